"""The `llvm` kernel compiler of the numba backend (opt-in: `FNAD_KERNEL_COMPILER=llvm`).

With it, codegen.py gives the driver a `Kernel` for each fused kernel instead of numba's
dispatcher. At the first call with each argument signature a Kernel translates its kernel
source to LLVM IR (llvm_codegen.py), optimizes it with llvmlite at the level numba uses (O3,
the loop vectorizer on, SLP off), emits object code for this CPU and keeps it in the cache
dir (`fnad_llvm_<kernel>.<digest>.pkl`, keyed by the source, the signature, llvmlite's
version and the CPU: a new process loads it in about a millisecond), then links it into one
MCJIT engine per process. It calls the machine code through ctypes (the GIL released),
passing each array as its PyObject (a small generated wrapper reads the data pointer), after
allocating the kernel's outputs with np.empty. The driver, the threads
(runtime.run_threaded / run_together) and the results are the numba path's; the results
are bit-identical (the same LLVM, the same flags).

Why: compiling is 4-6x faster than numba (numba's own Python front end is skipped); a GPT
training step's 22 kernels: 0.58 s against 3.0 s in a fresh process. Why it is not the
default yet: it is new, and each kernel call costs about 2-4 us more than numba's
dispatcher (the signature check and the ctypes call), which small programs feel.

A kernel the translator does not cover (NotImplementedError & co. from llvm_codegen), an
argument that is not a C-contiguous array of a covered dtype, an int or an int tuple, or a
signature it cannot type, runs numba's dispatcher for that signature instead: `FALLBACKS`
lists (kernel, reason) for each such case.
"""
from __future__ import annotations

import ast
import ctypes
import hashlib
import os
import threading

import numpy as np

COMPILER = os.environ.get("FNAD_KERNEL_COMPILER", "numba")
if COMPILER not in ("numba", "llvm"):
    raise ValueError(f"FNAD_KERNEL_COMPILER={COMPILER!r}: expected 'numba' or 'llvm'")
ENABLED = COMPILER == "llvm"

CACHE_VERSION = 1                    # of the translator's output: bump to drop cached code
FALLBACKS: list = []                 # (kernel name, reason): signatures run by numba instead
_LOCK = threading.Lock()             # one compile at a time (the engine is shared)
_JIT: dict = {}                      # "engine", "tm", "llvm": built at the first compile
_DTYPES = frozenset(("float32", "float64", "bool", "int8", "uint8", "int16", "uint16",
                     "int32", "uint32", "int64", "uint64"))


def _jit():
    if not _JIT:
        import llvmlite.binding as llvm
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_triple(llvm.get_process_triple())
        cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
        tm = target.create_target_machine(cpu=cpu, features=features, opt=3, reloc="static",
                                          codemodel="jitdefault", jit=True)
        import llvmlite
        _JIT.update(llvm=llvm, tm=tm, engine=llvm.create_mcjit_compiler(
            llvm.parse_assembly(""), tm), objects=[],
            machine=(llvmlite.__version__, llvm.get_process_triple(), cpu, features))
    return _JIT


def _signature(args) -> tuple | None:
    """The argument types the translator compiles for, or None (numba takes the call)."""
    sig = []
    for a in args:
        if isinstance(a, np.ndarray):
            name = a.dtype.name
            if name not in _DTYPES or not a.flags.c_contiguous:
                return None
            sig.append(("arr", name))
        elif isinstance(a, tuple):
            sig.append(("tup", len(a)))
        elif isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)):
            sig.append("int64")
        else:
            return None
    return tuple(sig)


class _Machine:
    """One compiled signature: the ctypes function and how to call it."""
    __slots__ = ("fn", "outputs", "tuples", "threaded")

    def __init__(self, fn, outputs, tuples, threaded):
        self.fn, self.outputs, self.tuples, self.threaded = fn, outputs, tuples, threaded


_KERNELS: dict = {}                  # kernel name -> Kernel (one per distinct source)


def kernel(name: str, source: str, load_numba) -> Kernel:
    """The Kernel of this source, made once per process (its machine code is shared by every
    program that uses the same kernel, as numba's dispatchers are)."""
    k = _KERNELS.get(name)
    if k is None:
        k = _KERNELS[name] = Kernel(name, source, load_numba)
    return k


class Kernel:
    """A fused kernel compiled by llvm_codegen + llvmlite: called as numba's dispatcher of
    the same source is (same arguments, same results). `load_numba()` gives the dispatcher
    for what the translator does not cover."""

    __slots__ = ("name", "source", "_load_numba", "_machines", "_numba")

    def __init__(self, name: str, source: str, load_numba):
        self.name, self.source, self._load_numba = name, source, load_numba
        self._machines: dict = {}
        self._numba = None

    def __repr__(self):
        return f"<fnad llvm kernel {self.name}>"

    def _by_numba(self, args, reason):
        if self._numba is None:
            FALLBACKS.append((self.name, reason))
            self._numba = self._load_numba()
        return self._numba(*args)

    def __call__(self, *args):
        sig = _signature(args)
        if sig is None:
            return self._by_numba(args, "argument types")
        m = self._machines.get(sig)
        if m is None:
            with _LOCK:
                m = self._machines.get(sig)
                if m is None:
                    m = self._machines[sig] = self._compile(sig)
        if m is False:
            return self._by_numba(args, "not translated")
        if m.tuples:
            args = list(args)
            for i in m.tuples:
                args[i] = np.array(args[i], np.int64)
        outs = [np.empty(() if i is None else args[i], dt) for i, dt in m.outputs]
        m.fn(*args, *outs)
        return 0 if m.threaded else tuple(outs)

    def _compile(self, sig):
        """The machine code for `sig`: from the cache dir where an earlier process left it,
        else translated, optimized and written there (object code and how to call it)."""
        import pickle

        from fnad.backends.numba_cpu.codegen import _replace, cache_dir
        jit = _jit()
        key = repr((CACHE_VERSION, self.source, sig, jit["machine"]))
        digest = hashlib.sha256(key.encode()).hexdigest()[:20]
        path = cache_dir() / f"fnad_llvm_{self.name}.{digest}.pkl"
        try:
            saved = pickle.loads(path.read_bytes())
        except (OSError, pickle.UnpicklingError, EOFError, ValueError):
            saved = None
        if saved is None:
            saved = self._translate(sig, f"{self.name}_{digest}")
            if saved is False:
                return False
            try:
                _replace(path, pickle.dumps(saved))
            except OSError:
                pass                                  # a read-only cache dir
        obj = jit["llvm"].ObjectFileRef.from_data(saved["object"])
        jit["objects"].append(obj)
        jit["engine"].add_object_file(obj)
        jit["engine"].finalize_object()
        argtypes = [ctypes.py_object if isinstance(s, tuple) else ctypes.c_int64 for s in sig]
        argtypes += [ctypes.py_object] * len(saved["outputs"])
        address = jit["engine"].get_function_address(saved["wrapper"])
        if not address:
            raise RuntimeError(f"fnad llvm kernels: {saved['wrapper']} not found in the "
                               "loaded object code")
        fn = ctypes.CFUNCTYPE(None, *argtypes)(address)
        tuples = tuple(i for i, s in enumerate(sig) if isinstance(s, tuple) and s[0] == "tup")
        return _Machine(fn, saved["outputs"], tuples, saved["threaded"])

    def _translate(self, sig, symbol: str):
        """Object code of this kernel at `sig` (its function named `symbol`) and how to call
        it, or False where the translator does not cover the kernel."""
        from fnad.backends.numba_cpu import llvm_codegen as lg
        tree = ast.parse(self.source)
        fn_ast = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
                      and n.name == self.name)
        jit = _jit()
        llvm, tm = jit["llvm"], jit["tm"]
        try:
            mod, info = lg.kernel_module(symbol, fn_ast, list(sig), llvm.get_process_triple(),
                                         str(tm.target_data))
        except (NotImplementedError, NameError, KeyError, TypeError) as e:
            FALLBACKS.append((self.name, f"{type(e).__name__}: {e}"[:200]))
            return False
        wrapper = lg.pyobject_wrapper(mod, mod.get_global(symbol), info)
        ll = llvm.parse_assembly(str(mod))
        ll.verify()
        tuning = llvm.create_pipeline_tuning_options(speed_level=3)
        tuning.loop_vectorization, tuning.slp_vectorization = True, False   # numba's choice
        passes = llvm.create_pass_builder(tm, tuning)
        passes.getModulePassManager().run(ll, passes)
        outputs = tuple((size, np.dtype(dtype))   # (position of its size argument or None, dtype)
                        for size, (_, dtype) in zip(info["output_sizes"], info["outputs"]))
        return {"object": tm.emit_object(ll), "wrapper": wrapper.name, "outputs": outputs,
                "threaded": info["threaded"]}
