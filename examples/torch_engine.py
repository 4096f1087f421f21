#!/usr/bin/env python3
"""torch_engine.py: hc_engine's windows in PyTorch, with the read several ways.

A window is 48 layers x 2 reads for T tokens, each layer its own weights
(seeded), the layer's pending write on its first read, and before each read
the layer's other work: a kernel that copies --stream-mb MB (a cold L2 for
the read).  The window is captured in one CUDA graph and replayed; ms per
window is the median of --windows replays.

--window decode (the default; hc_read, T = 1..8, --tokens 1,4,8): the read is

  hctune bitwise  the daemon's bitwise choice, through the hctune package
  hctune kl       the daemon's kl choice
  torch eager     the spec's math in PyTorch (bf16 GEMMs through cuBLAS, f32
                  accumulate; the norm, gate and mix in f32)
  torch.compile   the same function after torch.compile(mode=--compile-mode)

--window prefill (hc_read_prefill, T = 16..32768, --tokens 2048,8192): the
read is pair_mma (HCTUNE_FORCE, the reference), the daemon's bits:pair_mma
choice (checked bit-identical to pair_mma's resid and every read's outputs
over the window), the daemon's kl choice, torch eager and torch.compile
(PyTorch's read rounds xn and lo to bf16 before the GEMMs, as the prefill
op does).  96 reads' outputs at T = 8,192 are 16 GB, and the layers'
pending writes 16 GB more: the window needs about 35 GB of the card, and
the host holds the reference's outputs (16 GB).

and, for reference, the other work alone.  Without a daemon the hctune rows
run what the library compiles itself, and say so.

  PYTHONPATH=python python3 examples/torch_engine.py --tokens 1,4,8 [--json]
  PYTHONPATH=python python3 examples/torch_engine.py --window prefill [--json]

--compile-mode defaults to "max-autotune-no-cudagraphs": max-autotune's tuning
of the GEMMs, without the compiled function's own CUDA graphs, because the
whole window is captured in one graph here.

The other work is a custom op of this script (torch.ops.hctune_example.copy:
dst = src * 1.0, ping-pong between two buffers so that each copy reads what
the one before wrote), the same kernel in every row: opaque to torch.compile,
which can neither drop nor merge it (issue 36: with plain torch ops it kept
one of the 96 copies, whose results nothing read).

--compiled-window MODE (decode only; e.g. max-autotune) adds the
configuration an engine compiled whole runs: the window itself compiled with
torch.compile(mode=MODE, fullgraph=True, dynamic=False), CUDA graphs
included when MODE has them, no graph of our own around it, three ways: the
read as hctune's custom op (torch.ops.hctune.hc_read; the bitwise and kl
rows run one compiled function, the kernel named by handles, see
hctune.torch_ops), the read in PyTorch, and the other work alone; each
function its own code object, so that each compiles once per T within
Dynamo's default recompile_limit (8).  Every tensor the window touches is
marked a static address (unguarded) so that the CUDA graphs neither copy
the weights in nor skip because the window writes its inputs.  The script
checks that the compiled other work alone is within 10% of the captured
one (the compiled rows then do the same work) and says so.

Exit 0 when every row ran and every check held: hctune's outputs agree with
torch eager's (relative error under 3e-2: different summation orders and
roundings), bits:pair_mma is bit-identical to pair_mma, the copies rows
agree; 1 otherwise, 2 on bad arguments or without torch or a GPU.
"""
import argparse
import json
import os
import statistics
import sys
import time

S, C, K = 4, 2560, 320
D = S * C
EPS = 1e-6
WINDOWS = {  # --window: the op, its T range, default tokens and windows
    "decode": dict(op="hc_read", tmin=1, tmax=8, tokens="1,4,8", windows=20),
    "prefill": dict(op="hc_read_prefill", tmin=16, tmax=32768, tokens="2048,8192", windows=10),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--socket", help="daemon socket (default: as libhctune finds it)")
    p.add_argument("--window", choices=sorted(WINDOWS), default="decode")
    p.add_argument("--tokens", help="token counts (default 1,4,8 decode, 2048,8192 prefill)")
    p.add_argument("--windows", type=int, help="replays per row (default 20 decode, 10 prefill)")
    p.add_argument("--layers", type=int, default=48)
    p.add_argument("--stream-mb", type=float, default=64.0)
    p.add_argument("--compile-mode", default="max-autotune-no-cudagraphs",
                   help="torch.compile mode, or 'none' to skip the row")
    p.add_argument("--compiled-window", default="none", metavar="MODE",
                   help="also compile the whole window with torch.compile(mode=MODE, "
                        "fullgraph=True), the read as hctune's custom op and in PyTorch "
                        "(decode only; e.g. max-autotune; default none)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout-ms", type=int, default=1000)
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    a = p.parse_args(argv)
    w = WINDOWS[a.window]
    a.op = w["op"]
    try:
        a.tokens = sorted({int(t) for t in (a.tokens or w["tokens"]).split(",")})
    except ValueError:
        p.error("--tokens %r: want a list like %s" % (a.tokens, w["tokens"]))
    if not a.tokens or a.tokens[0] < w["tmin"] or a.tokens[-1] > w["tmax"]:
        p.error("--tokens: each in %d..%d for the %s window" % (w["tmin"], w["tmax"], a.window))
    a.windows = w["windows"] if a.windows is None else a.windows
    if a.windows < 1 or a.layers < 1 or not 0 <= a.stream_mb <= 4096:
        p.error("--windows and --layers at least 1, --stream-mb in 0..4096")
    if a.compiled_window != "none" and a.window != "decode":
        p.error("--compiled-window: the decode window only")
    return a


def fail(status, msg):
    print("torch_engine: %s" % msg, file=sys.stderr)
    sys.exit(status)


def define_copy(torch):
    """torch.ops.hctune_example.copy(dst, src): dst = src * 1.0, a kernel
    (the layer's other work) that torch.compile cannot see into."""
    @torch.library.custom_op("hctune_example::copy", mutates_args=("dst",))
    def copy(dst: torch.Tensor, src: torch.Tensor) -> None:
        torch.mul(src, 1.0, out=dst)

    @copy.register_fake
    def _(dst, src):
        return None

    return torch.ops.hctune_example.copy.default


def load(hctune, a, client, parity, force=None):
    """hctune.load of the window's op for --tokens, HCTUNE_FORCE=force while
    loading (the library reads it then); (kernel, None) or (None, why)."""
    saved = os.environ.get("HCTUNE_FORCE")
    if force is not None:
        os.environ["HCTUNE_FORCE"] = force
    try:
        return hctune.load(a.op, a.tokens[0], a.tokens[-1],
                           client=client if client.connected else None, parity=parity), None
    except hctune.Error as e:
        return None, str(e)
    finally:
        if force is None:
            pass
        elif saved is None:
            del os.environ["HCTUNE_FORCE"]
        else:
            os.environ["HCTUNE_FORCE"] = saved


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
    bufs = [torch.ones(max(n_stream, 1), device=dev), torch.ones(max(n_stream, 1), device=dev)]
    copy = define_copy(torch)

    def other_work(k):
        # Read k's other work: a kernel, not cudaMemcpy (an engine's other
        # work is kernels, and a read launched with PDL then follows a
        # kernel node), reading what the one before wrote.
        if n_stream:
            copy(bufs[(k + 1) % 2], bufs[k % 2])

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

    # (row, read, extra): extra is the hctune.Kernel of a hctune row, or a
    # dict of roles: ref (the bit reference), bits_of (compared bit for
    # bit with that row), copies (the other work alone).
    rows_cfg, kernels = [], []
    if a.window == "decode":
        hct_rows = [("hctune bitwise", "bitwise", None, {}), ("hctune kl", "kl", None, {})]
    else:
        hct_rows = [("pair_mma (reference)", "bitwise", "%s=pair_mma" % a.op, {"ref": True}),
                    ("hctune bits:pair_mma", "bits:pair_mma", None, {"bits_of": "pair_mma (reference)"}),
                    ("hctune kl", "kl", None, {})]
    for name, parity, force, roles in hct_rows:
        k, why = load(hctune, a, client, parity, force)
        if k is None:
            print("torch_engine: %s: %s" % (name, why), file=sys.stderr)
            rows_cfg.append((name, None, dict(roles, why=why)))
            continue
        kernels.append(k)
        rows_cfg.append((name, hctune_read(k), dict(roles, kernel=k)))
    rows_cfg.append(("torch eager", torch_read(read_core), {"eager": True}))
    if a.compile_mode != "none":
        compiled = torch.compile(read_core, mode=a.compile_mode, dynamic=False)
        rows_cfg.append(("torch.compile", torch_read(compiled), {}))
    rows_cfg.append(("copies alone", None, {"copies": True}))

    stream = torch.cuda.Stream()

    def window(read, T):
        for l in range(a.layers):
            L = layers[l]
            for r in range(2):
                other_work(2 * l + r)
                if read is not None:
                    read(T, L, L["pending"] if r == 0 else None, outs[2 * l + r])

    # The reads whose mixed is compared with eager's: all of them at decode,
    # the first two and the last at prefill (the outputs are GBs there; the
    # bit checks compare every read).
    sample = range(2 * a.layers) if a.window == "decode" else sorted({0, 1, 2 * a.layers - 1})

    def sampled(T):
        return torch.cat([outs[i]["mixed"][:T].flatten() for i in sample]).clone()

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
        del g
        return ms, sampled(T)

    def snapshot(T):
        """resid and every read's three outputs, on the host."""
        return [resid[:T].cpu()] + [o[n][:T].cpu() for o in outs
                                     for n in ("mixed", "mixed_bf16", "mixed_f16")]

    def bit_mismatches(T, ref):
        got = [resid[:T]] + [o[n][:T] for o in outs for n in ("mixed", "mixed_bf16", "mixed_f16")]
        bad = 0
        for x, y in zip(got, ref):
            y = y.to(dev)
            it = torch.int16 if x.element_size() == 2 else torch.int32
            bad += int((x.view(it) != y.view(it)).sum())
        return bad

    compiled_cfg, dynamo = [], None
    if a.compiled_window != "none":
        compiled_cfg, dynamo = compiled_rows(a, torch, hctune, rows_cfg, layers, outs, resid, bufs,
                                             other_work, torch_read(read_core))

    rows, ok, checks = [], True, []
    t_start = time.time()
    for T in a.tokens:
        results, refs = {}, {}
        for name, read, extra in rows_cfg:
            if read is None and not extra.get("copies"):
                rows.append(dict(T=T, row=name, ms_window=None, runs="(not loaded: %s)" % extra["why"],
                                 check="failed"))
                ok = False
                continue
            results[name] = measure(read, T)
            if extra.get("ref"):
                refs[name] = snapshot(T)
            if extra.get("bits_of"):
                results[name] += (bit_mismatches(T, refs[extra["bits_of"]])
                                  if extra["bits_of"] in refs else None,)
        for name, win, extra in compiled_cfg:
            resid.copy_(resid0)
            results[name] = measure_compiled(torch, win, T, a.windows, resid, resid0, sampled)
        eager_out = results["torch eager"][1]
        copies = results["copies alone"][0]
        for name, read, extra in rows_cfg + compiled_cfg:
            if name not in results:
                continue
            ms, out = results[name][:2]
            runs, check = "", ""
            k = extra.get("kernel")
            if k is not None:
                ch, why = k.choice(T)
                runs = "%s %s [%s%s]" % (ch.variant, json.dumps(ch.params, separators=(",", ":")),
                                         ch.source, ", compiled here" if ch.fallback else "")
                rel = float((out - eager_out).norm() / eager_out.norm())
                check = "rel. error vs eager %.2e" % rel
                if not rel < 3e-2:
                    ok = False
                    check += " TOO LARGE"
            if extra.get("bits_of"):
                bad = results[name][2]
                if bad == 0:
                    check += "; bit-identical to %s (resid and %d reads x 3 outputs)" % (
                        extra["bits_of"].split()[0], 2 * a.layers)
                else:
                    ok = False
                    check += "; DIFFERS from %s: %s" % (extra["bits_of"].split()[0],
                                                        "no reference" if bad is None
                                                        else "%d elements" % bad)
            base = results["copies [compiled]"][0] if name.endswith("[compiled]") else copies
            rows.append(dict(T=T, row=name, ms_window=ms,
                             ms_reads=ms - base if not name.startswith("copies") else None,
                             runs=runs, check=check))
        if compiled_cfg:
            cc = results["copies [compiled]"][0]
            agree = abs(cc - copies) <= 0.10 * copies
            ok &= agree
            checks.append("T=%d: copies alone %.3f ms captured, %.3f ms compiled (%+.1f%%): %s" % (
                T, copies, cc, 100.0 * (cc - copies) / copies,
                "agree within 10%, the compiled rows do the window's work" if agree else
                "DISAGREE by more than 10%: the compiled rows are not the captured window"))
            kl, tc = results.get("hctune kl [compiled]"), results.get("torch [compiled]")
            if kl and tc:
                checks.append("T=%d: hctune kl compiled %.3f ms, torch compiled %.3f ms: %s" % (
                    T, kl[0], tc[0], "hctune faster" if kl[0] < tc[0] else "hctune NOT faster"))
    if dynamo is not None:
        dynamo = dynamo()
        checks.append("Dynamo: %d graphs compiled in all (unique_graphs), per window function %s; "
                      "recompile_limit %d" % (dynamo["graphs"], dynamo["entries"], dynamo["limit"]))

    for k in kernels:
        k.close()
    client.close()
    head = dict(gpu=torch.cuda.get_device_name(0), torch=torch.__version__, window=a.window,
                op=a.op, layers=a.layers, windows=a.windows, stream_mb=a.stream_mb,
                compile_mode=a.compile_mode, compiled_window=a.compiled_window, note=note,
                seconds=round(time.time() - t_start, 1))
    if a.json:
        print(json.dumps(dict(head, rows=rows, checks=checks, dynamo=dynamo, ok=ok)))
    else:
        print("torch_engine %s window on %s (torch %s): %d layers x 2 reads of %s, %g MB copied "
              "before each read, median of %d windows%s" % (
                  a.window, head["gpu"], head["torch"], a.layers, a.op, a.stream_mb, a.windows,
                  "" if not note else " (" + note + ")"))
        print("%-5s %-26s %9s %9s  %-44s %s" % ("T", "read", "ms/window", "reads ms", "runs", "check"))
        for r in rows:
            ms = "%9.3f" % r["ms_window"] if r["ms_window"] is not None else "%9s" % "-"
            rd = "%9.3f" % r["ms_reads"] if r.get("ms_reads") is not None else "%9s" % ""
            print("%-5d %-26s %s %s  %-44s %s" % (r["T"], r["row"], ms, rd, r["runs"], r["check"]))
        for c in checks:
            print(c)
    return 0 if ok else 1


def compiled_rows(a, torch, hctune, rows_cfg, layers, outs, resid, bufs, other_work,
                  torch_layer_read):
    """([(row name, compiled window, extra)], dynamo) for --compiled-window:
    the window compiled whole with torch.compile(mode=a.compiled_window,
    fullgraph=True, dynamic=False), three functions of their own code (so
    Dynamo counts each one's compiles apart): the read as hctune's custom op
    (every hctune row, the kernel named by the row's handles), in PyTorch,
    or none.  dynamo() gives Dynamo's counts when the rows have run."""
    import hctune.torch_ops
    from torch._dynamo.utils import counters
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    for t in [resid] + bufs + [t for L in layers for t in L.values()] + \
             [t for o in outs for t in o.values()]:
        torch._dynamo.mark_static_address(t, guard=False)
    before = counters["stats"]["unique_graphs"]
    op = None

    def window_op(T, handles):
        for l in range(a.layers):
            L = layers[l]
            for r in range(2):
                other_work(2 * l + r)
                o = outs[2 * l + r]
                op(handles[2 * l + r], T, resid, L["pending"] if r == 0 else None, L["w_norm"],
                   L["w_down"], L["w_up"], o["mixed"], o["mixed_bf16"], o["mixed_f16"])

    def window_torch(T):
        for l in range(a.layers):
            L = layers[l]
            for r in range(2):
                other_work(2 * l + r)
                torch_layer_read(T, L, L["pending"] if r == 0 else None, outs[2 * l + r])

    def window_copies(T):
        for k in range(2 * a.layers):
            other_work(k)

    def compiled(fn):
        return torch.compile(fn, mode=a.compiled_window, fullgraph=True, dynamic=False)

    out = []
    win_op = compiled(window_op)
    for name, read, extra in rows_cfg:
        k = extra.get("kernel")
        if k is not None:
            tk = hctune.torch_ops.wrap(k)
            op = tk.op
            handles = [tk.handle() for _ in range(2 * a.layers)]
            out.append((name + " [compiled]", lambda T, h=handles: win_op(T, h), extra))
    out.append(("torch [compiled]", compiled(window_torch), {}))
    out.append(("copies [compiled]", compiled(window_copies), {"copies": True}))

    def dynamo():
        config = torch._dynamo.config
        fns = (("op", window_op), ("torch", window_torch), ("copies", window_copies))
        return dict(graphs=counters["stats"]["unique_graphs"] - before,
                    entries={n: len(_debug_get_cache_entry_list(f.__code__)) for n, f in fns},
                    limit=config.recompile_limit if hasattr(config, "recompile_limit")
                    else config.cache_size_limit)
    return out, dynamo


def measure_compiled(torch, win, T, windows, resid, resid0, sampled):
    """(ms per window, the sampled outputs) of a compiled window, as
    measure() does for a captured one: warm-up calls (compile, tune, record
    the CUDA graphs), resid reset, then `windows` timed calls on the current
    stream."""
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
    return ms, sampled(T)


if __name__ == "__main__":
    sys.exit(main())
