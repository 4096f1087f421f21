"""examples/torch_engine.py's compiled windows on the CPU (issue 36):
compiled_rows() as --compiled-window builds them, with stand-in hc_read
kernels behind hctune.torch_ops and the script's own other-work op.  What
it proves without a GPU: every row's compiled window runs every copy (the
other work is not dropped: torch.compile kept one of 96 when it was plain
torch ops) and, in the op rows, every read with the row's own kernel; the
bitwise and kl rows share one compiled function and one graph per T; each
window function compiles once per T (the copies window once), within
Dynamo's default limit.  The CUDA half (CUDA graphs, timings, the
copies-alone agreement) is tests/gpu-torch.sh's.

Skips, saying why, without torch or without the checkout's examples/.
"""
import argparse
import contextlib
import importlib.util
import os
import unittest

try:
    import torch
except ImportError as e:
    torch = None
    WHY = "torch is not importable here (%s): pip install torch to run these" % e

import hctune

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "torch_engine.py")
if torch is not None and not os.path.exists(EXAMPLE):
    torch, WHY = None, "no %s: not run from a checkout" % EXAMPLE

if torch is not None:
    def _load(name, path):
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    torch_engine = _load("torch_engine", EXAMPLE)
    stand_in = _load("test_torch_model_stand_in", os.path.join(HERE, "test_torch_model.py"))

    @contextlib.contextmanager
    def counting_copies():
        """Counts the other work's copies: its op's implementation calls
        torch.mul(..., out=dst), looked up when it runs."""
        class Count:
            n = 0
        real = torch.mul

        def mul(*args, **kwargs):
            Count.n += 1
            return real(*args, **kwargs)
        torch.mul = mul
        try:
            yield Count
        finally:
            torch.mul = real


@unittest.skipIf(torch is None, "" if torch is not None else WHY)
class TestCompiledWindows(unittest.TestCase):
    LAYERS = 8
    TOKENS = (1, 4, 8)

    def test_windows_do_the_work_and_compile_once_per_t(self):
        S, C, K, D = torch_engine.S, torch_engine.C, torch_engine.K, torch_engine.D
        torch._dynamo.reset()
        a = argparse.Namespace(layers=self.LAYERS, compiled_window="max-autotune")
        layers = [dict(w_norm=torch.ones(S, C, dtype=torch.bfloat16),
                       w_down=torch.zeros(K, D, dtype=torch.bfloat16),
                       w_up=torch.zeros(D, K, dtype=torch.bfloat16),
                       pending=0.01 * torch.randn(8, S, C)) for _ in range(self.LAYERS)]
        resid = torch.randn(8, S, C)
        outs = [dict(mixed=torch.empty(8, C), mixed_bf16=torch.empty(8, C, dtype=torch.bfloat16),
                     mixed_f16=torch.empty(8, C, dtype=torch.float16))
                for _ in range(2 * self.LAYERS)]
        bufs = [torch.ones(4096), torch.ones(4096)]
        copy = torch_engine.define_copy(torch)

        def other_work(k):
            copy(bufs[(k + 1) % 2], bufs[k % 2])

        def torch_layer_read(T, L, pending, o):   # a cheap stand-in of the PyTorch read
            o["mixed"][:T].copy_(resid[:T].sum(1))

        kernels = {p: stand_in.StandInRead(p) for p in ("bitwise", "kl")}
        rows_cfg = [("hctune " + p, None, {"kernel": k}) for p, k in kernels.items()]
        rows, dynamo = torch_engine.compiled_rows(a, torch, hctune, rows_cfg, layers, outs, resid,
                                                  bufs, other_work, torch_layer_read)
        self.assertEqual([r[0] for r in rows], ["hctune bitwise [compiled]", "hctune kl [compiled]",
                                                "torch [compiled]", "copies [compiled]"])
        reads = 2 * self.LAYERS
        for T in self.TOKENS:
            for name, win, extra in rows:
                win(T)                       # compiles (the first time), then counted
                for k in kernels.values():
                    k.reads = 0
                with counting_copies() as c:
                    win(T)
                self.assertEqual(c.n, reads, "%s at T=%d: copies run" % (name, T))
                got = {p: k.reads for p, k in kernels.items()}
                want = {p: reads if name == "hctune %s [compiled]" % p else 0 for p in kernels}
                self.assertEqual(got, want, "%s at T=%d: reads by kernel" % (name, T))
        d = dynamo()
        print("\ntorch %s: %d graphs compiled, per window function %s" % (
            torch.__version__, d["graphs"], d["entries"]))
        self.assertEqual(d["entries"], {"op": 3, "torch": 3, "copies": 1})
        self.assertEqual(d["graphs"], 7)
        self.assertEqual(d["limit"], 8)


if __name__ == "__main__":
    unittest.main()
