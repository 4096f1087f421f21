#!/usr/bin/env python3
"""cublas-bits.py: are pair_mma's bits (bits:pair_mma, hc_read_prefill) what
a PyTorch engine gets from cuBLAS?  Issue 33's "the engine's bits, measured".

  cublas-bits.py [--tokens 16,33,100,2048,8192,32768] [--point NAME=V,...]
                 [--seed N] [--no-pending] [--no-profile]
                 [--no-reduced-reduction] [--op-dir DIR] [--json [FILE]]
  cublas-bits.py --dry-run DIR [--arch sm_90] [--point NAME=V,...]

pair_mma's kernels are compiled as hctune compiles them (jit/options.c,
jit/cuda.c): the template's text as it is, named after its file, through
NVRTC (the library hctune loads, by ctypes; never CuPy's compile, which adds
-ftz=true), with -I kernels-src/common, -I the op folder, -std=c++17,
-arch=sm_XX of the card, --ptxas-options=-v, -DHCT_WARP=32,
-DHCT_ARCH=XX, -DHCT_CUDA=1, the op's constants and the point's parameters
(default: each parameter's first value, the family head's default point).
The cubin is loaded with CuPy (RawModule(path=...)) and each launch's
grid, block, shared memory and arguments are the manifest's own
expressions, evaluated as jit/expr.c does.

Inputs as the spec draws them (the manifest's "inputs": normal, weights
scaled by 1/sqrt(fan-in), never a stored zero), as torch tensors on the GPU;
pair_mma's outputs are poisoned (all bits set: NaN) before each run.  At
each T:

  down lo     pair_mma's norm, then its down GEMM: lo (bf16), against
              torch.mm(xn, w_down.T) on the same xn (cuBLAS: bf16 in, f32
              accumulate, bf16 out);
  up gated    pair_mma's up GEMM on its lo: gated = 1/(1+expf(-u)) (f32),
              against cuBLAS's u in f32 (torch.mm(lo, w_up.T,
              out_dtype=torch.float32)) through the same gate (hc_read.h's
              hcr_sigmoid, compiled with the same options);
  images      pair_mma's mix (hc_pf_mix) on each gated: mixed, mixed_bf16,
              mixed_f16 (counts shown mixed/bf16/f16);
  bf16 u      what a plain PyTorch engine gets: torch.mm(lo, w_up.T) rounded
              to bf16 before the same gate and mix (expected to differ);
  chain       both GEMMs cuBLAS's (the f32 up GEMM on cuBLAS's own lo), gate
              and mix as above: the images an engine on PyTorch computes.
  torch.sigmoid, 1/(1+exp(-u))
              an engine's own gate on cuBLAS's f32 u against the spec's
              (NVRTC contracts expf's last product with the + 1 into an fma,
              in pair_mma and in the gate here alike; torch's kernels are
              nvcc's, and the second is three of them, exp rounded first).

Every comparison is bit for bit, over every element: "equal", or the count
that differ (the JSON adds the largest ulp and absolute difference and the
first few that differ).  The cuBLAS kernels come from torch.profiler.

--dry-run DIR writes the exact source and options handed to NVRTC, the
gate's source, an nvcc command that compiles both the same way, and the
launch geometry at each T; with NVRTC loadable it compiles both as well
(cubins and logs in DIR).  It needs neither torch nor a GPU.

Exit status: 0 when it ran (whatever the bits), 1 on a bad argument, a
manifest the tool cannot follow, a compile error or a failed T, 2 without
torch, CuPy, NVRTC or a GPU.
"""
import argparse
import ctypes
import glob
import json
import os
import re
import shlex
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OP_DIR = os.path.join(ROOT, "kernels-src", "hc_read_prefill")
VARIANT = "pair_mma"
TOKENS = "16,33,100,2048,8192,32768"
# The card values the manifest loader assumes without a card (jit/manifest.c).
CARD_DEFAULTS = {"SMEM_OPTIN": 232448, "SM_COUNT": 132, "WARP": 32, "HIP": 0}

# The gate of the comparison: hc_read.h's own hcr_sigmoid, in a module of
# its own compiled with pair_mma's options, on cuBLAS's u (f32, or bf16
# widened as a PyTorch engine's would be).
GATE_NAME = "hcb_gate.cu"
GATE_SRC = r"""/* cublas-bits.py: the spec's gate on cuBLAS's u, with hc_read.h's own
 * expression (hcr_sigmoid) and pair_mma's compile options. */
#include "hc_read.h"

HCT_ENTRY void __launch_bounds__(256) hcb_gate_f32(const float *u, float *g, long long n) {
  const long long i = (long long)blockIdx.x * 256 + threadIdx.x;
  if (i < n) g[i] = hcr_sigmoid(u[i]);
}

HCT_ENTRY void __launch_bounds__(256) hcb_gate_bf16(const hct_u16 *u, float *g, long long n) {
  const long long i = (long long)blockIdx.x * 256 + threadIdx.x;
  if (i < n) g[i] = hcr_sigmoid(hct_bf16_to_f32(u[i]));
}
"""
GATE_ENTRIES = ("hcb_gate_f32", "hcb_gate_bf16")


class Fail(Exception):
    """One line for the user and the exit status."""

    def __init__(self, status, msg):
        Exception.__init__(self, msg)
        self.status = status


# ---- the manifest's integer expressions (jit/expr.c) ---------------------

class Expr:
    """Evaluates as jit/expr.c does: int64, C division, precedence from
    loosest || && (== !=) (< <= > >=) (+ -) (* / %) unary (! -) primary,
    functions min, max, cdiv."""

    TOKEN = re.compile(r"\s*(\d+|[A-Za-z_]\w*|\|\||&&|==|!=|<=|>=|[-+*/%()<>!,])")

    def __init__(self, text, syms):
        self.text, self.syms = str(text), syms
        self.toks, pos = [], 0
        while pos < len(self.text):
            m = self.TOKEN.match(self.text, pos)
            if m is None:
                if self.text[pos:].strip() == "":
                    break
                self.bad("unexpected '%s'" % self.text[pos:].strip()[0])
            self.toks.append(m.group(1))
            pos = m.end()
        self.i = 0

    def bad(self, why):
        raise Fail(1, "expression '%s': %s" % (self.text, why))

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, tok):
        if self.peek() == tok:
            self.i += 1
            return True
        return False

    def value(self):
        v = self.lor()
        if self.peek() is not None:
            self.bad("unexpected '%s'" % self.peek())
        return v

    def lor(self):
        v = self.land()
        while self.take("||"):
            r = self.land()
            v = int(bool(v) or bool(r))
        return v

    def land(self):
        v = self.eq()
        while self.take("&&"):
            r = self.eq()
            v = int(bool(v) and bool(r))
        return v

    def eq(self):
        v = self.rel()
        while self.peek() in ("==", "!="):
            op = self.toks[self.i]
            self.i += 1
            r = self.rel()
            v = int(v == r) if op == "==" else int(v != r)
        return v

    def rel(self):
        v = self.add()
        while self.peek() in ("<", "<=", ">", ">="):
            op = self.toks[self.i]
            self.i += 1
            r = self.add()
            v = int({"<": v < r, "<=": v <= r, ">": v > r, ">=": v >= r}[op])
        return v

    def add(self):
        v = self.mul()
        while self.peek() in ("+", "-"):
            op = self.toks[self.i]
            self.i += 1
            r = self.mul()
            v = v + r if op == "+" else v - r
        return v

    @staticmethod
    def cdivide(a, b):  # C: truncation toward zero
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q

    def mul(self):
        v = self.unary()
        while self.peek() in ("*", "/", "%"):
            op = self.toks[self.i]
            self.i += 1
            r = self.unary()
            if op == "*":
                v *= r
            else:
                if r == 0:
                    self.bad("division by zero")
                q = self.cdivide(v, r)
                v = q if op == "/" else v - q * r
        return v

    def unary(self):
        if self.take("-"):
            return -self.unary()
        if self.take("!"):
            return int(not self.unary())
        return self.primary()

    def primary(self):
        tok = self.peek()
        if tok is None:
            self.bad("unexpected end")
        self.i += 1
        if tok == "(":
            v = self.lor()
            if not self.take(")"):
                self.bad("missing ')'")
            return v
        if tok.isdigit():
            return int(tok)
        if re.match(r"[A-Za-z_]", tok):
            if self.take("("):
                a = self.lor()
                if not self.take(","):
                    self.bad("%s() takes two arguments" % tok)
                b = self.lor()
                if not self.take(")"):
                    self.bad("missing ')' after %s(" % tok)
                if tok == "min":
                    return min(a, b)
                if tok == "max":
                    return max(a, b)
                if tok == "cdiv":
                    if b == 0:
                        self.bad("division by zero in cdiv")
                    return self.cdivide(a + b - 1, b)
                self.bad("unknown function '%s'" % tok)
            if tok not in self.syms:
                self.bad("unknown name '%s'" % tok)
            return self.syms[tok]
        self.bad("unexpected '%s'" % tok)


def ev(text, syms):
    if isinstance(text, int):
        return text
    return Expr(text, syms).value()


# ---- the op and the point --------------------------------------------------

def load_op(op_dir, point_arg):
    path = os.path.join(op_dir, "manifest.json")
    try:
        with open(path) as f:
            man = json.load(f)
    except (OSError, ValueError) as e:
        raise Fail(1, "'%s': %s" % (path, e))
    var = [v for v in man.get("variants", []) if v.get("name") == VARIANT]
    if not var:
        raise Fail(1, "'%s': no variant '%s'" % (path, VARIANT))
    var = var[0]
    consts = dict(man["constants"])
    point = {p["name"]: p["values"][0] for p in var["params"]}
    for kv in filter(None, (point_arg or "").split(",")):
        k, _, v = kv.partition("=")
        params = {p["name"]: p["values"] for p in var["params"]}
        if k not in params:
            raise Fail(1, "--point '%s': %s has no parameter '%s' (has %s)" % (kv, VARIANT, k, ", ".join(params)))
        if not v.lstrip("-").isdigit() or int(v) not in params[k]:
            raise Fail(1, "--point '%s': %s takes %s" % (kv, k, ", ".join(str(x) for x in params[k])))
        point[k] = int(v)
    launches = {}
    for L in var["launches"]:
        for x in L["args"]:
            if isinstance(x, str) and x.startswith("@") and not re.match(r"^@\w+$", x):
                raise Fail(1, "'%s': %s's kernel '%s' takes '%s', which this tool cannot pass"
                           % (path, VARIANT, L["entry"], x))
        launches[L["entry"]] = L
    for entry in ("hc_pf_norm", "hc_pm_down", "hc_pm_up", "hc_pf_mix"):
        if entry not in launches:
            raise Fail(1, "'%s': %s has no launch of '%s'" % (path, VARIANT, entry))
    return dict(dir=os.path.abspath(op_dir), man=man, var=var, consts=consts, point=point,
                launches=launches, template=var["template"])


def symbols(op, arch_num, smem_optin, sm_count, T=None):
    s = dict(CARD_DEFAULTS)
    s.update(SMEM_OPTIN=smem_optin, SM_COUNT=sm_count, ARCH=arch_num)
    s.update(op["consts"])
    s.update(op["point"])
    if T is not None:
        s["T"] = T
    return s


def check_point(op, syms):
    for c in op["var"].get("constraints", []):
        if not ev(c, syms):
            raise Fail(1, "point %s of %s: constraint '%s' does not hold"
                       % (point_text(op["point"]), VARIANT, c))


def point_text(point):
    return ",".join("%s=%d" % kv for kv in point.items())


def geometry(op, entry, syms):
    L = op["launches"][entry]
    grid = tuple(ev(x, syms) for x in L["grid"])
    block = tuple(ev(x, syms) for x in L["block"])
    return grid, block, ev(L["smem"], syms)


# ---- NVRTC, as jit/cuda.c loads and drives it ------------------------------

class Nvrtc:
    NAMES = ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so")

    def __init__(self):
        self.lib, self.path, tried = None, None, []
        dirs = [os.path.join(os.environ["CUDA_HOME"], "lib64")] if os.environ.get("CUDA_HOME") else []
        dirs += ["/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/targets/x86_64-linux/lib"]
        # Last, the NVRTC of the Python wheels (nvidia-cuda-nvrtc), which
        # hctune does not look at: reported, so a figure says which it was.
        for p in sys.path:
            dirs += sorted(glob.glob(os.path.join(p, "nvidia", "*", "lib")))
        for name in self.NAMES:
            try:
                self.lib, self.path = ctypes.CDLL(name), name
                break
            except OSError as e:
                tried.append(str(e))
        for d in dirs if self.lib is None else []:
            for name in self.NAMES:
                full = os.path.join(d, name)
                if not os.path.exists(full):
                    continue
                for b in sorted(glob.glob(os.path.join(d, "libnvrtc-builtins.so.*"))):
                    try:
                        ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
                    except OSError:
                        pass
                try:
                    self.lib, self.path = ctypes.CDLL(full), full
                    break
                except OSError as e:
                    tried.append(str(e))
            if self.lib is not None:
                break
        if self.lib is None:
            raise Fail(2, "nvrtc: cannot load the library (%s)" % ("; ".join(tried[-2:]) or "not found"))
        L = self.lib
        L.nvrtcGetErrorString.restype = ctypes.c_char_p
        L.nvrtcCreateProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_char_p,
                                         ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        L.nvrtcCompileProgram.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        for f in ("nvrtcGetProgramLogSize", "nvrtcGetCUBINSize", "nvrtcGetPTXSize"):
            getattr(L, f).argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        for f in ("nvrtcGetProgramLog", "nvrtcGetCUBIN", "nvrtcGetPTX"):
            getattr(L, f).argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        L.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.check(L.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        self.version = "%d.%d" % (major.value, minor.value)
        self.archs = []
        n = ctypes.c_int()
        if hasattr(L, "nvrtcGetSupportedArchs") and L.nvrtcGetNumSupportedArchs(ctypes.byref(n)) == 0 \
                and 0 < n.value <= 64:
            arr = (ctypes.c_int * n.value)()
            if L.nvrtcGetSupportedArchs(arr) == 0:
                self.archs = list(arr)

    def check(self, rc, what):
        if rc != 0:
            raise Fail(1, "%s: %s" % (what, self.lib.nvrtcGetErrorString(rc).decode()))

    def target_options(self, arch):
        """jit/cuda.c's cuda_target_options for a plain (not arch-specific)
        variant: -arch=sm_XX when NVRTC knows the arch (a cubin), else PTX
        for the highest arch it knows below; HCT_ARCH is what the code may
        use."""
        m = re.match(r"^sm_(\d+)$", arch)
        if m is None:
            raise Fail(1, "arch '%s': expected sm_XX" % arch)
        num = int(m.group(1))
        exact = num in self.archs or not self.archs
        below = [a for a in self.archs if a <= num]
        if not exact and not below:
            raise Fail(2, "arch '%s': nvrtc %s compiles for sm_%d and newer only" % (arch, self.version, self.archs[0]))
        target = num if exact else max(below)
        opts = ["-arch=%s" % arch] if exact else ["--gpu-architecture=compute_%d" % target]
        opts += ["--ptxas-options=-v", "-DHCT_WARP=32", "-DHCT_ARCH=%d" % target, "-DHCT_CUDA=1"]
        return opts, not exact

    def compile(self, source, name, options):
        """(image bytes, log); raises Fail with the log's error line."""
        prog = ctypes.c_void_p()
        self.check(self.lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None),
                   "nvrtcCreateProgram")
        try:
            argv = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
            rc = self.lib.nvrtcCompileProgram(prog, len(options), argv)
            size = ctypes.c_size_t()
            log = ""
            if self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)) == 0 and size.value > 1:
                buf = ctypes.create_string_buffer(size.value)
                if self.lib.nvrtcGetProgramLog(prog, buf) == 0:
                    log = buf.value.decode(errors="replace")
            if rc != 0:
                lines = [ln for ln in log.splitlines() if "error" in ln] or [ln for ln in log.splitlines() if ln]
                raise Fail(1, "'%s': %s" % (name, lines[0] if lines else
                                             self.lib.nvrtcGetErrorString(rc).decode()))
            ptx = any(o.startswith("--gpu-architecture=compute_") for o in options)
            get_size, get = ((self.lib.nvrtcGetPTXSize, self.lib.nvrtcGetPTX) if ptx else
                             (self.lib.nvrtcGetCUBINSize, self.lib.nvrtcGetCUBIN))
            self.check(get_size(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
            buf = ctypes.create_string_buffer(size.value)
            self.check(get(prog, buf), "nvrtcGetCUBIN")
            return buf.raw, log
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(prog))


def compile_options(op, target_opts):
    """jit/options.c's order: includes, the standard, the target, the op's
    constants, the point's parameters."""
    opts = ["-I%s" % os.path.join(os.path.dirname(op["dir"]), "common"), "-I%s" % op["dir"], "-std=c++17"]
    opts += target_opts
    opts += ["-D%s=%d" % kv for kv in op["consts"].items()]
    opts += ["-D%s=%d" % kv for kv in op["point"].items()]
    return opts


def registers(log):
    """{entry: registers} from ptxas -v's log."""
    out, entry = {}, None
    for line in log.splitlines():
        m = re.search(r"[Cc]ompiling entry function '([^']+)'", line)
        if m:
            entry = m.group(1)
        m = re.search(r"Used (\d+) registers", line)
        if m and entry:
            out[entry] = int(m.group(1))
    return out


def read_template(op):
    path = os.path.join(op["dir"], op["template"])
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        raise Fail(1, "'%s': %s" % (path, e))


# ---- --dry-run ---------------------------------------------------------------

def dry_run(a, op):
    arch_num = int(re.sub(r"\D", "", a.arch) or 0)
    syms = symbols(op, arch_num, CARD_DEFAULTS["SMEM_OPTIN"], CARD_DEFAULTS["SM_COUNT"])
    check_point(op, syms)
    os.makedirs(a.dry_run, exist_ok=True)
    source = read_template(op)
    try:
        nv = Nvrtc()
    except Fail as e:
        nv = None
        target = ["-arch=%s" % a.arch, "--ptxas-options=-v", "-DHCT_WARP=32", "-DHCT_ARCH=%d" % arch_num,
                  "-DHCT_CUDA=1"]
        nv_note = "no nvrtc here (%s): options written, nothing compiled" % e
    else:
        target, _ = nv.target_options(a.arch)
        nv_note = "nvrtc %s (%s)" % (nv.version, nv.path)
    opts = compile_options(op, target)
    files = {op["template"]: source, GATE_NAME: GATE_SRC, "options.txt": "\n".join(opts) + "\n"}
    nvcc = ["nvcc", "-c", "-x", "cu"] + opts
    files["nvcc.sh"] = ("#!/bin/sh\n# The same compile with nvcc (a check of the text, not hctune's path).\nset -e\n"
                        "cd \"$(dirname \"$0\")\"\n" +
                        "".join("%s %s -o %s.o\n" % (" ".join(shlex.quote(x) for x in nvcc), f, f)
                                for f in (op["template"], GATE_NAME)))
    plan = {}
    for T in a.tokens:
        s = dict(syms, T=T)
        plan[str(T)] = {e: dict(zip(("grid", "block", "smem"), geometry(op, e, s))) for e in op["launches"]}
    files["launches.json"] = json.dumps(dict(point=op["point"], options=opts, launches=plan), indent=1) + "\n"
    for name, text in files.items():
        with open(os.path.join(a.dry_run, name), "w") as f:
            f.write(text)
    os.chmod(os.path.join(a.dry_run, "nvcc.sh"), 0o755)
    print("cublas-bits: %s: %s at %s, %s" % (a.dry_run, VARIANT, point_text(op["point"]), nv_note))
    if nv is not None:
        for name, src in ((op["template"], source), (GATE_NAME, GATE_SRC)):
            image, log = nv.compile(src, name, opts)
            base = os.path.join(a.dry_run, os.path.splitext(name)[0])
            with open(base + (".cubin" if target[0].startswith("-arch") else ".ptx"), "wb") as f:
                f.write(image)
            with open(base + ".log", "w") as f:
                f.write(log)
            regs = registers(log)
            print("  %s: %d bytes; registers %s" % (name, len(image), ", ".join(
                "%s %d" % kv for kv in sorted(regs.items())) or "?"))
    for T in a.tokens:
        print("  T=%d: %s" % (T, "; ".join("%s grid %s block %s smem %d" % (e, g["grid"], g["block"], g["smem"])
                                           for e, g in plan[str(T)].items())))
    return 0


# ---- on the GPU ------------------------------------------------------------

class Gpu:
    """torch for the tensors and cuBLAS, CuPy to load and launch the cubins
    (on torch's current stream), everything synchronised after each step."""

    def __init__(self, a, op, torch, cupy, numpy):
        self.a, self.op, self.torch, self.cupy, self.np = a, op, torch, cupy, numpy
        self.dev = torch.device("cuda:0")
        props = torch.cuda.get_device_properties(0)
        self.name = props.name
        cc = torch.cuda.get_device_capability(0)
        self.arch_num = cc[0] * 10 + cc[1]
        if self.arch_num < op["var"].get("min_arch", 0):
            raise Fail(2, "card '%s' (sm_%d): %s needs sm_%d or later"
                       % (self.name, self.arch_num, VARIANT, op["var"]["min_arch"]))
        cupy.cuda.Device(0).use()
        cupy.zeros(1, dtype=cupy.float32)  # CuPy's context: the primary one, as torch's
        smem_optin = getattr(props, "shared_memory_per_block_optin", None) or \
            cupy.cuda.runtime.getDeviceProperties(0).get("sharedMemPerBlockOptin") or CARD_DEFAULTS["SMEM_OPTIN"]
        self.syms = symbols(op, self.arch_num, int(smem_optin), props.multi_processor_count)
        check_point(op, self.syms)
        self.nv = Nvrtc()
        target, self.is_ptx = self.nv.target_options("sm_%d" % self.arch_num)
        self.opts = compile_options(op, target)
        self.fn, self.regs = {}, {}
        with tempfile.TemporaryDirectory(prefix="cublas-bits.") as tmp:
            for name, src, entries in ((op["template"], read_template(op), tuple(op["launches"])),
                                       (GATE_NAME, GATE_SRC, GATE_ENTRIES)):
                image, log = self.nv.compile(src, name, self.opts)
                self.regs.update(registers(log))
                path = os.path.join(tmp, os.path.splitext(name)[0] + (".ptx" if self.is_ptx else ".cubin"))
                with open(path, "wb") as f:
                    f.write(image)
                # The cubin as it is: CuPy's own compile would add -ftz=true.
                mod = cupy.RawModule(path=path)
                for e in entries:
                    self.fn[e] = mod.get_function(e)  # loads the module now
        self.stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)

    def sync(self):
        self.torch.cuda.synchronize()

    def launch(self, entry, T, bufs):
        """entry's launch with the manifest's geometry and arguments, the
        buffers named by bufs (a name mapped to None passes a null pointer)."""
        np = self.np
        s = dict(self.syms, T=T)
        grid, block, smem = geometry(self.op, entry, s)
        args = []
        for x in self.op["launches"][entry]["args"]:
            if isinstance(x, str) and x.startswith("@"):
                if x[1:] not in bufs:
                    raise Fail(1, "kernel '%s': argument '%s' is no buffer of this tool" % (entry, x))
                t = bufs[x[1:]]
                args.append(None if t is None else np.int64(t.data_ptr()))
            else:
                args.append(np.int32(ev(x, s)))
        f = self.fn[entry]
        if smem > 48 * 1024:  # as jit/cuda.c's cuda_function_smem
            f.max_dynamic_shared_size_bytes = smem
        f(grid, block, tuple(args), shared_mem=smem, stream=self.stream)
        self.sync()

    def gate(self, u, out):
        n = u.numel()
        f = self.fn["hcb_gate_f32" if u.dtype == self.torch.float32 else "hcb_gate_bf16"]
        f(((n + 255) // 256, 1, 1), (256, 1, 1),
          (self.np.int64(u.data_ptr()), self.np.int64(out.data_ptr()), self.np.int64(n)), stream=self.stream)
        self.sync()


def up_f32(torch, lo, w_up):
    """cuBLAS's u in f32 (bf16 in, f32 accumulate, no rounding of u), and how:
    torch.mm's out_dtype (aten's _mm_dtype_out_cuda: the addmm path of a
    plain mm, cuBLAS writing f32), else cublasGemmEx through CuPy."""
    why = []
    for how, call in (("torch.mm(lo, w_up.t(), out_dtype=torch.float32)",
                       lambda: torch.mm(lo, w_up.t(), out_dtype=torch.float32)),
                      ("torch.mm(lo, w_up.t(), torch.float32)", lambda: torch.mm(lo, w_up.t(), torch.float32))):
        try:
            u = call()
            if u.dtype == torch.float32:
                return u, how
            why.append("%s gave %s" % (how, u.dtype))
        except (TypeError, RuntimeError) as e:
            why.append("%s: %s" % (how, str(e).splitlines()[0][:80] if str(e) else type(e).__name__))
    # cublasGemmEx through CuPy: column-major u^T [D x T] = w_up (op T) . lo^T.
    import cupy
    import numpy
    from cupy_backends.cuda.libs import cublas
    T, K = lo.shape
    D = w_up.shape[0]
    u = torch.empty(T, D, dtype=torch.float32, device=lo.device)
    one, zero = numpy.ones(1, numpy.float32), numpy.zeros(1, numpy.float32)
    h = cupy.cuda.device.get_cublas_handle()
    with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
        cublas.gemmEx(h, 1, 0, D, T, K, one.ctypes.data, w_up.data_ptr(), 14, K, lo.data_ptr(), 14, K,
                      zero.ctypes.data, u.data_ptr(), 0, D, 68, -1)
    torch.cuda.synchronize()
    return u, "cublasGemmEx via CuPy (CUDA_R_16BF in, CUDA_R_32F out, CUBLAS_COMPUTE_32F; %s)" % "; ".join(why)


def kernel_names(torch, fn):
    """The CUDA kernels fn launches, by torch.profiler (fn runs once before)."""
    try:
        from torch.profiler import profile, ProfilerActivity
        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        names = []
        for e in prof.events():
            if "CUDA" not in str(getattr(e, "device_type", "")):
                continue
            if e.name.startswith(("Memcpy", "Memset", "cudaMemset")) or e.name in names:
                continue
            names.append(e.name)
        return names or ["?"]
    except Exception as e:  # a profiler that cannot start costs a column, not the run
        return ["? (%s: %s)" % (type(e).__name__, str(e)[:80])]


def num(x):
    """A float for JSON: NaN and infinities as strings."""
    v = float(x)
    return v if v == v and abs(v) != float("inf") else repr(v)


def compare(torch, ours, theirs, row):
    """Bit for bit over every element: the count that differ, and where."""
    iv = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}[ours.dtype]
    a, b = ours.reshape(-1).view(iv), theirs.reshape(-1).view(iv)
    ne = a != b
    n = int(ne.sum())
    out = dict(differ=n, of=a.numel(), nan_ours=int(torch.isnan(ours).sum()))
    if n:
        da, db = a[ne].long(), b[ne].long()
        out["max_ulp"] = int((da - db).abs().max())  # same sign: ulps apart
        fa, fb = ours.reshape(-1)[ne].float(), theirs.reshape(-1)[ne].float()
        out["max_abs"] = num((fa - fb).abs().max())
        first = int(ne.int().argmax())
        idx = ne[first:first + (1 << 20)].nonzero().reshape(-1)[:4] + first
        out["first"] = [dict(t=i // row, col=i % row, ours=num(ours.reshape(-1)[i]),
                             cublas=num(theirs.reshape(-1)[i])) for i in idx.tolist()]
    return out


def draw_inputs(torch, op, T, gen, dev, pending):
    """The manifest's rules: mean + sd * N(0,1) / sqrt(fan_in), never a
    stored zero, in each buffer's dtype."""
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    bufs = {b["name"]: b for b in op["man"]["buffers"]}
    syms = dict(op["consts"], T=T)
    out = {}
    for r in op["man"]["inputs"]:
        name = r["buffer"]
        if name == "pending" and not pending:
            out[name] = None
            continue
        if T is None and bufs[name]["role"] != "weight" or T is not None and bufs[name]["role"] == "weight":
            continue
        dt = dtypes[bufs[name]["dtype"]]
        n = ev(bufs[name]["elems"], syms)
        sd = r["sd"] / (ev(r["fan_in"], syms) ** 0.5 if "fan_in" in r else 1.0)
        x = (r["mean"] + sd * torch.randn(n, generator=gen, device=dev)).to(dt)
        while True:
            z = x == 0
            k = int(z.sum())
            if k == 0:
                break
            x[z] = (r["mean"] + sd * torch.randn(k, generator=gen, device=dev)).to(dt)
        out[name] = x
    return out


def poisoned(torch, n, dtype, dev):
    t = torch.empty(n, dtype=dtype, device=dev)
    t.view(torch.int16 if t.element_size() == 2 else torch.int32).fill_(-1)  # all bits set: NaN
    return t


def one_count(g, T, weights, gen):
    torch, op = g.torch, g.op
    S, C, D, K = (op["consts"][k] for k in ("S", "C", "D", "K"))
    dev = g.dev
    row = dict(T=T)
    bufs = dict(weights)
    bufs.update(draw_inputs(torch, op, T, gen, dev, not g.a.no_pending))
    # Sizes from the manifest, so a layout change there stops the tool.
    sizes = {b["name"]: ev(b["elems"], dict(op["consts"], T=T)) for b in op["man"]["buffers"]}
    for name, t in bufs.items():
        if t is not None and t.numel() != sizes[name]:
            raise Fail(1, "buffer '%s': %d elements, the manifest says %d" % (name, t.numel(), sizes[name]))
    bufs["xn"] = poisoned(torch, T * D, torch.bfloat16, dev)
    bufs["lo"] = poisoned(torch, T * K, torch.bfloat16, dev)
    g.launch("hc_pf_norm", T, bufs)
    g.launch("hc_pm_down", T, bufs)
    xn, lo = bufs["xn"].view(T, D), bufs["lo"].view(T, K)
    w_down, w_up = bufs["w_down"].view(K, D), bufs["w_up"].view(D, K)

    down = lambda: torch.mm(xn, w_down.t())  # noqa: E731
    lo_cb = down()
    torch.cuda.synchronize()
    row["lo"] = compare(torch, lo, lo_cb, K)

    def images(gated):
        out = dict(bufs, gated=gated, mixed=poisoned(torch, T * C, torch.float32, dev),
                   mixed_bf16=poisoned(torch, T * C, torch.bfloat16, dev),
                   mixed_f16=poisoned(torch, T * C, torch.float16, dev))
        g.launch("hc_pf_mix", T, out)
        return {k: out[k] for k in ("mixed", "mixed_bf16", "mixed_f16")}

    def images_cmp(ours, theirs):
        return {k: compare(torch, ours[k], theirs[k], C) for k in ours}

    bufs["gated"] = poisoned(torch, T * D, torch.float32, dev)
    g.launch("hc_pm_up", T, bufs)
    gated = bufs["gated"]
    img = images(gated)

    u, row["up_f32_method"] = up_f32(torch, lo, w_up)
    g_cb = torch.empty(T * D, dtype=torch.float32, device=dev)
    g.gate(u, g_cb)
    row["gated"] = compare(torch, gated, g_cb, D)
    # Does an engine's own gate give the spec's bits on the same u?  NVRTC
    # contracts expf's last product with the + 1 (an fma, in pair_mma and
    # here alike); torch.sigmoid is one kernel, 1/(1+exp(-u)) three.
    sig = torch.sigmoid(u).reshape(-1)
    row["torch_sigmoid"] = compare(torch, g_cb, sig, D)
    sig = (1.0 / (1.0 + torch.exp(-u))).reshape(-1)
    row["torch_exp_gate"] = compare(torch, g_cb, sig, D)
    del sig
    row["images"] = images_cmp(img, images(g_cb))
    del u

    u16 = torch.mm(lo, w_up.t())
    g.gate(u16, g_cb)
    row["gated_bf16u"] = compare(torch, gated, g_cb, D)
    row["images_bf16u"] = images_cmp(img, images(g_cb))
    del u16

    u, _ = up_f32(torch, lo_cb, w_up)
    g.gate(u, g_cb)
    row["images_chain"] = images_cmp(img, images(g_cb))
    del u, g_cb

    if not g.a.no_profile:
        row["kernels"] = dict(down=kernel_names(torch, down),
                              up_f32=kernel_names(torch, lambda: up_f32(torch, lo, w_up)),
                              up_bf16=kernel_names(torch, lambda: torch.mm(lo, w_up.t())))
    return row


def run(a, op):
    lo_t, hi_t = op["var"].get("tokens", [1, 1 << 30])
    for T in a.tokens:
        if not lo_t <= T <= hi_t:
            raise Fail(1, "--tokens: %d is outside %s's range %d..%d" % (T, VARIANT, lo_t, hi_t))
    try:
        import torch
    except ImportError as e:
        raise Fail(2, "no torch here (%s)" % e)
    try:
        import cupy
        import numpy
    except ImportError as e:
        raise Fail(2, "no cupy here (%s)" % e)
    if not torch.cuda.is_available():
        raise Fail(2, "no GPU: torch.cuda.is_available() is False")
    mm = torch.backends.cuda.matmul
    if a.no_reduced_reduction:
        mm.allow_bf16_reduced_precision_reduction = False
    torch.zeros(1, device="cuda:0")
    g = Gpu(a, op, torch, cupy, numpy)
    gen = torch.Generator(device=g.dev).manual_seed(a.seed)
    weights = draw_inputs(torch, op, None, gen, g.dev, True)
    out = dict(gpu=g.name, arch="sm_%d" % g.arch_num, torch=torch.__version__, cupy=cupy.__version__,
               cuda=torch.version.cuda, cublas=None,
               blas_backend=_blas_backend(torch),
               nvrtc=g.nv.version, nvrtc_lib=g.nv.path, options=g.opts, point=op["point"], registers=g.regs,
               pending=not a.no_pending, seed=a.seed,
               allow_bf16_reduced_precision_reduction=getattr(mm, "allow_bf16_reduced_precision_reduction", None),
               rows=[])
    status = 0
    for T in a.tokens:
        try:
            out["rows"].append(one_count(g, T, weights, gen))
        except Fail:
            raise
        except Exception as e:  # a fault at one T: said, and the rest skipped (the context may be gone)
            out["rows"].append(dict(T=T, error="%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200]
                                                           if str(e) else "")))
            print("cublas-bits: T = %d: %s" % (T, out["rows"][-1]["error"]), file=sys.stderr)
            status = 1
            break
        torch.cuda.empty_cache()
    out["cublas"] = cublas_info()  # loaded by now, by the first GEMM
    if a.json and a.json != "-":
        try:
            with open(a.json, "w") as f:
                f.write(json.dumps(out) + "\n")
        except OSError as e:
            print_table(out)
            raise Fail(1, "--json '%s': %s" % (a.json, e))
    if a.json == "-":
        print(json.dumps(out))
    else:
        print_table(out)
    return status


def _blas_backend(torch):
    try:
        return str(torch.backends.cuda.preferred_blas_library())
    except Exception:  # an older or newer torch without it: said, not fatal
        return None


def cublas_info():
    """The cuBLAS library this process loaded (after a GEMM) and its version."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({ln.split()[-1] for ln in f if re.search(r"/libcublas\.so[.\d]*$", ln.strip())})
        if not paths:
            return None
        lib = ctypes.CDLL(paths[0])
        v = []
        for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            x = ctypes.c_int()
            if lib.cublasGetProperty(prop, ctypes.byref(x)) != 0:
                return paths[0]
            v.append(str(x.value))
        return "%s (%s)" % (".".join(v), paths[0])
    except (OSError, AttributeError):
        return None


def cell(c):
    return "equal" if c["differ"] == 0 else "%d differ" % c["differ"]


def cell3(d):
    n = [d[k]["differ"] for k in ("mixed", "mixed_bf16", "mixed_f16")]
    return "equal" if not any(n) else "%d/%d/%d" % tuple(n)


def print_table(out):
    print("%s (%s), torch %s (CUDA %s, %s), cuBLAS %s, cupy %s, nvrtc %s (%s)" % (
        out["gpu"], out["arch"], out["torch"], out["cuda"], out["blas_backend"], out["cublas"], out["cupy"],
        out["nvrtc"], out["nvrtc_lib"]))
    print("%s at %s; registers %s; pending %s; seed %d; allow_bf16_reduced_precision_reduction %s" % (
        VARIANT, point_text(out["point"]), ", ".join("%s %d" % kv for kv in sorted(out["registers"].items())),
        "given" if out["pending"] else "none", out["seed"], out["allow_bf16_reduced_precision_reduction"]))
    methods = sorted({r["up_f32_method"] for r in out["rows"] if "up_f32_method" in r})
    print("cuBLAS's f32 u by %s; images: mixed/bf16/f16 counts" % ", ".join(methods or ["?"]))
    hdr = ("T", "down lo", "up gated", "images", "bf16-u gated", "bf16-u images", "chain images", "torch.sigmoid",
           "1/(1+exp(-u))")
    fmt = "%-6s %-15s %-15s %-22s %-15s %-22s %-22s %-15s %s"
    print(fmt % hdr)
    for r in out["rows"]:
        if "error" in r:
            print("%-6d %s" % (r["T"], r["error"]))
            continue
        print(fmt % (r["T"], cell(r["lo"]), cell(r["gated"]), cell3(r["images"]), cell(r["gated_bf16u"]),
                     cell3(r["images_bf16u"]), cell3(r["images_chain"]), cell(r["torch_sigmoid"]),
                     cell(r["torch_exp_gate"])))
    if any("kernels" in r for r in out["rows"]):
        print("cuBLAS kernels (torch.profiler):")
        for r in out["rows"]:
            for k, label in (("down", "down, bf16 out"), ("up_f32", "up, f32 out"), ("up_bf16", "up, bf16 out")):
                if "kernels" in r:
                    print("  T=%-6d %-15s %s" % (r["T"], label, " + ".join(r["kernels"][k])))
    for r in out["rows"]:
        for k in ("lo", "gated"):
            if "error" not in r and r[k]["differ"]:
                c = r[k]
                f = c["first"][0]
                print("  T=%d %s: %d of %d differ, at most %d ulp (abs %s); first t %d col %d: ours %r, cuBLAS %r" % (
                    r["T"], k, c["differ"], c["of"], c["max_ulp"], c["max_abs"], f["t"], f["col"], f["ours"],
                    f["cublas"]))


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, and 1: 2 says "no torch, CuPy or GPU"
        print("cublas-bits: %s" % message, file=sys.stderr)
        sys.exit(1)


def parse_args(argv):
    p = Parser(prog="cublas-bits.py", description=__doc__.split("\n\n")[0],
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", default=TOKENS, help="comma-separated token counts (default %s)" % TOKENS)
    p.add_argument("--point", default="",
                   help="NAME=V,... parameters of %s (default: each one's first value)" % VARIANT)
    p.add_argument("--seed", type=int, default=1, help="the inputs' seed (default 1)")
    p.add_argument("--no-pending", action="store_true", help="no pending write (default: drawn, R' = R + P)")
    p.add_argument("--no-profile", action="store_true", help="skip torch.profiler's kernel names")
    p.add_argument("--no-reduced-reduction", action="store_true",
                   help="torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False")
    p.add_argument("--op-dir", default=OP_DIR, help="the op folder (default kernels-src/hc_read_prefill)")
    p.add_argument("--json", nargs="?", const="-", metavar="FILE",
                   help="one JSON object: instead of the table, or with FILE into FILE and the table printed")
    p.add_argument("--dry-run", metavar="DIR", help="write the sources, options and launches to DIR; no GPU")
    p.add_argument("--arch", default="sm_90", help="--dry-run's arch (default sm_90; on the GPU the card's)")
    a = p.parse_args(argv)
    try:
        a.tokens = [int(x) for x in a.tokens.split(",") if x.strip()]
    except ValueError:
        p.error("--tokens '%s': want numbers such as 16,2048" % a.tokens)
    if not a.tokens or min(a.tokens) < 1:
        p.error("--tokens: want positive counts")
    if not re.match(r"^sm_\d+$", a.arch):
        p.error("--arch '%s': want sm_XX, such as sm_90" % a.arch)
    return a


def main(argv):
    a = parse_args(argv)
    try:
        op = load_op(a.op_dir, a.point)
        return dry_run(a, op) if a.dry_run else run(a, op)
    except Fail as e:
        print("cublas-bits: %s" % e, file=sys.stderr)
        return e.status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
