"""The package's own build backend (python/_backend/hctune_backend.py) and
the search for libhctune (hctune/_lib.py), without pip and without a GPU.
The search runs in child processes: a process opens the library once.

Run: PYTHONPATH=$PWD/python HCTUNE_LIB=$PWD/lib/libhctune.so.0 \
     python3 -m unittest discover -s python/tests
"""
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(PYDIR, "_backend"))
import hctune_backend  # noqa: E402


class TestBackend(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="hct_backend.")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_requires_nothing(self):
        self.assertEqual(hctune_backend.get_requires_for_build_wheel(), [])
        self.assertEqual(hctune_backend.get_requires_for_build_sdist(), [])
        self.assertEqual(hctune_backend.get_requires_for_build_editable(), [])
        with open(os.path.join(PYDIR, "pyproject.toml")) as f:
            text = f.read()
        self.assertIn("requires = []", text)
        self.assertIn('build-backend = "hctune_backend"', text)

    def test_wheel_has_every_module_and_a_valid_record(self):
        name = hctune_backend.build_wheel(self.tmp)
        self.assertEqual(name, "hctune-0.1.0-py3-none-any.whl")
        with zipfile.ZipFile(os.path.join(self.tmp, name)) as z:
            names = z.namelist()
            want = sorted("hctune/" + f for f in os.listdir(os.path.join(PYDIR, "hctune"))
                          if f.endswith(".py"))
            self.assertEqual(sorted(n for n in names if n.startswith("hctune/")), want)
            self.assertFalse([n for n in names if "__pycache__" in n], names)
            meta = z.read("hctune-0.1.0.dist-info/METADATA").decode()
            self.assertIn("Name: hctune\n", meta)
            self.assertIn("Version: 0.1.0\n", meta)
            self.assertIn("License: MIT\n", meta)
            self.assertIn('Requires-Dist: torch; extra == "torch"\n', meta)
            wheel = z.read("hctune-0.1.0.dist-info/WHEEL").decode()
            self.assertIn("Root-Is-Purelib: true\n", wheel)
            record = z.read("hctune-0.1.0.dist-info/RECORD").decode().splitlines()
            self.assertEqual(len(record), len(names))
            for line in record:
                path, digest, size = line.rsplit(",", 2)
                self.assertIn(path, names)
                if path.endswith("RECORD"):
                    self.assertEqual((digest, size), ("", ""))
                    continue
                data = z.read(path)
                want_digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
                self.assertEqual(digest, "sha256=" + want_digest.decode(), path)
                self.assertEqual(int(size), len(data), path)

    def test_wheel_is_reproducible(self):
        a = os.path.join(self.tmp, "a")
        b = os.path.join(self.tmp, "b")
        os.mkdir(a)
        os.mkdir(b)
        name = hctune_backend.build_wheel(a)
        hctune_backend.build_wheel(b)
        with open(os.path.join(a, name), "rb") as fa, open(os.path.join(b, name), "rb") as fb:
            self.assertEqual(fa.read(), fb.read())

    def test_sdist_builds_again(self):
        """The sdist holds what a build from it needs: its own wheel."""
        name = hctune_backend.build_sdist(self.tmp)
        with tarfile.open(os.path.join(self.tmp, name)) as t:
            members = t.getnames()
            t.extractall(self.tmp)
        self.assertIn("hctune-0.1.0/PKG-INFO", members)
        self.assertIn("hctune-0.1.0/_backend/hctune_backend.py", members)
        self.assertIn("hctune-0.1.0/hctune/_lib.py", members)
        src = os.path.join(self.tmp, "hctune-0.1.0")
        out = subprocess.run([sys.executable, "-c",
                              "import sys; sys.path.insert(0, '_backend'); import hctune_backend; "
                              "print(hctune_backend.build_wheel(%r))" % self.tmp],
                             cwd=src, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "hctune-0.1.0-py3-none-any.whl")

    def test_editable_wheel_points_here(self):
        name = hctune_backend.build_editable(self.tmp)
        with zipfile.ZipFile(os.path.join(self.tmp, name)) as z:
            self.assertEqual(z.read("_hctune_editable.pth").decode().strip(), PYDIR)

    def test_mini_toml_reads_pyproject_as_tomllib_does(self):
        with open(os.path.join(PYDIR, "pyproject.toml")) as f:
            text = f.read()
        mini = hctune_backend._mini_toml(text)
        try:
            import tomllib
        except ImportError:
            self.skipTest("no tomllib (Python < 3.11) to compare with")
        self.assertEqual(mini, tomllib.loads(text))

    def test_mini_toml_refuses_what_it_cannot_read(self):
        with self.assertRaisesRegex(ValueError, r"pyproject.toml:2: not understood"):
            hctune_backend._mini_toml("[project]\nversion = 1.0\n")


def _child(code, env_extra, drop=("HCTUNE_LIB", "HCTUNE_PREFIX", "LD_LIBRARY_PATH")):
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONPATH"] = PYDIR
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd="/")


class TestLibrarySearch(unittest.TestCase):
    """Where the package finds libhctune.so.0.  The library this test run
    uses ($HCTUNE_LIB, else the checkout's) is copied into fake prefixes."""

    @classmethod
    def setUpClass(cls):
        import hctune
        cls.lib = hctune.library_path
        cls.tmp = tempfile.mkdtemp(prefix="hct_libsearch.")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_import_needs_no_library(self):
        out = _child("import hctune; print('ok')", {"HCTUNE_LIB": "/nonexistent/libhctune.so.0"})
        self.assertEqual(out.stdout, "ok\n", out.stderr)

    def test_import_needs_no_torch(self):
        """torch_ops is imported only when asked for: hctune works where
        importing torch fails."""
        code = ("import sys; sys.modules['torch'] = None\n"
                "import hctune\nc = hctune.Client('/nonexistent.sock', 10)\n"
                "print(c.connected, 'torch' in sys.modules and sys.modules['torch'] is not None)\n"
                "try:\n    import hctune.torch_ops\nexcept ImportError as e:\n    print('no torch_ops')\n")
        out = _child(code, {"HCTUNE_LIB": self.lib})
        self.assertEqual(out.stdout, "False False\nno torch_ops\n", out.stderr)

    def test_missing_library_names_what_was_tried(self):
        out = _child("import hctune\ntry:\n    hctune.Client('/nonexistent.sock', 10)\n"
                     "except hctune.LibraryNotFound as e:\n    print(e)\n",
                     {"HCTUNE_LIB": "/nonexistent/libhctune.so.0"})
        self.assertIn("cannot load libhctune.so.0; tried: /nonexistent/libhctune.so.0: no such file",
                      out.stdout, out.stderr)

    def test_argument_wins_and_is_kept(self):
        code = ("import hctune\nprint(hctune.load_library(%r))\n"
                "try:\n    hctune.load_library('/elsewhere/libhctune.so.0')\n"
                "except ValueError as e:\n    print(e)\n" % self.lib)
        out = _child(code, {"HCTUNE_LIB": "/nonexistent/libhctune.so.0"})
        lines = out.stdout.splitlines()
        self.assertEqual(lines[0], self.lib, out.stderr)
        self.assertIn("already loaded from %s, cannot switch" % self.lib, lines[1])

    def test_not_a_libhctune_is_refused_with_its_name(self):
        other = os.path.join(self.tmp, "libnothctune.so.0")
        libc = subprocess.run(["sh", "-c", "${CC:-gcc} -print-file-name=libm.so.6"],
                              capture_output=True, text=True).stdout.strip()
        if not os.path.isabs(libc):
            self.skipTest("no libm.so.6 path from the compiler to stand in for a wrong library")
        shutil.copy(libc, other)
        out = _child("import hctune\ntry:\n    hctune.load_library(%r)\n"
                     "except hctune.LibraryNotFound as e:\n    print(e)\n" % other, {})
        self.assertIn("%s: not this version's libhctune (no hct_strerror" % other, out.stdout,
                      out.stderr)

    def _installed_package(self):
        """A copy of the package outside any checkout, as pip installs it."""
        site = os.path.join(self.tmp, "site")
        if not os.path.isdir(site):
            shutil.copytree(os.path.join(PYDIR, "hctune"), os.path.join(site, "hctune"),
                            ignore=shutil.ignore_patterns("__pycache__"))
        return site

    def _prefix(self, name):
        prefix = os.path.join(self.tmp, name)
        os.makedirs(os.path.join(prefix, "lib"), exist_ok=True)
        shutil.copy(self.lib, os.path.join(prefix, "lib", "libhctune.so.0"))
        return prefix

    def test_prefix_from_the_environment(self):
        prefix = self._prefix("pfx_env")
        env = {"PYTHONPATH": self._installed_package(), "HCTUNE_PREFIX": prefix}
        out = _child("import hctune; print(hctune.library_path)", env)
        self.assertEqual(out.stdout.strip(), os.path.join(prefix, "lib", "libhctune.so.0"),
                         out.stderr)

    def test_prefix_of_the_hctune_program_on_path(self):
        prefix = self._prefix("pfx_path")
        os.makedirs(os.path.join(prefix, "bin"), exist_ok=True)
        prog = os.path.join(prefix, "bin", "hctune")
        with open(prog, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(prog, 0o755)
        env = {"PYTHONPATH": self._installed_package(),
               "PATH": os.path.join(prefix, "bin") + os.pathsep + os.environ.get("PATH", "")}
        out = _child("import hctune; print(hctune.library_path)", env)
        self.assertEqual(out.stdout.strip(), os.path.join(prefix, "lib", "libhctune.so.0"),
                         out.stderr)

    def test_loader_path_before_prefixes(self):
        loader = self._prefix("pfx_loader")
        other = self._prefix("pfx_other")
        env = {"PYTHONPATH": self._installed_package(), "HCTUNE_PREFIX": other,
               "LD_LIBRARY_PATH": os.path.join(loader, "lib")}
        out = _child("import hctune; print(hctune.library_path)", env)
        self.assertEqual(out.stdout.strip(), "libhctune.so.0", out.stderr)

    def test_checkout_package_uses_the_checkout_library(self):
        top = os.path.dirname(PYDIR)
        if not os.path.exists(os.path.join(top, "lib", "libhctune.so.0")):
            self.skipTest("this checkout has no lib/libhctune.so.0 (run make)")
        out = _child("import hctune; print(hctune.library_path)",
                     {"HCTUNE_PREFIX": self._prefix("pfx_unused")})
        self.assertEqual(out.stdout.strip(), os.path.join(top, "lib", "libhctune.so.0"), out.stderr)


if __name__ == "__main__":
    unittest.main()
