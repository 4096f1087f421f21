"""hctune's ops as PyTorch custom ops, for torch.compile (torch >= 2.4).

    import hctune, hctune.torch_ops
    k = hctune.load("hc_read", 1, 8, client=hctune.Client(), parity="bitwise")
    read = hctune.torch_ops.wrap(k)          # registers torch.ops.hctune.hc_read
    @torch.compile(mode="max-autotune", fullgraph=True)
    def step(...):
        read(T, resid=resid, pending=pending, w_norm=..., ..., mixed_f16=...)

A plain call of a hctune.Kernel is opaque to torch.compile: Dynamo cannot
trace ctypes, so fullgraph=True fails and a graph break splits the CUDA
graph.  wrap() registers, once per op, a torch.library.custom_op named
hctune::<op> (hctune::hc_read for hc_read) whose arguments are the kernel's
number in this module's table, the token count and the op's buffers in its
manifest's order, as tensors: Tensor for a buffer the op only reads,
Tensor(a!) for one it writes (inout and outputs: mutates_args), Optional
for the manifest's optional ones.  Its fake (meta) implementation, which
torch.compile runs on FakeTensors, does nothing: the op returns nothing and
its writes are declared in the schema, which is all the compiler needs to
order it against the graph's other kernels and to functionalize it.

The real implementation (CUDA only) checks the buffers against the
manifest as Kernel.launch does and enqueues on torch's current stream of
the buffers' device (torch.cuda.current_stream), the stream torch.compile's
CUDA graphs capture on, so the read is captured with the rest of the model.
The kernel stays in the table (alive) until release(); a compiled graph
holds its number.

Importing this module needs torch; `import hctune` does not import it.

Not yet run on a GPU: this machine has no torch and no GPU; written against
the documented torch.library API of torch 2.4 (custom_op, register_fake,
infer_schema's int/Tensor/Optional[Tensor] mapping) and checked on CPU
only by python/tests/test_torch_ops.py where torch is importable.
examples/torch_engine.py --compiled-window runs it for real on a GPU
machine.
"""
import keyword
import re
import threading
from typing import Optional

import torch

from ._api import Kernel

NAMESPACE = "hctune"

_lock = threading.Lock()
_kernels = {}          # number -> Kernel, alive while registered
_next = [1]
_ops = {}              # op name -> (layout, OpOverload)


def _layout(kernel):
    """((name, optional, written), ...) of the kernel's buffers, in order."""
    out = []
    for i in range(len(kernel.buffer_names)):
        info = kernel.buffer(i, kernel.tmin)
        if not info.name.isidentifier() or keyword.iskeyword(info.name) or \
                info.name in ("hct_kernel", "hct_tokens"):
            raise ValueError("op %r: buffer name %r cannot name a custom op argument"
                             % (kernel.op, info.name))
        out.append((info.name, info.optional, info.written))
    return tuple(out)


def _signature_source(fname, layout, body):
    params = ["hct_kernel: int", "hct_tokens: int"]
    for name, optional, _ in layout:
        params.append("%s: %s" % (name, "Optional[Tensor]" if optional else "Tensor"))
    return "def %s(%s) -> None:\n    %s\n" % (fname, ", ".join(params), body)


def _launch(number, tokens, buffers):
    """The custom op's CUDA implementation: Kernel.launch on torch's
    current stream of the first tensor's device."""
    kernel = _kernels.get(number)
    if kernel is None:
        raise RuntimeError("hctune custom op: kernel %d is not registered (released?)" % number)
    device = next(b.device for b in buffers if b is not None)
    stream = torch.cuda.current_stream(device).cuda_stream
    kernel.launch(tokens, *buffers, stream=stream)


def _define(op, layout):
    """Registers torch.ops.hctune.<op> for `layout`; returns its OpOverload."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", op):
        raise ValueError("op %r: not a valid custom op name (letters, digits, _)" % op)
    names = ", ".join(n for n, _, _ in layout)
    scope = {"Tensor": torch.Tensor, "Optional": Optional, "_launch": _launch}
    # Real functions with annotated parameters: infer_schema reads the
    # schema from them (int -> SymInt, Tensor, Optional[Tensor] -> Tensor?).
    exec(_signature_source(op, layout, "_launch(hct_kernel, hct_tokens, (%s,))" % names), scope)
    exec(_signature_source("fake", layout, "return None"), scope)
    mutated = tuple(n for n, _, written in layout if written)
    custom = torch.library.custom_op("%s::%s" % (NAMESPACE, op), scope[op], mutates_args=mutated,
                                     device_types="cuda")
    custom.register_fake(scope["fake"])
    return getattr(getattr(torch.ops, NAMESPACE), op).default


class TorchKernel:
    """A hctune.Kernel callable inside torch.compile(fullgraph=True):
    `k(T, **buffers)` (or buffers by position, in the manifest's order)
    calls torch.ops.hctune.<op>.  Plain Python that Dynamo traces."""

    def __init__(self, kernel, number, overload, names):
        self.kernel = kernel
        self.number = number
        self.op = overload
        self.names = names

    def __call__(self, tokens, *args, **kwargs):
        if len(args) > len(self.names):
            raise TypeError("%s takes %d buffers, %d given" % (self.kernel.op, len(self.names), len(args)))
        for name in kwargs:
            if name not in self.names:
                raise TypeError("%s has no buffer %r" % (self.kernel.op, name))
        bufs = list(args) + [kwargs.get(n) for n in self.names[len(args):]]
        self.op(self.number, tokens, *bufs)


def wrap(kernel):
    """Registers `kernel` (a hctune.Kernel) and, the first time its op is
    seen, the custom op torch.ops.hctune.<op>; returns a TorchKernel.  A
    second kernel of the same op shares the custom op (another number)."""
    if not isinstance(kernel, Kernel):
        raise TypeError("wrap: want a hctune.Kernel, got %s" % type(kernel).__name__)
    layout = _layout(kernel)
    with _lock:
        if kernel.op in _ops:
            known, overload = _ops[kernel.op]
            if known != layout:
                raise ValueError("op %r: its buffers changed since torch.ops.hctune.%s was "
                                 "registered in this process" % (kernel.op, kernel.op))
        else:
            overload = _define(kernel.op, layout)
            _ops[kernel.op] = (layout, overload)
        number = _next[0]
        _next[0] += 1
        _kernels[number] = kernel
    return TorchKernel(kernel, number, overload, tuple(n for n, _, _ in layout))


def release(wrapped):
    """Forgets a TorchKernel's kernel (a compiled graph that still calls it
    then raises); the caller closes the Kernel."""
    with _lock:
        _kernels.pop(wrapped.number, None)
