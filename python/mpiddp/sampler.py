"""DistributedSampler backed by mpiddp's C sampler (samplers/sampler.c): the same indices as
torch.utils.data.DistributedSampler (PyTorch 1.13) for the same arguments, without torch.
An iterable with __len__ and set_epoch, so torch's DataLoader(sampler=...) takes it."""
import ctypes

from . import _lib


class DistributedSampler:
    """Drop-in for torch.utils.data.DistributedSampler(dataset, num_replicas, rank, shuffle,
    seed, drop_last). `dataset` is anything with len() (or an int: the dataset size).
    num_replicas / rank default to the default communicator's (mpiddp.init())."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        from ._comm import default_comm
        from ._core import _check, _lib_
        size = dataset if isinstance(dataset, int) else len(dataset)
        if num_replicas is None or rank is None:
            comm = default_comm()
            num_replicas = comm.size if num_replicas is None else num_replicas
            rank = comm.rank if rank is None else rank
        for name, v in (("dataset size", size), ("num_replicas", num_replicas), ("rank", rank),
                        ("seed", seed)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError("%s %r: expected an int" % (name, v))
        if size < 0 or not 0 <= seed < 2 ** 64:
            raise ValueError("dataset size %d / seed %d out of range" % (size, seed))
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError("Invalid rank %d, rank should be in the interval [0, %d]"
                             % (rank, num_replicas - 1))
        self.num_replicas, self.rank, self.shuffle, self.seed = num_replicas, rank, shuffle, seed
        self.drop_last, self.epoch, self.dataset_size = drop_last, 0, size
        opts = _lib.SamplerOpts(dataset_size=size, num_replicas=num_replicas, rank=rank,
                                shuffle=int(bool(shuffle)), seed=seed, drop_last=int(bool(drop_last)))
        self._L, self._check = _lib_(), _check
        self._h = ctypes.c_void_p()
        _check("ddp_sampler_create", self._L.sampler_create(ctypes.byref(opts), ctypes.byref(self._h)))
        n = ctypes.c_size_t()
        _check("ddp_sampler_length", self._L.sampler_length(self._h, ctypes.byref(n)))
        self.num_samples = n.value
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch):
        if not isinstance(epoch, int) or epoch < 0:
            raise ValueError("epoch %r: expected an int >= 0" % (epoch,))
        self._check("ddp_sampler_set_epoch", self._L.sampler_set_epoch(self._live(), epoch))
        self.epoch = epoch

    def indices(self):
        """This rank's indices for the current epoch, as a list of ints."""
        n = self.num_samples
        out = (ctypes.c_int64 * max(n, 1))()
        got = ctypes.c_size_t()
        self._check("ddp_sampler_indices", self._L.sampler_indices(self._live(), out, n,
                                                                    ctypes.byref(got)))
        return out[:got.value]

    def __iter__(self):
        return iter(self.indices())

    def __len__(self):
        return self.num_samples

    def _live(self):
        if not self._h.value:
            raise ValueError("sampler was closed")
        return self._h

    def close(self):
        if self._h.value:
            self._check("ddp_sampler_destroy", self._L.sampler_destroy(ctypes.byref(self._h)))

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
