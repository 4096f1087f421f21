"""Client, Choice, Kernel: the operations of include/hctune.h."""
import ctypes
import json
from collections import namedtuple

from . import _lib
from ._lib import Error, check, lib, text

SOURCES = ("probe", "fleet", "pin", "env", "default")

Choice = namedtuple("Choice", "variant params parity_class source template_hash median_us "
                              "baseline_us fallback model tmin tmax stale device measured_tokens")
Choice.__doc__ = """What hctune answered: variant, params (dict), parity_class, source
("probe", "fleet", "pin", "env", "default"), template_hash, median_us,
baseline_us, fallback (True when it is not the daemon's own answer), model
(the card model it was measured on, "" when unknown), tmin and tmax (the
token counts it holds for; 0 when unknown), stale (the daemon answered
from an older copy of its database), device (the card the daemon answered
for: the whole UUID of the card named, a prefix resolved, or the model key;
"" without a daemon's answer) and measured_tokens (the T whose figures
median_us and baseline_us are; 0 when unknown or none).

A device the daemon does not know raises hctune.Error (name "ENODEV"), a
prefix several of its cards start with hctune.Error ("EINVAL"), each with
the daemon's message naming the cards."""

BufferInfo = namedtuple("BufferInfo", "name dtype optional written bytes")


def _choice(c, fallback):
    raw = c.params.decode(errors="replace")
    try:
        params = json.loads(raw) if raw else {}
    except ValueError:
        params = raw
    return Choice(c.variant.decode(errors="replace"), params, c.parity_class.decode(),
                  SOURCES[c.source] if 0 <= c.source < len(SOURCES) else "unknown",
                  c.template_hash.decode(errors="replace"), c.median_us, c.baseline_us,
                  bool(fallback), c.model.decode(errors="replace"), c.tmin, c.tmax, bool(c.stale),
                  c.device.decode(errors="replace"), c.measured_tokens)


def _check_tokens(tokens, what):
    if isinstance(tokens, bool) or not isinstance(tokens, int):
        raise TypeError("%s: want an int, got %s" % (what, type(tokens).__name__))


def _family_head_ok(name):
    return 0 < len(name) <= 31 and all(ch.isascii() and (ch.isalnum() or ch in "_.-") for ch in name)


def _check_parity(parity):
    """None, "bitwise", "kl", or a bit family "bits:<variant>" (issue 29:
    the exact bits of one variant, e.g. "bits:pair_mma"), as the library
    checks it; whether the op has the family is the answer's to say."""
    if parity in (None, "bitwise", "kl"):
        return
    if isinstance(parity, str) and parity.startswith("bits:") and _family_head_ok(parity[5:]):
        return
    raise ValueError("parity %r: want 'bitwise', 'kl' or 'bits:<variant>'" % (parity,))


class _Closing:
    """close() on leaving a with block and when collected (errors ignored
    then: the interpreter may be shutting down)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Client(_Closing):
    """A connection to the hctune daemon (hct_connect).  Without a daemon
    the client still works: every answer is then the op's baseline, with
    fallback=True, and `connected` is False with the reason in `why`."""

    def __init__(self, socket=None, timeout_ms=0):
        _check_tokens(timeout_ms, "timeout_ms")
        self._c = ctypes.c_void_p()
        rc = check(lib.hct_connect(text(socket, "socket"), timeout_ms, ctypes.byref(self._c)),
                   "hct_connect")
        self.connected = rc == 0
        self.why = "" if self.connected else _lib.last_error()

    def choose(self, op, tokens, device=None, parity=None):
        """The variant to run for `tokens` tokens (hct_choose)."""
        _check_tokens(tokens, "tokens")
        _check_parity(parity)
        out = _lib._Choice()
        rc = check(lib.hct_choose_sized(self._handle(), text(op, "op"), tokens, text(device, "device"),
                                        text(parity, "parity"), ctypes.byref(out),
                                        ctypes.sizeof(out)), "hct_choose")
        return _choice(out, rc == _lib.FALLBACK)

    def _handle(self):
        if self._c is None:
            raise ValueError("hctune.Client: closed")
        return self._c

    def close(self):
        if self._c is not None:
            lib.hct_close(self._c)
            self._c = None



# ---- buffers ---------------------------------------------------------------

_TORCH_DTYPES = {"f32": "torch.float32", "bf16": "torch.bfloat16", "f16": "torch.float16",
                 "u32": "torch.uint32", "i32": "torch.int32"}
# __cuda_array_interface__ type strings; bf16 has none, so any 2-byte type
# passes for it and only its size is checked.
_CAI_TYPES = {"f32": ("<f4",), "f16": ("<f2",), "bf16": ("<f2", "<u2", "<i2", "<V2", "|V2"),
              "u32": ("<u4",), "i32": ("<i4",)}


def _is_torch(x):
    return hasattr(x, "data_ptr") and hasattr(x, "is_cuda") and hasattr(x, "element_size")


def _pointer(x, info, what):
    """The device pointer of buffer x, checked against the manifest's info."""
    if x is None:
        if not info.optional:
            raise ValueError("%s: required, got None" % what)
        return 0
    if isinstance(x, bool):
        raise TypeError("%s: want a device pointer, array or tensor, got bool" % what)
    if isinstance(x, int):
        if x < 0 or x >= 1 << 64:
            raise ValueError("%s: pointer %#x outside 0..2**64-1" % (what, x))
        if x == 0 and not info.optional:
            raise ValueError("%s: null pointer for a required buffer" % what)
        return x
    if _is_torch(x):
        if not x.is_cuda:
            raise ValueError("%s: tensor on %s, want a CUDA tensor" % (what, getattr(x, "device", "cpu")))
        if str(x.dtype) != _TORCH_DTYPES.get(info.dtype):
            raise TypeError("%s: tensor of %s, the op wants %s" % (what, x.dtype, info.dtype))
        if not x.is_contiguous():
            raise ValueError("%s: tensor is not contiguous" % what)
        size = x.numel() * x.element_size()
        if size < info.bytes:
            raise ValueError("%s: %d bytes, the op needs %d at this T" % (what, size, info.bytes))
        return int(x.data_ptr())
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        ptr, readonly = cai["data"]
        typestr = cai.get("typestr", "")
        if typestr not in _CAI_TYPES.get(info.dtype, ()):
            raise TypeError("%s: array of %s, the op wants %s" % (what, typestr, info.dtype))
        if readonly and info.written:
            raise ValueError("%s: array is read-only, the op writes it" % what)
        shape = tuple(cai.get("shape", ()))
        n = 1
        for d in shape:
            n *= d
        itemsize = int(typestr[2:]) if typestr[2:].isdigit() else 0
        strides = cai.get("strides")
        if strides is not None:
            expect, contiguous = itemsize, True
            for d, s in zip(reversed(shape), reversed(tuple(strides))):
                if d > 1 and s != expect:
                    contiguous = False
                expect *= d
            if not contiguous:
                raise ValueError("%s: array is not C-contiguous" % what)
        if n * itemsize < info.bytes:
            raise ValueError("%s: %d bytes, the op needs %d at this T" % (what, n * itemsize, info.bytes))
        if ptr == 0 and n > 0:
            raise ValueError("%s: null data pointer" % what)
        return int(ptr)
    raise TypeError("%s: want an int device pointer, a __cuda_array_interface__ object or a "
                    "torch tensor, got %s" % (what, type(x).__name__))


def _stream_handle(stream, buffers):
    if stream is None:
        for b in buffers:
            if _is_torch(b) and b.is_cuda:
                import torch  # only when a tensor was given
                return int(torch.cuda.current_stream(b.device).cuda_stream)
        return 0
    if isinstance(stream, bool):
        raise TypeError("stream: want an int CUstream or a stream object, got bool")
    if isinstance(stream, int):
        if stream < 0:
            raise ValueError("stream: %d is not a CUstream handle" % stream)
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):
        h = getattr(stream, attr, None)
        if isinstance(h, int):
            return h
    raise TypeError("stream: want an int CUstream, or an object with .cuda_stream or .ptr, got %s"
                    % type(stream).__name__)


class Kernel(_Closing):
    """A loaded op for a token range in the caller's CUDA context
    (hct_kernel_load); call it to enqueue on the caller's stream."""

    def __init__(self, handle, op, tmin, tmax, status):
        self._k = handle
        self.op = op
        self.tmin, self.tmax = tmin, tmax
        self.fallback = status == _lib.FALLBACK
        n = check(lib.hct_kernel_buffer_count(handle), "hct_kernel_buffer_count")
        self.buffer_names = [self.buffer(i, tmin).name for i in range(n)]

    def buffer(self, i, tokens):
        """BufferInfo of buffer i at `tokens` tokens (its size in bytes then)."""
        info = _lib._BufferInfo()
        check(lib.hct_kernel_buffer(self._handle(), i, tokens, ctypes.byref(info)),
              "hct_kernel_buffer")
        return BufferInfo(info.name.decode(), info.dtype.decode(), bool(info.optional),
                          bool(info.written), info.bytes)

    def choice(self, tokens):
        """What runs at `tokens`: (Choice, why) -- why is "" when the daemon
        served it, else why the library compiled it itself."""
        _check_tokens(tokens, "tokens")
        out = _lib._Choice()
        why = ctypes.c_char_p()
        rc = check(lib.hct_kernel_choice_sized(self._handle(), tokens, ctypes.byref(out),
                                               ctypes.sizeof(out), ctypes.byref(why)),
                   "hct_kernel_choice")
        return _choice(out, rc == _lib.FALLBACK), (why.value or b"").decode(errors="replace")

    def pointers(self, tokens, *args, **kwargs):
        """The checked device pointers, in the manifest's order, of buffers
        given by position or by name."""
        _check_tokens(tokens, "tokens")
        if not self.tmin <= tokens <= self.tmax:
            raise ValueError("tokens %d: this kernel covers %d-%d" % (tokens, self.tmin, self.tmax))
        names = self.buffer_names
        if len(args) > len(names):
            raise TypeError("%s takes %d buffers, %d given" % (self.op, len(names), len(args)))
        given = dict(zip(names, args))
        for name, v in kwargs.items():
            if name not in names:
                raise TypeError("%s has no buffer %r (it has %s)" % (self.op, name, ", ".join(names)))
            if name in given:
                raise TypeError("%s: buffer %r given twice" % (self.op, name))
            given[name] = v
        ptrs = []
        for i, name in enumerate(names):
            info = self.buffer(i, tokens)
            ptrs.append(_pointer(given.get(name), info, "%s buffer %r" % (self.op, name)))
        return ptrs, [given.get(n) for n in names]

    def launch(self, tokens, *args, stream=None, **kwargs):
        """Enqueues the op for `tokens` tokens (hct_kernel_launch)."""
        ptrs, objs = self.pointers(tokens, *args, **kwargs)
        handle = _stream_handle(stream, objs)
        arr = (ctypes.c_uint64 * len(ptrs))(*ptrs)
        check(lib.hct_kernel_launch(self._handle(), ctypes.c_void_p(handle), tokens, arr, len(ptrs)),
              "hct_kernel_launch")

    __call__ = launch

    def _handle(self):
        if self._k is None:
            raise ValueError("hctune.Kernel: closed")
        return self._k

    def close(self):
        """Waits for the context, frees scratch and modules (hct_kernel_free)."""
        if self._k is not None:
            lib.hct_kernel_free(self._k)
            self._k = None



def load(op, tmin, tmax=None, client=None, device=None, parity=None):
    """Loads `op` for tmin..tmax tokens into the current CUDA context
    (hct_kernel_load).  client=None: no daemon, the baseline compiled here
    (or HCTUNE_FORCE's variant).  Raises hctune.Error without a GPU."""
    tmax = tmin if tmax is None else tmax
    _check_tokens(tmin, "tmin")
    _check_tokens(tmax, "tmax")
    _check_parity(parity)
    if client is not None and not isinstance(client, Client):
        raise TypeError("client: want a hctune.Client or None, got %s" % type(client).__name__)
    handle = ctypes.c_void_p()
    rc = check(lib.hct_kernel_load(client._handle() if client is not None else None,
                                   text(op, "op"), tmin, tmax, text(device, "device"),
                                   text(parity, "parity"), ctypes.byref(handle)), "hct_kernel_load")
    return Kernel(handle, op, tmin, tmax, rc)
