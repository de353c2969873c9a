"""Code generation for the numba backend: a jaxpr -> generated Python, compiled by numba.

`compile_jaxpr(closed)` generates, for the whole program:

    kernels   one `@numba.njit` function per fusion group (plan.py groups, where a
              kernel may recompute a cheap value another wrote; kernels.py source): a
              loop nest over the group's domain, sizes passed at run time.
              Each distinct kernel source is its own module `<cache>/fnad_k_<sha>.py`,
              imported once per process: identical kernels (the layers of a model, the
              same optimizer update on every parameter, the same program at a new shape)
              are compiled once, and numba's `cache=True` keeps the machine code on disk,
              so a new process loads it instead of compiling.
    driver    `make(K)`, a factory holding `run(*args)`: straight-line Python, one
              statement per fusion group or equation (consecutive independent kernels
              too small to be threaded in one `run_together` call, which overlaps them on
              the backend's threads; consecutive independent products, such as a weight's
              dX and dW, in one gemm.products_together call). dot_general and every primitive
              that is not fused call the backend's impl (the NumPy reference: BLAS for
              dot_general); jit, checkpoint, custom_jvp_call, custom_vjp_call,
              custom_linear_solve and name are inlined; cond, scan and while are Python
              control flow around driver functions generated for their bodies; other
              higher-order primitives (debug_callback) run their eager rule. K holds the
              run-time objects the driver needs (impls with their params bound, jaxpr
              constants, literal arrays): never globals, so the text depends only on the
              program's structure. Kept in memory by hash (and written to
              `<cache>/fnad_driver_<sha>.py` so that tracebacks show its lines).
    saved     the driver, the kernel sources and how to rebuild K, pickled as
              `<cache>/fnad_program_<key>.pkl`, the key being the jaxpr's fingerprint
              (ir.fingerprint) with fnad's source files and the versions: a new process
              running the same program reads it back instead of generating it again.
              Programs without a fingerprint (a user's primitive, a callback) and those
              whose K holds something no other process can rebuild are not saved.
              `<cache>/fnad_traced_<key>` names the saved program that jit's jaxpr as
              traced (before its passes) became: `load_traced` finds it by that.

The cache dir is `$FNAD_CACHE_DIR`, else the `jax_compilation_cache_dir` option, else
~/.cache/fnad/numba. The callable returned has
`.source`: the driver followed by its kernels (`fnad.jit(f).lower(x).source`).

Under `jax_debug_nans`/`jax_debug_infs` the program is interpreted instead (the check
names the primitive that produced the NaN, which a fused kernel cannot).

Numerics: jit gives the eager (NumPy reference) result bit for bit, NaN, inf and integer
wraparound included, wherever it computes the same operations in the same order: kernels
carry no fast-math flags (no FMA contraction, no reciprocal for a division), and functions
whose NumPy implementation a kernel cannot reproduce (pow, atan2, cbrt, the trigonometric
and hyperbolic functions) are not fused: the driver calls NumPy for them. It differs by a
few ulp in three places, chosen for speed (tests/test_jit_backends.py lists them):
fnad's vectorized exp, exp2, log, log1p, expm1, tanh, logistic, erf, erfc (mathfns.py,
<= 3 ulp); integer_pow with |y| >= 3 or y = -2 in floats (repeated multiplication, as
XLA, where NumPy calls pow); float sums over the trailing axes of a fused kernel (a
vectorized accumulation order, where NumPy sums pairwise; an exact pairwise sum measured
4-10x slower than the vectorized one). (Products run in order, as NumPy's.)
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import marshal
import math
import os
import pathlib
import pickle
import sys
import tempfile
import types
import warnings
from typing import NamedTuple

import numpy as np

from fnad import core
from fnad.config import config
from fnad.core import Array
from fnad.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var, fingerprint
from fnad.passes.dce import live_eqns
from fnad.primitives import linalg as _linalg
from fnad.primitives import shape_ops as so

CODEGEN_VERSION = "4"
STRICT = bool(os.environ.get("FNAD_NUMBA_STRICT"))
TOGETHER_MIN = 1 << 17     # elements of work in a batch of small kernel calls run side by side
_MODULES: dict = {}                         # kernel name -> imported module
_DRIVERS: dict = {}                         # (driver source sha, llvm?) -> its `make`


def compile_jaxpr(closed: ClosedJaxpr):
    """The jaxpr as a Python callable on NumPy buffers (returns a list of buffers)."""
    from fnad.backends import numba_cpu as backend
    if config.jax_debug_nans or config.jax_debug_infs:
        from fnad.backends.numpy_ref.compile import interpreter
        run = interpreter(closed.jaxpr, [np.asarray(c) for c in closed.consts], backend)
        run.source = None
        return run
    return Compiled(closed, *_build(closed, backend, fuse=True))


def load_traced(traced: ClosedJaxpr):
    """The program compiled before, in any process, for the jaxpr that jit traced as
    `traced` (before its passes: `remember_traced` noted which saved program that was),
    read back from the cache dir; None where there is none. A new process running a program
    generated before so skips the passes and the optimized jaxpr's fingerprint (about 35-60
    ms of the GPT step's warm-cache first call against the traced jaxpr's 15-20)."""
    from fnad.backends import numba_cpu as backend
    if config.jax_debug_nans or config.jax_debug_infs:
        return None
    key = _traced_key(traced)
    if key is None:
        return None
    try:
        program_key = (cache_dir() / f"fnad_traced_{key}").read_text()
    except OSError:
        return None
    saved = _saved(program_key, backend)
    if saved is None:
        return None
    return Compiled(traced, *_loaded(*saved), key=program_key)


def remember_traced(traced: ClosedJaxpr, compiled) -> None:
    """Note in the cache dir that jit's traced jaxpr `traced` compiles, after its passes,
    to the saved program `compiled` (compile_jaxpr's result; `load_traced` reads it back)."""
    program_key = getattr(compiled, "key", None)
    if program_key is None:                  # not saved (no fingerprint, debug_nans)
        return
    key = _traced_key(traced)
    if key is not None:
        try:
            _replace(cache_dir() / f"fnad_traced_{key}", program_key.encode())
        except OSError:
            pass                             # a read-only cache dir: the passes run again


_last_traced: tuple = (None, None)          # (a traced jaxpr, its _traced_key)


def _traced_key(traced: ClosedJaxpr) -> str | None:
    """_program_key of jit's traced jaxpr, computed once for load_traced and remember_traced
    of the same one (a fingerprint of the GPT step's takes 15-20 ms)."""
    global _last_traced
    last, key = _last_traced
    if last is not traced:
        from fnad.backends import numba_cpu as backend
        key = _program_key(traced, backend, fuse=True)
        _last_traced = (traced, key)
    return key


def _build(closed: ClosedJaxpr, backend, fuse: bool):
    """(run, source, kernels, signatures, key): the generated program, its kernels imported
    (numba dispatchers, compiled lazily), the argument types they are called with, and the
    key it is saved under in the cache dir (None where it is not saved).

    A program generated before, in this process or another, is read back from the cache
    dir (`_saved`) instead: generating the GPT step's took about 60-100 ms of a warm-cache
    first call."""
    key = _program_key(closed, backend, fuse)
    saved = _saved(key, backend) if key is not None else None
    if saved is None:
        m = _ModuleBuilder(backend, fuse)
        m.function(closed.jaxpr, closed.consts, "run")
        saved = m.driver_source(), m.kernels, m.K, m.signatures
        if key is not None and m.recipes is not None:
            _save(key, (saved[0], saved[1], m.recipes, saved[3]))
        else:
            key = None
    return *_loaded(*saved), key


def _loaded(driver: str, kernels: dict, K: list, signatures: dict):
    """(run, source, kernels, signatures) of a generated program: its kernels loaded, its
    driver's `make` called on K."""
    from fnad.backends.numba_cpu import llvm_kernels
    namespace = {name: load_kernel(name, src) for name, src in kernels.items()}
    run = load_driver(driver, namespace, llvm_kernels.ENABLED)(K)
    return (run, "\n\n".join([driver] + list(kernels.values())), list(namespace.values()),
            signatures)


def kernel_module(src: str, imports=(), runtime=()) -> tuple[str, str]:
    """(name, module text) of a kernel: `src` (kernels.py's language, its function named
    `kernel`) under the imports it uses (mathfns and runtime.py names); the name is the
    text's hash, so that an identical kernel is compiled once and found in the cache dir."""
    head = [_stamp("kernel"), "import math  # noqa", "", "import numba", "import numpy as np"]
    if imports:
        head.append("from fnad.backends.numba_cpu.mathfns import " + ", ".join(sorted(imports)))
    if runtime:
        head.append("from fnad.backends.numba_cpu.runtime import " + ", ".join(sorted(runtime)))
    text = "\n".join(head + ["", "", src])
    name = "k_" + hashlib.sha256(text.encode()).hexdigest()[:20]
    return name, text.replace("def kernel(", f"def {name}(", 1)


def load_kernel(name: str, text: str):
    """The callable kernel of a kernel module: fnad's LLVM translation (llvm_kernels.py,
    the default), else numba's dispatcher (FNAD_KERNEL_COMPILER=numba, or where the
    translator does not cover the kernel)."""
    from fnad.backends.numba_cpu import llvm_kernels
    if llvm_kernels.ENABLED:
        return llvm_kernels.kernel(name, text, functools.partial(_numba_kernel, text, name))
    return _numba_kernel(text, name)


def _numba_kernel(src: str, name: str):
    """The numba dispatcher of kernel `name` (its module imported from the cache dir)."""
    return getattr(load_module(src, name), name)


def _numba_error(e: BaseException) -> bool:
    """Whether `e` is numba's (a typing or lowering error of a fused kernel). A program whose
    kernels fnad's LLVM translator compiled may never import numba: then it is not."""
    errors = sys.modules.get("numba.core.errors")
    return errors is not None and isinstance(e, errors.NumbaError)


class Compiled:
    """A compiled program: call it on NumPy buffers (returns a list); `.source` is the code.

    numba compiles the kernels at the first call (0.1-1 s each) unless they are in its disk
    cache; those that are, the first call loads without starting numba's compiler
    (runtime.load_cached). With `config.jax_background_compile` (the default) a program with
    kernels to compile starts child processes that compile them into the disk cache
    (precompile.py; several where there are CPUs and kernels enough) and, until they are
    done, runs on the NumPy interpreter (numpy_ref/compile.py: the jaxpr it was compiled
    from, equation by equation); a thread of this process loads each kernel from the disk cache as
    soon as a child has it there (precompile.load_when_compiled), and the first call after
    the children are done runs the generated program. `wait()` blocks until the children are
    done and the kernels loaded. A program whose kernels are loaded or on disk (marker files
    say so) runs compiled at once. With the option off, the first call compiles, then runs:
    in this process, or in parallel children it waits for where precompile.py would start
    more than one.

    Should compiling fail (a code generator bug: a numba typing or lowering error), the
    program is rebuilt without fused kernels (every equation through the backend's impls)
    with a warning, unless `STRICT` is set (the env var FNAD_NUMBA_STRICT=1; the tests set
    it) in which case the error is raised.
    """

    __slots__ = ("run", "source", "key", "_closed", "_checked", "_kernels", "_signatures",
                 "_job", "_interp", "_loader", "_helper")

    def __init__(self, closed, run, source: str, kernels=(), signatures=None, key=None):
        self.run, self.source, self._closed = run, source, closed
        self.key = key                   # the name it is saved under in the cache dir, if any
        self._kernels, self._signatures = tuple(kernels), signatures or {}
        self._checked, self._job, self._interp, self._loader = False, None, None, None
        self._helper = None              # llvm_kernels.compile_ahead's process, if any

    def __call__(self, *bufs):
        if self._checked:
            return self.run(*bufs)
        from fnad.backends.numba_cpu import llvm_kernels
        if llvm_kernels.ENABLED:         # compiled at the first call (a helper process too)
            if self._helper is None:
                self._helper = llvm_kernels.compile_ahead(self._kernels, self._signatures)
            return self._first(bufs)
        from fnad.backends.numba_cpu import precompile
        job = self._job
        if job is None:
            if (all(k.signatures for k in self._kernels)
                    or precompile.markers_present(cache_dir(), self._signatures)):
                return self._first(bufs)
            background = config.jax_background_compile
            if not background and precompile.children(self._signatures) < 2:
                return self._first(bufs)     # one child would add its imports to the wait
            job = self._job = precompile.start(cache_dir(), self._signatures)
            self._loader = precompile.load_when_compiled(job, self._kernels, self._signatures,
                                                         cache_dir())
            if not background:
                job.wait()
        if job.poll() is None:
            return self._interpret(bufs)
        self._job = None
        if job.returncode != 0:
            warnings.warn(f"fnad numba backend: a child process compiling kernels exited "
                          f"with code {job.returncode}; compiling in this process",
                          RuntimeWarning, stacklevel=2)
        return self._first(bufs)

    def wait(self) -> None:
        """Block until a background compile of this program has finished and its kernels
        are loaded (the next call runs compiled at once)."""
        job, loader = self._job, self._loader
        if job is not None:
            job.wait()
        if loader is not None:
            loader.join()

    @property
    def compiling(self) -> bool:
        """Whether a background compile is running (calls run interpreted meanwhile)."""
        return self._job is not None and self._job.poll() is None

    def _interpret(self, bufs):
        if self._interp is None:               # only while a background compile runs
            from fnad.backends import numba_cpu as backend
            from fnad.backends.numpy_ref.compile import interpreter
            closed = self._closed
            self._interp = interpreter(closed.jaxpr, [np.asarray(c) for c in closed.consts],
                                       backend)
        return self._interp(*bufs)

    def _first(self, bufs):
        from fnad.backends.numba_cpu import llvm_kernels, threads
        if self._loader is not None:      # its last loads (it ends with the children)
            self._loader.join()
            self._loader = None
        if not llvm_kernels.ENABLED:      # (llvm_kernels compiles at the first call)
            from fnad.backends.numba_cpu import precompile, runtime
            if not precompile.load_cached_kernels(self._kernels, self._signatures):
                runtime.before_compiling()             # some compile at their first call
        try:
            with core.gc_paused():       # numba loading or compiling kernels (precompile.py)
                out = self.run(*bufs)
        except Exception as e:
            if STRICT or not _numba_error(e):
                raise
            first = str(e).splitlines()[0][:200] if str(e) else ""
            warnings.warn(f"fnad numba backend: compiling a fused kernel failed "
                          f"({type(e).__name__}: {first}); running this program without "
                          "fusion. Please report this with the program's jaxpr.",
                          RuntimeWarning, stacklevel=3)
            from fnad.backends import numba_cpu as backend
            self.run, self.source = _build(self._closed, backend, fuse=False)[:2]
            out = self.run(*bufs)
        else:
            if not llvm_kernels.ENABLED:
                precompile.write_markers(cache_dir(), self._signatures)
            threads.start_spinning()
        self._checked, self._interp = True, None          # the interpreted tier is done
        return out


# ---- flattening: inline the call-like primitives, drop dead code --------------------------
def _call_params() -> dict:
    """Call-like primitive -> the param holding the sub-jaxpr it calls (all operands)."""
    from fnad.custom import custom_jvp_call_p, custom_vjp_call_p
    from fnad.custom_batching import custom_vmap_call_p
    from fnad.jit import jit_p
    from fnad.primitives.solves import custom_linear_solve_p
    from fnad.remat import remat_p
    return {jit_p: "jaxpr", remat_p: "jaxpr", custom_jvp_call_p: "call_jaxpr",
            custom_vjp_call_p: "call_jaxpr", custom_linear_solve_p: "call_jaxpr",
            custom_vmap_call_p: "call_jaxpr"}


def flatten(jaxpr: Jaxpr, consts) -> tuple:
    """(invars, [(constvar, value)], eqns, outvars) with calls inlined (fresh Vars inside)."""
    from fnad.remat import name_p
    calls = _call_params()
    const_pairs = list(zip(jaxpr.constvars, consts))
    eqns: list = []

    def go(jaxpr: Jaxpr, env: dict, top: bool):
        def sub(a):
            return env.get(a, a) if type(a) is Var else a
        for eqn in jaxpr.eqns:
            ins = [env.get(a, a) for a in eqn.invars]      # (env holds Vars only)
            key = calls.get(eqn.primitive)
            if key is not None:
                closed = eqn.params[key]
                inner = dict(zip(closed.jaxpr.invars, ins))
                for cv, c in zip(closed.jaxpr.constvars, closed.consts):
                    fresh = Var(cv.aval)
                    const_pairs.append((fresh, c))
                    inner[cv] = fresh
                outs = go(closed.jaxpr, inner, False)
                env.update(zip(eqn.outvars, outs))
            elif eqn.primitive is name_p:
                env[eqn.outvars[0]] = ins[0]
            else:
                outvars = eqn.outvars
                if not top:
                    outvars = [Var(v.aval) for v in eqn.outvars]
                    env.update(zip(eqn.outvars, outvars))
                eqns.append(JaxprEqn(eqn.primitive, ins, eqn.params, outvars, eqn.source_info))
        return [sub(v) for v in jaxpr.outvars]

    outvars = go(jaxpr, {}, True)
    eqns = _transposed_dots(live_eqns(eqns, outvars)[0], outvars)
    return list(jaxpr.invars), const_pairs, eqns, outvars


def _transposed_dots(eqns: list, outvars: list) -> list:
    """transpose(dot_general(a, b)) swapping the lhs and rhs free dims -> dot_general(b, a).

    Reverse mode writes weight gradients as `transpose(x^T @ g)`; BLAS can produce the
    transposed product directly instead of a copy by the next kernel (C()."""
    from fnad.primitives.linalg import dot_general_p
    from fnad.primitives.shape_ops import transpose_p
    uses: dict = {}
    for e in eqns:
        for x in e.invars:
            if type(x) is Var:
                uses[x] = uses.get(x, 0) + 1
    for v in outvars:
        if type(v) is Var:
            uses[v] = uses.get(v, 0) + 1
    producer = {e.outvars[0]: k for k, e in enumerate(eqns)
                if e.primitive is dot_general_p}
    drop = set()
    out = list(eqns)
    for k, e in enumerate(eqns):
        if e.primitive is not transpose_p or type(e.invars[0]) is not Var:
            continue
        j = producer.get(e.invars[0])
        if j is None or uses[e.invars[0]] != 1:
            continue
        d = eqns[j]
        lhs, rhs = d.invars
        (lc, rc), (lb, rb) = d.params["dimension_numbers"]
        nb = len(lb)
        nl = lhs.aval.ndim - len(lc) - nb
        nr = rhs.aval.ndim - len(rc) - nb
        swap = tuple(range(nb)) + tuple(range(nb + nl, nb + nl + nr)) + tuple(range(nb, nb + nl))
        if e.params["permutation"] != swap:
            continue
        params = dict(d.params, dimension_numbers=((rc, lc), (rb, lb)))
        out[k] = JaxprEqn(d.primitive, [rhs, lhs], params, e.outvars, d.source_info)
        drop.add(j)
    return [e for k, e in enumerate(out) if k not in drop]


# ---- the module --------------------------------------------------------------------------------
class _ModuleBuilder:
    """Collects kernel modules, driver functions and the run-time objects list K."""

    def __init__(self, backend, fuse: bool = True):
        self.backend = backend
        self.fuse = fuse
        self.kernels: dict[str, str] = {}          # name -> kernel module source
        self.signatures: dict[str, set] = {}       # name -> argument type specs it is called with
        self.K: list = []
        self.recipes: list | None = []     # how another process rebuilds each K (_rebuilt)
        self.functions: list[str] = []
        self.n_fn = 0
        self._kernel_of: dict = {}                 # kernels.kernel_key -> (name, sizes, threaded)

    def const(self, obj, recipe=None) -> str:
        """Name obj in K. `recipe` says how another process rebuilds it (`_rebuilt`): by
        default obj pickles as itself (an array keeps its writeable flag, which numba's
        types see); UNSAVED where it cannot be rebuilt (the program is not saved)."""
        self.K.append(obj)
        if recipe is UNSAVED:
            self.recipes = None
        elif self.recipes is not None:
            if recipe is None:
                recipe = (("array", obj, obj.flags.writeable) if type(obj) is np.ndarray
                          else ("value", obj))
            self.recipes.append(recipe)
        return f"K{len(self.K) - 1}"

    def kernel(self, group, eqns, views=frozenset()) -> tuple[str, tuple, bool, frozenset]:
        """The group's kernel (one module per distinct source): name, sizes, threaded, and
        which of the inputs numbered in `views` it reads by strides (kernels.kernel_source):
        all of them, unless it calls math functions such as exp or tanh, whose loops must
        vectorize. Reading x[:, ::2] by strides, tanh(x[:, ::2]) + 1 on 4000x4000 f32
        took 14.5 ms against 5.4 ms copying first; x.T * 2 + 1 (2000x2000), with no math
        function, 2.7 ms against 5.9 ms."""
        from fnad.backends.numba_cpu.kernels import kernel_key, kernel_source
        key = (kernel_key(group, eqns), views)         # the same group seen before: reuse
        try:
            hit = self._kernel_of.get(key)
        except TypeError:                              # an unhashable param: no reuse
            hit = key = None
        if hit is not None:
            return hit
        strided = views
        src, imports, runtime, sizes, threaded = kernel_source(group, eqns, "kernel", strided)
        if strided and imports:
            strided = frozenset()
            src, imports, runtime, sizes, threaded = kernel_source(group, eqns, "kernel")
        name, text = kernel_module(src, imports, runtime)
        self.kernels.setdefault(name, text)        # the layers of a model: the same kernels
        if key is not None:
            self._kernel_of[key] = (name, sizes, threaded, strided)
        return name, sizes, threaded, strided

    def function(self, jaxpr: Jaxpr, consts, name: str | None = None) -> str:
        """Emit a driver function for `jaxpr`; returns its name."""
        if name is None:
            self.n_fn += 1
            name = f"f{self.n_fn}"
        with core.gc_paused():
            _Driver(self, jaxpr, consts, name).emit()
        return name

    def driver_source(self) -> str:
        head = [_stamp("driver"),
                "# kernels (modules fnad_k_*.py in the cache dir, source below in .source): "
                + (", ".join(self.kernels) or "none"),
                "import numpy as np", ""]
        make = ["def make(K):", "    C = writable  # noqa", "    R = writable_flat  # noqa",
                "    S = strided  # noqa"]
        if self.K:
            make.append("    " + ", ".join(f"K{i}" for i in range(len(self.K))) + ", = K")
        for fn in self.functions:
            make += ["", fn]
        make += ["", "    return run", ""]
        return "\n".join(head + make)


@functools.cache                           # once per process: it reads and hashes a file
def _stamp(what: str) -> str:
    """The first line of generated modules: versions of everything the code depends on
    (numba's disk cache does not notice when a helper module changes: the source must).
    Read from the files, without importing numba (threads.py)."""
    here = pathlib.Path(__file__).parent
    mathfns, runtime = (hashlib.sha256((here / f).read_bytes()).hexdigest()[:12]
                        for f in ("mathfns.py", "runtime.py"))
    return (f"# fnad numba backend: generated {what} (codegen {CODEGEN_VERSION}, mathfns "
            f"{mathfns}, runtime {runtime}, numba {_numba_version()})")


def _numba_version() -> str:
    """numba's version without importing numba where it is not yet: the name of its
    installed metadata folder beside the package (under a ms; importlib.metadata's lookup
    took 30 ms), else numba.__version__."""
    numba = sys.modules.get("numba")
    if numba is None:
        spec = importlib.util.find_spec("numba")
        if spec is not None and spec.origin:
            found = sorted(pathlib.Path(spec.origin).parent.parent.glob("numba-*.dist-info"))
            if len(found) == 1:
                return found[0].name[len("numba-"):-len(".dist-info")]
        import numba
    return numba.__version__


# Primitives whose NumPy implementations return views of their operand where they can
# (any strides): a kernel reads their results by strides instead of a contiguous copy.
_VIEW_PRIMITIVES = frozenset({so.slice_p, so.transpose_p, so.reshape_p,
                              so.broadcast_in_dim_p, so.squeeze_p, so.rev_p})


class _Placed:
    """A tree of concatenates written into the root's new buffer (_Driver.placements):
    `writes` holds (leaf, index/view path into the buffer); `inputs` and `outputs` read
    as a kernel group's do."""

    __slots__ = ("root", "writes", "inputs", "outputs")

    def __init__(self, root: Var, writes: list):
        self.root, self.writes = root, writes
        self.inputs = [(a, None) for a, _ in writes if type(a) is Var]
        self.outputs = [root]


class _KernelCall(NamedTuple):
    """A kernel call batched by _Driver.group, written by _Driver.flush."""
    outs: list          # the names of its outputs
    kernel: str         # the kernel's name
    args: list          # its arguments, as source
    size: int           # elements of work
    shaped: list        # (name, shape) of the outputs to reshape (it returns them flat)


class _Driver:
    """The straight-line Python function of one (flattened) jaxpr."""

    def __init__(self, m: _ModuleBuilder, jaxpr: Jaxpr, consts, name: str):
        self.m = m
        self.name = name
        self.invars, self.const_pairs, self.eqns, self.outvars = flatten(jaxpr, consts)
        self.args = set(self.invars)
        self.lines: list[str] = []
        self.names: dict = {}
        self.contiguous: set = set()        # Vars known to be C-contiguous arrays
        self.views: set = set()             # Vars the driver made as views (strides: any)
        self.batch: list = []               # kernel calls not written yet (see flush)
        self.batched: set = set()           # the Vars they define
        self.held: list = []                # names to `del` after them
        self.products: list = []            # products not written yet (see flush)
        self.producing: set = set()         # the Vars they define
        self.n = 0

    def fresh(self, prefix="v") -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def line(self, s: str, depth: int = 2):
        self.lines.append("    " * depth + s)

    def atom(self, a) -> str:
        if type(a) is Literal:                 # one buffer for every call: read-only, so
            val = np.array(a.val, a.aval.dtype)   # that a caller can't change an output
            val.flags.writeable = False
            return self.m.const(val)
        return self.names[a]

    def define(self, v: Var) -> str:
        name = self.names[v] = self.fresh()
        return name

    def emit(self):
        from fnad.backends.numba_cpu.threads import writable
        from fnad.backends.numba_cpu.scalar_ops import fusable
        from fnad.backends.numba_cpu.plan import plan_recomputing
        args = []
        for v in self.invars:
            name = self.names[v] = self.fresh("a")
            args.append(name)
        for v, c in self.const_pairs:
            self.names[v] = self.m.const(writable(np.asarray(c)))       # threads.writable
            self.contiguous.add(v)
        self.eqns, steps = plan_recomputing(self.eqns, self.outvars,
                                            fusable if self.m.fuse else _never)
        steps = self.placements(steps)
        reads = self.step_reads(steps)
        self.inplace = self.inplace_updates(steps, reads)
        dead = self.dead_after(steps, reads)
        for pos, (kind, x) in enumerate(steps):
            work = kind == "eqn" and x not in self.inplace and self.product_work(self.eqns[x])
            if work:
                if self.batch or not self.producing.isdisjoint(reads[pos]):
                    self.flush()
            elif kind != "group" or self.products or not self.batched.isdisjoint(reads[pos]):
                self.flush()
            if work:
                self.product(self.eqns[x], work)
            elif kind == "group":
                self.group(x)
            elif kind == "place":
                self.place(x)
            else:
                self.eqn(self.eqns[x], x in self.inplace)
            self.held += [self.names[v] for v in dead.get(pos, ()) if v in self.names]
            if not self.batch and not self.products:
                self.flush()
        self.flush()
        outs = ", ".join(self.atom(v) for v in self.outvars)
        self.line(f"return [{outs}]")
        head = f"    def {self.name}({', '.join(args)}):"
        self.m.functions.append("\n".join([head] + self.lines))

    # ---- a fusion group: one kernel call ----
    def group(self, g):
        """The call of the group's kernel. Its arrays are passed flat (rank 1, or 0 for a
        scalar) and the kernel indexes them as they are: numba compiles a function again
        for every rank of an argument, so the same kernel read
        arrays of ranks 1 and 2 (AdamW's update of a bias and of a weight matrix) compiled
        twice. Outputs it allocates come back flat (it is given their sizes) and are
        reshaped here; a threaded kernel is given the flat views of its outputs. Inputs the
        driver did not make itself (arguments, what an impl returned) go through C or R
        (threads.writable, writable_flat), which copy a read-only array: numba would compile
        the kernel again for it. Except a rank-1 argument of the program: there the check
        (65 ns) would be a tenth of the call overhead of a small program (`fnad.jit` of
        `x + 1`: 2.1 µs), and a read-only one costs one compile more (on disk from then on)."""
        from fnad.backends.numba_cpu.threads import NUM_THREADS
        views = frozenset(k for k, (v, _) in enumerate(g.inputs)
                          if v in self.views and v.aval.shape)
        kname, sizes, threaded, strided = self.m.kernel(g, self.eqns, views)
        args = [self.m.const(np.array(sizes, np.uint64))] if sizes else []   # kernels.py sz
        spec = [("array", "uint64", 1)] if sizes else []   # the argument types, for precompile
        for k, (v, _) in enumerate(g.inputs):
            a, dt = self.atom(v), v.aval.dtype
            if k in strided:            # a view, read in place: flat memory and strides
                args.append(f"*S({a})")
                spec += [("array", dt.name, 1), ("tuple", v.aval.ndim)]
                continue
            if not v.aval.shape:        # a fresh 0-d array: one argument type for any scalar
                args.append(f"np.array({a}, {_np_dtype(dt)})")
                spec.append(("array", dt.name, 0))
                continue
            if v.aval.ndim == 1:        # an argument: np.ascontiguousarray (see above)
                args.append(a if v in self.contiguous else
                            f"np.ascontiguousarray({a})" if v in self.args else f"C({a})")
            else:                       # flat (a view where it is contiguous): see above
                args.append(f"{a}.ravel()" if v in self.contiguous else f"R({a})")
            spec.append(("array", dt.name, 1))
        self.contiguous.update(g.outputs)
        if threaded:                    # outputs allocated here, chunks run on all threads
            self.flush()
            for v in g.outputs:
                o = self.define(v)
                self.line(f"{o} = aligned_empty({tuple(v.aval.shape)!r}, "
                          f"{_np_dtype(v.aval.dtype)})")
                args.append(o if v.aval.ndim == 1 else f"{o}.ravel()")
                spec.append(("array", v.aval.dtype.name, 1))
            chunks = min(sizes[0], 16 * NUM_THREADS)
            spec += [("array", "int64", 1), ("int64",)]
            self.m.signatures.setdefault(kname, set()).add(tuple(spec))
            self.line(f"run_threaded({kname}, ({', '.join(args)},), {chunks})")
            return
        args += [repr(math.prod(v.aval.shape)) for v in g.outputs if v.aval.shape]
        spec += [("int64",) for v in g.outputs if v.aval.shape]
        self.m.signatures.setdefault(kname, set()).add(tuple(spec))
        outs = [self.define(v) for v in g.outputs]
        shaped = [(o, tuple(v.aval.shape)) for o, v in zip(outs, g.outputs) if v.aval.ndim > 1]
        self.batch.append(_KernelCall(outs, kname, args, math.prod(sizes), shaped))
        self.batched.update(g.outputs)

    # ---- independent products side by side ----
    def product_work(self, eqn) -> int:
        """The multiply-adds of `eqn` where it is a float32/64 dot_general large enough for
        gemm.py to split across the threads (gemm.SMALL), else 0: consecutive such products
        that do not read each other's results run as one gemm.products_together call."""
        from fnad.backends.numba_cpu.gemm import SMALL
        if (eqn.primitive is not _linalg.dot_general_p
                or self.m.backend.impl_rules.get(eqn.primitive) is not _backend_dot_general()):
            return 0
        lhs, rhs = (a.aval for a in eqn.invars)
        if not (lhs.dtype == rhs.dtype == eqn.outvars[0].aval.dtype
                and lhs.dtype.kind == "f" and lhs.dtype.itemsize >= 4):
            return 0
        (_, rc), (_, rb) = eqn.params["dimension_numbers"]
        work = math.prod(lhs.shape) * math.prod(
            d for i, d in enumerate(rhs.shape) if i not in rc + rb)
        return work if work >= SMALL else 0

    def product(self, eqn, work: int):
        self.products.append((eqn.outvars[0], self.impl(eqn),
                              [self.atom(a) for a in eqn.invars], work))
        self.producing.add(eqn.outvars[0])

    def write_products(self):
        products, self.products, self.producing = self.products, [], set()
        if len(products) == 1:
            (v, fn, ins, _), = products
            self.line(f"{self.define(v)} = {fn}({', '.join(ins)})")
            return
        outs = [self.define(v) for v, *_ in products]
        calls = "".join(f"({fn}, {', '.join(ins)}, {work}), " for _, fn, ins, work in products)
        self.line(f"{', '.join(outs)}, = products_together(({calls}))")

    def flush(self):
        """Write the products (write_products) or the kernel calls batched so far
        (consecutive groups too small to be threaded, none reading another's outputs),
        then the `del`s held for them. Calls with TOGETHER_MIN elements of work in all run
        side by side (threads.run_together): the GPT step's 31 AdamW updates, RoPE's two
        halves of q and of k."""
        if self.products:
            self.write_products()
        batch, self.batch, self.batched = self.batch, [], set()
        if len(batch) > 1 and sum(c.size for c in batch) >= TOGETHER_MIN:
            self.line("(")
            for c in batch:
                self.line(f"({''.join(o + ', ' for o in c.outs)}),", depth=3)
            self.line(") = run_together((")
            for c in batch:
                self.line(f"({c.kernel}, ({''.join(a + ', ' for a in c.args)})),", depth=3)
            self.line("))")
        else:
            for c in batch:
                self.line(f"{''.join(o + ', ' for o in c.outs)}= {c.kernel}({', '.join(c.args)})")
        for c in batch:                 # kernels return flat outputs (see group)
            for o, shape in c.shaped:
                self.line(f"{o} = {o}.reshape({shape!r})")
        if self.held:
            self.line(f"del {', '.join(sorted(self.held))}")
            self.held = []

    def dead_after(self, steps, reads) -> dict:
        """step index -> the Vars this function defined that are read there for the last
        time (`reads`: step_reads(steps); not outputs): the driver `del`s them after it, so
        that their memory serves the next buffers (as XLA's buffer assignment reuses
        memory) instead of every intermediate living until the function returns (the
        compiled GPT train step of benchmarks/gpt_step.py: peak resident memory 600 MB
        without, 355 MB with)."""
        from fnad.passes.dce import last_reads
        defined = {v for kind, x in steps
                   for v in (self.eqns[x].outvars if kind == "eqn" else x.outputs)}
        return last_reads([[v for v in vs if v in defined] for vs in reads], self.outvars)

    def step_reads(self, steps) -> list[list[Var]]:
        """The Vars each step reads: an equation's operands, a kernel's or a placement's
        inputs."""
        return [[a for a in self.eqns[x].invars if type(a) is Var] if kind == "eqn"
                else [v for v, _ in x.inputs] for kind, x in steps]

    # ---- buffers updated in place ----
    def inplace_updates(self, steps, reads) -> set:
        """Indices of the dynamic_update_slice eqns that may write into their operand
        (`reads`: step_reads(steps)): one whose buffer this function allocated with an
        earlier dynamic_update_slice (never an input, a constant, or anything that may be a
        view of one) when nothing that may alias that buffer is read later or returned. A
        chain of updates (a KV cache updated by every layer) then copies once instead of
        once per update.

        Aliasing is tracked conservatively: a kernel's outputs are new buffers; every other
        equation's outputs may alias any of its inputs (reshape, slice, transpose... are
        views)."""
        from fnad.passes.dce import last_read_at
        from fnad.primitives.shape_ops import dynamic_update_slice_p
        eqns, foreign = self.eqns, object()           # foreign: inputs, constants, literals
        last = last_read_at(reads, self.outvars)
        roots: dict = {}                              # Var -> the buffers it may alias
        members: dict = {}                            # buffer -> the Vars that may alias it
        owned, inplace = set(), set()

        def bind(v, rs):
            roots[v] = rs
            for r in rs:
                members.setdefault(r, []).append(v)
        for pos, (kind, x) in enumerate(steps):
            if kind != "eqn":                         # a kernel's or a placement's: new
                for v in x.outputs:
                    bind(v, (v,))
                continue
            e = eqns[x]
            if e.primitive is dynamic_update_slice_p:
                rs = roots.get(e.invars[0], (foreign,))
                if (len(rs) == 1 and rs[0] in owned
                        and all(last.get(m, -1) <= pos for m in members[rs[0]])):
                    inplace.add(x)
                    bind(e.outvars[0], rs)
                else:
                    owned.add(e.outvars[0])
                    bind(e.outvars[0], (e.outvars[0],))
                continue
            rs = tuple({r for a in e.invars
                        for r in (roots.get(a, (foreign,)) if type(a) is Var else ())})
            for v in e.outvars:
                bind(v, rs)
        return inplace

    # ---- concatenates written in place ----
    def placements(self, steps) -> list:
        """`steps` with each tree of concatenates (and the reshapes, transposes and
        squeezes between them, each read once) replaced by one ("place", _Placed) step
        that allocates the root concatenate's buffer and copies every leaf into its view
        of it. A gradient that flows back through split -> reshape -> transpose -> RoPE's
        interleave (the GPT step's QKV gradient) is then copied once into the [B, T, 3D]
        buffer instead of once per level (concat, reshape of a transposed array, concat).
        A reshape joins a tree only where it is a view of the buffer (the layout is known
        here: the buffer is a fresh C-ordered array); otherwise its result is a leaf."""
        from fnad.passes.dce import read_counts
        eqns = self.eqns
        top = {x for kind, x in steps if kind == "eqn"}
        producer = {e.outvars[0]: i for i, e in enumerate(eqns)
                    if i in top and len(e.outvars) == 1}
        # an output counts as a read: never absorbed (a concatenate's operand read there too)
        reads = read_counts(self.step_reads(steps), self.outvars)
        moves = {so.reshape_p, so.transpose_p, so.squeeze_p, so.concatenate_p}
        absorbed: set = set()
        placed: dict = {}                             # step position of a root -> _Placed

        def walk(a, view, path, writes, taken) -> None:
            i = producer.get(a) if type(a) is Var else None
            e = eqns[i] if i is not None else None
            if e is None or e.primitive not in moves or reads.get(a) != 1:
                writes.append((a, path))
                return
            x = e.invars[0]
            if e.primitive is so.concatenate_p:
                taken.append(i)
                split(e, view, path, writes, taken)
            elif e.primitive is so.transpose_p:
                inv = tuple(int(k) for k in np.argsort(e.params["permutation"]))
                taken.append(i)
                walk(x, view.transpose(inv), f"{path}.transpose({inv!r})", writes, taken)
            else:                                     # reshape, squeeze: a view or a leaf
                shape = tuple(x.aval.shape)
                inner = view.reshape(shape)
                if not np.may_share_memory(inner, view):
                    writes.append((a, path))
                    return
                taken.append(i)
                walk(x, inner, f"{path}.reshape({shape!r})", writes, taken)

        def split(e, view, path, writes, taken) -> None:
            d, start = e.params["dimension"], 0
            for x in e.invars:
                n = x.aval.shape[d]
                index = ", ".join([":"] * d + [f"{start}:{start + n}"])
                walk(x, view[(slice(None),) * d + (slice(start, start + n),)],
                     f"{path}[{index}]", writes, taken)
                start += n

        for pos in range(len(steps) - 1, -1, -1):
            kind, i = steps[pos]
            if kind != "eqn" or i in absorbed or eqns[i].primitive is not so.concatenate_p:
                continue
            root = eqns[i].outvars[0]
            dummy = np.empty(root.aval.shape, np.int8)   # untouched pages: only strides matter
            writes, taken = [], []
            split(eqns[i], dummy, "", writes, taken)
            if taken:                                 # else np.concatenate does as well
                absorbed.update(taken)
                placed[pos] = _Placed(root, writes)
        return [("place", placed[pos]) if pos in placed else step
                for pos, step in enumerate(steps)
                if step[0] != "eqn" or step[1] not in absorbed]

    def place(self, p: _Placed):
        v = p.root
        out = self.define(v)
        self.line(f"{out} = np.empty({tuple(v.aval.shape)!r}, {_np_dtype(v.aval.dtype)})"
                  f"  # concatenates written in place")
        for a, path in p.writes:
            self.line(f"{out}{path}[...] = {self.atom(a)}")
        self.contiguous.add(v)

    # ---- one equation in the driver ----
    def eqn(self, eqn, inplace: bool = False):
        from fnad.primitives.control_flow import cond_p, scan_p, while_p
        prim = eqn.primitive
        ins = [self.atom(a) for a in eqn.invars]
        impl = self.m.backend.impl_rules.get(prim)
        if inplace:
            from fnad.backends.numpy_ref.shape_ops import dynamic_update_slice_into
            self.call(self.m.const(dynamic_update_slice_into), ins, eqn)
            self.lines[-1] += "  # dynamic_update_slice in place"
        elif impl is not None:
            self.call(self.impl(eqn), ins, eqn)
            if prim in _VIEW_PRIMITIVES:
                self.views.update(eqn.outvars)
        elif prim is cond_p:
            self.cond(eqn, ins)
        elif prim is scan_p:
            self.scan(eqn, ins)
        elif prim is while_p:
            self.while_(eqn, ins)
        elif prim in core.eager_rules:
            self.call(self.m.const(eager_call(eqn, self.m.backend), UNSAVED), ins, eqn,
                      multi=True)
        else:
            raise core.no_impl_error(prim, self.m.backend.name)

    def impl(self, eqn) -> str:
        """The name of the backend's impl of `eqn` with its params bound (a K constant);
        for the backend's own dot_general, a gemm.Product planned for the operands' shapes
        (the layout decided here, not at every call). A product whose result may come back
        as a column-major view (gemm.flipped: x @ W^T, N >= 8 M) counts as one of the
        driver's views: the kernels that read it read it by strides, without a copy."""
        prim = eqn.primitive
        impl = self.m.backend.impl_rules[prim]
        if prim is _linalg.dot_general_p and impl is _backend_dot_general():
            recipe = ("product", *((tuple(a.aval.shape), a.aval.dtype) for a in eqn.invars),
                      eqn.params)
            product = _rebuilt(recipe, self.m.backend)
            rhs = eqn.invars[1]
            if product.column_major and (product.rhs[0] == 1
                                         or (type(rhs) is Var and rhs in self.views)):
                self.views.add(eqn.outvars[0])
            return self.m.const(product, recipe)
        return self.m.const(functools.partial(impl, **eqn.params) if eqn.params else impl,
                            ("impl", prim, eqn.params))

    def call(self, fn: str, ins: list, eqn, multi: bool | None = None):
        multi = eqn.primitive.multiple_results if multi is None else multi
        expr = f"{fn}({', '.join(ins)})"
        if not multi:
            self.line(f"{self.define(eqn.outvars[0])} = {expr}")
        elif eqn.outvars:
            outs = [self.define(v) for v in eqn.outvars]
            self.line(f"{''.join(o + ', ' for o in outs)}= {expr}")
        else:
            self.line(expr)

    def _assign(self, eqn, expr: str, depth=2):
        if eqn.outvars:
            outs = [self.define(v) for v in eqn.outvars]
            self.line(f"{''.join(o + ', ' for o in outs)}= {expr}", depth)
        else:
            self.line(expr, depth)

    def cond(self, eqn, ins):
        branches = eqn.params["branches"]
        fns = [self.m.function(b.jaxpr, b.consts) for b in branches]
        idx, ops = ins[0], ins[1:]
        i = self.fresh("i")
        self.line(f"{i} = min(max(int({idx}), 0), {len(fns) - 1})")
        self._assign(eqn, f"({', '.join(fns)},)[{i}]({', '.join(ops)})")

    def scan(self, eqn, ins):
        p = eqn.params
        body = self.m.function(p["jaxpr"].jaxpr, p["jaxpr"].consts)
        nc, nk, length = p["num_consts"], p["num_carry"], p["length"]
        consts, carry, xs = ins[:nc], ins[nc:nc + nk], ins[nc + nk:]
        cs = [self.fresh("c") for _ in carry]
        for c, init in zip(cs, carry):
            self.line(f"{c} = {init}")
        ys = []
        for a in p["jaxpr"].out_avals[nk:]:
            y = self.fresh("y")
            ys.append(y)
            self.line(f"{y} = np.empty({(length,) + tuple(a.shape)!r}, {_np_dtype(a.dtype)})")
        i, r = self.fresh("i"), self.fresh("r")
        steps = f"range({length} - 1, -1, -1)" if p["reverse"] else f"range({length})"
        self.line("with one_blas_thread:  # the body's products: gemm.one_blas_thread")
        self.line(f"for {i} in {steps}:", 3)
        args = consts + cs + [f"{x}[{i}]" for x in xs]
        self.line(f"{r} = {body}({', '.join(args)})", 4)
        for k, c in enumerate(cs):
            self.line(f"{c} = {r}[{k}]", 4)
        for k, y in enumerate(ys):
            self.line(f"{y}[{i}] = {r}[{nk + k}]", 4)
        self._assign(eqn, ", ".join(cs + ys) + ("," if len(cs + ys) == 1 else ""))

    def while_(self, eqn, ins):
        p = eqn.params
        cfn = self.m.function(p["cond_jaxpr"].jaxpr, p["cond_jaxpr"].consts)
        bfn = self.m.function(p["body_jaxpr"].jaxpr, p["body_jaxpr"].consts)
        ncc, nbc = p["cond_nconsts"], p["body_nconsts"]
        cc, bc, carry = ins[:ncc], ins[ncc:ncc + nbc], ins[ncc + nbc:]
        cs = [self.fresh("c") for _ in carry]
        for c, init in zip(cs, carry):
            self.line(f"{c} = {init}")
        self.line("with one_blas_thread:  # the body's products: gemm.one_blas_thread")
        self.line(f"while {cfn}({', '.join(cc + cs)})[0]:", 3)
        lhs = "".join(c + ", " for c in cs)
        self.line(f"{lhs}= {bfn}({', '.join(bc + cs)})", 4)
        self._assign(eqn, ", ".join(cs) + ("," if len(cs) == 1 else ""))


def _never(eqn) -> bool:
    return False


def _backend_dot_general():
    """The numba backend's own dot_general impl (gemm.py's), which a Product replaces."""
    from fnad.backends.numba_cpu import _dot_general
    return _dot_general


_np_dtypes: dict = {}                       # dtype -> _np_dtype(dtype) (dtype.name is slow)


def _np_dtype(dtype) -> str:
    text = _np_dtypes.get(dtype) if type(dtype) in core._dtype_classes else None
    if text is None:
        dt = np.dtype(dtype)
        if dt.type.__module__ == "numpy" and hasattr(np, dt.name):
            text = f"np.{dt.name}"
        elif np.dtype(dt.name) == dt:            # ml_dtypes' (bfloat16...): dt.str is '<V2'
            text = f"np.dtype({dt.name!r})"
        else:
            text = f"np.dtype({dt.str!r})"
        if type(dtype) in core._dtype_classes:
            _np_dtypes[dtype] = text
    return text


def _numpy_buffer(r, backend):
    return r._value if type(r) is Array else np.asarray(r)


def eager_call(eqn, backend, buffer_of=_numpy_buffer):
    """A driver callable running a higher-order primitive's eager rule on buffers of
    `backend` (wrapped as its Arrays); `buffer_of(result, backend)` makes each result a
    buffer again (here NumPy's; the cuda backend passes its own)."""
    rule, params = core.eager_rules[eqn.primitive], eqn.params
    avals = [x.aval for x in eqn.invars]
    where = eqn.source_info

    def call(*bufs):
        with core.eqn_source(where):
            res = rule(*[Array(b, a, backend) for b, a in zip(bufs, avals)], **params)
        res = res if eqn.primitive.multiple_results else [res]
        return [buffer_of(r, backend) for r in res]
    return call


# ---- loading: a file in the cache dir, imported as a module ---------------------------------
def cache_dir() -> pathlib.Path:
    """`$FNAD_CACHE_DIR`, else the `jax_compilation_cache_dir` option (config.update, or
    $JAX_COMPILATION_CACHE_DIR), else ~/.cache/fnad/numba (a temp dir where none is
    writable)."""
    from fnad.config import config
    env = os.environ.get("FNAD_CACHE_DIR") or config.jax_compilation_cache_dir
    path = pathlib.Path(env) if env else pathlib.Path.home() / ".cache" / "fnad" / "numba"
    try:
        path.mkdir(parents=True, exist_ok=True)
        if os.access(path, os.W_OK):
            return path
    except OSError:
        pass
    path = pathlib.Path(tempfile.gettempdir()) / "fnad-numba-cache"
    path.mkdir(parents=True, exist_ok=True)
    return path


# ---- generated programs kept on disk ---------------------------------------------------------
UNSAVED = object()                          # a K entry no other process can rebuild
SAVED_CONSTS_MAX = 1 << 24                  # bytes of jaxpr constants a saved program may hold


def _program_key(closed: ClosedJaxpr, backend, fuse: bool) -> str | None:
    """The name a generated program is saved under: the jaxpr's fingerprint with everything
    else the generated code depends on (fnad's source files, numba's and NumPy's versions,
    the thread count, the code generator's size thresholds). None where the jaxpr has no
    fingerprint (ir.fingerprint: a user's primitive, a callable param)."""
    from fnad.backends.numba_cpu import kernels, plan
    from fnad.backends.numba_cpu.threads import NUM_THREADS
    if sum(np.asarray(c).nbytes for c in closed.consts) > SAVED_CONSTS_MAX:
        return None                  # large constants (weights closed over): not copied
    fp = fingerprint(closed)
    if fp is None:
        return None
    context = (_stamp("driver"), _source_stamp(), backend.__name__, fuse, np.__version__,
               sys.version, NUM_THREADS, TOGETHER_MIN, kernels.THREADED_MIN,
               plan.MAX_GROUP_EQNS, plan.MAX_RECOMPUTED,   # (tunables an A/B script may set)
               config.jax_hoist_scans)        # (the passes a traced program went through)
    return hashlib.sha256(fp + repr(context).encode()).hexdigest()[:32]


@functools.cache                        # once per process: a stat of fnad's source files
def _source_stamp() -> str:
    """Names, sizes and modification times of fnad's Python files (fnad, fnad.backends,
    fnad.primitives): any edit to fnad changes it, so no program generated by other code is
    read back."""
    import fnad
    import fnad.backends
    import fnad.primitives
    h = hashlib.sha256()
    for pkg in (fnad, fnad.backends, fnad.primitives):
        for root in pkg.__path__:
            for path in sorted(pathlib.Path(root).rglob("*.py")):
                st = path.stat()
                h.update(f"{path}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:16]


def _save(key: str, program: tuple) -> None:
    """Keep (driver, kernels, recipes, signatures) as `<cache>/fnad_program_<key>.pkl`,
    unless something in it does not pickle (a user's primitive, a closure among the params):
    then it is generated again in each process."""
    try:
        data = pickle.dumps((key, program), protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return
    try:
        _replace(cache_dir() / f"fnad_program_{key}.pkl", data)
    except OSError:
        pass                                    # a read-only cache dir: generate every time


def _saved(key: str, backend) -> tuple | None:
    """(driver, kernels, K, signatures) of the program saved under `key`, K rebuilt; None
    where there is none (or it cannot be read: it is generated and saved again)."""
    try:
        data = (cache_dir() / f"fnad_program_{key}.pkl").read_bytes()
    except OSError:
        return None
    try:
        saved_key, (driver, kernels, recipes, signatures) = pickle.loads(data)
        if saved_key != key:
            return None
        K = [_rebuilt(r, backend) for r in recipes]
    except Exception:                 # a truncated or foreign file: generate it again
        return None
    return driver, kernels, K, signatures


def _rebuilt(recipe: tuple, backend):
    """The K entry `recipe` describes (_ModuleBuilder.const)."""
    kind = recipe[0]
    if kind == "impl":                         # a primitive's impl, its params bound
        _, prim, params = recipe
        impl = backend.impl_rules[prim]
        return functools.partial(impl, **params) if params else impl
    if kind == "product":                      # dot_general planned for its operands
        _, (lhs_shape, lhs_dtype), (rhs_shape, rhs_dtype), params = recipe
        impl = backend.impl_rules[_linalg.dot_general_p]
        if impl is not _backend_dot_general():     # replaced since: the impl as it is now
            return functools.partial(impl, **params)
        from fnad.backends.numba_cpu.gemm import Product
        return Product(lhs_shape, lhs_dtype, rhs_shape, rhs_dtype, **params)
    if kind == "array":
        _, value, writeable = recipe
        value.flags.writeable = writeable
        return value
    return recipe[1]


def _write(path: pathlib.Path, src: str) -> None:
    """Write `src` to `path` unless it is already there."""
    if path.exists() and path.read_text() == src:
        return
    _replace(path, src.encode())


def _replace(path: pathlib.Path, data: bytes) -> None:
    """Write `data` to `path` atomically (a rename: readers in other processes never see a
    partial file)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _code(src: str, path: pathlib.Path):
    """`compile(src, path)`, kept in `<path stem>.<python tag>.code` beside the source (the
    Python version's magic number and a hash of the source, then the marshalled code).

    Python's own .pyc cache does this for imported modules, but not where bytecode writing
    is off (PYTHONDONTWRITEBYTECODE), and never for exec'd source such as the driver:
    compiling the GPT step's driver took 12 ms of a warm-cache first call, its 23 kernel
    modules about 13 ms more without .pyc files."""
    head = importlib.util.MAGIC_NUMBER + hashlib.sha256(src.encode()).digest()[:16]
    cached = path.with_name(f"{path.stem}.{sys.implementation.cache_tag}.code")
    try:
        data = cached.read_bytes()
        if data[:len(head)] == head:
            return marshal.loads(data[len(head):])
    except (OSError, ValueError, EOFError, TypeError):
        pass                                  # absent, or unreadable: compile again
    code = compile(src, str(path), "exec")
    try:
        _replace(cached, head + marshal.dumps(code))
    except OSError:
        pass                                  # a read-only cache dir: compile every time
    return code


def load_module(src: str, name: str):
    """Import the kernel module `name` from `<cache>/fnad_<name>.py` (written once).

    Registered in sys.modules before it runs, and its functions' code names that file, so
    numba's `cache=True` can locate their source and keep their machine code next to it
    (__pycache__)."""
    mod = _MODULES.get(name)
    if mod is not None:
        return mod
    modname = f"fnad_{name}"
    path = cache_dir() / f"{modname}.py"
    _write(path, src)
    mod = types.ModuleType(modname)
    mod.__file__ = str(path)
    sys.modules[modname] = mod
    exec(_code(src, path), mod.__dict__)
    _MODULES[name] = mod
    return mod


def load_driver(src: str, kernels: dict, llvm: bool = False):
    """The `make` function of a driver source (kept in memory by hash and kernel compiler,
    whose kernels it holds; also written to the cache dir, so that tracebacks show its
    lines)."""
    sha = hashlib.sha256(src.encode()).hexdigest()[:24]
    make = _DRIVERS.get((sha, llvm))
    if make is None:
        path = cache_dir() / f"fnad_driver_{sha}.py"
        _write(path, src)
        from fnad.backends.numba_cpu.gemm import one_blas_thread, products_together
        from fnad.backends.numba_cpu.threads import (aligned_empty, run_threaded, run_together,
                                                     strided, writable, writable_flat)
        namespace = dict(kernels, np=np, aligned_empty=aligned_empty,
                         one_blas_thread=one_blas_thread, products_together=products_together,
                         run_threaded=run_threaded, run_together=run_together,
                         strided=strided, writable=writable, writable_flat=writable_flat,
                         __name__=f"fnad_driver_{sha}")
        exec(_code(src, path), namespace)
        if llvm:                    # llvm_kernels.Kernel: the driver calls its builtin
            for kernel in kernels.values():
                kernel.bind(namespace)
        make = _DRIVERS[sha, llvm] = namespace["make"]
    return make
