"""hctune: run the GPU kernel variants hctune chose, from Python.

ctypes bindings of libhctune (include/hctune.h); nothing to compile.

    client = hctune.Client()              # the daemon, or fallback without one
    k = hctune.load("hc_read", 1, 8, client=client, parity="bitwise")
    k(T, resid=..., pending=None, w_norm=..., ...)   # enqueued on the caller's stream

Buffers are device pointers (int), objects with __cuda_array_interface__
(CuPy, Numba), or PyTorch tensors; they are checked against the op's
manifest (name, dtype, size, writability) before anything is enqueued.
The stream is the caller's: `stream=` (an int CUstream, or an object with
.cuda_stream or .ptr), else PyTorch's current stream when a buffer is a
tensor, else the legacy default stream.
"""
from ._lib import Error, library_path
from ._api import BufferInfo, Choice, Client, Kernel, load

__all__ = ["BufferInfo", "Choice", "Client", "Error", "Kernel", "library_path", "load"]
__version__ = "0.1.0"
