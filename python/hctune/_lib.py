"""Finding and declaring libhctune.so.0 (ctypes)."""
import ctypes
import ctypes.util
import os
import shutil
import sys

FALLBACK = 1  # HCT_FALLBACK: a usable answer that is not the daemon's


class Error(Exception):
    """A negative HCT_E* code with libhctune's one-line message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.name = _err_name(code)


class _Choice(ctypes.Structure):
    _fields_ = [
        ("variant", ctypes.c_char * 64),
        ("params", ctypes.c_char * 256),
        ("parity_class", ctypes.c_char * 16),
        ("template_hash", ctypes.c_char * 40),
        ("source", ctypes.c_int),
        ("median_us", ctypes.c_double),
        ("baseline_us", ctypes.c_double),
        # appended after 0.1.0 (include/hctune.h): passed with its size
        ("model", ctypes.c_char * 256),
        ("tmin", ctypes.c_int),
        ("tmax", ctypes.c_int),
        ("stale", ctypes.c_int),
        ("measured_tokens", ctypes.c_int),
        ("device", ctypes.c_char * 256),
    ]


class _BufferInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char * 32),
        ("dtype", ctypes.c_char * 8),
        ("optional", ctypes.c_int),
        ("written", ctypes.c_int),
        ("bytes", ctypes.c_size_t),
    ]


class LibraryNotFound(ImportError):
    """libhctune.so.0 could not be loaded; `tried` lists each place and why."""

    def __init__(self, tried):
        super().__init__("hctune: cannot load libhctune.so.0; tried: " + "; ".join(tried)
                         + " (set HCTUNE_LIB=PATH or HCTUNE_PREFIX=PREFIX, call "
                         "hctune.load_library(PATH), or run `make install`)")
        self.tried = tried


SONAME = "libhctune.so.0"


def _checkout_lib():
    """The checkout's lib/libhctune.so.0 when this package is a checkout's
    python/hctune (beside ../pyproject.toml and ../../include/hctune.h),
    else None: a package run from a checkout means that checkout's build,
    never an older installed copy."""
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.normpath(os.path.join(here, "..", ".."))
    if (os.path.exists(os.path.join(here, "..", "pyproject.toml"))
            and os.path.exists(os.path.join(top, "include", "hctune.h"))):
        return os.path.join(top, "lib", SONAME)
    return None


def _prefix_libs():
    """PREFIX/lib/libhctune.so.0 for the prefixes `make install` may have
    used: $HCTUNE_PREFIX, the one of the `hctune` program on PATH, this
    Python's, then make's default /usr/local and /usr.  They come after the
    loader path because a fresh install into /usr/local/lib is not in the
    loader's cache until ldconfig runs."""
    prefixes = []
    if os.environ.get("HCTUNE_PREFIX"):
        prefixes.append(os.environ["HCTUNE_PREFIX"])
    prog = shutil.which("hctune")
    if prog:
        prefixes.append(os.path.dirname(os.path.dirname(os.path.realpath(prog))))
    prefixes += [sys.prefix, "/usr/local", "/usr"]
    out = []
    for p in prefixes:
        path = os.path.join(p, "lib", SONAME)
        if path not in out:
            out.append(path)
    return out


def _candidates(path=None):
    """Where to look, in order: `path` or $HCTUNE_LIB alone when given; else
    the checkout's lib/ (when this package is a checkout's), the loader's
    own search (LD_LIBRARY_PATH, ld.so.cache, /lib, /usr/lib), what
    ctypes.util.find_library finds, then the install prefixes."""
    if path is not None:
        return [("argument", path)]
    env = os.environ.get("HCTUNE_LIB")
    if env:
        return [("HCTUNE_LIB", env)]
    out = []
    checkout = _checkout_lib()
    if checkout:
        out.append(("checkout", checkout))
    out.append(("loader path", SONAME))
    out.append(("find_library", None))  # resolved only if reached: it runs ldconfig/gcc
    out += [("prefix", p) for p in _prefix_libs()]
    return out


def _try(where, path, tried):
    if where == "find_library":
        path = ctypes.util.find_library("hctune")
        if path is None:
            tried.append("ctypes.util.find_library('hctune'): not found")
            return None
    if os.sep in path and not os.path.exists(path):
        tried.append("%s: no such file" % path)
        return None
    try:
        handle = ctypes.CDLL(path)
    except OSError as e:
        tried.append("%s (%s): %s" % (path, where, e))
        return None
    missing = [n for n in _SIGNATURES if not hasattr(handle, n)]
    if missing:
        tried.append("%s: not this version's libhctune (no %s)" % (path, ", ".join(missing)))
        return None
    return handle, path


class _Lazy:
    """The library, opened on first use: `import hctune` needs nothing, and
    hctune.load_library(PATH) may choose it before."""

    handle = None
    path = None

    def __getattr__(self, name):
        if _Lazy.handle is None:
            load_library()
        return getattr(_Lazy.handle, name)


def load_library(path=None):
    """Opens libhctune (once per process) and returns the path it came from.
    `path` (or $HCTUNE_LIB) names the file and nothing else is tried;
    without one, see _candidates().  Raises LibraryNotFound naming every
    place tried and why each failed.  Once opened, a call naming another
    file raises ValueError: ctypes cannot unload the first."""
    if _Lazy.handle is not None:
        if path is not None and os.path.realpath(path) != os.path.realpath(_Lazy.path):
            raise ValueError("hctune: libhctune is already loaded from %s, cannot switch to %s"
                             % (_Lazy.path, path))
        return _Lazy.path
    tried = []
    for where, p in _candidates(path):
        got = _try(where, p, tried)
        if got is not None:
            handle, where_from = got
            for name, (res, args) in _SIGNATURES.items():
                fn = getattr(handle, name)
                fn.restype = res
                fn.argtypes = args
            _Lazy.handle, _Lazy.path = handle, where_from
            return where_from
    raise LibraryNotFound(tried)


lib = _Lazy()

_P = ctypes.c_void_p
_S = ctypes.c_char_p
_I = ctypes.c_int
_SIGNATURES = {
    "hct_strerror": (_S, [_I]),
    "hct_err_name": (_S, [_I]),
    "hct_last_error": (_S, []),
    "hct_source_name": (_S, [_I]),
    "hct_connect": (_I, [_S, _I, ctypes.POINTER(_P)]),
    "hct_close": (None, [_P]),
    "hct_choose_sized": (_I, [_P, _S, _I, _S, _S, ctypes.POINTER(_Choice), ctypes.c_size_t]),
    "hct_kernel_load": (_I, [_P, _S, _I, _I, _S, _S, ctypes.POINTER(_P)]),
    "hct_kernel_launch": (_I, [_P, _P, _I, ctypes.POINTER(ctypes.c_uint64), _I]),
    "hct_kernel_choice_sized": (_I, [_P, _I, ctypes.POINTER(_Choice), ctypes.c_size_t,
                                    ctypes.POINTER(_S)]),
    "hct_kernel_buffer_count": (_I, [_P]),
    "hct_kernel_buffer": (_I, [_P, _I, _I, ctypes.POINTER(_BufferInfo)]),
    "hct_kernel_free": (None, [_P]),
}


def _err_name(code):
    return lib.hct_err_name(code).decode()


def last_error():
    return lib.hct_last_error().decode(errors="replace")


def check(rc, what):
    """Raises Error for a negative code; returns rc (0 or FALLBACK)."""
    if rc < 0:
        msg = last_error() or lib.hct_strerror(rc).decode()
        raise Error(rc, "%s: %s" % (what, msg))
    return rc


def text(s, what):
    if s is None:
        return None
    if not isinstance(s, str):
        raise TypeError("%s: want a str, got %s" % (what, type(s).__name__))
    return s.encode()
