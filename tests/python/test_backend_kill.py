"""A rank lost in the middle of the backend's collectives (run under tests/robust_run.sh, which
checks how the job ended): `stop` freezes the last rank with SIGSTOP after a few all_reduces
(a hung rank: mpirun sees nothing, only the library's watchdog, DDP_TIMEOUT_S, can end the
job); `kill` kills it with SIGKILL while the others wait in an async all_reduce. Either way
the job must end, non-zero, in bounded time, and no rank may report finishing."""
import os
import signal
import sys

from ddptest import need_torch

torch = need_torch()
import torch.distributed as dist  # noqa: E402

import mpiddp.torch  # noqa: E402,F401  (registers the backend)


def main():
    want, mode = int(sys.argv[1]), sys.argv[2]
    dist.init_process_group(backend="mpiddp")
    R, r = dist.get_world_size(), dist.get_rank()
    if R != want:
        print("FAIL: world size %d, expected %d" % (R, want))
        return 1
    x = torch.ones(1 << 16)
    for step in range(3):
        dist.all_reduce(x)
    print("rank %d: 3 all_reduces done" % r, flush=True)
    if r == R - 1:
        print("rank %d raises SIG%s" % (r, mode.upper()), flush=True)
        os.kill(os.getpid(), signal.SIGSTOP if mode == "stop" else signal.SIGKILL)
    w = dist.all_reduce(x, async_op=True)
    w.wait()
    print("rank %d: finished although a peer was lost" % r, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
