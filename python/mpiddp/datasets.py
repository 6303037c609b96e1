"""Datasets read by mpiddp's C readers (samplers/dataset.c), as NumPy arrays: the very values
the C apps train on (ddp_train), so a PyTorch run and a C run see the same inputs."""
import ctypes
import os

from . import _lib

# Where Debian's dataset-fashion-mnist installs the IDX files, and the normalisation the C apps
# use (apps/kit/fmnist.h: the library itself knows no dataset).
FMNIST_DIR = "/usr/share/datasets/fashion-mnist"
FMNIST_MEAN, FMNIST_STD = 0.2860, 0.3530


def _idx_file(directory, name):
    plain = os.path.join(directory, name)
    return plain if os.path.exists(plain) or not os.path.exists(plain + ".gz") else plain + ".gz"


def fashion_mnist(directory=None, train=True):
    """(x, y): x float32 [N, 784] normalised as torchvision's ToTensor + Normalize(0.2860,
    0.3530), y int64 [N]. directory: None = where Debian's dataset-fashion-mnist installs the
    IDX files (/usr/share/datasets/fashion-mnist); .gz files are read when the plain ones are
    absent. Raises MpiddpError (DDP_EIO, DDP_EFORMAT) naming the file."""
    import numpy as np
    from ._core import _check, _lib_
    L = _lib_()
    h = ctypes.c_void_p()
    d = FMNIST_DIR if directory is None else str(directory)
    prefix = "train" if train else "t10k"
    images = _idx_file(d, prefix + "-images-idx3-ubyte").encode()
    labels = _idx_file(d, prefix + "-labels-idx1-ubyte").encode()
    _check("ddp_dataset_open_idx", L.dataset_open_idx(images, labels, FMNIST_MEAN, FMNIST_STD,
                                                      ctypes.byref(h)))
    try:
        info = _lib.DatasetInfo()
        _check("ddp_dataset_info", L.dataset_info(h, ctypes.byref(info)))
        n, elems = info.count, info.sample_elems
        x = np.empty((n, elems), dtype=np.float32)
        y = np.empty(n, dtype=np.int64)
        label = ctypes.c_int32()
        base, stride, get = x.ctypes.data, elems * 4, L.dataset_get
        for i in range(n):
            _check("ddp_dataset_get", get(h, i, base + i * stride, elems, ctypes.byref(label)))
            y[i] = label.value
        return x, y
    finally:
        _check("ddp_dataset_destroy", L.dataset_destroy(ctypes.byref(h)))
