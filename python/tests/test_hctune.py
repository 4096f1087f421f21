"""hctune's Python package without a GPU: fallback answers, errors,
argument checking of buffers (ints, __cuda_array_interface__ objects, and
tensors, with a duck-typed stand-in for torch here), streams.

Run: PYTHONPATH=python HCTUNE_LIB=lib/libhctune.so.0 python3 -m unittest discover -s python/tests
"""
import os
import unittest

import hctune
from hctune import _api

NO_SOCKET = "/nonexistent/hctune-test.sock"


class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name


class FakeTensor:
    """What hctune reads of a torch.Tensor."""

    def __init__(self, ptr, dtype, numel, size, cuda=True, contiguous=True):
        self._ptr, self.dtype, self._numel, self._size = ptr, FakeDtype(dtype), numel, size
        self.is_cuda, self._contiguous, self.device = cuda, contiguous, "cuda:0" if cuda else "cpu"

    def data_ptr(self):
        return self._ptr

    def numel(self):
        return self._numel

    def element_size(self):
        return self._size

    def is_contiguous(self):
        return self._contiguous


class FakeArray:
    def __init__(self, ptr, typestr, shape, readonly=False, strides=None):
        self.__cuda_array_interface__ = {"data": (ptr, readonly), "typestr": typestr,
                                         "shape": shape, "strides": strides, "version": 3}


F32_OUT = hctune.BufferInfo("mixed", "f32", False, True, 4 * 2560)
BF16_W = hctune.BufferInfo("w_down", "bf16", False, False, 2 * 320 * 10240)
OPT = hctune.BufferInfo("pending", "f32", True, False, 4 * 10240)


class TestFallback(unittest.TestCase):
    def setUp(self):
        os.environ.pop("HCTUNE_FORCE", None)

    def test_no_daemon_gives_the_baseline(self):
        c = hctune.Client(NO_SOCKET, 20)
        self.assertFalse(c.connected)
        self.assertIn(NO_SOCKET, c.why)
        ch = c.choose("hc_read", 4)
        # The baseline's first point at T, as the daemon's default has it.
        self.assertEqual((ch.variant, ch.params, ch.parity_class, ch.source, ch.fallback),
                         ("v1", {"DOWN_WARPS": 4, "UP_WARPS": 4}, "baseline", "default", True))
        self.assertEqual((ch.device, ch.measured_tokens), ("", 0))
        self.assertEqual(c.choose("hc_read_prefill", 64, parity="kl").variant, "pair_simt")
        # Issue 29: a bit family passes through; without a daemon its head
        # answers, never the baseline.
        ch = c.choose("hc_read_prefill", 64, parity="bits:pair_mma")
        self.assertEqual((ch.variant, ch.parity_class, ch.source, ch.fallback),
                         ("pair_mma", "kl", "default", True))
        with self.assertRaises(hctune.Error) as e:
            c.choose("hc_read_prefill", 64, parity="bits:upmix")
        self.assertEqual(e.exception.name, "ENOENT")
        c.close()
        c.close()  # twice is fine

    def test_errors(self):
        with hctune.Client(NO_SOCKET, 20) as c:
            with self.assertRaises(hctune.Error) as e:
                c.choose("mystery", 1)
            self.assertEqual(e.exception.name, "ENOENT")
            self.assertIn("mystery", str(e.exception))
            with self.assertRaises(hctune.Error) as e:
                c.choose("hc_read", 0)
            self.assertEqual(e.exception.name, "EINVAL")
            with self.assertRaises(ValueError):
                c.choose("hc_read", 1, parity="exact")
            for bad in ("bits:", "bits:a b", "bits:" + "x" * 32, "baseline"):
                with self.assertRaises(ValueError):
                    c.choose("hc_read", 1, parity=bad)
            with self.assertRaises(TypeError):
                c.choose(b"hc_read", 1)
            with self.assertRaises(TypeError):
                c.choose("hc_read", 1.5)
        with self.assertRaises(ValueError):
            c.choose("hc_read", 1)  # closed

    def test_malformed_force_is_an_error(self):
        os.environ["HCTUNE_FORCE"] = "hc_read"
        try:
            with hctune.Client(NO_SOCKET, 20) as c:
                with self.assertRaises(hctune.Error) as e:
                    c.choose("hc_read", 1)
                self.assertIn("HCTUNE_FORCE", str(e.exception))
        finally:
            del os.environ["HCTUNE_FORCE"]


    def test_force_with_parameters(self):
        relay = '{"PDL":1,"GB":0,"G":1,"NG":4,"LT":1}'
        os.environ["HCTUNE_FORCE"] = "hc_read=relay" + relay
        try:
            with hctune.Client(NO_SOCKET, 20) as c:
                ch = c.choose("hc_read", 4)
                self.assertEqual((ch.variant, ch.source), ("relay", "env"))
                self.assertEqual(ch.params, {"PDL": 1, "GB": 0, "G": 1, "NG": 4, "LT": 1})
                os.environ["HCTUNE_FORCE"] = "hc_read=relay" + relay.replace('"NG":4', '"NG":3')
                with self.assertRaises(hctune.Error) as e:
                    c.choose("hc_read", 4)
                self.assertEqual(e.exception.name, "EINVAL")
                self.assertIn("NG=3", str(e.exception))
        finally:
            del os.environ["HCTUNE_FORCE"]

    def test_templates_found_beside_the_library(self):
        """Without HCTUNE_KERNELS the library finds kernels-src beside its
        lib/ folder (dladdr of itself, not the python3 executable): a forced
        variant the manifest lacks is then refused, not passed on."""
        import subprocess
        import sys
        beside = os.path.join(os.path.dirname(hctune.library_path), "..", "kernels-src")
        if not os.path.isdir(beside):
            self.skipTest("the library is not in a checkout's lib/ (%s)" % hctune.library_path)
        env = dict(os.environ, HCTUNE_FORCE="hc_read=v9")
        env.pop("HCTUNE_KERNELS", None)
        code = ("import hctune\n"
                "try:\n    hctune.Client(%r, 20).choose('hc_read', 1); print('passed on')\n"
                "except hctune.Error as e:\n    print(e.name, e)\n" % NO_SOCKET)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             cwd="/")
        self.assertIn("EINVAL", out.stdout, out.stdout + out.stderr)
        self.assertIn("no variant 'v9'", out.stdout)
        self.assertEqual(out.stderr.count("hctune: "), 1, out.stderr)


class TestDeviceNames(unittest.TestCase):
    """Issue 30: a device the daemon does not know raises, a prefix names
    one card or raises, the answer names the card.  tests/test_python.c
    starts a daemon with two cards, DT_TWIN_A and DT_TWIN_B of
    tests/daemon_test.h, and sets HCTUNE_TEST_SOCKET; without it (a plain
    unittest run) the class is skipped, unless HCTUNE_TEST_REQUIRE_DAEMON
    says the daemon should be there."""

    TWIN_A = "GPU-7f92aaaa-0000-0000-0000-000000000001"
    TWIN_B = "GPU-7f92bbbb-0000-0000-0000-000000000002"

    def setUp(self):
        os.environ.pop("HCTUNE_FORCE", None)
        self.sock = os.environ.get("HCTUNE_TEST_SOCKET")
        if not self.sock:
            if os.environ.get("HCTUNE_TEST_REQUIRE_DAEMON"):
                self.fail("HCTUNE_TEST_SOCKET is not set: no daemon to ask")
            self.skipTest("no daemon: HCTUNE_TEST_SOCKET is set by tests/test_python.c")
        self.c = hctune.Client(self.sock, 2000)
        self.assertTrue(self.c.connected, self.c.why)

    def tearDown(self):
        self.c.close()

    def test_prefix_names_the_card(self):
        ch = self.c.choose("hc_read", 2, device="GPU-7f92a")
        self.assertEqual((ch.variant, ch.source, ch.device, ch.fallback),
                         ("v2", "probe", self.TWIN_A, False))
        self.assertEqual(ch.measured_tokens, 2)
        self.assertEqual(self.c.choose("hc_read", 2, device="7f92BBBB").device, self.TWIN_B)

    def test_unknown_card_raises(self):
        with self.assertRaises(hctune.Error) as e:
            self.c.choose("hc_read", 2, device="GPU-nothere")
        self.assertEqual(e.exception.name, "ENODEV")
        self.assertIn("'GPU-nothere'", str(e.exception))
        self.assertIn(self.TWIN_A, str(e.exception))

    def test_ambiguous_prefix_raises(self):
        with self.assertRaises(hctune.Error) as e:
            self.c.choose("hc_read", 2, device="GPU-7f92")
        self.assertEqual(e.exception.name, "EINVAL")
        self.assertIn(self.TWIN_A, str(e.exception))
        self.assertIn(self.TWIN_B, str(e.exception))


class TestLoad(unittest.TestCase):
    def test_arguments_checked_before_the_driver(self):
        with self.assertRaises(ValueError):
            hctune.load("hc_read", 1, 8, parity="exact")
        with self.assertRaises(TypeError):
            hctune.load("hc_read", "1")
        with self.assertRaises(TypeError):
            hctune.load("hc_read", 1, 8, client="socket")
        for tmin, tmax, name in ((0, 8, "EINVAL"), (5, 4, "EINVAL"), (1, 1048577, "ERANGE")):
            with self.assertRaises(hctune.Error) as e:
                hctune.load("hc_read", tmin, tmax)
            self.assertEqual(e.exception.name, name)

    def test_without_a_gpu_it_says_so(self):
        try:
            k = hctune.load("hc_read", 1, 8)
        except hctune.Error as e:
            self.assertIn(e.name, ("ENODRIVER", "ENODEV"))
            self.assertIn("cuda", str(e))
        else:
            k.close()
            self.skipTest("a GPU is here: tests/gpu-engine.sh covers loading")


class TestBuffers(unittest.TestCase):
    def test_ints(self):
        self.assertEqual(_api._pointer(0x7f0000001000, F32_OUT, "b"), 0x7f0000001000)
        self.assertEqual(_api._pointer(None, OPT, "b"), 0)
        self.assertEqual(_api._pointer(0, OPT, "b"), 0)
        for bad, exc in ((None, ValueError), (0, ValueError), (-1, ValueError), (1 << 64, ValueError),
                         (True, TypeError), (1.0, TypeError), ("0x1000", TypeError)):
            with self.assertRaises(exc, msg=repr(bad)):
                _api._pointer(bad, F32_OUT, "b")

    def test_tensors(self):
        ok = FakeTensor(0x1000, "torch.float32", 2560, 4)
        self.assertEqual(_api._pointer(ok, F32_OUT, "mixed"), 0x1000)
        self.assertEqual(_api._pointer(FakeTensor(0x2000, "torch.bfloat16", 320 * 10240, 2), BF16_W, "w"),
                         0x2000)
        cases = [
            (FakeTensor(0x1000, "torch.float16", 2560, 2), TypeError, "float16"),
            (FakeTensor(0x1000, "torch.float32", 2560, 4, cuda=False), ValueError, "CUDA"),
            (FakeTensor(0x1000, "torch.float32", 2560, 4, contiguous=False), ValueError, "contiguous"),
            (FakeTensor(0x1000, "torch.float32", 2559, 4), ValueError, "needs 10240"),
        ]
        for t, exc, words in cases:
            with self.assertRaises(exc) as e:
                _api._pointer(t, F32_OUT, "mixed")
            self.assertIn(words, str(e.exception))
            self.assertIn("mixed", str(e.exception))

    def test_cuda_array_interface(self):
        self.assertEqual(_api._pointer(FakeArray(0x3000, "<f4", (1, 2560)), F32_OUT, "m"), 0x3000)
        self.assertEqual(_api._pointer(FakeArray(0x3000, "<u2", (320, 10240)), BF16_W, "w"), 0x3000)
        self.assertEqual(_api._pointer(FakeArray(0x3000, "<f4", (1, 2560), strides=(10240, 4)),
                                       F32_OUT, "m"), 0x3000)
        cases = [
            (FakeArray(0x3000, "<f8", (2560,)), TypeError, "<f8"),
            (FakeArray(0x3000, "<f4", (2560,), readonly=True), ValueError, "read-only"),
            (FakeArray(0x3000, "<f4", (2, 2560), strides=(4, 8)), ValueError, "contiguous"),
            (FakeArray(0x3000, "<f4", (100,)), ValueError, "needs"),
            (FakeArray(0, "<f4", (2560,)), ValueError, "null"),
        ]
        for a, exc, words in cases:
            with self.assertRaises(exc) as e:
                _api._pointer(a, F32_OUT, "m")
            self.assertIn(words, str(e.exception))

    def test_streams(self):
        self.assertEqual(_api._stream_handle(None, [1, 2]), 0)
        self.assertEqual(_api._stream_handle(0x55, []), 0x55)

        class TorchStream:
            cuda_stream = 0x77

        class CupyStream:
            ptr = 0x88

        self.assertEqual(_api._stream_handle(TorchStream(), []), 0x77)
        self.assertEqual(_api._stream_handle(CupyStream(), []), 0x88)
        for bad in (-1, True, "s", object()):
            with self.assertRaises((TypeError, ValueError)):
                _api._stream_handle(bad, [])


class FakeKernel(hctune.Kernel):
    """A Kernel with hc_read's buffers and no library handle behind it:
    the argument checks are Python's."""

    INFOS = [hctune.BufferInfo(n, d, o, w, b) for n, d, o, w, b in (
        ("resid", "f32", False, True, 40960), ("pending", "f32", True, False, 40960),
        ("w_norm", "bf16", False, False, 20480), ("w_down", "bf16", False, False, 6553600),
        ("w_up", "bf16", False, False, 6553600), ("mixed", "f32", False, True, 10240),
        ("mixed_bf16", "bf16", False, True, 5120), ("mixed_f16", "f16", False, True, 5120))]

    def __init__(self):
        self._k = None
        self.op, self.tmin, self.tmax, self.fallback = "hc_read", 1, 8, True
        self.buffer_names = [i.name for i in self.INFOS]

    def buffer(self, i, tokens):
        return self.INFOS[i]


class TestKernelArguments(unittest.TestCase):
    def test_by_name_and_position(self):
        k = FakeKernel()
        ptrs, _ = k.pointers(1, 0x100, None, 0x300, 0x400, 0x500, mixed=0x600, mixed_bf16=0x700,
                             mixed_f16=0x800)
        self.assertEqual(ptrs, [0x100, 0, 0x300, 0x400, 0x500, 0x600, 0x700, 0x800])

    def test_mistakes(self):
        k = FakeKernel()
        full = dict(resid=1, w_norm=3, w_down=4, w_up=5, mixed=6, mixed_bf16=7, mixed_f16=8)
        with self.assertRaises(TypeError) as e:
            k.pointers(1, **dict(full, residual=1))
        self.assertIn("residual", str(e.exception))
        with self.assertRaises(TypeError):
            k.pointers(1, 1, resid=1, **{n: v for n, v in full.items() if n != "resid"})
        with self.assertRaises(TypeError):
            k.pointers(1, *range(1, 10))
        with self.assertRaises(ValueError) as e:
            k.pointers(1, **{n: v for n, v in full.items() if n != "w_up"})
        self.assertIn("w_up", str(e.exception))
        with self.assertRaises(ValueError):
            k.pointers(9, **full)
        with self.assertRaises(ValueError):
            k.launch(1, **full)  # no handle: closed


if __name__ == "__main__":
    unittest.main()
