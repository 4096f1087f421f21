#!/usr/bin/env python3
"""torch_model.py: a model that compiles hctune in, two instances in one process.

Model is a torch.nn.Module of --layers layers (48), each with its own
weights (w_norm, w_down, w_up of the spec, and w_mix) and its own kernel
handle: every layer reads twice (hc_read through torch.ops.hctune.hc_read),
the first read with the pending write the previous layer made, the second
without; between them the layer's other work, a multiply that turns the
second read's output into the next layer's pending write (so every read's
output is consumed, and the compiler can drop none).  Which layers read with
the bitwise and which with the kl kernel is the instance's pattern: the
target reads kl on every third layer, the drafter on every second.

Both instances are compiled with torch.compile(fullgraph=True, mode=--mode,
default max-autotune: CUDA graphs on) at Dynamo's default limits and called
at every T of --tokens (1-8), each call checked bit for bit (resid and every
read's three outputs) against the same instance called without
torch.compile: the same kernels, launched eagerly.  The graphs Dynamo
compiled are counted from its own counters
(torch._dynamo.utils.counters["stats"]["unique_graphs"]) and its cache
entries for Model.forward: kernel identity is data (handles, see
hctune.torch_ops), so the count is what Dynamo's default dynamism needs for
T (one graph for T = 1, one dynamic graph for the others), not one more per
layer, kernel or instance.

  PYTHONPATH=python python3 examples/torch_model.py [--socket PATH] [--tokens 1-8] [--json]

--shared-handles gives each kernel one handle that every layer of every
instance shares, the way not to hold them: the instances then differ in
which inputs alias, a guard, and compile twice (the negative control).
Without a daemon both instances run the baseline compiled by the library,
said so.  Exit 0 when every output is bit-identical and the graphs are
within --max-graphs (default 2), 1 otherwise, 2 on bad arguments or
without torch or a GPU.
"""
import argparse
import json
import os
import sys
import time

S, C, K = 4, 2560, 320
D = S * C
PATTERNS = {"target": lambda l: "kl" if l % 3 == 0 else "bitwise",
            "drafter": lambda l: "kl" if l % 2 == 0 else "bitwise"}


def model_class(torch):
    """Layer and Model, made once torch is imported (torch is optional for
    the hctune package and for this file's import)."""
    nn = torch.nn

    class Layer(nn.Module):
        def __init__(self, read, gen, device, per_layer_handle):
            super().__init__()

            def randn(*shape, scale, dtype):
                return (torch.randn(*shape, generator=gen) * scale).to(device=device, dtype=dtype)

            self.w_norm = nn.Parameter((1.0 + 0.25 * torch.rand(S, C, generator=gen)).to(
                device=device, dtype=torch.bfloat16), requires_grad=False)
            self.w_down = nn.Parameter(randn(K, D, scale=D ** -0.5, dtype=torch.bfloat16),
                                       requires_grad=False)
            self.w_up = nn.Parameter(randn(D, K, scale=K ** -0.5, dtype=torch.bfloat16),
                                     requires_grad=False)
            self.w_mix = nn.Parameter(randn(S, C, scale=0.05, dtype=torch.float32), requires_grad=False)
            # The kernel, as data: this layer's own handle, a buffer like
            # its weights (static for CUDA graphs, never guarded by value).
            self.register_buffer("read_handle", read.handle(device) if per_layer_handle
                                 else read.default_handle, persistent=False)

        def read(self, r, pending):
            T = r.shape[0]
            mixed = torch.empty(T, C, device=r.device)
            mixed_bf16 = torch.empty(T, C, device=r.device, dtype=torch.bfloat16)
            mixed_f16 = torch.empty(T, C, device=r.device, dtype=torch.float16)
            torch.ops.hctune.hc_read(self.read_handle, T, r, pending, self.w_norm, self.w_down,
                                     self.w_up, mixed, mixed_bf16, mixed_f16)
            return mixed, mixed_bf16, mixed_f16

        def forward(self, r, pending):
            first = self.read(r, pending)
            second = self.read(r, None)
            # The other work: the next layer's pending write, from this
            # layer's second read (one rounding: bit-identical compiled or not).
            return first + second, second[0].unsqueeze(1) * self.w_mix

    class Model(nn.Module):
        """forward(resid [T][S][C] f32, pending [T][S][C] f32) -> (resid
        after every read, mixed [2L][T][C] f32, mixed_bf16, mixed_f16)."""

        def __init__(self, reads, pattern, seed, device, layers=48, per_layer_handle=True):
            super().__init__()
            gen = torch.Generator().manual_seed(seed)
            self.layers = nn.ModuleList(Layer(reads[pattern(l)], gen, device, per_layer_handle)
                                        for l in range(layers))

        def forward(self, resid, pending):
            r = resid.clone()       # the reads write r; the caller's tensor stays as it was
            outs = []
            for layer in self.layers:
                got, pending = layer(r, pending)
                outs += got
            return (r, torch.stack(outs[0::3]), torch.stack(outs[1::3]), torch.stack(outs[2::3]))

    return Layer, Model


def recompile_limit(torch):
    """Dynamo's recompile limit (cache_size_limit before torch 2.7)."""
    config = torch._dynamo.config
    return config.recompile_limit if hasattr(config, "recompile_limit") else config.cache_size_limit


def run(torch, models, tokens, mode, seed=7, log=None):
    """Compiles each model of `models` ({name: Model}) with
    torch.compile(fullgraph=True, mode=mode), calls it at every T of
    `tokens` and checks each call bit for bit against the model called
    eagerly.  Returns a dict: graphs (Dynamo's unique_graphs), cache_entries
    (Dynamo's entries for Model.forward), mismatches [(name, T, what,
    elements)], seconds, calls."""
    from torch._dynamo.utils import counters
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    before = counters["stats"]["unique_graphs"]
    compiled = {name: torch.compile(m, fullgraph=True, mode=mode) for name, m in models.items()}
    device = next(iter(models.values())).layers[0].w_norm.device
    gen = torch.Generator().manual_seed(seed)
    mismatches, calls, t0 = [], 0, time.time()
    for T in tokens:
        resid = torch.randn(T, S, C, generator=gen).to(device)
        pending = (0.05 * torch.randn(T, S, C, generator=gen)).to(device)
        for name, m in models.items():
            with torch.no_grad():
                want = [t.clone() for t in m(resid, pending)]
                got = [t.clone() for t in compiled[name](resid, pending)]
            calls += 1
            n_bad = len(mismatches)
            for what, a, b in zip(("resid", "mixed", "mixed_bf16", "mixed_f16"), got, want):
                bad = int((a.view(torch.int16 if a.element_size() == 2 else torch.int32) !=
                           b.view(torch.int16 if b.element_size() == 2 else torch.int32)).sum())
                if bad or a.shape != b.shape:
                    mismatches.append((name, T, what, bad))
            if log:
                log("%s T=%d: %s" % (name, T, "bit-identical to eager" if len(mismatches) == n_bad
                                     else "DIFFERS: %s" % mismatches[n_bad:]))
    model_cls = type(next(iter(models.values())))
    return dict(graphs=counters["stats"]["unique_graphs"] - before,
                cache_entries=len(_debug_get_cache_entry_list(model_cls.forward.__code__)),
                mismatches=mismatches, seconds=time.time() - t0, calls=calls)


def parse_tokens(text):
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return sorted(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--socket", help="daemon socket (default: as libhctune finds it)")
    p.add_argument("--tokens", default="1-8", help="token counts in 1..8 (default 1-8)")
    p.add_argument("--layers", type=int, default=48)
    p.add_argument("--mode", default="max-autotune", help="torch.compile mode (default max-autotune)")
    p.add_argument("--max-graphs", type=int, default=2,
                   help="fail above this many graphs compiled (default 2: T = 1 and the rest)")
    p.add_argument("--shared-handles", action="store_true",
                   help="one handle per kernel, shared by every layer (the negative control)")
    p.add_argument("--timeout-ms", type=int, default=1000)
    p.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    a = p.parse_args()
    try:
        a.tokens = parse_tokens(a.tokens)
    except ValueError:
        p.error("--tokens %r: want a list like 1-8 or 1,4,8" % a.tokens)
    if not a.tokens or a.tokens[0] < 1 or a.tokens[-1] > 8 or a.layers < 1:
        p.error("--tokens: each in 1..8; --layers at least 1")
    try:
        import torch
    except ImportError as e:
        print("torch_model: no torch here (%s)" % e, file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_model: no GPU: torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import hctune
    import hctune.torch_ops

    torch.cuda.init()
    dev = torch.device("cuda:0")
    client = hctune.Client(a.socket, a.timeout_ms)
    note = "" if client.connected else "no daemon (%s): the baseline compiled here" % client.why
    if note:
        print("torch_model: %s" % note, file=sys.stderr)
    reads = {}
    for parity in ("bitwise", "kl"):
        k = hctune.load("hc_read", a.tokens[0], a.tokens[-1],
                        client=client if client.connected else None, parity=parity)
        reads[parity] = hctune.torch_ops.wrap(k, dev)
    _, Model = model_class(torch)
    models = {name: Model(reads, PATTERNS[name], seed=i + 1, device=dev, layers=a.layers,
                          per_layer_handle=not a.shared_handles)
              for i, name in enumerate(("target", "drafter"))}
    lines = []
    res = run(torch, models, a.tokens, a.mode, log=None if a.json else lines.append)
    choices = {parity: {T: "%s %s [%s]" % (c.variant, json.dumps(c.params, separators=(",", ":")),
                                          c.source + (", compiled here" if c.fallback else ""))
                        for T in a.tokens for c in [r.kernel.choice(T)[0]]}
               for parity, r in reads.items()}
    ok = not res["mismatches"] and res["graphs"] <= a.max_graphs
    out = dict(gpu=torch.cuda.get_device_name(0), torch=torch.__version__, mode=a.mode,
               layers=a.layers, tokens=a.tokens, shared_handles=a.shared_handles,
               recompile_limit=recompile_limit(torch), note=note,
               graphs=res["graphs"], cache_entries=res["cache_entries"], calls=res["calls"],
               seconds=round(res["seconds"], 1), mismatches=res["mismatches"], choices=choices, ok=ok)
    if a.json:
        print(json.dumps(out))
    else:
        print("torch_model on %s (torch %s): 2 instances x %d layers x 2 reads, mode %s, "
              "recompile_limit %d%s" % (out["gpu"], out["torch"], a.layers, a.mode,
                                        out["recompile_limit"], " (" + note + ")" if note else ""))
        for line in lines:
            print("  " + line)
        for parity, by_t in choices.items():
            print("  %s: %s" % (parity, "; ".join("T=%d %s" % kv for kv in sorted(by_t.items()))))
        print("graphs compiled (Dynamo's unique_graphs): %d; cache entries of Model.forward: %d; "
              "%d calls in %.1f s; %s" % (res["graphs"], res["cache_entries"], res["calls"],
                                        res["seconds"], "every output bit-identical to eager"
                                        if not res["mismatches"] else
                                        "%d outputs DIFFER" % len(res["mismatches"])))
        if res["graphs"] > a.max_graphs:
            print("MORE GRAPHS than %d: a recompile per layer, kernel or instance" % a.max_graphs)
    for r in reads.values():
        hctune.torch_ops.release(r)
        r.kernel.close()
    client.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
