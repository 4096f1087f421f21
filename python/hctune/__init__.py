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

libhctune.so.0 is opened on first use, not at import (`import hctune` needs
nothing): from hctune.load_library(PATH) or $HCTUNE_LIB when given, else the
checkout's lib/ when this package is a checkout's python/hctune, else the
loader's path (LD_LIBRARY_PATH, ld.so.cache), ctypes.util.find_library,
then PREFIX/lib for $HCTUNE_PREFIX, the `hctune` program's prefix, this
Python's prefix, /usr/local and /usr.  hctune.LibraryNotFound names every
place tried.  hctune.library_path is the file opened (reading it opens it).

Inside torch.compile, `import hctune.torch_ops` registers the custom op
torch.ops.hctune.launch (see that module; it needs torch, hctune does not).
"""
from ._lib import Error, LibraryNotFound, load_library
from ._api import BufferInfo, Choice, Client, Kernel, load

__all__ = ["BufferInfo", "Choice", "Client", "Error", "Kernel", "LibraryNotFound", "library_path",
           "load", "load_library"]
__version__ = "0.1.0"


def __getattr__(name):
    # library_path opens the library on first read (PEP 562), as it did when
    # the library was opened at import.
    if name == "library_path":
        return load_library()
    raise AttributeError("module 'hctune' has no attribute %r" % name)
