"""What the PyTorch peers share: gloo rendezvous on loopback and one process per rank."""
import os
import queue
import socket

import torch.distributed as dist
import torch.multiprocessing as mp


def one_blas_thread():
    """One compute thread per rank (W-DDP), for the processes started after this call:
    torch.set_num_threads(1) does not bound the thread pool of Debian's torch's OpenBLAS
    (measured: a lone np=1 process ran its GEMMs on both cores, 52 ms a W-DDP step instead of
    72), and OpenBLAS reads its variable once, when it loads."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_gloo(rank, world, port):
    """Joins the gloo process group of `world` ranks on 127.0.0.1:port (loopback only)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)


def spawn(target, world, *args):
    """Runs target(rank, world, port, *args, q) in `world` fresh processes; rank 0 puts its
    result on q. Returns (result, ok): result is None and ok False when a process failed
    before rank 0 answered (the others are then terminated, never waited for forever)."""
    one_blas_thread()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    ps = [ctx.Process(target=target, args=(r, world, port, *args, q)) for r in range(world)]
    for p in ps:
        p.start()
    res = None
    while res is None:
        try:
            res = q.get(timeout=1.0)
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in ps) or all(p.exitcode is not None for p in ps):
                for p in ps:
                    if p.exitcode is None:
                        p.terminate()
                for p in ps:
                    p.join()
                return None, False
    for p in ps:
        p.join()
    return res, all(p.exitcode == 0 for p in ps)
