"""Finding and declaring libhctune.so.0 (ctypes)."""
import ctypes
import os

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
    ]


class _BufferInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char * 32),
        ("dtype", ctypes.c_char * 8),
        ("optional", ctypes.c_int),
        ("written", ctypes.c_int),
        ("bytes", ctypes.c_size_t),
    ]


def _candidates():
    env = os.environ.get("HCTUNE_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    # python/hctune/ in a checkout: the library is the checkout's lib/.
    checkout = os.path.join(here, "..", "..", "lib", "libhctune.so.0")
    return [os.path.normpath(checkout), "libhctune.so.0"]


def _open():
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            errors.append("%s: no such file" % path)
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append(str(e))
    raise ImportError("hctune: cannot load libhctune.so.0 (set HCTUNE_LIB or build with make): "
                      + "; ".join(errors))


lib, library_path = _open()

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
    "hct_kernel_choice": (_I, [_P, _I, ctypes.POINTER(_Choice), ctypes.POINTER(_S)]),
    "hct_kernel_buffer_count": (_I, [_P]),
    "hct_kernel_buffer": (_I, [_P, _I, _I, ctypes.POINTER(_BufferInfo)]),
    "hct_kernel_free": (None, [_P]),
}
for _name, (_res, _args) in _SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args


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
