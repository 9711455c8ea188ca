"""bench/run.py — olympus against its peers and floors, measured in one run.

`make bench` (or `PYTHONPATH=python /usr/bin/python3 bench/run.py`) builds the
small C helpers it needs (bench/floor.c, bench/ctypes_driver.c,
bench/native_host.c, bench/ffi_kernel.c into bench/build/), measures every row and prints one table:
the olympus figure, the peer's figure, their ratio (olympus time / peer time:
lower is better), the target for the row, whether it is met, and the spread
(interquartile range / median) of the repeats. It also writes
bench/results/latest.json. docs/performance.md says what every row measures.

A row whose olympus side cannot run yet prints "n/a" and the reason; the run
never stops on one row. Only ratios mean something: the machines are noisy, so
the two sides of a row are measured in alternation (A B A B ...) after a
warm-up, and each figure is the median of the repeats.

Options: --quick (3 repeats, short batches: a smoke test), --filter TEXT (rows
whose id or name contains TEXT), --repeats N, --target-ms MS (length of one
timed batch), --json PATH, --cb-driver auto|unroll|fori.
Environment: OLYMPUS_EXT_DIR / OLYMPUS_BUILD_DIR name the olympus build folder
(default: build/) whose libolympus.a the native-host driver links.
OLYMPUS_CPU_LEVEL (or OLYMPUS_NO_SIMD) below the CPU's best holds the peers to
that level too: NumPy (NPY_DISABLE_CPU_FEATURES, set before numpy is imported),
Numba (NUMBA_CPU_NAME) and the C floors (-march=haswell / x86-64); the header's
"peers at" line says what they run at. A variable set by the caller wins.
"""
import argparse
import ctypes
import datetime
import importlib.machinery
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# ---------------------------------------------------------------- peers at olympus's level
#
# With OLYMPUS_CPU_LEVEL (or OLYMPUS_NO_SIMD) forcing olympus's kernels below the
# CPU's best level, the peers are held to the same level, so every row reads
# as it would on a CPU whose best is that level: NumPy through
# NPY_DISABLE_CPU_FEATURES (read once, when numpy is imported: so this runs
# before the import below, and child processes inherit it), Numba through
# NUMBA_CPU_NAME, the C floors through a build per level (build_floor). A
# variable the caller set is left as it is.

# Per level: the NumPy dispatch targets it keeps, and the Numba / gcc CPU name.
_PEER_LEVELS = {
    "portable": (set(), "x86-64"),
    "avx2": ({"SSSE3", "SSE41", "POPCNT", "SSE42", "AVX", "F16C", "FMA3", "AVX2"}, "haswell"),
}


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _olympus_level_from_env(flags):
    """(level olympus runs at, the CPU's best), read as src/cpu/simd.c reads them."""
    best = ("avx512" if {"avx512f", "avx512dq", "avx512bw", "avx512vl"} <= flags
            else "avx2" if {"avx2", "fma"} <= flags else "portable")
    order = ["portable", "avx2", "avx512"]
    no = os.environ.get("OLYMPUS_NO_SIMD", "")
    want = os.environ.get("OLYMPUS_CPU_LEVEL", "")
    if no and no != "0":
        want = "portable"
    if want not in order:
        return best, best
    return order[min(order.index(want), order.index(best))], best


def _limit_peers():
    """Sets the peers' environment for a forced olympus level; returns the
    level the peers are meant to run at."""
    level, best = _olympus_level_from_env(_cpu_flags())
    if level == best or level not in _PEER_LEVELS:
        return level
    keep, cpu_name = _PEER_LEVELS[level]
    os.environ.setdefault("NUMBA_CPU_NAME", cpu_name)
    if "NPY_DISABLE_CPU_FEATURES" not in os.environ:
        # Only NumPy's dispatch targets that this CPU has may be named (others
        # are refused with a warning): ask a child numpy which those are.
        code = ("from numpy.core._multiarray_umath import __cpu_features__ as f, "
                "__cpu_dispatch__ as d\nprint(' '.join(x for x in d if f.get(x)))")
        try:
            have = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                  text=True, timeout=60).stdout.split()
        except (OSError, subprocess.SubprocessError):
            have = []
        drop = [x for x in have if x not in keep]
        if drop:
            os.environ["NPY_DISABLE_CPU_FEATURES"] = " ".join(drop)
    return level


PEER_LEVEL = _limit_peers()

import numpy as np  # noqa: E402 - after _limit_peers, which sets NumPy's dispatch

OUT = os.path.join(HERE, "build")  # ignored by git (build/)
RESULTS = os.path.join(HERE, "results")

K_CHAIN = 256         # callbacks chained in one jitted function (unrolled driver)
N_FORI = 1024         # callbacks per jitted call in the fori_loop driver
K_NATIVE = 256        # host calls chained in one program (native row)


class NotAvailable(Exception):
    """This side of a row cannot run (a feature or a dependency is missing)."""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- building helpers

def olympus_build_dir():
    d = os.environ.get("OLYMPUS_BUILD_DIR") or os.environ.get("OLYMPUS_EXT_DIR")
    return os.path.abspath(d) if d else os.path.join(ROOT, "build")


def _stale(out, deps):
    if not os.path.exists(out):
        return True
    t = os.path.getmtime(out)
    return any(os.path.exists(d) and os.path.getmtime(d) > t for d in deps)


def _cc(args, out, deps):
    """Compile with gcc when out is missing, older than deps, or was built by
    another command. Raises NotAvailable."""
    cmd = ["gcc"] + args + ["-o", out]
    stamp = out + ".cmd"
    try:
        with open(stamp) as f:
            same = f.read() == " ".join(cmd)
    except OSError:
        same = False
    if same and not _stale(out, deps):
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        raise NotAvailable(f"build of {os.path.basename(out)} failed: " + " | ".join(tail))
    with open(stamp, "w") as f:
        f.write(" ".join(cmd))
    return out


def floor_march():
    """gcc's -march for the C floors: the CPU's own, or the forced level's
    (the AVX2 build has no AVX-512 code, as on an AVX2-only CPU)."""
    level, best = _olympus_level_from_env(_cpu_flags())
    return "native" if level == best else _PEER_LEVELS[level][1]


def build_floor():
    """The CPython extension _olybench_floor (floor.c), imported from bench/build
    (bench/build/march-NAME/ when built for a forced level)."""
    src = os.path.join(HERE, "floor.c")
    march = floor_march()
    out = os.path.join(OUT if march == "native" else os.path.join(OUT, "march-" + march),
                       "_olybench_floor" + sysconfig.get_config_var("EXT_SUFFIX"))
    # -O3 -march=native -ffast-math: lets gcc vectorise the chain loop with
    # glibc's libmvec sinf/cosf, so "C loop" is a real floor for NumPy's SIMD math.
    # chain_sleef links SLEEF where its header is there (olympus's own build needs it).
    import glob
    has_sleef = any(glob.glob(d + "/sleef.h") for d in
                    ("/usr/include", "/usr/include/*-linux-gnu", "/usr/local/include"))
    sleef = ["-DOLY_BENCH_SLEEF", "-lsleef"] if has_sleef else []
    _cc(["-std=c11", "-O3", "-march=" + march, "-ffast-math", "-shared", "-fPIC", "-Wall",
         "-I" + sysconfig.get_paths()["include"], "-I" + np.get_include(), src, "-lm"] + sleef,
        out, [src])
    loader = importlib.machinery.ExtensionFileLoader("_olybench_floor", out)
    spec = importlib.util.spec_from_file_location("_olybench_floor", out, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build_ctypes_driver():
    src = os.path.join(HERE, "ctypes_driver.c")
    out = os.path.join(OUT, "libolybench_ctypes.so")
    _cc(["-std=c11", "-O2", "-shared", "-fPIC", "-Wall", src], out, [src])
    lib = ctypes.CDLL(out)
    return lib


def build_ffi_kernel():
    """bench/build/libolybench_ffi.so (ffi_kernel.c), built as an FFI kernel
    library is: the public header only, nothing linked."""
    src = os.path.join(HERE, "ffi_kernel.c")
    out = os.path.join(OUT, "libolybench_ffi.so")
    hdr = os.path.join(ROOT, "include", "olympus.h")
    _cc(["-std=c11", "-O2", "-shared", "-fPIC", "-Wall", "-I" + os.path.join(ROOT, "include"),
         src], out, [src, hdr])
    lib = ctypes.CDLL(out)
    lib.oly_bench_ffi_floor.restype = ctypes.c_float
    lib.oly_bench_ffi_floor.argtypes = [ctypes.c_float, ctypes.c_int64]
    lib.oly_bench_scalar_loop.restype = ctypes.c_float
    lib.oly_bench_scalar_loop.argtypes = [ctypes.c_float, ctypes.c_int64]
    return lib


def _mpi_link(lib):
    """OpenMPI's link flags when the library was built with MPI (src/rt/mpi.c
    then calls it), else none."""
    try:
        syms = subprocess.run(["nm", lib], capture_output=True, text=True).stdout
        if "U MPI_Init_thread" not in syms:
            return []
        return subprocess.run(["mpicc", "--showme:link"], capture_output=True,
                              text=True).stdout.split()
    except OSError:
        return []


def build_native_driver():
    src = os.path.join(HERE, "native_host.c")
    lib = os.path.join(olympus_build_dir(), "libolympus.a")
    if not os.path.exists(lib):
        raise NotAvailable(f"{os.path.relpath(lib, ROOT)} missing (run make first)")
    out = os.path.join(OUT, "native_host")
    # --whole-archive: every primitive row is linked even if the registry ever
    # refers to its rows weakly again (a plain static link would then drop them).
    _cc(["-std=c11", "-O2", "-D_GNU_SOURCE", "-Wall", "-I" + os.path.join(ROOT, "include"), src,
         "-Wl,--whole-archive", lib, "-Wl,--no-whole-archive", "-lsleef", "-lopenblas", "-lfftw3",
         "-lfftw3f", "-lm", "-lpthread"] + _mpi_link(lib),
        out,
        [src, lib, os.path.join(ROOT, "include", "olympus.h")])
    return out


# ---------------------------------------------------------------- lazily built pieces

_cache = {}


def lazy(name, make):
    """make() once; a NotAvailable (or any failure) is remembered and re-raised."""
    if name not in _cache:
        try:
            _cache[name] = (True, make())
        except NotAvailable as e:
            _cache[name] = (False, str(e))
        except Exception as e:  # noqa: BLE001 - reported in the row, never fatal
            _cache[name] = (False, f"{type(e).__name__}: {e}")
    ok, v = _cache[name]
    if not ok:
        raise NotAvailable(v)
    return v


def floor_mod():
    return lazy("floor", build_floor)


def ctypes_lib():
    return lazy("ctypes", build_ctypes_driver)


def _import_olympus():
    try:
        import olympus
        import olympus.numpy as jnp
    except Exception as e:  # noqa: BLE001
        raise NotAvailable(f"import olympus failed: {type(e).__name__}: {e}") from None
    return olympus, jnp


def oly():
    return lazy("olympus", _import_olympus)


def numba_mod():
    def imp():
        try:
            import numba
        except Exception as e:  # noqa: BLE001
            raise NotAvailable(f"numba unavailable: {e}") from None
        return numba
    return lazy("numba", imp)


# ---------------------------------------------------------------- host functions

def host_identity(x):
    """The Python callback of every callback row: it returns its argument, so a
    row measures the round trip (wrap, call, convert, copy back), not the work."""
    return x


def host_void(x):
    """The debug-callback host function: looks at nothing, returns nothing."""
    return None


# ---------------------------------------------------------------- cases

class Case:
    """One argument shape for the callback rows."""

    def __init__(self, name, value, x64):
        self.name = name
        self.value = value      # the first argument, a NumPy array
        self.x64 = x64          # olympus needs olympus_enable_x64 for it

    @property
    def scalar(self):
        return self.value.ndim == 0


SCALAR = Case("f32[]", np.array(0.25, np.float32), False)
VEC1K = Case("f64[1000]", np.full(1000, 0.25, np.float64), True)


class x64_mode:
    """Turns olympus_enable_x64 on for the rows that need 64-bit values."""

    def __init__(self, on):
        self.on = on
        self.prev = None

    def __enter__(self):
        if self.on:
            try:
                olympus, _ = oly()
            except NotAvailable:
                return  # the olympus side reports it
            self.prev = bool(olympus.config.olympus_enable_x64)
            olympus.config.update("olympus_enable_x64", True)

    def __exit__(self, *exc):
        if self.prev is not None:
            olympus, _ = oly()
            olympus.config.update("olympus_enable_x64", self.prev)


# A side of a row: prepare() -> Side (or raises NotAvailable). run(n) does n
# units of ops_per_unit operations each; result() gives a value to cross-check.

class Side:
    def __init__(self, run, ops_per_unit=1, result=None, note=""):
        self.run = run
        self.ops = ops_per_unit
        self.result = result
        self.note = note


# ---------------------------------------------------------------- callback peers

def floor_callback(case, want_result=True):
    def prepare():
        fl = floor_mod()
        host = host_identity if want_result else host_void
        x = case.value
        return Side(lambda n: fl.py_loop(host, x, n, want_result),
                    result=lambda: fl.py_loop(host, x, 3, want_result))
    return prepare


_numba_fns = {}


def _numba_loops():
    """The Numba objmode loops: n chained calls of the host function inside one
    @njit call, one objmode block per call (the peer's way of calling Python)."""
    if _numba_fns:
        return _numba_fns
    numba = numba_mod()
    njit, objmode = numba.njit, numba.objmode

    @njit(cache=False)
    def scalar_loop(x, n):
        acc = x
        for _ in range(n):
            with objmode(y="float32"):
                y = host_identity(acc)
            acc = y
        return acc

    @njit(cache=False)
    def vec_loop(x, n):
        acc = x
        for _ in range(n):
            with objmode(y="float64[::1]"):
                y = host_identity(acc)
            acc = y
        return acc

    @njit(cache=False)
    def void_loop(x, n):
        for _ in range(n):
            with objmode():
                host_void(x)
        return x

    _numba_fns.update(scalar=scalar_loop, vec=vec_loop, void=void_loop)
    return _numba_fns


def numba_callback(case, want_result=True):
    def prepare():
        fns = lazy("numba_loops", _numba_loops)
        if not want_result:
            fn = fns["void"]
        else:
            fn = fns["scalar"] if case.scalar else fns["vec"]
        x = case.value[()] if case.scalar else case.value  # np.float32 scalar or array
        fn(x, 2)  # compile
        return Side(lambda n: fn(x, n), result=lambda: fn(x, 3))
    return prepare


def ctypes_callback(case):
    """A ctypes callback called from a C loop. Scalars go by value (ctypes' cheapest
    form); arrays by pointer, wrapped with np.frombuffer and copied back."""
    def prepare():
        lib = ctypes_lib()
        if case.scalar:
            proto = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float)
            cb = proto(host_identity)
            drive = lib.oly_bench_drive_f32
            drive.restype = ctypes.c_float
            drive.argtypes = [proto, ctypes.c_float, ctypes.c_int64]
            x = float(case.value)
            return Side(lambda n: drive(cb, x, n), result=lambda: np.float32(drive(cb, x, 3)))
        dtype = case.value.dtype
        arr_t = ctypes.c_char * case.value.nbytes
        shape = case.value.shape

        def py_cb(pin, pout):
            a = np.frombuffer(arr_t.from_address(pin), dtype).reshape(shape)
            r = host_identity(a)
            np.frombuffer(arr_t.from_address(pout), dtype).reshape(shape)[...] = r
            return 0

        proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
        cb = proto(py_cb)
        drive = lib.oly_bench_drive_buf
        drive.restype = ctypes.c_void_p
        drive.argtypes = [proto, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        a = case.value.copy()
        b = np.empty_like(a)

        def run(n):
            if drive(cb, a.ctypes.data, b.ctypes.data, n) is None:
                raise RuntimeError("ctypes callback failed")

        def result():
            run(3)
            return a.copy()
        return Side(run, result=result)
    return prepare


# ---------------------------------------------------------------- olympus callback sides

def _oly_one_call(olympus, flavour):
    """v -> one callback of the flavour on v (returns the value to chain)."""
    if flavour == "pure_callback":
        def one(v):
            return olympus.pure_callback(host_identity, olympus.ShapeDtypeStruct(v.shape, v.dtype), v)
    elif flavour in ("io_callback", "io_callback(ordered)"):
        try:
            from olympus.experimental import io_callback
        except ImportError as e:
            raise NotAvailable(f"olympus.experimental.io_callback missing: {e}") from None
        ordered = flavour.endswith("(ordered)")

        def one(v):
            return io_callback(host_identity, olympus.ShapeDtypeStruct(v.shape, v.dtype), v,
                               ordered=ordered)
    elif flavour == "debug.callback":
        debug = getattr(olympus, "debug", None)
        if debug is None or not hasattr(debug, "callback"):
            raise NotAvailable("olympus.debug.callback missing")

        def one(v):
            debug.callback(host_void, v)
            return v
    else:
        raise ValueError(flavour)
    return one


def _driver_unroll(olympus, jnp, one, x):
    """K_CHAIN callbacks chained in one jitted function, called in a Python loop."""
    def chain(v):
        for _ in range(K_CHAIN):
            v = one(v)
        return v
    jf = olympus.jit(chain)
    xa = jnp.asarray(x)
    jf(xa)  # trace + compile

    def run(n):
        for _ in range(n):
            jf(xa)
    return Side(run, ops_per_unit=K_CHAIN, result=lambda: np.asarray(jf(xa)),
                note=f"{K_CHAIN} chained in 1 jit call")


def _driver_fori(olympus, jnp, one, x):
    """N_FORI callbacks from a lax.fori_loop in one jitted call (slots in once
    olympus.lax.fori_loop exists)."""
    lax = getattr(olympus, "lax", None)
    fori = getattr(lax, "fori_loop", None)
    if fori is None:
        raise NotAvailable("not in olympus.lax yet")
    jf = olympus.jit(lambda v: fori(0, N_FORI, lambda i, w: one(w), v))
    xa = jnp.asarray(x)
    jf(xa)

    def run(n):
        for _ in range(n):
            jf(xa)
    return Side(run, ops_per_unit=N_FORI, result=lambda: np.asarray(jf(xa)),
                note=f"fori_loop of {N_FORI} in 1 jit call")


def oly_callback(flavour, case, args):
    def prepare():
        olympus, jnp = oly()
        one = _oly_one_call(olympus, flavour)
        x = case.value
        if args.cb_driver in ("auto", "fori"):
            try:
                return _driver_fori(olympus, jnp, one, x)
            except NotAvailable as e:
                if args.cb_driver == "fori":
                    raise
                why = str(e)
            except Exception as e:  # noqa: BLE001
                if args.cb_driver == "fori":
                    raise
                why = f"failed: {type(e).__name__}: {e}".splitlines()[0]
            side = _driver_unroll(olympus, jnp, one, x)
            side.note += f" (fori_loop: {why})"
            return side
        return _driver_unroll(olympus, jnp, one, x)
    return prepare


# ---------------------------------------------------------------- host_callback taps

def _tap_void(arg, transforms):
    """A tap function that does nothing: the row measures the tap's path."""


def _tap_side(make, x, ops_per_unit=1, note=""):
    """Calls of the jitted make(hcb, olympus) on x; a batch ends when the receiver
    has called every tap of it (barrier_wait)."""
    olympus, _ = oly()
    from olympus.experimental import host_callback as hcb
    jf = olympus.jit(make(hcb, olympus))
    jf(x)
    hcb.barrier_wait()

    def run(n):
        for _ in range(n):
            jf(x)
        hcb.barrier_wait()
    return Side(run, ops_per_unit=ops_per_unit, note=note)


def oly_taps_fori():
    """N_FORI scalar id_taps from a fori_loop in one jit call."""
    _, jnp = oly()
    return _tap_side(lambda hcb, olympus: lambda v: olympus.lax.fori_loop(
        0, N_FORI, lambda i, w: hcb.id_tap(_tap_void, w), v), jnp.float32(0.25),
        ops_per_unit=N_FORI, note=f"fori_loop of {N_FORI} taps + barrier_wait")


def floor_void_scalar():
    fl = floor_mod()
    x = SCALAR.value
    return Side(lambda n: fl.py_loop(host_void, x, n, False))


MIB = np.ones(1 << 18, np.float32)  # 1 MiB


def oly_tap_1mib():
    """One 1 MiB tap per jit call."""
    _, jnp = oly()
    return _tap_side(lambda hcb, olympus: lambda v: hcb.id_tap(_tap_void, v), jnp.asarray(MIB),
                     note="GB/s = 1 MiB / time")


def memcpy_1mib():
    out = np.empty_like(MIB)
    return Side(lambda n: [np.copyto(out, MIB) for _ in range(n)])


# ---------------------------------------------------------------- buffer_callback

def _copy_in_place(ctx, out, x):
    """The callback of the in-place rows: copies its argument into its output
    through the buffer protocol (the cheapest way Python code writes 1000 f64
    in place; Buffer or ndarray alike)."""
    memoryview(out)[:] = memoryview(x)


def _add_one_in_place(ctx, out, x):
    np.add(np.asarray(x), 1.0, out=np.asarray(out))


def _add_one(x):
    return x + 1.0


def _buffer_callback_api():
    try:
        from olympus.experimental.buffer_callback import buffer_callback
    except ImportError as e:
        raise NotAvailable(f"olympus.experimental.buffer_callback missing: {e}") from None
    return buffer_callback


def oly_buffer_callback(host, case, args, per_jit=False):
    """buffer_callback(host) chained N_FORI times in a fori_loop (per_jit: one
    call per jitted call, for large arrays)."""
    def prepare():
        olympus, jnp = oly()
        f = _buffer_callback_api()(host, olympus.ShapeDtypeStruct(case.value.shape,
                                                                  case.value.dtype))
        if per_jit:
            return _one_per_jit(olympus, jnp, f, case.value)
        return _driver_fori(olympus, jnp, f, case.value)
    return prepare


def oly_pure_same_work(host, case, per_jit=False):
    """pure_callback(host) on the same chain as oly_buffer_callback."""
    def prepare():
        olympus, jnp = oly()

        def one(v):
            return olympus.pure_callback(host, olympus.ShapeDtypeStruct(v.shape, v.dtype), v)
        if per_jit:
            return _one_per_jit(olympus, jnp, one, case.value)
        return _driver_fori(olympus, jnp, one, case.value)
    return prepare


def _one_per_jit(olympus, jnp, one, x):
    jf = olympus.jit(one)
    xa = jnp.asarray(x)
    jf(xa)

    def run(n):
        for _ in range(n):
            jf(xa)
    return Side(run, result=lambda: np.asarray(jf(xa)), note="1 callback per jit call")


def floor_inplace_callback(host, case):
    def prepare():
        fl = floor_mod()
        x = case.value
        return Side(lambda n: fl.py_loop_inplace(host, x, n),
                    result=lambda: fl.py_loop_inplace(host, x, 3))
    return prepare


MIB_F32 = Case("f32[262144]", MIB, False)  # 1 MiB


# ---------------------------------------------------------------- callback statistics, progress bars

def oly_stats_side(on, args):
    """The scalar pure_callback row (fori_loop of N_FORI in one jit call) with
    callback statistics on or off: each batch sets the switch, so the two
    sides alternate in one process."""
    def prepare():
        olympus, _ = oly()
        from olympus import _core
        side = oly_callback("pure_callback", SCALAR, args)()
        inner = side.run

        def run(n):
            was = _core.callback_stats_enable(on)
            try:
                inner(n)
            finally:
                _core.callback_stats_enable(was)
                if on:
                    _core.callback_stats(reset=True)
        side.run = run
        side.note += "; statistics " + ("on" if on else "off")
        return side
    return prepare


N_PROGRESS = 10 ** 6


def _progress_body(kind):
    """The loop body of the progress rows: a scalar update (the cheapest body:
    the worst case for any per-iteration cost) or 64 floats of sin/cos."""
    _, jnp = oly()
    if kind == "scalar":
        return (lambda i, w: w * np.float32(0.999) + np.float32(0.001)), np.float32(0.25)
    return (lambda i, w: jnp.sin(w) * np.float32(0.5) + jnp.cos(w) * np.float32(0.25),
            np.full(64, 0.25, np.float32))


def oly_progress_loop(kind, form):
    """jit of a fori_loop of N_PROGRESS iterations; form: None (no bar),
    "keyword" (olympus.experimental.progress.fori_loop) or "decorator"
    (@progress_bar on the body of lax.fori_loop). The bar writes plain lines to
    os.devnull; a unit ends when every tap was delivered (barrier)."""
    def prepare():
        olympus, jnp = oly()
        from olympus import _core
        body, x0 = _progress_body(kind)
        sink = open(os.devnull, "w")
        if form is None:
            fn = lambda x: olympus.lax.fori_loop(0, N_PROGRESS, body, x)  # noqa: E731
        else:
            from olympus.experimental import progress, progress_bar
            bar = progress_bar(N_PROGRESS, desc="bench", file=sink, terminal=False)
            if form == "keyword":
                fn = lambda x: progress.fori_loop(0, N_PROGRESS, body, x,  # noqa: E731
                                                  progress=bar)
            else:
                fn = lambda x: olympus.lax.fori_loop(0, N_PROGRESS, bar(body), x)  # noqa: E731
        jf = olympus.jit(fn)
        x = jnp.asarray(x0)
        _block(jf(x))
        _core.outfeed_barrier()

        def run(n):
            for _ in range(n):
                _block(jf(x))
            _core.outfeed_barrier()
        return Side(run, ops_per_unit=N_PROGRESS, result=lambda: np.asarray(jf(x)),
                    note=f"fori_loop of {N_PROGRESS} iterations in 1 jit call")
    return prepare


# ---------------------------------------------------------------- native host function

def native_results(args):
    """Runs bench/build/native_host once; {case: {"oly_ns": [...], "peer_ns": [...], "error"}}."""
    def run():
        exe = build_native_driver()
        reps = str(args.repeats)
        p = subprocess.run([exe, str(K_NATIVE), reps, str(args.target_ms)], capture_output=True,
                           text=True, timeout=120)
        out = {}
        for line in p.stdout.splitlines():
            line = line.strip()
            if line.startswith("{"):
                d = json.loads(line)
                out[d["case"]] = d
        if not out:
            raise NotAvailable(f"native_host exited {p.returncode}: "
                               + (p.stderr.strip().splitlines() or ["no output"])[-1])
        return out
    return lazy("native", run)


# ---------------------------------------------------------------- processes (MPI)

def mpi_results(args):
    """Runs bench/build/mpi_allreduce under `mpirun -n 2` once; {case: {...}} as
    native_results. NotAvailable without OpenMPI or in a build without MPI."""
    def run():
        import shutil
        if not shutil.which("mpicc") or not shutil.which("mpirun"):
            raise NotAvailable("OpenMPI absent (mpicc / mpirun: libopenmpi-dev, openmpi-bin)")
        flags = subprocess.run(["mpicc", "--showme:compile"], capture_output=True, text=True)
        libs = subprocess.run(["mpicc", "--showme:link"], capture_output=True, text=True)
        src = os.path.join(HERE, "mpi_allreduce.c")
        lib = os.path.join(olympus_build_dir(), "libolympus.a")
        if not os.path.exists(lib):
            raise NotAvailable(f"{os.path.relpath(lib, ROOT)} missing (run make first)")
        out = os.path.join(OUT, "mpi_allreduce")
        _cc(["-std=c11", "-O2", "-D_GNU_SOURCE", "-Wall", "-I" + os.path.join(ROOT, "include")]
            + flags.stdout.split() + [src, lib, "-lsleef", "-lopenblas", "-lfftw3", "-lfftw3f",
                                      "-lm", "-lpthread"] + libs.stdout.split(),
            out, [src, lib, os.path.join(ROOT, "include", "olympus.h")])
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        p = subprocess.run(["mpirun", "-n", "2", "--oversubscribe", out, str(args.repeats),
                            str(args.target_ms)], capture_output=True, text=True, timeout=300,
                           env=env)
        res = {}
        for line in p.stdout.splitlines():
            if line.strip().startswith("{"):
                d = json.loads(line)
                if d["error"] and not d["oly_ns"] and not d["peer_ns"]:
                    raise NotAvailable(d["error"])
                res[d["case"]] = d
        if not res:
            raise NotAvailable(f"mpirun exited {p.returncode}: "
                               + (p.stderr.strip().splitlines() or ["no output"])[-1])
        return res
    return lazy("mpi", run)


# ---------------------------------------------------------------- pmap dispatch (4 devices)

PMAP_SHAPE = (4, 8)


def _pmap_body(jnp):
    return lambda v: jnp.sin(v) * 2.0 + 1.0


def oly_pmap_dispatch():
    olympus, jnp = oly()
    pm = olympus.pmap(_pmap_body(jnp), axis_name="i")
    x = jnp.asarray(np.arange(32, dtype=np.float32).reshape(PMAP_SHAPE) / 8)
    _block(pm(x))

    def run(n):
        for _ in range(n):
            _block(pm(x))
    return Side(run, result=lambda: np.asarray(pm(x)),
                note="pmap(sin(v)*2+1) over 4 CPU devices, f32[4,8] (one f32[8] per device)")


def oly_jit_per_device():
    olympus, jnp = oly()
    jf = olympus.jit(_pmap_body(jnp))
    x = np.arange(32, dtype=np.float32).reshape(PMAP_SHAPE) / 8
    devs = olympus.devices()
    xs = [olympus.device_put(x[k], devs[k]) for k in range(PMAP_SHAPE[0])]
    for v in xs:
        _block(jf(v))

    def run(n):
        for _ in range(n):
            for r in [jf(v) for v in xs]:
                _block(r)
    return Side(run, result=lambda: np.stack([np.asarray(jf(v)) for v in xs]))


def oly_jit_whole():
    olympus, jnp = oly()
    jf = olympus.jit(_pmap_body(jnp))
    x = jnp.asarray(np.arange(32, dtype=np.float32).reshape(PMAP_SHAPE) / 8)
    _block(jf(x))

    def run(n):
        for _ in range(n):
            _block(jf(x))
    return Side(run, result=lambda: np.asarray(jf(x)))


PMAP_PEERS = {"pmap-4jit": oly_jit_per_device, "pmap-1jit": oly_jit_whole}


def pmap_child(args):
    """The pmap rows, measured in this process (started with 4 CPU devices):
    one JSON line per case, as native_host prints."""
    for case, peer in PMAP_PEERS.items():
        res, sides = measure_pair(oly_pmap_dispatch, peer, args.repeats, args.target_ms / 1e3)
        d = {"case": case, "error": ""}
        for k in ("oly", "peer"):
            v = res[k]
            d[f"{k}_ns"] = [t * 1e9 for t in v] if isinstance(v, list) else []
            if not isinstance(v, list):
                d["error"] = d["error"] or v
        d["note"] = cross_check(sides, 1e-6)
        print(json.dumps(d), flush=True)
    return 0


def pmap_results(args):
    """Runs this script again with OLYMPUS_NUM_CPU_DEVICES=4 (the device count
    is fixed at first use); {case: {...}} as native_results."""
    def run():
        env = dict(os.environ, OLYMPUS_NUM_CPU_DEVICES="4")
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--pmap-child",
                            "--repeats", str(args.repeats), "--target-ms", str(args.target_ms)],
                           capture_output=True, text=True, timeout=600, env=env)
        out = {}
        for line in p.stdout.splitlines():
            if line.strip().startswith("{"):
                d = json.loads(line)
                out[d["case"]] = d
        if not out:
            raise NotAvailable(f"the pmap child exited {p.returncode}: "
                               + (p.stderr.strip().splitlines() or ["no output"])[-1])
        return out
    return lazy("pmap", run)


# ---------------------------------------------------------------- ffi_call of a C kernel

def _ffi_target():
    """The bench kernel registered as the FFI target "bench.affine"."""
    def make():
        lib = lazy("ffi_kernel", build_ffi_kernel)
        olympus, _ = oly()
        ffi = getattr(olympus, "ffi", None)
        if ffi is None or not hasattr(ffi, "ffi_call"):
            raise NotAvailable("olympus.ffi missing")
        ffi.register_ffi_target("bench.affine", lib.oly_bench_ffi_affine)
        return ffi.ffi_call("bench.affine", olympus.ShapeDtypeStruct((), np.float32))
    return lazy("ffi_target", make)


def oly_ffi(driver):
    """ffi_call of the scalar kernel: N_FORI chained calls in a jitted
    fori_loop, or K_CHAIN chained calls unrolled in one jitted function (how
    the native C-API row chains its calls)."""
    def prepare():
        olympus, jnp = oly()
        call = _ffi_target()
        x = np.float32(0.25)
        if driver == "fori":
            return _driver_fori(olympus, jnp, call, x)
        return _driver_unroll(olympus, jnp, call, x)
    return prepare


def oly_fori_jnp():
    """The same fori_loop with the work as olympus ops (w * 0.5 + 1) instead of
    a kernel call: what the loop itself costs per iteration."""
    def prepare():
        olympus, jnp = oly()
        return _driver_fori(olympus, jnp, lambda w: w * np.float32(0.5) + np.float32(1),
                            np.float32(0.25))
    return prepare


def ffi_floor(chain):
    """The same C function through a volatile function pointer, chain calls
    per unit, in one C loop (one ctypes call per unit)."""
    def prepare():
        lib = lazy("ffi_kernel", build_ffi_kernel)
        fl = lib.oly_bench_ffi_floor

        def run(n):
            fl(0.25, n * chain)
        return Side(run, ops_per_unit=chain, result=lambda: np.float32(fl(0.25, chain)))
    return prepare


# ---------------------------------------------------------------- dispatch and kernels

def oly_jit_dispatch():
    olympus, jnp = oly()
    jf = olympus.jit(lambda x: x + 1)
    x = jnp.asarray(np.ones(1, np.float32))
    jf(x)

    def run(n):
        for _ in range(n):
            jf(x)
    return Side(run, result=lambda: np.asarray(jf(x)), note="jit(lambda x: x + 1), f32[1]")


def numba_dispatch():
    numba = numba_mod()
    fn = numba.njit(lambda x: x + 1)
    a = np.ones(1, np.float32)
    fn(a)

    def run(n):
        for _ in range(n):
            fn(a)
    return Side(run, result=lambda: fn(a))


def numpy_ufunc_1():
    a = np.ones(1, np.float32)
    add = np.add

    def run(n):
        for _ in range(n):
            add(a, 1)
    return Side(run, result=lambda: add(a, 1))


def oly_eager_sin():
    olympus, jnp = oly()
    x = jnp.asarray(np.full(1, 0.5, np.float32))
    sin = jnp.sin
    sin(x)

    def run(n):
        for _ in range(n):
            sin(x)
    return Side(run, result=lambda: np.asarray(sin(x)))


def oly_eager_add():
    """jnp.add on two f32[1] Arrays: the eager binary-op path (dtype check in C)."""
    olympus, jnp = oly()
    a = jnp.asarray(np.full(1, 0.5, np.float32))
    b = jnp.asarray(np.full(1, 0.25, np.float32))
    add = jnp.add
    add(a, b)

    def run(n):
        for _ in range(n):
            add(a, b)
    return Side(run, result=lambda: np.asarray(add(a, b)))


def numpy_add_1():
    a = np.full(1, 0.5, np.float32)
    b = np.full(1, 0.25, np.float32)
    add = np.add

    def run(n):
        for _ in range(n):
            add(a, b)
    return Side(run, result=lambda: add(a, b))


def numpy_sin_1():
    a = np.full(1, 0.5, np.float32)
    sin = np.sin

    def run(n):
        for _ in range(n):
            sin(a)
    return Side(run, result=lambda: sin(a))


_rng = np.random.default_rng(0)
X1M = _rng.standard_normal(1 << 20).astype(np.float32)
Y1M = _rng.standard_normal(1 << 20).astype(np.float32)


def _block(v):
    b = getattr(v, "block_until_ready", None)
    return b() if b is not None else v


def oly_jit_side(fn, *arrays, note=""):
    def prepare():
        olympus, jnp = oly()
        jf = olympus.jit(fn(jnp))
        xs = [jnp.asarray(a) for a in arrays]
        _block(jf(*xs))

        def run(n):
            for _ in range(n):
                _block(jf(*xs))
        return Side(run, result=lambda: np.asarray(jf(*xs)), note=note)
    return prepare


def numpy_side(fn, *arrays):
    def prepare():
        def run(n):
            for _ in range(n):
                fn(*arrays)
        return Side(run, result=lambda: fn(*arrays))
    return prepare


def oly_random_normal(n):
    """olympus.random.normal f32[n] from one key (jitted; the key fixed)."""
    def prepare():
        olympus, _ = oly()
        random = olympus.random
        key = random.PRNGKey(0)
        f = olympus.jit(lambda k: random.normal(k, (n,)))
        _block(f(key))

        def run(m):
            for _ in range(m):
                _block(f(key))
        return Side(run, note="threefry2x32 + erf_inv, JAX's bits")
    return prepare


def numpy_standard_normal(n):
    def prepare():
        g = np.random.default_rng(0)

        def run(m):
            for _ in range(m):
                g.standard_normal(n, dtype=np.float32)
        return Side(run)
    return prepare


def _floor_side(call, out, note=""):
    """A bench/floor.c loop as a side: call(out) writes its result into out."""
    def run(n):
        for _ in range(n):
            call(out)

    def result():
        call(out)
        return out.copy()
    return Side(run, result=result, note=note)


def c_chain_floor():
    fl = floor_mod()
    return _floor_side(lambda o: fl.chain(X1M, Y1M, o), np.empty_like(X1M))


def c_chain_sleef_floor():
    """chain in AVX-512 (AVX2 at a forced avx2 level) registers on SLEEF's u10
    sinf/cosf: the floor at olympus's accuracy (one thread)."""
    fl = floor_mod()
    out = np.empty_like(X1M)
    if fl.chain_sleef(X1M, Y1M, out) is not None:
        raise NotAvailable("floor.c built without AVX2/AVX-512 + SLEEF")
    out.fill(np.nan)
    fl.chain_sleef(X1M, Y1M, out)
    if np.isnan(out).any():
        raise NotAvailable("floor.c built without AVX2/AVX-512 + SLEEF")
    return _floor_side(lambda o: fl.chain_sleef(X1M, Y1M, o), out, note="SLEEF u10, 1 thread")


# A subprocess running the 10M chain with its own OLYMPUS_NUM_THREADS (the pool
# size is read once per process): "n" on stdin runs n calls, then "done".
_CHAIN_WORKER = r'''
import sys
import numpy as np
import olympus, olympus.numpy as jnp
g = np.random.default_rng(1)
x = g.standard_normal(10 ** 7).astype(np.float32)
y = g.standard_normal(10 ** 7).astype(np.float32)
f = olympus.jit(lambda a, b: jnp.sin(a) ** 2 + jnp.cos(a) * b)
xs = (jnp.asarray(x), jnp.asarray(y))
f(*xs).block_until_ready()
print("ready", flush=True)
for line in sys.stdin:
    for _ in range(int(line)):
        f(*xs).block_until_ready()
    print("done", flush=True)
'''


def chain_10m_threads(threads):
    """The 10M chain under OLYMPUS_NUM_THREADS=threads, in a subprocess (a pipe
    round trip per batch, ~0.1 ms against ~20+ ms a call)."""
    def prepare():
        import atexit
        env = dict(os.environ, OLYMPUS_NUM_THREADS=str(threads))
        env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "python"),
                                             env.get("PYTHONPATH", "")])
        p = subprocess.Popen([sys.executable, "-c", _CHAIN_WORKER], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
        atexit.register(p.kill)
        if p.stdout.readline().strip() != "ready":
            raise NotAvailable(f"the OLYMPUS_NUM_THREADS={threads} worker failed")

        def run(n):
            p.stdin.write(f"{n}\n")
            p.stdin.flush()
            if p.stdout.readline().strip() != "done":
                raise RuntimeError("the chain worker died")
        return Side(run, note=f"OLYMPUS_NUM_THREADS={threads}")
    return prepare


def _chain_np(x, y):
    return np.sin(x) ** 2 + np.cos(x) * y


X2K = _rng.standard_normal(2000).astype(np.float32)
Y2K = _rng.standard_normal(2000).astype(np.float32)


def _outer_add(x, y):
    return x[:, None] + y[None, :]


X10M = _rng.standard_normal(10 ** 7).astype(np.float32)
Y10M = _rng.standard_normal(10 ** 7).astype(np.float32)
A32, B32 = 0.999, 0.001  # chain32: x*a + b sixteen times


def _affine(x, y):
    return (x * 2 + 1) * y - x


def _chain32(x):
    a, b = np.float32(A32), np.float32(B32)
    for _ in range(16):
        x = x * a + b
    return x


def _chain32_oly(jnp):
    def f(x):
        for _ in range(16):
            x = x * A32 + B32
        return x
    return f


def _sincos_grad_np(x):
    """The hand-written gradient of sum(sin(x)*cos(x)): cos(x)**2 - sin(x)**2."""
    c, s = np.cos(x), np.sin(x)
    return c * c - s * s


def _sincos_grad_oly(jnp):
    import olympus
    return olympus.grad(lambda x: jnp.sum(jnp.sin(x) * jnp.cos(x)))


def c_affine_floor():
    fl = floor_mod()
    return _floor_side(lambda o: fl.affine(X10M, Y10M, o), np.empty_like(X10M))


def c_chain32_floor():
    fl = floor_mod()
    return _floor_side(lambda o: fl.chain32(X1M, o, A32, B32), np.empty_like(X1M))


def numba_chain32():
    """chain32 under Numba @njit (no fastmath: each mul and add rounded, as
    olympus rounds them)."""
    numba = numba_mod()

    @numba.njit(cache=False)
    def loop(x, out, a, b):
        for i in range(x.shape[0]):
            v = x[i]
            for _ in range(16):
                v = v * a + b
            out[i] = v
    out = np.empty_like(X1M)
    a, b = np.float32(A32), np.float32(B32)
    loop(X1M, out, a, b)

    def run(n):
        for _ in range(n):
            loop(X1M, out, a, b)

    def result():
        loop(X1M, out, a, b)
        return out.copy()
    return Side(run, result=result)


def _xy10m():
    """The chain's operands at 10M elements (made on first use: 80 MB)."""
    def make():
        g = np.random.default_rng(1)
        return (g.standard_normal(10 ** 7).astype(np.float32),
                g.standard_normal(10 ** 7).astype(np.float32))
    return lazy("xy10m", make)


def chain_10m(side):
    """The chain row at 10M f32: olympus (side "oly") or NumPy. Big buffers:
    what the buffer pool and the thread pool are for."""
    def prepare():
        x, y = _xy10m()
        if side == "oly":
            return oly_jit_side(lambda jnp: (lambda a, b: jnp.sin(a) ** 2 + jnp.cos(a) * b),
                                x, y)()
        return numpy_side(_chain_np, x, y)()
    return prepare


N_SCALAR_LOOP = 100_000


def oly_fori_scalar():
    """x = x * 0.999 + 1 for N_SCALAR_LOOP iterations of a lax.fori_loop in one
    jitted call (f32): what one iteration of a scalar loop costs."""
    def prepare():
        olympus, jnp = oly()
        f = olympus.jit(lambda x: olympus.lax.fori_loop(
            0, N_SCALAR_LOOP, lambda i, v: v * np.float32(0.999) + np.float32(1), x))
        x = jnp.asarray(np.float32(0.5))
        _block(f(x))

        def run(n):
            for _ in range(n):
                _block(f(x))
        return Side(run, ops_per_unit=N_SCALAR_LOOP, result=lambda: np.asarray(f(x)),
                    note=f"fori_loop of {N_SCALAR_LOOP} in 1 jit call")
    return prepare


def _py_scalar_loop(x, n):
    for _ in range(n):
        x = x * 0.999 + 1.0
    return x


def python_fori_scalar():
    """The same loop in CPython (floats: the interpreter's cheapest form)."""
    def prepare():
        m = 10_000
        return Side(lambda n: _py_scalar_loop(0.5, n * m), ops_per_unit=m,
                    result=lambda: np.float32(_py_scalar_loop(0.5, N_SCALAR_LOOP)))
    return prepare


def c_fori_scalar():
    """The same loop compiled from C (-O2, no fast-math): the machine code a
    Numba @njit loop runs, measurable where Numba is not installed."""
    def prepare():
        lib = lazy("ffi_kernel", build_ffi_kernel)
        f = lib.oly_bench_scalar_loop
        return Side(lambda n: f(0.5, n * N_SCALAR_LOOP), ops_per_unit=N_SCALAR_LOOP,
                    result=lambda: np.float32(f(0.5, N_SCALAR_LOOP)))
    return prepare


def numba_fori_scalar():
    """The same loop under Numba @njit on float32."""
    def prepare():
        numba = numba_mod()

        @numba.njit(cache=False)
        def loop(x, n):
            for _ in range(n):
                x = x * np.float32(0.999) + np.float32(1)
            return x
        x = np.float32(0.5)
        loop(x, 10)
        return Side(lambda n: loop(x, n * N_SCALAR_LOOP), ops_per_unit=N_SCALAR_LOOP,
                    result=lambda: loop(x, N_SCALAR_LOOP))
    return prepare


IDX = _rng.integers(0, 1 << 20, size=1 << 18).astype(np.int32)
ROWS_M = _rng.standard_normal((4096, 256)).astype(np.float32)
ROW_IDX = _rng.integers(0, 4096, size=2048).astype(np.int32)


def _np_add_at(x, i):
    out = x.copy()
    np.add.at(out, i, 1.0)
    return out


C1M = (X1M + 1j * Y1M).astype(np.complex64)

MATS = {n: (_rng.standard_normal((n, n)).astype(np.float32),
            _rng.standard_normal((n, n)).astype(np.float32)) for n in (4, 16, 32, 64, 256, 1024)}
VEC256 = _rng.standard_normal(256).astype(np.float32)
X1K2 = _rng.standard_normal((1000, 1000)).astype(np.float32)
# products of 1000 factors stay finite near 1
P1K2 = (1 + 0.001 * _rng.standard_normal((1000, 1000))).astype(np.float32)

# linalg at 512 f32: a well-conditioned general matrix (randn / sqrt(n) + 2 I),
# a symmetric positive definite one, a right-hand side
_LA = _rng.standard_normal((512, 512)).astype(np.float32) / np.float32(512 ** 0.5)
LA_GEN = (_LA + 2 * np.eye(512, dtype=np.float32)).astype(np.float32)
LA_SPD = (_LA @ _LA.T + np.eye(512, dtype=np.float32)).astype(np.float32)
LA_RHS = _rng.standard_normal((512,)).astype(np.float32)


def _scipy_linalg():
    import scipy.linalg
    return scipy.linalg


# ---------------------------------------------------------------- rows

class Row:
    """One line of the table. target: the most olympus time / peer time may be
    (None: no target, the row is for information)."""

    def __init__(self, rid, group, name, oly, peer_name, peer, target=None, target_text="",
                 x64=False, native=None, rtol=None):
        self.id, self.group, self.name = rid, group, name
        self.oly, self.peer_name, self.peer = oly, peer_name, peer
        self.target, self.target_text = target, target_text
        self.x64 = x64
        self.native = native  # case name in native_host's output
        self.rtol = rtol      # cross-check tolerance (None: no check)


def make_rows(args):
    rows = []
    floor_t = (1.3, "<=1.3x floor")
    objmode_t = (0.2, ">=5x faster")
    # 1-2: Python callbacks
    flavours = [("1", "pure_callback", "pure"), ("2", "io_callback", "io"),
                ("2", "io_callback(ordered)", "io-ord"), ("2", "debug.callback", "debug")]
    for grp, fl, tag in flavours:
        want = fl != "debug.callback"  # debug callbacks return nothing
        for case in (SCALAR, VEC1K):
            scalar = case.scalar
            rows.append(Row(f"{tag}-{case.name}-floor", grp, f"{fl} {case.name}",
                            oly_callback(fl, case, args), "C->Python floor",
                            floor_callback(case, want), *floor_t, x64=case.x64,
                            rtol=1e-6 if want else None))
            if scalar or grp == "1":
                rows.append(Row(f"{tag}-{case.name}-objmode", grp, f"{fl} {case.name}",
                                oly_callback(fl, case, args), "Numba objmode",
                                numba_callback(case, want),
                                *(objmode_t if scalar else (None, "")), x64=case.x64,
                                rtol=1e-6 if want else None))
            if grp == "1":
                rows.append(Row(f"{tag}-{case.name}-ctypes", grp, f"{fl} {case.name}",
                                oly_callback(fl, case, args), "ctypes callback from C",
                                ctypes_callback(case), x64=case.x64, rtol=1e-6))
    # 3: native host function (measured by the C driver)
    for cname in ("f32[]", "f32[1000]"):
        rows.append(Row(f"native-{cname}", "3", f"C host fn {cname}", None,
                        "C call via fn pointer", None, 3.0, "<=3x fn ptr", native=cname))
    # 9: processes: olympus's MPI transport against raw MPI (bench/mpi_allreduce.c)
    rows.append(Row("psum-1MiB-mpi", "9", "allreduce f32[262144] (1 MiB), 2 processes", None,
                    "raw MPI_Allreduce", None, 1.2, "<=1.2x MPI", native="mpi-allreduce-1MiB"))
    rows.append(Row("psum-1MiB-pmap-mpi", "9", "pmap psum f32[262144] (1 MiB), 2 processes x 1 device",
                    None, "raw MPI_Allreduce", None, 1.2, "<=1.2x MPI",
                    native="mpi-pmap-psum-1MiB"))
    # 3: ffi_call of the same C work, from Python-defined programs
    rows.append(Row("ffi-f32[]-fori", "3", "ffi_call f32[] (fori_loop)", oly_ffi("fori"),
                    "C call via fn pointer", ffi_floor(N_FORI), 3.0, "<=3x fn ptr", rtol=1e-6))
    rows.append(Row("ffi-f32[]-chain", "3", "ffi_call f32[] (256 chained)", oly_ffi("unroll"),
                    "C call via fn pointer", ffi_floor(K_CHAIN), 3.0, "<=3x fn ptr", rtol=1e-6))
    rows.append(Row("ffi-loop-jnp", "3", "no call: w*0.5+1 (fori_loop)", oly_fori_jnp(),
                    "C call via fn pointer", ffi_floor(N_FORI), rtol=1e-6))
    rows.append(Row("fori-scalar-numba", "3", "fori_loop x*0.999+1 f32[], per iteration",
                    oly_fori_scalar(), "Numba @njit loop", numba_fori_scalar(), 3.0,
                    "<=3x Numba", rtol=1e-4))
    rows.append(Row("fori-scalar-c", "3", "fori_loop x*0.999+1 f32[], per iteration",
                    oly_fori_scalar(), "C loop (Numba's code)", c_fori_scalar(), 3.0,
                    "<=3x C loop", rtol=1e-4))
    rows.append(Row("fori-scalar-python", "3", "fori_loop x*0.999+1 f32[], per iteration",
                    oly_fori_scalar(), "CPython loop", python_fori_scalar(), rtol=1e-3))
    # 4: dispatch
    rows.append(Row("dispatch-numba", "4", "cached jit dispatch", oly_jit_dispatch,
                    "Numba @njit call", numba_dispatch, 2.0, "<=2x Numba", rtol=1e-6))
    rows.append(Row("dispatch-ufunc", "4", "cached jit dispatch", oly_jit_dispatch,
                    "NumPy ufunc f32[1]", numpy_ufunc_1, rtol=1e-6))
    rows.append(Row("eager-add", "4", "eager jnp.add f32[1]", oly_eager_add, "np.add f32[1]",
                    numpy_add_1, 1.0, "<=NumPy", rtol=1e-6))
    rows.append(Row("eager-sin", "4", "eager jnp.sin f32[1]", oly_eager_sin, "np.sin f32[1]",
                    numpy_sin_1, 1.0, "<=NumPy", rtol=1e-6))
    # pmap's launch (issue 15): one group run of 4 members against the same
    # body as 4 jit calls, one per device, and as 1 jit call on the whole array
    rows.append(Row("pmap-4dev-4jit", "4", "pmap sin(v)*2+1 f32[4,8], 4 devices", None,
                    "4 sequential jit calls f32[8]", None, native="pmap-4jit"))
    rows.append(Row("pmap-4dev-1jit", "4", "pmap sin(v)*2+1 f32[4,8], 4 devices", None,
                    "1 jit call f32[4,8]", None, native="pmap-1jit"))
    # 5: kernels
    chain = oly_jit_side(lambda jnp: (lambda x, y: jnp.sin(x) ** 2 + jnp.cos(x) * y), X1M, Y1M)
    rows.append(Row("chain-numpy", "5", "sin(x)**2+cos(x)*y f32[1M]", chain, "NumPy",
                    numpy_side(_chain_np, X1M, Y1M), 0.6, "<=0.6x NumPy", rtol=1e-4))
    rows.append(Row("chain-c", "5", "sin(x)**2+cos(x)*y f32[1M]", chain, "C loop (floor)",
                    c_chain_floor, 1.5, "<=1.5x floor", rtol=1e-4))
    rows.append(Row("chain-c-sleef", "5", "sin(x)**2+cos(x)*y f32[1M]", chain,
                    "C SLEEF u10 (floor)", c_chain_sleef_floor, 1.5, "<=1.5x floor", rtol=1e-4))
    rows.append(Row("chain-threads-10M", "5", "sin(x)**2+cos(x)*y f32[10M]",
                    chain_10m_threads(2), "olympus, 1 thread", chain_10m_threads(1), 1 / 1.6,
                    ">=1.6x on 2 threads"))
    # fusion (src/exec/fuse.c): elementwise chains in one pass over memory
    affine = oly_jit_side(lambda jnp: _affine, X10M, Y10M)
    rows.append(Row("affine-floor", "5", "(x*2+1)*y-x f32[10M]", affine,
                    "C loop (bandwidth floor)", c_affine_floor, 1.5, "<=1.5x floor", rtol=1e-5))
    rows.append(Row("affine-numpy", "5", "(x*2+1)*y-x f32[10M]", affine, "NumPy",
                    numpy_side(_affine, X10M, Y10M), rtol=1e-5))
    # a broadcast operand read in place (stride 0), never materialised
    rows.append(Row("broadcast-add", "5", "x[:,None]+y[None,:] f32[2000]x2",
                    oly_jit_side(lambda jnp: _outer_add, X2K, Y2K), "NumPy",
                    numpy_side(_outer_add, X2K, Y2K), 1.0, "<=NumPy", rtol=0))
    chain32 = oly_jit_side(_chain32_oly, X1M)
    rows.append(Row("chain32-numpy", "5", "32 chained mul/add f32[1M]", chain32, "NumPy",
                    numpy_side(_chain32, X1M), rtol=1e-5))
    rows.append(Row("chain32-c", "5", "32 chained mul/add f32[1M]", chain32, "C loop (floor)",
                    c_chain32_floor, 2.0, "<=2x C (no Numba)", rtol=1e-5))
    rows.append(Row("chain32-numba", "5", "32 chained mul/add f32[1M]", chain32, "Numba @njit",
                    numba_chain32, 2.0, "<=2x Numba", rtol=1e-5))
    rows.append(Row("grad-sincos-numpy", "5", "grad(sum(sin(x)*cos(x))) f32[1M]",
                    oly_jit_side(_sincos_grad_oly, X1M), "NumPy by hand",
                    numpy_side(_sincos_grad_np, X1M), 1.2, "<=1.2x NumPy", rtol=1e-5))
    rows.append(Row("chain-numpy-10M", "5", "sin(x)**2+cos(x)*y f32[10M]", chain_10m("oly"),
                    "NumPy", chain_10m("numpy"), 1.0, ">=NumPy speed", rtol=1e-4))
    rows.append(Row("sum-numpy", "5", "sum f32[1M]", oly_jit_side(lambda jnp: jnp.sum, X1M),
                    "NumPy", numpy_side(np.sum, X1M), rtol=1e-3))
    # reductions over axis 0 (rows accumulated into the output vector)
    for op, arr in (("sum", X1K2), ("max", X1K2), ("min", X1K2), ("prod", P1K2)):
        target = (1.0, "<=NumPy") if op in ("sum", "max") else (None, "")
        rows.append(Row(f"{op}-axis0-1000", "5", f"{op}(axis=0) f32[1000,1000]",
                        oly_jit_side(lambda jnp, op=op: (lambda x: getattr(jnp, op)(x, axis=0)),
                                     arr), "NumPy",
                        numpy_side(lambda x, op=op: getattr(np, op)(x, axis=0), arr), *target,
                        rtol=1e-4))
    # gather / scatter / sort: indexing against NumPy's fancy indexing
    rows.append(Row("gather-elems", "5", "x[idx] f32[1M], 256K indices",
                    oly_jit_side(lambda jnp: (lambda x, i: x[i]), X1M, IDX), "NumPy",
                    numpy_side(lambda x, i: x[i], X1M, IDX), 1.0, "<=NumPy", rtol=0))
    rows.append(Row("gather-rows", "5", "x[idx] rows f32[4096,256], 2048 rows",
                    oly_jit_side(lambda jnp: (lambda x, i: x[i]), ROWS_M, ROW_IDX), "NumPy",
                    numpy_side(lambda x, i: x[i], ROWS_M, ROW_IDX), 1.0, "<=NumPy", rtol=0))
    rows.append(Row("scatter-add", "5", "x.at[idx].add(1) f32[1M], 256K indices",
                    oly_jit_side(lambda jnp: (lambda x, i: x.at[i].add(1.0)), X1M, IDX),
                    "np.add.at", numpy_side(_np_add_at, X1M, IDX), 1.0, "<=NumPy", rtol=1e-6))
    rows.append(Row("sort-1M", "5", "sort f32[1M]", oly_jit_side(lambda jnp: jnp.sort, X1M),
                    "NumPy", numpy_side(np.sort, X1M), rtol=0))
    # fft: FFTW3 (single precision, one thread) against numpy.fft (pocketfft,
    # which computes in double)
    rows.append(Row("fft-1M-c64", "5", "fft c64[1M]", oly_jit_side(lambda jnp: jnp.fft.fft, C1M),
                    "NumPy", numpy_side(np.fft.fft, C1M), 1.1, "<=1.1x NumPy", rtol=1e-3))
    rows.append(Row("rfft-1M-f32", "5", "rfft f32[1M]",
                    oly_jit_side(lambda jnp: jnp.fft.rfft, X1M), "NumPy",
                    numpy_side(np.fft.rfft, X1M), 1.1, "<=1.1x NumPy", rtol=1e-3))
    rows.append(Row("random-normal-10M", "5", "random.normal f32[10M]",
                    oly_random_normal(10**7), "NumPy Generator.standard_normal",
                    numpy_standard_normal(10**7), 1.1, "<=1.1x NumPy"))
    for n in (4, 16, 32, 64):
        a, b = MATS[n]
        target = (1.0, "<=NumPy") if n == 32 else (None, "")
        rows.append(Row(f"matmul-{n}", "5", f"matmul f32[{n},{n}]",
                        oly_jit_side(lambda jnp: jnp.matmul, a, b), "NumPy",
                        numpy_side(np.matmul, a, b), *target, rtol=1e-4))
    rows.append(Row("matvec-256", "5", "matvec f32[256,256] @ f32[256]",
                    oly_jit_side(lambda jnp: jnp.matmul, MATS[256][0], VEC256), "NumPy",
                    numpy_side(np.matmul, MATS[256][0], VEC256), 1.0, "<=NumPy", rtol=1e-4))
    for n in (256, 1024):
        a, b = MATS[n]
        rows.append(Row(f"matmul-{n}", "5", f"matmul f32[{n},{n}]",
                        oly_jit_side(lambda jnp: jnp.matmul, a, b), "NumPy",
                        numpy_side(np.matmul, a, b), 1 / 0.9, ">=0.9x NumPy", rtol=1e-3))
    # linalg (LAPACK through OpenBLAS on both sides): solve, cholesky, svd
    la_t = (1.1, "<=1.1x")
    sp = _scipy_linalg()
    la_rows = [
        ("solve", "solve f32[512,512] x = b", lambda jnp: jnp.linalg.solve, (LA_GEN, LA_RHS),
         np.linalg.solve, lambda a, b: sp.solve(a, b, check_finite=False), 1e-4),
        ("cholesky", "cholesky f32[512,512]", lambda jnp: jnp.linalg.cholesky, (LA_SPD,),
         np.linalg.cholesky, lambda a: sp.cholesky(a, lower=True, check_finite=False), 1e-4),
        ("svd", "svd f32[512,512] (u, s, vh; s compared)",
         lambda jnp: (lambda a: jnp.linalg.svd(a)[1]), (LA_GEN,),
         lambda a: np.linalg.svd(a)[1], lambda a: sp.svd(a, check_finite=False)[1], 1e-3),
    ]
    for rid, name, ofn, arrs, npf, spf, tol in la_rows:
        rows.append(Row(f"{rid}-512-numpy", "5", name, oly_jit_side(ofn, *arrs), "NumPy",
                        numpy_side(npf, *arrs), *la_t, rtol=tol))
        rows.append(Row(f"{rid}-512-scipy", "5", name, oly_jit_side(ofn, *arrs), "SciPy",
                        numpy_side(spf, *arrs), *la_t, rtol=tol))
    # 6: host_callback taps, delivered to the tap function
    rows.append(Row("tap-f32[]-floor", "6", "id_tap f32[] (fori_loop)", oly_taps_fori,
                    "C->Python floor", floor_void_scalar, None, "goal >=1M taps/s"))
    rows.append(Row("tap-1MiB-memcpy", "6", "id_tap f32[262144] (1 MiB)", oly_tap_1mib,
                    "memcpy 1 MiB", memcpy_1mib, None, "goal >=2 GB/s"))
    # 7: buffer_callback: results written in place
    rows.append(Row("buffer-f64[1000]-floor", "7", "buffer_callback f64[1000] copy in place",
                    oly_buffer_callback(_copy_in_place, VEC1K, args), "C->Python floor",
                    floor_callback(VEC1K), 1.0, "<=1.0x floor", x64=True, rtol=1e-6))
    rows.append(Row("buffer-f64[1000]-inplace", "7", "buffer_callback f64[1000] copy in place",
                    oly_buffer_callback(_copy_in_place, VEC1K, args), "C->Python in-place floor",
                    floor_inplace_callback(_copy_in_place, VEC1K), 1.0, "<=1.0x floor",
                    x64=True, rtol=1e-6))
    rows.append(Row("buffer-f64[1000]-pure", "7", "buffer_callback f64[1000] x+1 in place",
                    oly_buffer_callback(_add_one_in_place, VEC1K, args), "pure_callback x+1",
                    oly_pure_same_work(_add_one, VEC1K), x64=True, rtol=1e-6))
    rows.append(Row("buffer-1MiB-pure", "7", "buffer_callback f32[262144] x+1 in place",
                    oly_buffer_callback(_add_one_in_place, MIB_F32, args, per_jit=True),
                    "pure_callback x+1", oly_pure_same_work(_add_one, MIB_F32, per_jit=True),
                    rtol=1e-6))
    # 8: callback statistics (on vs off: what enabling costs; off is every
    # other row) and progress bars on a 10^6-iteration loop (vs the same loop)
    rows.append(Row("stats-on-pure-f32[]", "8", "pure_callback f32[] stats on",
                    oly_stats_side(True, args), "the same, stats off",
                    oly_stats_side(False, args), rtol=1e-6))
    for kind, what in (("scalar", "w*0.999+0.001"), ("vec64", "sin/cos f32[64]")):
        for form in ("keyword", "decorator"):
            rows.append(Row(f"progress-1e6-{kind}-{form}", "8",
                            f"{form} bar, 1e6 its of {what}", oly_progress_loop(kind, form),
                            "the loop, no bar", oly_progress_loop(kind, None), 1.05,
                            "<=5% over", rtol=1e-5))
    if args.filter:
        rows = [r for r in rows if args.filter in r.id or args.filter in r.name]
    return rows


# ---------------------------------------------------------------- measuring

def _timed(run, n):
    t0 = time.perf_counter()
    run(n)
    return time.perf_counter() - t0


def _calibrate(side, target_s):
    """Units per batch so that one batch takes about target_s."""
    n = 1
    while True:
        t = _timed(side.run, n)
        if t >= target_s / 8 or n >= 1 << 24:
            break
        n *= 8 if t < target_s / 64 else 2
    return max(1, int(round(n * target_s / max(t, 1e-9))))


def _prepare(make):
    if make is None:
        raise NotAvailable("no such side")
    side = make()
    side.run(1)  # warm-up
    return side


def measure_pair(oly_make, peer_make, repeats, target_s):
    """Warm-up, calibration, then `repeats` timed batches of each side in turn.
    Returns ({"oly": per-op seconds list or reason str, "peer": ...}, prepared sides)."""
    sides, reasons = {}, {}
    for key, make in (("oly", oly_make), ("peer", peer_make)):
        try:
            sides[key] = _prepare(make)
        except NotAvailable as e:
            reasons[key] = str(e)
        except Exception as e:  # noqa: BLE001
            reasons[key] = f"{type(e).__name__}: {e}".splitlines()[0]
    units = {}
    for key, side in list(sides.items()):
        try:
            units[key] = _calibrate(side, target_s)
        except Exception as e:  # noqa: BLE001
            reasons[key] = f"{type(e).__name__}: {e}".splitlines()[0]
            del sides[key]
    times = {k: [] for k in sides}
    for _ in range(repeats):
        for key in list(sides):
            side = sides[key]
            try:
                t = _timed(side.run, units[key])
            except Exception as e:  # noqa: BLE001
                reasons[key] = f"{type(e).__name__}: {e}".splitlines()[0]
                del sides[key]
                continue
            times[key].append(t / (units[key] * side.ops))
    res = {k: (times[k] if k in sides else reasons[k]) for k in ("oly", "peer")}
    return res, sides


def cross_check(sides, rtol):
    if rtol is None or "oly" not in sides or "peer" not in sides:
        return ""
    a, b = sides["oly"].result, sides["peer"].result
    if a is None or b is None:
        return ""
    try:
        ra, rb = np.asarray(a()), np.asarray(b())
        if ra.shape != rb.shape or not np.allclose(ra, rb, rtol=rtol, atol=rtol):
            err = np.max(np.abs(ra.astype(np.float64) - rb.astype(np.float64))) \
                if ra.shape == rb.shape else f"shape {ra.shape} vs {rb.shape}"
            return f"RESULT MISMATCH vs peer (max abs err {err})"
    except Exception as e:  # noqa: BLE001
        return f"cross-check failed: {type(e).__name__}: {e}"
    return ""


def _spread(v):
    """Interquartile range / median: robust to the outliers a shared machine makes."""
    if not isinstance(v, list) or len(v) < 2:
        return None
    q = statistics.quantiles(v, n=4, method="inclusive")
    return (q[2] - q[0]) / statistics.median(v)


def run_row(row, args):
    if row.native:
        pmap_note = ""
        try:
            mpi = row.native.startswith("mpi-")
            pmap = row.native.startswith("pmap-")
            d = (mpi_results(args) if mpi else pmap_results(args) if pmap
                 else native_results(args))[row.native]
            pmap_note = d.get("note", "")
            oly = d["oly_ns"] if d["oly_ns"] else (d.get("error") or "olympus side failed")
            if isinstance(oly, list):
                oly = [t * 1e-9 for t in oly]
            res = {"oly": oly, "peer": [t * 1e-9 for t in d["peer_ns"]]}
        except NotAvailable as e:
            res = {"oly": str(e), "peer": str(e)}
        how = f"{K_NATIVE} chained host calls in 1 program run"
        if row.native.startswith("mpi-"):
            how = "2 processes under mpirun, per allreduce (the slower process's time)"
        note = ""
        if row.native.startswith("pmap-"):
            how = ("per call, results blocked on; measured in a child process with "
                   "OLYMPUS_NUM_CPU_DEVICES=4")
            note = pmap_note
    else:
        with x64_mode(row.x64):
            res, sides = measure_pair(row.oly, row.peer, args.repeats, args.target_ms / 1e3)
            note = cross_check(sides, row.rtol)
        how = sides["oly"].note if "oly" in sides else ""
    out = {"id": row.id, "group": row.group, "name": row.name, "peer": row.peer_name,
           "target_ratio_max": row.target, "target": row.target_text}
    for k in ("oly", "peer"):
        v = res[k]
        if isinstance(v, list) and v:
            out[f"{k}_s"] = statistics.median(v)
            out[f"{k}_repeats_s"] = v
            out[f"{k}_spread_iqr"] = _spread(v)
            out[f"{k}_min_s"] = min(v)
        else:
            out[f"{k}_s"] = None
            out[f"{k}_na"] = v if isinstance(v, str) else "no measurement"
    if out["oly_s"] and out["peer_s"]:
        out["ratio"] = out["oly_s"] / out["peer_s"]
        out["met"] = None if row.target is None else out["ratio"] <= row.target
    else:
        out["ratio"] = None
        out["met"] = None
    out["how"] = how
    out["note"] = note
    return out


# ---------------------------------------------------------------- printing

def fmt_time(s):
    if s is None:
        return "n/a"
    if s < 1e-6:
        return f"{s * 1e9:.0f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.2f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def fmt_spread(v):
    return "-" if v is None else f"{100 * v:.0f}%"


GROUPS = {"1": "1 pure_callback round trip, per callback",
          "2": "2 io_callback / debug.callback round trip, per callback",
          "3": "3 native C host function, per call",
          "4": "4 dispatch, per call",
          "5": "5 array kernels, per call",
          "6": "6 host_callback taps, per tap",
          "7": "7 buffer_callback round trip, per callback",
          "8": "8 callback statistics and progress bars"}


def print_table(results, file=sys.stdout):
    head = ["row", "olympus", "peer", "peer time", "ratio", "target", "met", "IQR o/p"]
    lines = []
    notes = []
    for r in results:
        if r["oly_s"] is None:
            notes.append(f"{r['id']}: olympus n/a: {r['oly_na']}")
        if r["peer_s"] is None:
            notes.append(f"{r['id']}: peer n/a: {r['peer_na']}")
        if r["note"]:
            notes.append(f"{r['id']}: {r['note']}")
        met = "-" if r["met"] is None else ("yes" if r["met"] else "NO")
        if r["target_ratio_max"] is not None and r["ratio"] is None:
            met = "?"
        tgt = r["target"] + (f" (<={r['target_ratio_max']:.2f})" if r["target_ratio_max"] else "") \
            if r["target"] else "-"
        lines.append((r["group"], [f"{r['name']}", fmt_time(r["oly_s"]), r["peer"],
                                   fmt_time(r["peer_s"]),
                                   "n/a" if r["ratio"] is None else f"{r['ratio']:.2f}x",
                                   tgt, met,
                                   f"{fmt_spread(r.get('oly_spread_iqr'))}/{fmt_spread(r.get('peer_spread_iqr'))}"]))
    widths = [max(len(head[i]), *(len(c[i]) for _, c in lines)) for i in range(len(head))] \
        if lines else [len(h) for h in head]
    right = {1, 3, 4}

    def fmt(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    print("ratio = olympus time / peer time (lower is better); target = the most the ratio "
          "may be; IQR = interquartile range / median of the repeats (olympus/peer)", file=file)
    print(fmt(head), file=file)
    print("  ".join("-" * w for w in widths), file=file)
    group_how = {}
    for r in results:
        if r.get("how"):
            group_how.setdefault(r["group"], r["how"])
    for r in results:
        if r.get("how") and r["how"] != group_how.get(r["group"]):
            notes.append(f"{r['id']}: {r['how']}")
    group = None
    for g, cells in lines:
        if g != group:
            how = f"; olympus: {group_how[g]}" if g in group_how else ""
            print(f"[{GROUPS.get(g, g)}{how}]", file=file)
            group = g
        print(fmt(cells), file=file)
    if notes:
        print("\nnotes:", file=file)
        for n in notes:
            print(f"  {n}", file=file)


def _level_text(info):
    """The olympus kernels' CPU dispatch level, and the best the CPU has when lower."""
    lv, mx = info.get("cpu_level", "n/a"), info.get("cpu_level_max")
    return lv if not mx or mx == lv else f"{lv} (forced; CPU max {mx})"


def peers_text():
    """The level the peers run at, read back from NumPy itself (so a
    NPY_DISABLE_CPU_FEATURES that did not take shows)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as feat, __cpu_dispatch__ as disp
    except ImportError:
        from numpy.core._multiarray_umath import __cpu_features__ as feat, __cpu_dispatch__ as disp
    on = [x for x in disp if feat.get(x)]
    avx512 = [x for x in on if x.startswith("AVX512")]
    npy = (f"AVX-512 ({avx512[-1]})" if avx512 else "AVX2" if "AVX2" in on
           else on[-1] if on else "baseline")
    text = f"NumPy dispatch {npy}"
    if os.environ.get("NPY_DISABLE_CPU_FEATURES"):
        text += f" [NPY_DISABLE_CPU_FEATURES={os.environ['NPY_DISABLE_CPU_FEATURES']}]"
    text += f", Numba cpu {os.environ.get('NUMBA_CPU_NAME', 'host')}"
    text += f", C floors -march={floor_march()}"
    return text


def machine_info():
    model, flags = "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    try:
        load = " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        load = "?"
    info = {"nproc": os.cpu_count(), "cpu_model": model, "cpu_flags": isa, "load": load,
            "platform": platform.platform(),
            "python": sys.version.split()[0], "numpy": np.__version__,
            "peer_level": PEER_LEVEL, "peers": peers_text()}
    try:
        info["numba"] = numba_mod().__version__
    except NotAvailable:
        info["numba"] = None
    try:
        info["git"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                     capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 repeats of 5 ms batches")
    ap.add_argument("--filter", default="", help="only rows whose id or name contains this")
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--target-ms", type=float, default=10.0, help="length of one timed batch")
    ap.add_argument("--json", default=os.path.join(RESULTS, "latest.json"))
    ap.add_argument("--cb-driver", choices=("auto", "unroll", "fori"), default="auto",
                    help="how olympus issues many callbacks in one compiled call")
    ap.add_argument("--pmap-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats, args.target_ms = 3, 5.0
    args.repeats = max(1, args.repeats)
    if args.pmap_child:
        return pmap_child(args)
    t0 = time.perf_counter()
    info = machine_info()
    info["cpu_level"] = "n/a"
    try:
        olympus, _ = oly()
        core = getattr(olympus, "_core", None)
        info["olympus"] = getattr(core, "__file__", "?")
        if hasattr(core, "cpu_info"):
            ci = core.cpu_info()
            info["cpu_level"] = ci["level"]
            info["cpu_level_max"] = ci["max_level"]
    except NotAvailable as e:
        info["olympus"] = f"n/a: {e}"
    log(f"olympus bench: {info['nproc']} x {info['cpu_model']} ({info['cpu_flags']}); "
        f"olympus kernels: {_level_text(info)}; olympus: {info['olympus']}")
    log(f"peers: {info['peers']}")
    rows = make_rows(args)
    results = []
    for i, row in enumerate(rows, 1):
        t1 = time.perf_counter()
        try:
            r = run_row(row, args)
        except Exception as e:  # noqa: BLE001 - a row never stops the table
            traceback.print_exc()
            r = {"id": row.id, "group": row.group, "name": row.name, "peer": row.peer_name,
                 "target_ratio_max": row.target, "target": row.target_text, "oly_s": None,
                 "peer_s": None, "oly_na": f"bench error: {e}", "peer_na": "bench error",
                 "ratio": None, "met": None, "note": ""}
        results.append(r)
        log(f"  [{i:2d}/{len(rows)}] {row.id:28s} {time.perf_counter() - t1:5.1f} s")
    elapsed = time.perf_counter() - t0
    print(f"olympus bench — {info['nproc']} x {info['cpu_model']} ({info['cpu_flags']}), "
          f"olympus kernels: {_level_text(info)}; python {info['python']}, "
          f"numpy {info['numpy']}, numba {info['numba']}; median of {args.repeats} repeats; "
          f"{elapsed:.0f} s; load {info['load']} before")
    print(f"peers at {info['peer_level']}: {info['peers']}")
    print_table(results)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "machine": info, "repeats": args.repeats, "target_ms": args.target_ms,
           "elapsed_s": elapsed, "rows": results}
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
    log(f"wrote {os.path.relpath(args.json, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
