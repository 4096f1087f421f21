"""hctune.torch_ops without a GPU: the custom op's schema (what it writes,
what is optional), its fake implementation under torch.compile with
fullgraph=True, the buffers reaching the implementation in the manifest's
order, and kernel handles (the kernel a handle names, by its address; a
copy read by value; a released kernel refused).  A stand-in Kernel whose
launch computes on the CPU replaces hct_kernel_load (which needs a GPU);
the op's implementation, torch_ops' own, calls it.

Skips, saying why, when torch is not importable (it is not a dependency of
hctune).  The CUDA path (current stream, CUDA graphs of max-autotune) runs
on a GPU machine: examples/torch_engine.py --compiled-window.
"""
import unittest

try:
    import torch
except ImportError as e:  # the whole file skips, with the reason
    torch = None
    WHY = "torch is not importable here (%s): pip install torch to run these" % e

import hctune

if torch is not None:
    from hctune import torch_ops

    class StandInKernel(hctune.Kernel):
        """A Kernel of op `name` with the manifest's buffer facts, no library."""

        def __init__(self, name, buffers):
            self._k = None
            self.op, self.tmin, self.tmax, self.fallback = name, 1, 8, True
            self._infos = [hctune.BufferInfo(n, "f32", opt, wr, 4 * 8) for n, opt, wr in buffers]
            self.buffer_names = [b.name for b in self._infos]
            self.calls = []

        def buffer(self, i, tokens):
            return self._infos[i]

        def launch(self, tokens, *args, stream=None, **kwargs):
            # x += add (when given), out = x * w * tokens; and a record.
            self.calls.append((tokens, args, stream))
            x, add, w, out = args
            if add is not None:
                x.add_(add)
            out.copy_(x * w * tokens)


@unittest.skipIf(torch is None, "" if torch is not None else WHY)
class TestTorchOps(unittest.TestCase):
    BUFFERS = [("x", False, True), ("add", True, False), ("w", False, False), ("out", False, True)]

    @classmethod
    def setUpClass(cls):
        cls.kernel = StandInKernel("torchops_test", cls.BUFFERS)
        cls.k = torch_ops.wrap(cls.kernel)

    def setUp(self):
        self.kernel.calls.clear()

    def test_schema_declares_writes_and_optionals(self):
        schema = str(torch.ops.hctune.torchops_test.default._schema)
        self.assertRegex(schema, r"\(Tensor hct_kernel, SymInt hct_tokens, ")
        self.assertRegex(schema, r"Tensor\(a\d*!\) x")
        self.assertRegex(schema, r"Tensor\? add")
        self.assertRegex(schema, r"Tensor w[,)]")
        self.assertRegex(schema, r"Tensor\(a\d*!\) out")
        self.assertRegex(schema, r"-> \(\)")

    def test_fake_runs_on_fake_tensors(self):
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            x, w, out = torch.empty(8), torch.empty(8), torch.empty(8)
            self.k(2, x=x, add=None, w=w, out=out, handle=torch.empty(1, dtype=torch.int32))
        self.assertEqual(self.kernel.calls, [], "the real implementation ran on fake tensors")

    def test_buffers_in_manifest_order_by_name_or_position(self):
        x, add, w, out = (torch.full((8,), float(v)) for v in (1, 2, 3, 0))
        self.k(2, out=out, w=w, x=x, add=add)
        tokens, args, _ = self.kernel.calls[-1]
        self.assertEqual(tokens, 2)
        self.assertTrue(all(a is b for a, b in zip(args, (x, add, w, out))))
        self.assertEqual(out.tolist(), [18.0] * 8)
        self.k(1, x, None, w, out)
        self.assertIsNone(self.kernel.calls[-1][1][1])
        with self.assertRaisesRegex(TypeError, "torchops_test has no buffer 'wx'"):
            self.k(1, x=x, wx=w, out=out)

    def test_fullgraph_compile_matches_eager(self):
        def step(x, add, w, out):
            y = x * 2
            self.k(3, x=y, add=add, w=w, out=out)
            return y + 1

        args = [torch.arange(8, dtype=torch.float32), torch.ones(8), torch.full((8,), 0.5),
                torch.zeros(8)]
        eager_args = [a.clone() for a in args]
        want = step(*eager_args)
        compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
        got = compiled(*args)
        self.assertEqual(got.tolist(), want.tolist())
        self.assertEqual(args[3].tolist(), eager_args[3].tolist())   # the op's write kept

    def test_handles_name_their_kernel(self):
        other_kernel = StandInKernel("torchops_test", self.BUFFERS)
        other = torch_ops.wrap(other_kernel)
        h1, h2 = self.k.handle(), other.handle()
        self.assertEqual((h1.dtype, h1.numel(), int(h1)), (torch.int32, 1, self.k.number))
        self.assertIsNot(h1, self.k.handle())          # a new one each call
        self.assertIs(torch_ops.kernel_of(h1), self.kernel)
        self.assertIs(torch_ops.kernel_of(h2), other_kernel)
        self.assertIs(torch_ops.kernel_of(h2.clone()), other_kernel)   # a copy: read by value
        x, w, out = torch.ones(8), torch.full((8,), 2.0), torch.zeros(8)
        self.k(1, x, None, w, out, handle=h2)
        self.assertEqual((len(other_kernel.calls), len(self.kernel.calls)), (1, 0))
        self.k(1, x, None, w, out, handle=h1)
        self.assertEqual((len(other_kernel.calls), len(self.kernel.calls)), (1, 1))
        with self.assertRaisesRegex(TypeError, "want a handle from TorchKernel.handle"):
            torch_ops.kernel_of(torch.zeros(2, dtype=torch.int32))
        torch_ops.release(other)
        with self.assertRaisesRegex(RuntimeError, "kernel %d is not registered" % other.number):
            self.k(1, x, None, w, out, handle=h2)
        with self.assertRaisesRegex(RuntimeError, "not registered"):
            other.handle()

    def test_kernel_is_data_under_compile(self):
        """Two kernels through one compiled function: one graph, each call
        runs the kernel its handle names."""
        from torch._dynamo.utils import counters
        other_kernel = StandInKernel("torchops_test", self.BUFFERS)
        other = torch_ops.wrap(other_kernel)

        def step(h, x, w, out):
            self.k(2, x=x, add=None, w=w, out=out, handle=h)
            return out + 1

        torch._dynamo.reset()
        before = counters["stats"]["unique_graphs"]
        compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
        x, w = torch.ones(8), torch.full((8,), 3.0)
        for h, kern in ((self.k.handle(), self.kernel), (other.handle(), other_kernel)) * 2:
            n = len(kern.calls)
            got = compiled(h, x, w, torch.zeros(8))
            self.assertEqual(got.tolist(), [7.0] * 8)
            self.assertEqual(len(kern.calls), n + 1)
        self.assertEqual(counters["stats"]["unique_graphs"] - before, 1)
        torch_ops.release(other)

    def test_second_kernel_of_an_op_shares_it(self):
        other = torch_ops.wrap(StandInKernel("torchops_test", self.BUFFERS))
        self.assertIs(other.op, self.k.op)
        self.assertNotEqual(other.number, self.k.number)
        torch_ops.release(other)
        with self.assertRaisesRegex(ValueError, "buffers changed"):
            torch_ops.wrap(StandInKernel("torchops_test", self.BUFFERS[:3]))

    def test_bad_names_refused(self):
        with self.assertRaisesRegex(ValueError, "buffer name 'class' cannot name"):
            torch_ops.wrap(StandInKernel("torchops_bad", [("class", False, True)]))
        with self.assertRaisesRegex(ValueError, "not a valid custom op name"):
            torch_ops.wrap(StandInKernel("torchops-bad", [("x", False, True)]))


if __name__ == "__main__":
    unittest.main()
