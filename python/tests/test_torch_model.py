"""examples/torch_model.py on the CPU: the two-instance 48-layer model
compiled with torch.compile(fullgraph=True, mode="max-autotune") at Dynamo's
default limits, called at T = 1..8, with a stand-in hc_read kernel that
computes on the CPU behind the same wrapper (hctune.torch_ops' custom op and
its handles).  What it proves without a GPU: the graphs Dynamo compiles,
counted from its own counters, are what its default dynamism needs (T = 1,
then one dynamic graph), not one more per layer, kernel or instance; every
call runs the kernel each layer's handle names (the stand-ins count their
reads); outputs are bit-identical to the model called eagerly.  The negative
control (one handle per kernel shared by every layer) compiles more graphs:
the count can fail.  The CUDA half (CUDA graphs of max-autotune, the real
kernels) is tests/gpu-torch.sh's.

Skips, saying why, without torch (it is not a dependency of hctune) or
without the checkout's examples/.  About a minute on two cores.
"""
import importlib.util
import os
import unittest

try:
    import torch
except ImportError as e:
    torch = None
    WHY = "torch is not importable here (%s): pip install torch to run these" % e

import hctune

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "torch_model.py")
if torch is not None and not os.path.exists(EXAMPLE):
    torch, WHY = None, "no %s: not run from a checkout" % EXAMPLE

if torch is not None:
    from hctune import torch_ops

    spec = importlib.util.spec_from_file_location("torch_model", EXAMPLE)
    torch_model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(torch_model)

    # hc_read's manifest, as hct_kernel_buffer gives it (name, dtype,
    # optional, written); sizes are checked by the stand-in at each call.
    HC_READ = [("resid", "f32", False, True), ("pending", "f32", True, False),
               ("w_norm", "bf16", False, False), ("w_down", "bf16", False, False),
               ("w_up", "bf16", False, False), ("mixed", "f32", False, True),
               ("mixed_bf16", "bf16", False, True), ("mixed_f16", "f16", False, True)]
    DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}

    class StandInRead(hctune.Kernel):
        """hc_read on the CPU, not the spec's math: R' = R + P written back,
        mixed = the streams weighted by w_norm and summed, in stream order
        for "bitwise" and in reverse for "kl" (so the two differ in their
        last bits and a read run by the wrong kernel shows)."""

        def __init__(self, parity):
            self._k = None
            self.op, self.tmin, self.tmax, self.fallback = "hc_read", 1, 8, True
            self.parity = parity
            self._infos = [hctune.BufferInfo(n, dt, opt, wr, 0) for n, dt, opt, wr in HC_READ]
            self.buffer_names = [b.name for b in self._infos]
            self.reads = 0

        def buffer(self, i, tokens):
            return self._infos[i]

        def launch(self, tokens, *bufs, stream=None):
            for info, b in zip(self._infos, bufs):
                if b is not None and b.dtype != DTYPES[info.dtype]:
                    raise TypeError("%s: %s, want %s" % (info.name, b.dtype, info.dtype))
            resid, pending, w_norm, _, _, mixed, mixed_bf16, mixed_f16 = bufs
            S, C = w_norm.shape
            r = resid.view(-1, S, C)[:tokens]
            if pending is not None:
                r.add_(pending.view(-1, S, C)[:tokens])
            order = range(S) if self.parity == "bitwise" else range(S - 1, -1, -1)
            m = torch.zeros(tokens, C)
            for s in order:
                m = m + r[:, s] * w_norm[s].float()
            mixed[:tokens].copy_(m)
            mixed_bf16[:tokens].copy_(m.to(torch.bfloat16))
            mixed_f16[:tokens].copy_(m.to(torch.float16))
            self.reads += 1


@unittest.skipIf(torch is None, "" if torch is not None else WHY)
class TestTorchModel(unittest.TestCase):
    LAYERS = 48
    TOKENS = list(range(1, 9))

    @classmethod
    def setUpClass(cls):
        cls.reads = {p: torch_ops.wrap(StandInRead(p), torch.device("cpu")) for p in ("bitwise", "kl")}
        _, cls.Model = torch_model.model_class(torch)

    @classmethod
    def tearDownClass(cls):
        for r in cls.reads.values():
            torch_ops.release(r)

    def models(self, per_layer_handle):
        return {name: self.Model(self.reads, torch_model.PATTERNS[name], seed=i + 1,
                                 device=torch.device("cpu"), layers=self.LAYERS,
                                 per_layer_handle=per_layer_handle)
                for i, name in enumerate(("target", "drafter"))}

    def test_two_instances_compile_once_per_dynamism(self):
        torch._dynamo.reset()
        self.assertEqual(torch_model.recompile_limit(torch), 8, "not Dynamo's default limit")
        models = self.models(per_layer_handle=True)
        # Reads per call of each instance by kernel, from its pattern.
        want = {name: {p: 2 * sum(torch_model.PATTERNS[name](l) == p for l in range(self.LAYERS))
                       for p in ("bitwise", "kl")} for name in models}
        self.assertNotEqual(want["target"], want["drafter"])
        counted = []
        for r in self.reads.values():
            r.kernel.reads = 0
        res = torch_model.run(torch, models, self.TOKENS, "max-autotune", log=counted.append)
        print("\ntorch %s: %d graphs compiled (Dynamo's unique_graphs), %d cache entries of "
              "Model.forward, %d calls in %.1f s" % (torch.__version__, res["graphs"],
                                                    res["cache_entries"], res["calls"], res["seconds"]))
        self.assertEqual(res["mismatches"], [])
        self.assertEqual(res["calls"], 2 * len(self.TOKENS))
        self.assertEqual((res["graphs"], res["cache_entries"]), (2, 2),
                         "a recompile per layer, kernel or instance")
        # Each call, eager and compiled, ran each layer's kernel.
        total = {p: 2 * len(self.TOKENS) * sum(w[p] for w in want.values()) for p in ("bitwise", "kl")}
        self.assertEqual({p: r.kernel.reads for p, r in self.reads.items()}, total)

    def test_shared_handles_recompile(self):
        """The negative control: the instances then differ in which inputs
        are the same tensor, a guard Dynamo installs, and compile apart."""
        torch._dynamo.reset()
        res = torch_model.run(torch, self.models(per_layer_handle=False), [1, 2, 3], "max-autotune")
        print("\nshared handles: %d graphs compiled" % res["graphs"])
        self.assertEqual(res["mismatches"], [])
        self.assertGreater(res["graphs"], 2)


if __name__ == "__main__":
    unittest.main()
