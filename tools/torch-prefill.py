#!/usr/bin/env python3
"""torch-prefill.py: the prefill hyper-connection read written in PyTorch,
timed the way hctune bench times its variants, so that docs/perf/ can
put both in one table from one run.

  torch-prefill.py [--tokens 2048,8192,32768] [--modes eager,max-autotune]
                   [--iters N] [--json]

The read (../shared/spec/hc_read.md, prefill): per (t, s) the norm, xn and lo
rounded to bf16 before the GEMMs (cuBLAS bf16 GEMMs accumulate in f32), the
gate and the mix, with the three outputs (f32, bf16, f16).  PyTorch's up GEMM
returns bf16 (u is rounded before the gate); hctune's variants keep u in
f32: the torch figure is, if anything, flattered by that.

Cold: the read walks two full sets of inputs and weights in turn (each set's
R alone is 4 x L2 at T = 2048), and each timed call is preceded by nothing
but other reads, as a prefill is.  The time is the median over --iters
rounds of 10 back-to-back reads, from CUDA events.  max-autotune's tuning
runs before the clock starts and its time is reported as tune_s.

Exit status: 0 with a table (or --json), 2 without torch or a GPU.
"""
import argparse
import json
import statistics
import sys
import time

S, C, K = 4, 2560, 320
D = S * C
EPS = 1e-6


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", default="2048,8192,32768",
                   help="comma-separated token counts (default 2048,8192,32768)")
    p.add_argument("--modes", default="eager,max-autotune",
                   help="comma-separated: eager, or a torch.compile mode (default eager,max-autotune)")
    p.add_argument("--iters", type=int, default=15, help="timed rounds of 10 reads (default 15)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args()
    try:
        a.tokens = [int(x) for x in a.tokens.split(",") if x]
    except ValueError:
        p.error("--tokens: want numbers such as 2048,8192")
    if not a.tokens or min(a.tokens) < 1:
        p.error("--tokens: want positive counts")
    a.modes = [m for m in a.modes.split(",") if m]
    if a.iters < 3:
        p.error("--iters: at least 3")
    return a


def fail(status, msg):
    print("torch-prefill: %s" % msg, file=sys.stderr)
    sys.exit(status)


def main():
    a = parse_args()
    try:
        import torch
    except ImportError as e:
        fail(2, "no torch here (%s)" % e)
    if not torch.cuda.is_available():
        fail(2, "no GPU: torch.cuda.is_available() is False")
    dev = torch.device("cuda:0")
    gen = torch.Generator(device=dev).manual_seed(1)

    def randn(*shape, scale=1.0, dtype=torch.float32):
        return (torch.randn(*shape, generator=gen, device=dev) * scale).to(dtype)

    def read(r, w_norm, w_down, w_up):
        T = r.shape[0]
        ss = (r * r).sum(-1, keepdim=True)
        rs = torch.rsqrt(ss / C + EPS)
        xn = ((r * w_norm.float()) * rs).reshape(T, D).to(torch.bfloat16)
        lo = torch.matmul(xn, w_down.t())
        u = torch.matmul(lo, w_up.t()).float()
        g = torch.sigmoid(u).reshape(T, S, C)
        m = (g * r).sum(1)
        return m, m.to(torch.bfloat16), m.to(torch.float16)

    rows = []
    for T in a.tokens:
        sets = [dict(r=randn(T, S, C),
                     w_norm=(1.0 + 0.1 * torch.randn(S, C, generator=gen, device=dev)).to(torch.bfloat16),
                     w_down=randn(K, D, scale=D ** -0.5, dtype=torch.bfloat16),
                     w_up=randn(D, K, scale=K ** -0.5, dtype=torch.bfloat16)) for _ in range(2)]
        for mode in a.modes:
            fn = read if mode == "eager" else torch.compile(read, mode=mode, dynamic=False)
            t0 = time.time()
            try:
                for i in range(3):
                    x = sets[i % 2]
                    fn(x["r"], x["w_norm"], x["w_down"], x["w_up"])
                torch.cuda.synchronize()
            except Exception as e:  # a compile failure is a row, not a crash
                rows.append(dict(T=T, mode=mode, error="%s: %s" % (type(e).__name__, str(e)[:200])))
                continue
            tune_s = time.time() - t0
            times = []
            for _ in range(a.iters):
                e0 = torch.cuda.Event(enable_timing=True)
                e1 = torch.cuda.Event(enable_timing=True)
                e0.record()
                for i in range(10):
                    x = sets[i % 2]
                    fn(x["r"], x["w_norm"], x["w_down"], x["w_up"])
                e1.record()
                e1.synchronize()
                times.append(e0.elapsed_time(e1) * 1000.0 / 10)
            rows.append(dict(T=T, mode=mode, us=statistics.median(times), min_us=min(times),
                             tune_s=round(tune_s, 1)))
    out = dict(gpu=torch.cuda.get_device_name(0), torch=torch.__version__, rows=rows)
    if a.json:
        print(json.dumps(out))
        return
    print("%s, torch %s" % (out["gpu"], out["torch"]))
    print("%-6s %-14s %10s %10s %8s" % ("T", "mode", "us/read", "min", "tune s"))
    for r in rows:
        if "error" in r:
            print("%-6d %-14s %s" % (r["T"], r["mode"], r["error"]))
        else:
            print("%-6d %-14s %10.1f %10.1f %8.1f" % (r["T"], r["mode"], r["us"], r["min_us"], r["tune_s"]))


if __name__ == "__main__":
    main()
