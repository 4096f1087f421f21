"""hctune's ops as PyTorch custom ops, for torch.compile (torch >= 2.4).

    import hctune, hctune.torch_ops
    k = hctune.load("hc_read", 1, 8, client=hctune.Client(), parity="kl")
    read = hctune.torch_ops.wrap(k)       # registers torch.ops.hctune.hc_read
    h = read.handle()                     # names k: keep one per use (a layer's buffer)
    @torch.compile(mode="max-autotune", fullgraph=True)
    def step(...):
        read(T, handle=h, resid=resid, pending=pending, w_norm=..., ..., mixed_f16=...)

A plain call of a hctune.Kernel is opaque to torch.compile: Dynamo cannot
trace ctypes, so fullgraph=True fails and a graph break splits the CUDA
graph.  wrap() registers, once per op, a torch.library.custom_op named
hctune::<op> (hctune::hc_read for hc_read) whose arguments are a kernel
handle (a tensor), the token count and the op's buffers in its manifest's
order: Tensor for a buffer the op only reads, Tensor(a!) for one it writes
(inout and outputs: mutates_args), Optional for the manifest's optional
ones.  Its fake (meta) implementation, which torch.compile runs on
FakeTensors, does nothing: the op returns nothing and its writes are
declared in the schema, which is all the compiler needs to order it
against the graph's other kernels and to functionalize it.

Which kernel runs is data, not code: the handle is a one-element int32
tensor (holding the kernel's number, for people) that this module knows by
its address.  Dynamo guards a Python int or str it meets as a constant, so
a kernel named by one (the number before issue 36) made every distinct
kernel at one call site a recompile: a window compiled once per row and T
met the default recompile_limit of 8, and two instances of a model whose
layers hold different kernels compiled twice.  A tensor is an input whose
value nobody guards: one graph serves every kernel, layer and instance.
The handle is never read on the GPU and never copied to the host; the
implementation looks its address up here.  So a handle must reach the op
as itself, not a copy: handle() marks it a static address for CUDA graphs
(torch._dynamo.mark_static_address, unguarded: cudagraph trees record once
per set of handles, and Dynamo adds no guard), as a module's buffers are.
Keep one handle per use (each layer its own, as its weights are): Dynamo
guards which inputs are the same tensor, so handles shared between layers
make the pattern of sharing a guard (two instances that share differently
compile twice).

The real implementation checks the buffers against the manifest as
Kernel.launch does and, for CUDA tensors, enqueues on torch's current
stream of the buffers' device (torch.cuda.current_stream), the stream
torch.compile's CUDA graphs capture on, so the read is captured with the
rest of the model.  It is registered for every device: a hctune.Kernel
refuses tensors that are not CUDA's with one line, and a stand-in kernel
(python/tests) can run the same wrapper on the CPU.  The kernel stays in
the table (alive) until release(); a compiled graph holds its handles.

Importing this module needs torch; `import hctune` does not import it.
Checked on CPU (python/tests/test_torch_ops.py, test_torch_model.py) where
torch is importable; on a GPU by tests/gpu-torch.sh.
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
_handles = {}          # (device, data_ptr) -> (handle tensor, number)
_next = [1]
_ops = {}              # op name -> (layout, OpOverload)


def _layout(kernel):
    """((name, optional, written), ...) of the kernel's buffers, in order."""
    out = []
    for i in range(len(kernel.buffer_names)):
        info = kernel.buffer(i, kernel.tmin)
        if not info.name.isidentifier() or keyword.iskeyword(info.name) or \
                info.name in ("hct_kernel", "hct_tokens", "handle"):
            raise ValueError("op %r: buffer name %r cannot name a custom op argument"
                             % (kernel.op, info.name))
        out.append((info.name, info.optional, info.written))
    return tuple(out)


def _signature_source(fname, layout, body):
    params = ["hct_kernel: Tensor", "hct_tokens: int"]
    for name, optional, _ in layout:
        params.append("%s: %s" % (name, "Optional[Tensor]" if optional else "Tensor"))
    return "def %s(%s) -> None:\n    %s\n" % (fname, ", ".join(params), body)


def _capturing(t):
    return t.is_cuda and torch.cuda.is_current_stream_capturing()


def kernel_of(handle):
    """The hctune.Kernel a handle names.  By the handle's address; a copy
    of a handle (another address) is read once, outside a CUDA graph
    capture, where reading it costs a synchronisation and is legal."""
    if not isinstance(handle, torch.Tensor) or handle.dtype != torch.int32 or handle.numel() != 1:
        raise TypeError("hctune custom op: hct_kernel: want a handle from TorchKernel.handle() "
                        "(a one-element int32 tensor), got %s"
                        % (type(handle).__name__ if not isinstance(handle, torch.Tensor)
                           else "a %s tensor of %d elements" % (handle.dtype, handle.numel())))
    got = _handles.get((handle.device, handle.data_ptr()))
    if got is not None:
        number = got[1]
    elif _capturing(handle):
        raise RuntimeError("hctune custom op: handle at %#x on %s: not a handle of "
                           "hctune.torch_ops (a copy?), and it cannot be read during a CUDA "
                           "graph capture; pass TorchKernel.handle()'s tensor itself (a module "
                           "buffer, or marked static)" % (handle.data_ptr(), handle.device))
    else:
        number = int(handle.item())
    kernel = _kernels.get(number)
    if kernel is None:
        raise RuntimeError("hctune custom op: kernel %d is not registered (released?)" % number)
    return kernel


def _launch(handle, tokens, buffers):
    """The custom op's implementation: Kernel.launch of the handle's
    kernel, on torch's current stream of the first CUDA tensor's device."""
    kernel = kernel_of(handle)
    stream = None
    for b in buffers:
        if b is not None and b.is_cuda:
            stream = torch.cuda.current_stream(b.device).cuda_stream
            break
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
    custom = torch.library.custom_op("%s::%s" % (NAMESPACE, op), scope[op], mutates_args=mutated)
    custom.register_fake(scope["fake"])
    return getattr(getattr(torch.ops, NAMESPACE), op).default


def _default_device():
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


class TorchKernel:
    """A hctune.Kernel callable inside torch.compile(fullgraph=True):
    `k(T, handle=h, **buffers)` (or buffers by position, in the manifest's
    order) calls torch.ops.hctune.<op>(h, T, ...).  Plain Python that
    Dynamo traces; it reads no attribute Dynamo would guard by value.
    Without handle=, the kernel's own handle (made by wrap() on the current
    device) is used: fine for one call site, but every layer should hold
    its own (handle())."""

    def __init__(self, kernel, number, overload, names, device):
        self.kernel = kernel
        self.number = number
        self.op = overload
        self.names = names
        self.default_handle = self.handle(device)

    def handle(self, device=None):
        """A new handle naming this kernel: a one-element int32 tensor on
        `device` (default: the current CUDA device, else the CPU) holding
        the kernel's number, kept here (alive, so that its address names
        nothing else) until release(), and marked a static address
        (unguarded) for CUDA graphs."""
        h = torch.full((1,), self.number, dtype=torch.int32,
                       device=_default_device() if device is None else device)
        torch._dynamo.mark_static_address(h, guard=False)
        with _lock:
            if self.number not in _kernels:
                raise RuntimeError("hctune custom op: kernel %d is not registered (released?)"
                                   % self.number)
            _handles[(h.device, h.data_ptr())] = (h, self.number)
        return h

    def __call__(self, tokens, *args, handle=None, **kwargs):
        if len(args) > len(self.names):
            raise TypeError("%s takes %d buffers, %d given" % (self.kernel.op, len(self.names), len(args)))
        for name in kwargs:
            if name not in self.names:
                raise TypeError("%s has no buffer %r" % (self.kernel.op, name))
        bufs = list(args) + [kwargs.get(n) for n in self.names[len(args):]]
        self.op(self.default_handle if handle is None else handle, tokens, *bufs)


def wrap(kernel, device=None):
    """Registers `kernel` (a hctune.Kernel) and, the first time its op is
    seen, the custom op torch.ops.hctune.<op>; returns a TorchKernel whose
    default handle is on `device` (default: the current CUDA device, else
    the CPU).  A second kernel of the same op shares the custom op."""
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
    return TorchKernel(kernel, number, overload, tuple(n for n, _, _ in layout), device)


def release(wrapped):
    """Forgets a TorchKernel's kernel and its handles (a compiled graph
    that still calls it then raises); the caller closes the Kernel."""
    with _lock:
        _kernels.pop(wrapped.number, None)
        for key in [k for k, (_, n) in _handles.items() if n == wrapped.number]:
            del _handles[key]
