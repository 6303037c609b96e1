"""The collectives of a communicator (blocking and non-blocking, in place or out of place) and
the Request of a non-blocking one. Comm (_comm.py) inherits them; every buffer goes through
_buffers.buffer() before its pointer reaches C."""
import ctypes
import queue
import threading

from . import _lib
from ._buffers import _byref, _op, _opts, buffer
from ._core import _check, _lib_


# ---- requests ------------------------------------------------------------------------------
class Request:
    """A non-blocking collective in flight. The buffers it uses are kept alive (also by the
    communicator, so dropping the Request is safe) until wait() or test() saw it complete."""

    def __init__(self, comm, func, keep):
        self._comm, self._func, self._keep = comm, func, keep
        self._h = ctypes.c_void_p()
        self._status = None

    def wait(self):
        """Blocks (without the GIL) until done; raises MpiddpError if the collective failed."""
        if self._status is None:
            self._status = _lib_().wait(ctypes.byref(self._h))
            self._done()
        _check(self._func, self._status)

    def test(self):
        """True once complete (then like wait(): raises if it failed)."""
        if self._status is None:
            done = ctypes.c_int(0)
            st = _lib_().test(ctypes.byref(self._h), ctypes.byref(done))
            if not done.value and st == 0:
                return False
            self._status = st
            self._done()
        _check(self._func, self._status)
        return True

    def _done(self):
        self._comm._pending.discard(self)
        self._keep = None


class Waiter:
    """One thread completing futures (anything with set_result / set_exception: the DDP
    hooks' and the torch backend's torch.futures.Future) in posting order, which is the order
    the collectives of one communicator complete in: put(requests, future, finish) waits for
    the requests (Request.wait drops the GIL) and sets future to finish()'s value, or to the
    exception."""

    def __init__(self, name):
        self.q = queue.Queue()
        self.t = threading.Thread(target=self._run, name=name, daemon=True)
        self.t.start()

    def _run(self):
        while True:
            item = self.q.get()
            if item is None:
                return
            reqs, fut, finish = item
            try:
                for r in reqs:
                    r.wait()
                fut.set_result(finish())
            except BaseException as e:  # the future carries it to whoever waits on it
                fut.set_exception(e)

    def put(self, reqs, fut, finish):
        self.q.put((reqs, fut, finish))
        return fut

    def stop(self):
        self.q.put(None)
        self.t.join()


class Collectives:
    """allreduce, broadcast, allgather, reduce_scatter, barrier and their i* forms, for a class
    with _handle(), size and _pending (Comm)."""

    # -- collectives. out=None: in place in `buf`. They return the result buffer. --
    def _buf(self, x, name, writable=True):
        return buffer(x, name, writable, comm=self)

    def _args_reduce(self, buf, out):
        if out is None:
            b = self._buf(buf, "buf")
            return b, _lib.IN_PLACE, b, _opts((b,))
        send = self._buf(buf, "buf", writable=False)
        o = self._buf(out, "out")
        if o.dtype != send.dtype or o.count != send.count:
            raise ValueError("out: %d elements of dtype %d for an input of %d of dtype %d"
                             % (o.count, o.dtype, send.count, send.dtype))
        return send, send.ptr, o, _opts((send, o))

    def allreduce(self, buf, op="sum", out=None):
        _op(op)
        send, sp, recv, opts = self._args_reduce(buf, out)
        _check("ddp_allreduce", _lib_().allreduce(self._handle(), sp, recv.ptr, recv.count,
                                                  recv.dtype, _op(op), _byref(opts)))
        return recv.keep

    def iallreduce(self, buf, op="sum", out=None):
        _op(op)
        send, sp, recv, opts = self._args_reduce(buf, out)
        return self._post("ddp_iallreduce", (send, recv, opts), _lib_().iallreduce,
                          self._handle(), sp, recv.ptr, recv.count, recv.dtype, _op(op),
                          _byref(opts))

    def broadcast(self, buf, root=0):
        b = self._buf(buf, "buf")
        self._check_root(root)
        opts = _opts((b,))
        _check("ddp_broadcast", _lib_().broadcast(self._handle(), b.ptr, b.count, b.dtype,
                                                  root, _byref(opts)))
        return buf

    def ibroadcast(self, buf, root=0):
        b = self._buf(buf, "buf")
        self._check_root(root)
        opts = _opts((b,))
        return self._post("ddp_ibroadcast", (b, opts), _lib_().ibroadcast, self._handle(), b.ptr,
                          b.count, b.dtype, root, _byref(opts))

    def _args_blocks(self, send, recv, gather):
        """allgather (gather=True: recv holds size * len(send)) or reduce-scatter (send holds
        size * len(recv)): recv is written, send only read."""
        s = self._buf(send, "send", writable=False)
        r = self._buf(recv, "recv")
        small, big, name = (s, r, "recv") if gather else (r, s, "send")
        if r.dtype != s.dtype or big.count != small.count * self.size:
            raise ValueError("%s: %d elements of dtype %d, expected size*%d = %d of dtype %d"
                             % (name, big.count, big.dtype, small.count, small.count * self.size,
                                small.dtype))
        return s, r, _opts((s, r))

    def allgather(self, send, recv):
        """recv (size * len(send) elements) gets every rank's `send`, in rank order."""
        s, r, opts = self._args_blocks(send, recv, True)
        _check("ddp_allgather", _lib_().allgather(self._handle(), s.ptr, r.ptr, s.count, s.dtype,
                                                  _byref(opts)))
        return recv

    def iallgather(self, send, recv):
        s, r, opts = self._args_blocks(send, recv, True)
        return self._post("ddp_iallgather", (s, r, opts), _lib_().iallgather, self._handle(),
                          s.ptr, r.ptr, s.count, s.dtype, _byref(opts))

    def reduce_scatter(self, send, recv, op="sum"):
        """recv (len(send) / size elements) gets this rank's block of the reduction."""
        _op(op)
        s, r, opts = self._args_blocks(send, recv, False)
        _check("ddp_reduce_scatter", _lib_().reduce_scatter(self._handle(), s.ptr, r.ptr, r.count,
                                                            r.dtype, _op(op), _byref(opts)))
        return recv

    def ireduce_scatter(self, send, recv, op="sum"):
        _op(op)
        s, r, opts = self._args_blocks(send, recv, False)
        return self._post("ddp_ireduce_scatter", (s, r, opts), _lib_().ireduce_scatter,
                          self._handle(), s.ptr, r.ptr, r.count, r.dtype, _op(op), _byref(opts))

    def barrier(self):
        _check("ddp_barrier", _lib_().barrier(self._handle()))

    def ibarrier(self):
        return self._post("ddp_ibarrier", (), _lib_().ibarrier, self._handle())

    def _check_root(self, root):
        if not isinstance(root, int) or not 0 <= root < self.size:
            raise ValueError("root %r: expected 0 <= root < %d" % (root, self.size))

    def _post(self, func, keep, cfun, *args):
        req = Request(self, func, keep)
        _check(func, cfun(*args, ctypes.byref(req._h)))
        self._pending.add(req)
        return req
