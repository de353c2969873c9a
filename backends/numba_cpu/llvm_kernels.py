"""The `llvm` kernel compiler of the numba backend: the default (`FNAD_KERNEL_COMPILER=numba`
compiles the kernels with numba instead).

With it, codegen.py gives the driver a `Kernel` for each fused kernel instead of numba's
dispatcher. At the first call with each argument signature a Kernel translates its kernel
source to LLVM IR (llvm_codegen.py), optimizes it with llvmlite at the level numba uses
(O3, the loop vectorizer on, SLP off), emits object code for this CPU and keeps it in the
cache dir (`fnad_llvm_<kernel>.<digest>.pkl`, keyed by the source, the signature, the
translator's own source, llvmlite's version and the CPU: a new process loads it in about a
millisecond), then links it into one MCJIT engine per process. The object code includes a
CPython builtin (METH_FASTCALL, llvm_codegen.fastcall_wrapper) that checks the arguments,
allocates the outputs with numpy.empty and runs the kernel without the GIL; once a kernel
has one, the drivers that call it (`bind`) call the builtin directly. The driver, the
threads (threads.run_threaded / run_together) and the results are the numba path's; the
results are numba's bit for bit (the same LLVM, the same flags) on AMD's Zen 5; on Intel's
Sapphire/Emerald Rapids LLVM orders some vectorized sums and contracts some of mathfns' a*b + c
into FMAs differently for the two IRs (1-ulp differences, tests/test_llvm_kernels.py). A
program whose kernels are all translated runs without importing numba (threads.py).

Why: compiling is 4-6x faster than numba (numba's own Python front end is skipped); a GPT
training step's 22 kernels: 0.58 s against 3.0 s in a fresh process. A call costs less
than numba's dispatcher (`x + 1` under jit: 1.26 against 1.68 us). The kernels run at
numba's speed within a few percent (the GPT step: 2-3 % slower). With it the background
compile (config.jax_background_compile, numba's) is not used: compiling in the foreground
takes less time than numba's children take to start. A program with HELPER_MIN kernel
signatures or more to compile starts one helper process (compile_ahead) that compiles them
from the last backwards while this process compiles from the first (the GPT step's cold
first call: 1.5-1.6 s against 1.8-2.6 s alone).

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

COMPILER = os.environ.get("FNAD_KERNEL_COMPILER", "llvm")
if COMPILER not in ("numba", "llvm"):
    raise ValueError(f"FNAD_KERNEL_COMPILER={COMPILER!r}: expected 'numba' or 'llvm'")


# What the generated code calls (llvm_codegen: the builtins, the row buffers).
_C_FUNCTIONS = ("PyLong_AsLongLong", "PyErr_Occurred", "PyErr_Clear", "PyObject_Vectorcall",
                "PyEval_SaveThread", "PyEval_RestoreThread", "PyTuple_New", "PyTuple_SetItem",
                "Py_IncRef", "Py_DecRef", "PyErr_NoMemory", "PyLong_FromLongLong",
                "PySequence_GetSlice", "aligned_alloc", "malloc", "free")


def layout_as_assumed() -> bool:
    """Whether this interpreter and NumPy lay out objects as the generated builtins read
    them (llvm_codegen.fastcall_wrapper): a 64-bit CPython with the GIL, ndarray's data,
    descr and flags at 16, 56 and 64, the descr's type number at 28, a tuple's size and items
    at 16 and 24; and the C functions the machine code calls are visible in this process
    (where the JIT's linker finds them). Checked on live objects; where it fails, numba
    compiles the kernels."""
    import sys
    import sysconfig
    if sys.implementation.name != "cpython" or ctypes.sizeof(ctypes.c_void_p) != 8 or \
            sysconfig.get_config_var("Py_GIL_DISABLED"):
        return False
    try:
        process = ctypes.CDLL(None)
        for name in _C_FUNCTIONS:
            getattr(process, name)
    except (OSError, AttributeError, TypeError):
        return False

    def at(address, ctype):
        return ctype.from_address(address).value
    a, t = np.zeros(3, np.float32), (7, 8)
    descr = at(id(a) + 56, ctypes.c_void_p)
    return (at(id(a) + 8, ctypes.c_void_p) == id(np.ndarray)
            and at(id(a) + 16, ctypes.c_void_p) == a.ctypes.data
            and descr == id(a.dtype) and at(descr + 28, ctypes.c_int) == a.dtype.num
            and at(id(a) + 64, ctypes.c_int) & 1 == 1
            and at(id(t) + 8, ctypes.c_void_p) == id(tuple)
            and at(id(t) + 16, ctypes.c_ssize_t) == 2
            and at(id(t) + 24, ctypes.c_void_p) == id(t[0]))


ENABLED = COMPILER == "llvm" and layout_as_assumed()

FALLBACKS: list = []                 # (kernel name, reason): signatures run by numba instead
_LOCK = threading.Lock()             # one compile at a time (the engine is shared)
_NUMBA_LOCK = threading.Lock()       # one load of a kernel's numba dispatcher at a time
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
        import pathlib

        import llvmlite
        here = pathlib.Path(__file__).parent     # the code that makes the object code
        translator = hashlib.sha256(b"".join(
            (here / f).read_bytes() for f in ("llvm_codegen.py", "llvm_kernels.py",
                                              "mathfns.py", "runtime.py"))).hexdigest()
        _JIT.update(llvm=llvm, tm=tm, engine=llvm.create_mcjit_compiler(
            llvm.parse_assembly(""), tm), objects=[],
            machine=(translator, llvmlite.__version__, llvm.get_process_triple(), cpu,
                     features))
    return _JIT


# dtype -> its name, for the dtypes above in native byte order (NumPy builds `dtype.name`
# in Python: 2.5 us a call, most of a kernel call's dispatch before this table)
_NAMES = {np.dtype(name): name for name in _DTYPES}


def _signature(args) -> tuple | None:
    """The argument types the translator compiles for, or None (numba takes the call)."""
    sig = []
    for a in args:
        if type(a) is int:
            sig.append("int64")
        elif isinstance(a, np.ndarray):
            name = _NAMES.get(a.dtype)
            if name is None or not a.flags.c_contiguous:
                return None
            sig.append(("arr", name))
        elif isinstance(a, tuple):
            sig.append(("tup", len(a)))
        elif isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)):
            sig.append("int64")
        else:
            return None
    return tuple(sig)


def _plain_ints(a):
    """`a` with NumPy integers (alone or in a tuple) as Python ints; `a` itself if it has
    none."""
    if isinstance(a, np.integer):
        return int(a)
    if isinstance(a, tuple) and any(isinstance(e, np.integer) for e in a):
        return tuple(int(e) if isinstance(e, np.integer) else e for e in a)
    return a


class _PyMethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


_METH_FASTCALL = 0x80
_new_builtin = ctypes.pythonapi.PyCFunction_NewEx
_new_builtin.restype = ctypes.py_object
_new_builtin.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]


class _Machine:
    """One compiled signature: the builtin that checks its arguments, allocates the outputs
    and runs the machine code (llvm_codegen.fastcall_wrapper), and what keeps it alive."""
    __slots__ = ("call", "_keep")

    def __init__(self, call, keep):
        self.call, self._keep = call, keep


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

    __slots__ = ("name", "source", "_load_numba", "_machines", "_numba", "_first",
                 "_namespaces")

    def __init__(self, name: str, source: str, load_numba):
        self.name, self.source, self._load_numba = name, source, load_numba
        self._machines: dict = {}
        self._numba = None
        self._first = None                # the first compiled signature's machine
        self._namespaces: list = []       # drivers' globals that call this kernel

    def __repr__(self):
        return f"<fnad llvm kernel {self.name}>"

    def _by_numba(self, args, reason):
        if self._numba is None:
            with _NUMBA_LOCK:             # threads running the kernel: one loads it
                if self._numba is None:
                    FALLBACKS.append((self.name, reason))
                    self._numba = self._load_numba()
        return self._numba(*args)

    def bind(self, namespace: dict) -> None:
        """Let `namespace` (a driver's globals) call the compiled code directly, without
        this object's Python `__call__`, once there is some."""
        self._namespaces.append(namespace)
        if self._first is not None:
            namespace[self.name] = self._first.call

    def __call__(self, *args):
        """The general path: the machine code for these arguments' signature (compiled at
        its first call), else numba's dispatcher."""
        sig = _signature(args)
        if sig is None:
            return self._by_numba(args, "argument types")
        m = self._machines.get(sig)
        if m is None:
            with _LOCK:
                m = self._machines.get(sig)
                if m is None:
                    m = self._machines[sig] = self._compile(sig)
                    if m and self._first is None:      # drivers now call it directly
                        self._first = m
                        for ns in self._namespaces:
                            ns[self.name] = m.call
        if m is False:
            return self._by_numba(args, "not translated")
        return m.call(*args)

    def _rejected(self, *args):
        """What a compiled builtin calls with arguments it does not take: another signature
        (compiled here); NumPy integers (as Python ints, to the builtin again); else one its
        checks refine (an int beyond int64, an int64 array of another type number): numba's
        dispatcher."""
        sig = _signature(args)
        if sig is not None and sig not in self._machines:
            return self(*args)
        plain = tuple(map(_plain_ints, args))
        if self._machines.get(sig) and any(p is not a for p, a in zip(plain, args)):
            return self._machines[sig].call(*plain)
        return self._by_numba(args, "arguments the compiled code does not take")

    def _path(self, sig) -> tuple:
        """(path in the cache dir, digest) of this kernel's object code for `sig`."""
        from fnad.backends.numba_cpu.codegen import cache_dir
        key = repr((self.source, sig, _jit()["machine"]))
        digest = hashlib.sha256(key.encode()).hexdigest()[:20]
        return cache_dir() / f"fnad_llvm_{self.name}.{digest}.pkl", digest

    def _object_code(self, sig):
        """The object code for `sig` and how to call it: from the cache dir where another
        process (an earlier one, or a helper: compile_ahead) left it, else translated,
        optimized and written there; False where the translator does not cover it."""
        import pickle

        from fnad.backends.numba_cpu.codegen import _replace
        path, digest = self._path(sig)
        try:
            return pickle.loads(path.read_bytes())
        except (OSError, pickle.UnpicklingError, EOFError, ValueError):
            pass
        saved = self._translate(sig, f"{self.name}_{digest}")
        if saved is not False:
            try:
                _replace(path, pickle.dumps(saved))
            except OSError:
                pass                                  # a read-only cache dir
        return saved

    def _compile(self, sig):
        """The machine code for `sig` (its object code: _object_code), linked into this
        process's engine."""
        saved = self._object_code(sig)
        if saved is False:
            return False
        jit = _jit()
        obj = jit["llvm"].ObjectFileRef.from_data(saved["object"])
        jit["objects"].append(obj)
        jit["engine"].add_object_file(obj)
        jit["engine"].finalize_object()
        address = jit["engine"].get_function_address(saved["wrapper"])
        if not address:
            raise RuntimeError(f"fnad llvm kernels: {saved['wrapper']} not found in the "
                               "loaded object code")
        method = _PyMethodDef(self.name.encode(), address, _METH_FASTCALL, None)
        ctx = (self._rejected, np.ndarray, int, tuple, np.empty, (), 0,
               *(np.dtype(dt) for dt in saved["outputs"]))
        return _Machine(_new_builtin(ctypes.addressof(method), ctx, None), (method, ctx))

    def _translate(self, sig, symbol: str):
        """Object code of this kernel at `sig` (its function named `symbol`) and how to call
        it, or False where the translator does not cover the kernel."""
        from fnad.backends.numba_cpu import llvm_codegen as lg
        tree = ast.parse(self.source)
        fn_ast = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
                      and n.name == self.name)
        if len(sig) != len(fn_ast.args.args):     # numba's dispatcher says what is wrong
            return False
        jit = _jit()
        llvm, tm = jit["llvm"], jit["tm"]
        try:
            mod, info = lg.kernel_module(symbol, fn_ast, list(sig), llvm.get_process_triple(),
                                         str(tm.target_data))
        except (NotImplementedError, NameError, KeyError, TypeError) as e:
            FALLBACKS.append((self.name, f"{type(e).__name__}: {e}"[:200]))
            return False
        type_nums = [np.dtype(t[1]).num if isinstance(t, tuple) and t[0] == "arr" else 0
                     for t in sig]
        wrapper = lg.fastcall_wrapper(mod, mod.get_global(symbol), info, type_nums)
        ll = llvm.parse_assembly(str(mod))
        ll.verify()
        tuning = llvm.create_pipeline_tuning_options(speed_level=3)
        tuning.loop_vectorization, tuning.slp_vectorization = True, False   # numba's choice
        passes = llvm.create_pass_builder(tm, tuning)
        passes.getModulePassManager().run(ll, passes)
        return {"object": tm.emit_object(ll), "wrapper": wrapper.name,
                "outputs": tuple(dtype for _, dtype in info["outputs"])}


# ---- a helper process for a cold first call ---------------------------------------------------
# llvmlite runs every LLVM call behind one lock, so one process compiles one kernel at a time
# (about 0.1 s each): a cold first call of the GPT step spent 2 s of its 2.3 s on its 22. A
# helper process compiles the program's kernels from the last backwards while this one
# compiles from the first forwards, each taking the other's object code from the cache dir
# (Kernel._object_code) once it is there; where they meet, a kernel may be compiled twice.
HELPER_MIN = 8              # kernel signatures to compile: below, the helper's start (~0.3 s
#                             importing numpy, llvmlite and fnad) would cost about as much


def compile_ahead(kernels, signatures: dict):
    """Start a helper process (the Popen, or None) for the kernel signatures of a program
    that are not in the cache dir: `kernels` in the order the driver first calls them,
    `signatures` the code generator's argument specs per kernel name. None where there
    are fewer than HELPER_MIN, where this process may use one CPU, or with
    FNAD_LLVM_HELPER=0. A helper that fails costs only its help: this process compiles
    whatever is not in the cache dir when it needs it."""
    from fnad.backends.numba_cpu.threads import usable_cpus
    allowed = os.environ.get("FNAD_LLVM_HELPER", "1")
    if allowed not in ("0", "1"):
        raise ValueError(f"FNAD_LLVM_HELPER={allowed!r}: expected '1' (a helper process "
                         "compiles a cold program's kernels too, the default) or '0' (none)")
    if allowed == "0" or usable_cpus() < 2:
        return None
    todo = []
    for k in kernels:
        if not isinstance(k, Kernel):
            continue
        for spec in signatures.get(k.name, ()):
            sig = _signature_of_spec(spec)
            if sig is not None and sig not in k._machines and not k._path(sig)[0].exists():
                todo.append((k.name, k.source, sig))
    if len(todo) < HELPER_MIN:
        return None
    import json
    import subprocess
    import sys

    from fnad.backends.numba_cpu.codegen import cache_dir
    cache = str(cache_dir())          # (run there: see precompile.start on `python -m`)
    proc = subprocess.Popen([sys.executable, "-m", "fnad.backends.numba_cpu.llvm_kernels"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=cache,
                            env=dict(os.environ, FNAD_CACHE_DIR=cache))
    # beyond a pipe's 64 KB a write would wait for the helper's imports: a thread feeds it
    job = json.dumps(todo[::-1]).encode()
    threading.Thread(target=_feed, args=(proc, job), daemon=True).start()
    return proc


def _feed(proc, job: bytes) -> None:
    try:
        proc.stdin.write(job)
        proc.stdin.close()
    except OSError:                                   # it exited already: no help
        pass


def _signature_of_spec(spec) -> tuple | None:
    """The _signature of the arguments a code generator's spec describes (codegen's
    `signatures`: ("array", dtype, ndim), ("tuple", n), ("int64",)), or None where the
    call goes to numba."""
    sig = []
    for s in spec:
        if s[0] == "array" and s[1] in _DTYPES:
            sig.append(("arr", s[1]))
        elif s[0] == "tuple":
            sig.append(("tup", s[1]))
        elif s[0] == "int64":
            sig.append("int64")
        else:
            return None
    return tuple(sig)


def _helper(work: list) -> None:
    """The helper's loop: [name, source, signature] (JSON's lists), each compiled into the
    cache dir unless some process has put it there meanwhile."""
    for name, source, sig in work:
        k = Kernel(name, source, None)
        sig = tuple(tuple(a) if isinstance(a, list) else a for a in sig)
        if not k._path(sig)[0].exists():
            k._object_code(sig)


if __name__ == "__main__":
    import json
    import sys
    _helper(json.load(sys.stdin))
