#!/usr/bin/env python3
"""torch_engine.py: hc_engine's decode window in PyTorch, with the read three ways.

A window is 48 layers x 2 reads of hc_read for T tokens, each layer its own
weights (seeded), the layer's pending write on its first read, and before each
read the layer's other work: a copy of --stream-mb MB (a cold L2 for the read).
The window is captured in one CUDA graph and replayed; ms per window is the
median of --windows replays.  In the same run, with the same weights, the read
is:

  hctune bitwise  the daemon's bitwise choice, through the hctune package
  hctune kl       the daemon's kl choice
  torch eager     the spec's math in PyTorch (bf16 GEMMs through cuBLAS, f32
                  accumulate; the norm, gate and mix in f32)
  torch.compile   the same function after torch.compile(mode=--compile-mode)

and, for reference, the copies alone.  Without a daemon the hctune rows run
the baseline compiled by the library, and say so.

  PYTHONPATH=python python3 examples/torch_engine.py --tokens 1,4,8 [--json]

--compile-mode defaults to "max-autotune-no-cudagraphs": max-autotune's tuning
of the GEMMs, without the compiled function's own CUDA graphs, because the
whole window is captured in one graph here (as the issue's figures were).

--compiled-window MODE (e.g. max-autotune) adds the configuration an engine
compiled whole runs: the window itself is compiled with
torch.compile(mode=MODE, fullgraph=True), CUDA graphs included when MODE has
them, no graph of our own around it, three ways: the read as hctune's custom
op (torch.ops.hctune.hc_read from hctune.torch_ops, bitwise and kl), the
read in PyTorch, and the copies alone; each compiled once per T (compiling
and tuning are outside the timing).  Every tensor the window touches is
marked static (torch._dynamo.mark_static_address) so that the CUDA graphs
neither copy the weights in nor skip because the window writes its inputs;
if torch still logs "skipping cudagraphs", those rows ran without graphs.
Not yet run on a GPU when written (no torch where it was written).
Exit 0 when every row ran and hctune's outputs agree with torch eager's
(relative error under 3e-2: different summation orders and roundings),
1 otherwise, 2 on bad arguments or without torch or a GPU.
"""
import argparse
import json
import os
import statistics
import sys

S, C, K = 4, 2560, 320
D = S * C
EPS = 1e-6


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--socket", help="daemon socket (default: as libhctune finds it)")
    p.add_argument("--tokens", default="1,4,8", help="token counts, 1..8 (default 1,4,8)")
    p.add_argument("--windows", type=int, default=20, help="replays per row (default 20)")
    p.add_argument("--layers", type=int, default=48)
    p.add_argument("--stream-mb", type=float, default=64.0)
    p.add_argument("--compile-mode", default="max-autotune-no-cudagraphs",
                   help="torch.compile mode, or 'none' to skip the row")
    p.add_argument("--compiled-window", default="none", metavar="MODE",
                   help="also compile the whole window with torch.compile(mode=MODE, "
                        "fullgraph=True), the read as hctune's custom op and in PyTorch "
                        "(e.g. max-autotune; default none)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout-ms", type=int, default=1000)
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    a = p.parse_args()
    try:
        a.tokens = sorted({int(t) for t in a.tokens.split(",")})
    except ValueError:
        p.error("--tokens %r: want a list like 1,4,8" % a.tokens)
    if not a.tokens or a.tokens[0] < 1 or a.tokens[-1] > 8:
        p.error("--tokens: each in 1..8")
    if a.windows < 1 or a.layers < 1 or not 0 <= a.stream_mb <= 4096:
        p.error("--windows and --layers at least 1, --stream-mb in 0..4096")
    return a


def fail(status, msg):
    print("torch_engine: %s" % msg, file=sys.stderr)
    sys.exit(status)


def main():
    a = parse_args()
    try:
        import torch
    except ImportError as e:
        fail(2, "no torch here (%s)" % e)
    if not torch.cuda.is_available():
        fail(2, "no GPU: torch.cuda.is_available() is False")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import hctune

    dev = torch.device("cuda:0")
    torch.cuda.init()
    torch.manual_seed(a.seed)
    TM = max(a.tokens)
    gen = torch.Generator(device=dev).manual_seed(a.seed)

    def randn(*shape, scale=1.0, dtype=torch.float32):
        return (torch.randn(*shape, generator=gen, device=dev) * scale).to(dtype)

    layers = []
    for _ in range(a.layers):
        layers.append(dict(
            w_norm=(1.0 + 0.25 * torch.rand(S, C, generator=gen, device=dev)).to(torch.bfloat16),
            w_down=randn(K, D, scale=D ** -0.5, dtype=torch.bfloat16),
            w_up=randn(D, K, scale=K ** -0.5, dtype=torch.bfloat16),
            pending=randn(TM, S, C, scale=0.05)))
    resid0 = randn(TM, S, C)
    resid = resid0.clone()
    outs = [dict(mixed=torch.empty(TM, C, device=dev),
                 mixed_bf16=torch.empty(TM, C, device=dev, dtype=torch.bfloat16),
                 mixed_f16=torch.empty(TM, C, device=dev, dtype=torch.float16))
            for _ in range(2 * a.layers)]
    n_stream = int(a.stream_mb * 1048576) // 4
    src = torch.ones(max(n_stream, 1), device=dev)
    dst = torch.empty_like(src)

    def other_work():
        # A kernel, not cudaMemcpy: the layer's other work is kernels in an
        # engine, and a read launched with PDL then follows a kernel node.
        if n_stream:
            torch.mul(src, 1.0, out=dst)

    def read_core(r, w_norm, w_down, w_up):
        """The read's math after the pending add, for r = R' [T][S][C]."""
        T = r.shape[0]
        ss = (r * r).sum(-1, keepdim=True)
        rs = torch.rsqrt(ss / C + EPS)
        xn = (r * w_norm.float()) * rs
        lo = torch.matmul(xn.reshape(T, D).to(torch.bfloat16), w_down.t())
        u = torch.matmul(lo, w_up.t()).float()
        g = torch.sigmoid(u).reshape(T, S, C)
        m = (g * r).sum(1)
        return m, m.to(torch.bfloat16), m.to(torch.float16)

    def torch_read(fn):
        def read(T, L, pending, o):
            r = resid[:T]
            if pending is not None:
                r.add_(pending[:T])
            m, mb, mh = fn(r, L["w_norm"], L["w_down"], L["w_up"])
            o["mixed"][:T].copy_(m)
            o["mixed_bf16"][:T].copy_(mb)
            o["mixed_f16"][:T].copy_(mh)
        return read

    client = hctune.Client(a.socket, a.timeout_ms)
    note = "" if client.connected else "no daemon (%s): the baseline compiled here" % client.why
    if note:
        print("torch_engine: %s" % note, file=sys.stderr)

    def hctune_read(kernel):
        def read(T, L, pending, o):
            kernel(T, resid=resid, pending=None if pending is None else pending,
                   w_norm=L["w_norm"], w_down=L["w_down"], w_up=L["w_up"],
                   mixed=o["mixed"], mixed_bf16=o["mixed_bf16"], mixed_f16=o["mixed_f16"])
        return read

    rows_cfg = []
    kernels = []
    for parity in ("bitwise", "kl"):
        try:
            k = hctune.load("hc_read", a.tokens[0], a.tokens[-1],
                            client=client if client.connected else None, parity=parity)
        except hctune.Error as e:
            print("torch_engine: hctune %s: %s" % (parity, e), file=sys.stderr)
            rows_cfg.append(("hctune " + parity, None, None))
            continue
        kernels.append(k)
        rows_cfg.append(("hctune " + parity, hctune_read(k), k))
    rows_cfg.append(("torch eager", torch_read(read_core), None))
    if a.compile_mode != "none":
        compiled = torch.compile(read_core, mode=a.compile_mode, dynamic=False)
        rows_cfg.append(("torch.compile", torch_read(compiled), None))
    rows_cfg.append(("copies alone", None, "copies"))

    stream = torch.cuda.Stream()

    def window(read, T):
        for l in range(a.layers):
            L = layers[l]
            for r in range(2):
                other_work()
                if read is not None:
                    read(T, L, L["pending"] if r == 0 else None, outs[2 * l + r])

    def measure(read, T):
        # Warm up (and, for torch.compile, compile and tune) outside the capture.
        with torch.cuda.stream(stream):
            for _ in range(2):
                window(read, T)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            window(read, T)
        for _ in range(2):
            g.replay()
        resid.copy_(resid0)
        torch.cuda.synchronize()
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(a.windows + 1)]
        with torch.cuda.stream(stream):
            for i in range(a.windows):
                ev[i].record()
                g.replay()
            ev[a.windows].record()
        torch.cuda.synchronize()
        ms = statistics.median(ev[i].elapsed_time(ev[i + 1]) for i in range(a.windows))
        last = torch.cat([o["mixed"][:T].flatten() for o in outs]).clone()
        del g
        return ms, last

    compiled_cfg = []
    if a.compiled_window != "none":
        compiled_cfg = compiled_rows(a, torch, hctune, rows_cfg, layers, outs, resid, src, dst,
                                     other_work, torch_read(read_core))

    rows, ok = [], True
    for T in a.tokens:
        eager_out = None
        results = {}
        for name, read, extra in rows_cfg:
            if read is None and extra != "copies":
                rows.append(dict(T=T, row=name, ms_window=None, runs="(not loaded)", check="failed"))
                ok = False
                continue
            ms, out = measure(read, T)
            results[name] = (ms, out)
            if name == "torch eager":
                eager_out = out
        for name, win, extra in compiled_cfg:
            resid.copy_(resid0)
            results[name] = measure_compiled(torch, win, T, a.windows, resid, resid0, outs)
        copies = results["copies alone"][0]
        for name, read, extra in rows_cfg + compiled_cfg:
            if name not in results:
                continue
            ms, out = results[name]
            runs, check = "", ""
            if isinstance(extra, hctune.Kernel):
                ch, why = extra.choice(T)
                runs = "%s %s [%s%s]" % (ch.variant, json.dumps(ch.params, separators=(",", ":")),
                                         ch.source, ", compiled here" if ch.fallback else "")
                rel = float((out - eager_out).norm() / eager_out.norm())
                check = "rel. error vs eager %.2e" % rel
                if not rel < 3e-2:
                    ok = False
                    check += " TOO LARGE"
            base = results["copies [compiled]"][0] if name.endswith("[compiled]") else copies
            rows.append(dict(T=T, row=name, ms_window=ms,
                             ms_reads=ms - base if not name.startswith("copies") else None,
                             runs=runs, check=check))

    for k in kernels:
        k.close()
    client.close()
    if a.json:
        print(json.dumps(dict(gpu=torch.cuda.get_device_name(0), torch=torch.__version__,
                              layers=a.layers, windows=a.windows, stream_mb=a.stream_mb,
                              compile_mode=a.compile_mode, compiled_window=a.compiled_window,
                              note=note, rows=rows, ok=ok)))
    else:
        print("torch_engine on %s (torch %s): %d layers x 2 reads a window, %g MB copied before "
              "each read, median of %d windows%s" % (torch.cuda.get_device_name(0), torch.__version__,
                                                   a.layers, a.stream_mb, a.windows,
                                                   "" if not note else " (" + note + ")"))
        print("%-3s %-26s %9s %9s  %-44s %s" % ("T", "read", "ms/window", "reads ms", "runs", "check"))
        for r in rows:
            ms = "%9.3f" % r["ms_window"] if r["ms_window"] is not None else "%9s" % "-"
            rd = "%9.3f" % r["ms_reads"] if r.get("ms_reads") is not None else "%9s" % ""
            print("%-3d %-26s %s %s  %-44s %s" % (r["T"], r["row"], ms, rd, r["runs"], r["check"]))
    return 0 if ok else 1


def compiled_rows(a, torch, hctune, rows_cfg, layers, outs, resid, src, dst, other_work,
                  torch_layer_read):
    """[(row name, compiled window, extra)] for --compiled-window: the
    window compiled whole with torch.compile(mode=a.compiled_window,
    fullgraph=True), the read as hctune's custom op, in PyTorch, or none."""
    import hctune.torch_ops
    for t in [resid, src, dst] + [t for L in layers for t in L.values()] + \
             [t for o in outs for t in o.values()]:
        torch._dynamo.mark_static_address(t)

    def op_read(tk):
        def read(T, L, pending, o):
            tk(T, resid=resid, pending=pending, w_norm=L["w_norm"], w_down=L["w_down"],
               w_up=L["w_up"], mixed=o["mixed"], mixed_bf16=o["mixed_bf16"], mixed_f16=o["mixed_f16"])
        return read

    def window_of(read):
        def window(T):
            for l in range(a.layers):
                L = layers[l]
                for r in range(2):
                    other_work()
                    if read is not None:
                        read(T, L, L["pending"] if r == 0 else None, outs[2 * l + r])
        return torch.compile(window, mode=a.compiled_window, fullgraph=True, dynamic=False)

    out = []
    for name, read, extra in rows_cfg:
        if isinstance(extra, hctune.Kernel):
            tk = hctune.torch_ops.wrap(extra)
            out.append((name + " [compiled]", window_of(op_read(tk)), extra))
    out.append(("torch [compiled]", window_of(torch_layer_read), None))
    out.append(("copies [compiled]", window_of(None), "copies"))
    return out


def measure_compiled(torch, win, T, windows, resid, resid0, outs):
    """(ms per window, the outputs) of a compiled window, as measure() does
    for a captured one: warm-up calls (compile, tune, record the CUDA
    graphs), resid reset, then `windows` timed calls on the current stream."""
    for _ in range(3):
        win(T)
    resid.copy_(resid0)
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(windows + 1)]
    for i in range(windows):
        ev[i].record()
        win(T)
    ev[windows].record()
    torch.cuda.synchronize()
    ms = statistics.median(ev[i].elapsed_time(ev[i + 1]) for i in range(windows))
    return ms, torch.cat([o["mixed"][:T].flatten() for o in outs]).clone()


if __name__ == "__main__":
    sys.exit(main())
