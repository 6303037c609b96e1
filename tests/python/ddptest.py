"""What the Python tests share: torch present (or a skip), the world size check, one verdict
agreed by every rank. Each test is run as `launcher -n NP python3 test_x.py NP`."""
import os
import sys
import traceback


def need_torch():
    """Imports torch; a missing torch fails the test unless MPIDDP_SKIP_TORCH=1 (then 77)."""
    try:
        import torch
        return torch
    except ImportError as e:
        if os.environ.get("MPIDDP_SKIP_TORCH") == "1":
            print("SKIP: %s cannot import torch (%s) and MPIDDP_SKIP_TORCH=1" % (sys.executable, e))
            sys.exit(77)
        print("FAIL: %s cannot import torch (%s): install python3-torch (ci/setup.sh does) or set "
              "MPIDDP_SKIP_TORCH=1" % (sys.executable, e))
        sys.exit(1)


class Check:
    """Counts failures on this rank; finish() agrees on the verdict over all ranks."""

    def __init__(self, name, comm):
        self.name, self.comm, self.failures = name, comm, 0
        want = int(sys.argv[1])
        if comm.size != want:
            self.fail("world size %d, expected %d" % (comm.size, want))
            print("%s: FAIL rank %d: world size %d, expected %d" % (name, comm.rank, comm.size, want))
            sys.exit(1)

    def fail(self, msg):
        self.failures += 1
        print("%s: rank %d: FAIL %s" % (self.name, self.comm.rank, msg), flush=True)

    def expect(self, cond, msg):
        if not cond:
            self.fail(msg)
        return cond

    def raises(self, excs, msg, fn, *args, **kw):
        """fn(*args) must raise one of excs (and not crash)."""
        try:
            fn(*args, **kw)
        except excs as e:
            return e
        except Exception:
            self.fail("%s: raised something else:\n%s" % (msg, traceback.format_exc()))
            return None
        self.fail("%s: did not raise" % msg)
        return None

    def log(self, msg):
        if self.comm.rank == 0:
            print("%s: %s" % (self.name, msg), flush=True)

    def finish(self):
        import numpy as np
        n = np.array([self.failures], dtype=np.int64)
        self.comm.allreduce(n, op="sum")
        if self.comm.rank == 0:
            print("%s: %s (%d failures over %d ranks)"
                  % (self.name, "PASS" if n[0] == 0 else "FAIL", n[0], self.comm.size), flush=True)
        return 0 if n[0] == 0 else 1
