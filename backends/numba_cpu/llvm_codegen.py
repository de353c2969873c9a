"""fnad's generated kernels (the Python source of kernels.py) translated to LLVM IR with
llvmlite, without numba: the `llvm` kernel compiler (llvm_kernels.py compiles and calls it).

Why: numba spends 60-280 ms of its own Python (typing, lowering) and LLVM work on each
kernel; a GPT training step's 22 kernels took 3.0 s in a fresh process, against 0.58 s
translated here (the same LLVM optimization, once), with numba's results (bit for bit on
AMD's Zen 5; on Intel's AVX-512 CPUs some sums and FMAs round differently). The kernels
are a small language (kernels.py's module doc): scalar assignments, `for ... in range`,
`while True` with `break`, `if`, conditional expressions, numpy scalar casts and constants,
flat array loads and stores, and calls to runtime.py's helpers and mathfns.py's functions.
The translator knows exactly that language and types it as numba would; anything else
raises NotImplementedError (or NameError/KeyError/TypeError), and the caller then compiles
the kernel with numba instead.

Calling convention of a translated kernel `k(params...)` (returns an i32 status, C ABI, all
pointers noalias):
  - an array parameter (any rank, flat, C-contiguous)  -> pointer to its first element
  - a tuple of ints (strides `st<k>`)    -> pointer to int64[n]
  - an int parameter (sizes s<k>, chunks) -> i64 (sizes of kernel-allocated outputs unused)
  - then one pointer per `o<k> = empty(...)` at function level (the kernel's outputs, which
    the caller allocates with np.empty); `return (...)` / `return 0` return status 0.
`empty(n, dt)` inside a loop (row buffers) is allocated there (aligned_alloc) and freed at
the end of that loop body; where the allocation fails the kernel frees what it holds and
returns OUT_OF_MEMORY, which its builtin raises as MemoryError. mathfns functions
(exp_f32, ...) and runtime.py's integer division helpers are translated from their source
too (internal, alwaysinline; `contract` on mathfns' float ops, as their numba flags).
Semantics that differ from numba's and do not matter for fnad's kernels (which cast every
result to its dtype): small integers are not widened to int64 before an operation; a
conditional expression evaluates both arms (they are pure); unsigned `//` has no zero check
(used only with a chunk count >= 1).
"""
from __future__ import annotations

import ast
import math
import pathlib
import re

import numpy as np
from llvmlite import ir

MATHFNS_PATH = pathlib.Path(__file__).with_name("mathfns.py")
RUNTIME_PATH = pathlib.Path(__file__).with_name("runtime.py")
RUNTIME_FUNCS = ("idiv", "irem", "udiv", "urem")     # @_njit helpers translated from source

F32, F64 = ir.FloatType(), ir.DoubleType()
I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
LL = {"float32": F32, "float64": F64, "bool": I1, "int8": I8, "uint8": I8, "int16": ir.IntType(16),
      "uint16": ir.IntType(16), "int32": I32, "uint32": I32, "int64": I64, "uint64": I64}
MEM = dict(LL, bool=I8)                     # in-memory element type (numba stores bool as i8)
SIZE = {"float32": 4, "float64": 8, "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2,
        "int32": 4, "uint32": 4, "int64": 8, "uint64": 8}
NP_NAMES = {"float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
            "uint32", "uint64", "bool_"}
REDUCE_FLAGS = ("reassoc", "nsz")
# Outputs of at least ALIGNED_OUTPUT_BYTES start on an OUTPUT_ALIGN-byte boundary (a view of
# a slightly larger numpy.empty), as numba's allocations do; numpy.empty's large blocks
# start 16 bytes past a page, and the kernels' 64-byte vector stores straddle cache lines.
OUTPUT_ALIGN, ALIGNED_OUTPUT_BYTES = 64, 4096
OUT_OF_MEMORY = 1           # a kernel's status when a row buffer's allocation failed
SCRATCH_ALIGN = 64          # row buffers: aligned_alloc(64) (0: malloc, 16-byte aligned)


def is_float(t): return t in ("float32", "float64")
def is_int(t): return t in LL and t not in ("float32", "float64", "bool")
def is_signed(t): return t.startswith("int")


class Val:
    """A typed SSA value; `ty` a dtype name, ('arr', dtype) for a pointer, ('tup', n) for an
    int64 tuple pointer, ('pytup', [Val]) for a tuple of values."""
    __slots__ = ("v", "ty")

    def __init__(self, v, ty):
        self.v, self.ty = v, ty


class Const:
    """A compile-time constant (numpy scalar, Python number, bool or tuple of them)."""
    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x


def const_type(x):
    if isinstance(x, (bool, np.bool_)):
        return "bool"
    if isinstance(x, np.generic):
        return np.dtype(type(x)).name
    if isinstance(x, int):
        return "int64"
    if isinstance(x, float):
        return "float64"
    raise TypeError(f"constant {x!r}")


def promote(a, b):
    if a == b:
        return a
    if a == "bool":
        return b if b != "bool" else a
    if b == "bool":
        return a
    return np.promote_types(a, b).name


# ---- constant evaluation (module-level constants of mathfns, np.float32(...) literals) ------
_NP_CONST = {"inf": np.inf, "nan": np.nan, "pi": np.pi, "e": np.e}


def const_eval(node, env):
    """The value of `node` if it is a compile-time constant in `env`, else raise KeyError."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise KeyError(node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
            node.value.id == "np" and node.attr in _NP_CONST:
        return _NP_CONST[node.attr]
    if isinstance(node, ast.Tuple):
        return tuple(const_eval(e, env) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        x = const_eval(node.operand, env)
        if isinstance(node.op, ast.USub):
            return -x
        if isinstance(node.op, ast.UAdd):
            return +x
        raise KeyError("unary")
    if isinstance(node, ast.BinOp):
        a, b = const_eval(node.left, env), const_eval(node.right, env)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.Div: lambda: a / b, ast.Pow: lambda: a ** b}
        if type(node.op) in ops:
            return ops[type(node.op)]()
        raise KeyError("binop")
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        f = node.func
        name = None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "np":
            name = f.attr
        elif isinstance(f, ast.Name) and env.get(f.id) in (np.float32, np.float64):
            name = env[f.id].__name__
        if name in NP_NAMES:
            return getattr(np, name)(const_eval(node.args[0], env))
    raise KeyError(ast.dump(node)[:40])


def module_constants(tree):
    """Top-level constants of a module (mathfns: f32 = np.float32, _PE32 = (...), ...)."""
    env = {"np": np, "math": math}
    for st in tree.body:
        if isinstance(st, ast.Assign):
            try:
                val = const_eval(st.value, env) if not (
                    isinstance(st.value, ast.Tuple) and all(isinstance(e, ast.Attribute)
                                                             for e in st.value.elts)) else None
            except KeyError:
                continue
            if val is None:
                # f32, f64 = np.float32, np.float64
                if isinstance(st.targets[0], ast.Tuple):
                    for t, e in zip(st.targets[0].elts, st.value.elts):
                        if e.value.id == "np":
                            env[t.id] = getattr(np, e.attr)
                continue
            tgt = st.targets[0]
            if isinstance(tgt, ast.Name):
                env[tgt.id] = val
            elif isinstance(tgt, ast.Tuple):
                for t, x in zip(tgt.elts, val):
                    env[t.id] = x
    return env


class _Mathfns:
    """mathfns.py parsed once: its functions' ASTs and its constants."""
    _inst = None

    def __init__(self):
        tree = ast.parse(MATHFNS_PATH.read_text())
        self.funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.env = module_constants(tree)
        rt = ast.parse(RUNTIME_PATH.read_text())
        self.rt_funcs = {n.name: n for n in rt.body if isinstance(n, ast.FunctionDef)
                         and n.name in RUNTIME_FUNCS}
        self.rt_env = {"np": np, "math": math}

    @classmethod
    def get(cls):
        if cls._inst is None:
            cls._inst = _Mathfns()
        return cls._inst


# ---- the translator -------------------------------------------------------------------------
class FunctionBuilder:
    def __init__(self, module, fn_ast, param_types, env, name, *, is_kernel, flags=(),
                 mathfns=None, outputs_as_params=True):
        self.module, self.fn_ast, self.env = module, fn_ast, env
        self.flags = tuple(flags)                 # fast-math flags on every float op
        self.mathfns = mathfns if mathfns is not None else {}
        self.is_kernel = is_kernel
        self.outputs = []                         # (name, dtype) of function-level empty()
        self.output_sizes = []                    # the parameter giving each one's size
        self.scratch = [[]]                       # buffers allocated per loop (and function)
        self.loops = []                           # stack of exit blocks
        self.param_types = param_types
        self.name = name
        self.vars = {}

    # -- driver --
    def build(self):
        fa = self.fn_ast
        names = [a.arg for a in fa.args.args]
        counts = {}
        for node in ast.walk(fa):
            tgts = []
            if isinstance(node, ast.Assign):
                tgts = node.targets
            elif isinstance(node, (ast.AugAssign, ast.For)):
                tgts = [node.target]
            for t in tgts:
                for n in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(n, ast.Name):
                        counts[n.id] = counts.get(n.id, 0) + 1
        self.multi = {n for n, c in counts.items() if c > 1 or (n in names and c)}
        local = set(counts) | set(names)
        self.env = {k: v for k, v in self.env.items() if k not in local}
        assert len(names) == len(self.param_types), (self.name, names, self.param_types)
        if self.is_kernel:
            # count function-level outputs first: one pointer param each
            outs, sizes = [], []
            for st in fa.body:
                if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call) and \
                        isinstance(st.value.func, ast.Name) and st.value.func.id == "empty" \
                        and re.fullmatch(r"o\d+", st.targets[0].id):   # not a row buffer
                    size = st.value.args[0]        # the caller allocates: a size parameter
                    if isinstance(size, ast.Tuple) and not size.elts:
                        sizes.append(None)             # or () for a 0-d output
                    elif isinstance(size, ast.Name) and size.id in names:
                        sizes.append(names.index(size.id))
                    else:
                        raise NotImplementedError(f"{self.name}: an output's size is neither "
                                                  "a parameter nor ()")
                    outs.append((st.targets[0].id, self._dtype_arg(st.value.args[1])))
            self.outputs, self.output_sizes = outs, sizes
        llparams = [self._ll_param(t) for t in self.param_types]
        llparams += [MEM[dt].as_pointer() for _, dt in self.outputs]
        if self.is_kernel:
            ret = I32                            # 0, or OUT_OF_MEMORY (a row buffer)
        else:
            ret = self._infer_return_type(names)
        fnty = ir.FunctionType(LL[ret] if ret != "void" and not isinstance(ret, ir.Type)
                               else (ret if isinstance(ret, ir.Type) else ir.VoidType()), llparams)
        self.fn = fn = ir.Function(self.module, fnty, self.name)
        self.ret_type = ret
        fn.attributes.add("nounwind")
        if not self.is_kernel:
            fn.linkage = "internal"
            fn.attributes.add("alwaysinline")
        for a in fn.args:
            if isinstance(a.type, ir.PointerType):
                a.add_attribute("noalias")
        self.entry = fn.append_basic_block("entry")
        self.b = ir.IRBuilder(self.entry)
        body_bb = fn.append_basic_block("body")
        self.b.position_at_end(body_bb)
        for n, t, a in zip(names, self.param_types, fn.args):
            a.name = n
            if n in self.multi:
                self.assign(n, Val(a, t)) if isinstance(t, str) else None
                self.multi.discard(n) if not isinstance(t, str) else None
            if n not in self.vars:
                self.vars[n] = Val(a, t)
        self.out_params = dict(zip([n for n, _ in self.outputs], fn.args[len(names):]))
        for n, a in zip([n for n, _ in self.outputs], fn.args[len(names):]):
            a.name = "out_" + n
        self.block(fa.body)
        if not self.b.block.is_terminated:
            self._free_scratch(all_levels=True)
            if self.is_kernel:
                self.b.ret(ir.Constant(I32, 0))
            elif self.ret_type == "void":
                self.b.ret_void()
            else:
                self.b.unreachable()
        ir.IRBuilder(self.entry).branch(body_bb)
        return fn

    def _infer_return_type(self, names):
        # mathfns functions return a float of the argument type (or a value we find at the
        # first return): translate lazily by typing the return expression on the fly is
        # complex; all of mathfns' f32 functions return their first argument's type.
        t = self.param_types[0]
        return t

    def _ll_param(self, t):
        if isinstance(t, tuple) and t[0] == "arr":
            return MEM[t[1]].as_pointer()
        if isinstance(t, tuple) and t[0] == "tup":
            return I64.as_pointer()
        return LL[t]

    def _const_or_val(self, v):
        return v

    def _dtype_arg(self, node):
        # np.float32 / np.bool_ / ...
        if isinstance(node, ast.Attribute) and node.attr in NP_NAMES:
            return "bool" if node.attr == "bool_" else node.attr
        raise NotImplementedError(f"dtype {ast.dump(node)}")

    # -- statements --
    def block(self, stmts):
        for st in stmts:
            if self.b.block.is_terminated:
                self.b.position_at_end(self.fn.append_basic_block("dead"))
            self.stmt(st)

    def stmt(self, st):
        m = getattr(self, "st_" + type(st).__name__, None)
        if m is None:
            raise NotImplementedError(f"{self.name}: statement {type(st).__name__}")
        m(st)

    def st_Expr(self, st):
        self.expr(st.value)

    def st_Pass(self, st):
        pass

    def st_Assign(self, st):
        assert len(st.targets) == 1
        tgt = st.targets[0]
        if isinstance(tgt, ast.Name):
            if isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Name) and \
                    st.value.func.id == "empty" and tgt.id in self.out_params:
                dt = self._dtype_arg(st.value.args[1])
                self.vars[tgt.id] = Val(self.out_params[tgt.id], ("arr", dt))
                return
            self.assign(tgt.id, self.expr(st.value))
        elif isinstance(tgt, ast.Tuple):
            v = self.expr(st.value)
            items = v.x if isinstance(v, Const) else v.ty[1]
            items = [Const(x) for x in items] if isinstance(v, Const) else items
            assert len(items) == len(tgt.elts)
            for t, x in zip(tgt.elts, items):
                self.assign(t.id, x)
        elif isinstance(tgt, ast.Subscript):
            arr = self.expr(tgt.value)
            assert isinstance(arr, Val) and arr.ty[0] == "arr", ast.dump(tgt)
            ptr = self.elem_ptr(arr, tgt.slice)
            dt = arr.ty[1]
            val = self.cast(self.expr(st.value), dt)
            v = self.b.zext(val, I8) if dt == "bool" else val
            self.b.store(v, ptr, align=SIZE[dt])
        else:
            raise NotImplementedError(ast.dump(tgt))

    def assign(self, name, v):
        cur = self.vars.get(name)
        if isinstance(cur, tuple):                        # a stack slot
            slot, ty = cur
            self.b.store(self.cast(v, ty), slot)
            return
        if name not in self.multi and (isinstance(v, Const) or not isinstance(v.ty, str)):
            self.vars[name] = v                           # constants, pointers: bound
            return
        v = self.materialize(v)
        assert isinstance(v.ty, str), (self.name, name)
        slot = self._slot(name, v.ty)
        self.vars[name] = (slot, v.ty)
        self.b.store(v.v, slot)

    def _slot(self, name, ty):
        eb = ir.IRBuilder(self.entry)
        return eb.alloca(LL[ty], name=name)

    def _ty(self, v):
        return const_type(v.x) if isinstance(v, Const) else v.ty

    def st_AugAssign(self, st):
        self.st_Assign(ast.Assign(targets=[st.target], value=ast.BinOp(
            left=ast.Name(id=st.target.id, ctx=ast.Load()), op=st.op, right=st.value)))

    def st_Return(self, st):
        self._free_scratch(all_levels=True)
        if self.is_kernel:
            self.b.ret(ir.Constant(I32, 0))
        else:
            self.b.ret(self.cast(self.expr(st.value), self.ret_type))

    def st_Break(self, st):
        self._free_scratch(all_levels=False)
        self.b.branch(self.loops[-1])

    def _free_scratch(self, all_levels):
        levels = self.scratch if all_levels else self.scratch[-1:]
        for lst in levels:
            for p in lst:
                self.b.call(self._libc("free"), [self.b.bitcast(p, I8.as_pointer())])

    def _unless_null(self, raw):
        """Go on if the allocation `raw` succeeded; else free the row buffers allocated so
        far (every one in scope: the code is structured, so they dominate this point) and
        return OUT_OF_MEMORY, which the builtin raises as MemoryError."""
        failed = self.fn.append_basic_block("alloc_failed")
        ok = self.fn.append_basic_block("alloc_ok")
        null = self.b.icmp_unsigned("==", raw, ir.Constant(raw.type, None))
        self.b.cbranch(null, failed, ok).set_weights([1, 1000])
        self.b.position_at_end(failed)
        self._free_scratch(all_levels=True)
        self.b.ret(ir.Constant(I32, OUT_OF_MEMORY))
        self.b.position_at_end(ok)

    def _libc(self, name):
        if name in self.module.globals:
            return self.module.globals[name]
        if name == "malloc":
            f = ir.Function(self.module, ir.FunctionType(I8.as_pointer(), [I64]), "malloc")
            f.return_value.add_attribute("noalias")
        elif name == "aligned_alloc":
            f = ir.Function(self.module, ir.FunctionType(I8.as_pointer(), [I64, I64]),
                            "aligned_alloc")
            f.return_value.add_attribute("noalias")
        else:
            f = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [I8.as_pointer()]), "free")
        f.attributes.add("nounwind")
        return f

    def st_If(self, st):
        c = self.truth(self.expr(st.test))
        then = self.fn.append_basic_block("then")
        other = self.fn.append_basic_block("else") if st.orelse else None
        after = self.fn.append_basic_block("endif")
        self.b.cbranch(c, then, other or after)
        self.b.position_at_end(then)
        self.block(st.body)
        if not self.b.block.is_terminated:
            self.b.branch(after)
        if other is not None:
            self.b.position_at_end(other)
            self.block(st.orelse)
            if not self.b.block.is_terminated:
                self.b.branch(after)
        self.b.position_at_end(after)

    def st_While(self, st):
        assert isinstance(st.test, ast.Constant) and st.test.value is True and not st.orelse
        head = self.fn.append_basic_block("while")
        exit_ = self.fn.append_basic_block("wend")
        self.b.branch(head)
        self.b.position_at_end(head)
        self._loop_body(st.body, head, exit_)

    def _loop_body(self, stmts, head, exit_, step=None):
        """A loop's body: its row buffers freed at the end of each iteration, then `step`
        (a for loop's increment), then back to `head`; `break` goes to `exit_`."""
        self.loops.append(exit_)
        self.scratch.append([])
        self.block(stmts)
        if not self.b.block.is_terminated:
            self._free_scratch(all_levels=False)
            if step is not None:
                step()
            self.b.branch(head)
        self.scratch.pop()
        self.loops.pop()
        self.b.position_at_end(exit_)

    def st_For(self, st):
        it = st.iter
        assert isinstance(it, ast.Call) and it.func.id == "range" and not st.orelse
        args = [self.expr(a) for a in it.args]
        if len(args) == 1:
            args = [Const(0)] + args
        assert len(args) == 2, "range step not supported"
        ty = args[1].ty if isinstance(args[1], Val) else self._ty(args[0])
        if isinstance(args[0], Val) and isinstance(args[1], Val):
            ty = promote(args[0].ty, args[1].ty)
        start, stop = self.cast(args[0], ty), self.cast(args[1], ty)
        ivar = st.target.id
        slot = self._slot(ivar, ty)
        self.vars[ivar] = (slot, ty)
        self.b.store(start, slot)
        head = self.fn.append_basic_block("for")
        body = self.fn.append_basic_block("fbody")
        exit_ = self.fn.append_basic_block("fend")
        self.b.branch(head)
        self.b.position_at_end(head)
        i = self.b.load(slot)
        self.b.cbranch(self.b.icmp_signed("<", i, stop) if is_signed(ty)
                       else self.b.icmp_unsigned("<", i, stop), body, exit_)
        self.b.position_at_end(body)

        def step():
            self.b.store(self.b.add(self.b.load(slot), ir.Constant(LL[ty], 1)), slot)
        self._loop_body(st.body, head, exit_, step)

    # -- expressions --
    def expr(self, node):
        m = getattr(self, "ex_" + type(node).__name__, None)
        if m is None:
            raise NotImplementedError(f"{self.name}: expression {type(node).__name__}")
        return m(node)

    def materialize(self, v):
        if isinstance(v, Val):
            return v
        t = const_type(v.x)
        return Val(ir.Constant(LL[t], (int(v.x) if is_int(t) else
                                       bool(v.x) if t == "bool" else float(v.x))), t)

    def ex_Constant(self, node):
        return Const(node.value)

    def ex_Name(self, node):
        v = self.vars.get(node.id)
        if isinstance(v, tuple):
            slot, ty = v
            return Val(self.b.load(slot), ty)
        if v is not None:
            return v
        if node.id in self.env and not callable(self.env[node.id]):
            return Const(self.env[node.id])
        if node.id in ("True", "False"):
            return Const(node.id == "True")
        raise NameError(f"{self.name}: {node.id}")

    def ex_Attribute(self, node):
        return Const(const_eval(node, self.env))

    def ex_Tuple(self, node):
        vals = [self.expr(e) for e in node.elts]
        if all(isinstance(v, Const) for v in vals):
            return Const(tuple(v.x for v in vals))
        return Val(None, ("pytup", vals))

    def ex_Subscript(self, node):
        base = self.expr(node.value)
        if isinstance(base, Const):
            return Const(base.x[const_eval(node.slice, self.env)])
        if base.ty[0] == "tup":
            k = const_eval(node.slice, self.env)
            p = self.b.gep(base.v, [ir.Constant(I64, k)], inbounds=True)
            return Val(self.b.load(p, align=8), "int64")
        dt = base.ty[1]
        v = self.b.load(self.elem_ptr(base, node.slice), align=SIZE[dt])
        if dt == "bool":
            v = self.b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
        return Val(v, dt)

    def elem_ptr(self, arr, idx_node):
        idx = self.expr(idx_node)
        if isinstance(idx, Const):
            i = ir.Constant(I64, int(idx.x))
            assert idx.x >= 0, "negative constant index"
        else:
            if is_signed(idx.ty):
                raise NotImplementedError("signed run-time index (numba wraps negatives)")
            i = idx.v if idx.ty in ("uint64", "int64") else self.b.zext(idx.v, I64)
        return self.b.gep(arr.v, [i], inbounds=True)

    def ex_UnaryOp(self, node):
        try:
            return Const(const_eval(node, self.env))
        except KeyError:
            pass
        v = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            return Val(self.b.xor(self.truth(v), ir.Constant(I1, 1)), "bool")
        v = self.materialize(v)
        if isinstance(node.op, ast.USub):
            if is_float(v.ty):      # numba: fsub(-0.0, x)
                return Val(self.b.fsub(ir.Constant(LL[v.ty], -0.0), v.v, flags=self.flags), v.ty)
            return Val(self.b.neg(v.v), v.ty)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.Invert):
            if v.ty == "bool":      # numba: ~True == -2 (an int); fnad emits `not` for bools
                raise NotImplementedError("~ on bool")
            return Val(self.b.xor(v.v, ir.Constant(LL[v.ty], -1)), v.ty)
        raise NotImplementedError(ast.dump(node))

    def ex_BinOp(self, node):
        try:
            return Const(const_eval(node, self.env))
        except KeyError:
            pass
        a, b = self.expr(node.left), self.expr(node.right)
        ty = promote(self._ty(a), self._ty(b))
        op = type(node.op)
        if op is ast.Div and not is_float(ty):
            ty = "float64"
        if ty == "bool" and op in (ast.BitAnd, ast.BitOr, ast.BitXor):
            x, y = self.truth(self.materialize(a)), self.truth(self.materialize(b))
            f = {ast.BitAnd: self.b.and_, ast.BitOr: self.b.or_, ast.BitXor: self.b.xor}[op]
            return Val(f(x, y), "bool")
        x, y = self.cast(a, ty), self.cast(b, ty)
        B, fl = self.b, self.flags
        if is_float(ty):
            f = {ast.Add: B.fadd, ast.Sub: B.fsub, ast.Mult: B.fmul, ast.Div: B.fdiv}.get(op)
            if f is None:
                raise NotImplementedError(f"float {op.__name__}")
            return Val(f(x, y, flags=fl), ty)
        wrapping = {ast.Add: B.add, ast.Sub: B.sub, ast.Mult: B.mul, ast.BitXor: B.xor,
                    ast.BitAnd: B.and_, ast.BitOr: B.or_}.get(op)
        if wrapping is not None:
            return Val(wrapping(x, y), ty)
        if op is ast.FloorDiv and not is_signed(ty):
            return Val(B.udiv(x, y), ty)        # divisors here are nonzero (chunks >= 1)
        if op is ast.Mod and not is_signed(ty):
            return Val(B.urem(x, y), ty)
        if op in (ast.FloorDiv, ast.Mod):   # Python's rounding (callers guard b == 0, -1):
            r = B.srem(x, y)                 # truncated, moved toward -inf where the
            zero = ir.Constant(LL[ty], 0)    # remainder's sign differs from the divisor's
            adj = B.and_(B.icmp_signed("!=", r, zero),
                         B.icmp_signed("!=", B.icmp_signed("<", r, zero),
                                       B.icmp_signed("<", y, zero)))
            if op is ast.Mod:
                return Val(B.select(adj, B.add(r, y), r), ty)
            return Val(B.sub(B.sdiv(x, y), B.zext(adj, LL[ty])), ty)
        raise NotImplementedError(f"int {op.__name__} on {ty}")

    def ex_BoolOp(self, node):
        vals = [self.truth(self.expr(v)) for v in node.values]
        f = self.b.and_ if isinstance(node.op, ast.And) else self.b.or_
        r = vals[0]
        for v in vals[1:]:
            r = f(r, v)
        return Val(r, "bool")

    def ex_Compare(self, node):
        assert len(node.ops) == 1
        a, b = self.expr(node.left), self.expr(node.comparators[0])
        ty = promote(self._ty(a), self._ty(b))
        x, y = self.cast(a, ty), self.cast(b, ty)
        opname = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
                  ast.NotEq: "!="}[type(node.ops[0])]
        if is_float(ty):
            if opname == "!=":
                r = self.b.fcmp_unordered(opname, x, y, flags=self.flags)
            else:
                r = self.b.fcmp_ordered(opname, x, y, flags=self.flags)
        elif is_signed(ty):
            r = self.b.icmp_signed(opname, x, y)
        else:
            r = self.b.icmp_unsigned(opname, x, y)
        return Val(r, "bool")

    def ex_IfExp(self, node):
        c = self.truth(self.expr(node.test))
        a, b = self.expr(node.body), self.expr(node.orelse)
        ty = promote(self._ty(a), self._ty(b))
        return Val(self.b.select(c, self.cast(a, ty), self.cast(b, ty)), ty)

    def truth(self, v):
        if isinstance(v, Const):
            return ir.Constant(I1, bool(v.x))
        if v.ty == "bool":
            return v.v
        if is_float(v.ty):
            return self.b.fcmp_unordered("!=", v.v, ir.Constant(LL[v.ty], 0.0))
        return self.b.icmp_unsigned("!=", v.v, ir.Constant(LL[v.ty], 0))

    def cast(self, v, ty):
        """v (Val or Const) as an LLVM value of dtype `ty` (numba's implicit/explicit casts)."""
        if isinstance(v, Const):
            x = v.x
            if ty == "bool":
                return ir.Constant(I1, bool(x))
            if is_float(ty):
                return ir.Constant(LL[ty], float(getattr(np, ty)(x)))
            return ir.Constant(LL[ty], int(np.array(x).astype(ty)))
        s, B = v.ty, self.b
        if s == ty:
            return v.v
        if ty == "bool":
            return self.truth(v)
        if s == "bool":
            return B.uitofp(v.v, LL[ty]) if is_float(ty) else B.zext(v.v, LL[ty])
        if is_float(s) and is_float(ty):
            return B.fptrunc(v.v, LL[ty]) if SIZE[s] > SIZE[ty] else B.fpext(v.v, LL[ty])
        if is_float(s):
            return B.fptosi(v.v, LL[ty]) if is_signed(ty) else B.fptoui(v.v, LL[ty])
        if is_float(ty):
            return B.sitofp(v.v, LL[ty]) if is_signed(s) else B.uitofp(v.v, LL[ty])
        if SIZE[s] == SIZE[ty]:
            return v.v
        if SIZE[s] > SIZE[ty]:
            return B.trunc(v.v, LL[ty])
        return B.sext(v.v, LL[ty]) if is_signed(s) else B.zext(v.v, LL[ty])

    def intrinsic(self, name, ty, args, flags=()):
        t = LL[ty]
        f = self.module.declare_intrinsic(name, [t], ir.FunctionType(t, [t] * len(args)))
        return Val(self.b.call(f, args, fastmath=flags), ty)

    def ex_Call(self, node):
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "np":
            fname = "np." + f.attr
        elif isinstance(f, ast.Name):
            fname = f.id
            if self.env.get(fname) in (np.float32, np.float64):
                fname = "np." + self.env[fname].__name__
        else:
            raise NotImplementedError(ast.dump(f))
        if fname[3:] in NP_NAMES and fname.startswith("np."):
            try:
                return Const(const_eval(node, self.env))
            except KeyError:
                pass
            ty = "bool" if fname == "np.bool_" else fname[3:]
            return Val(self.cast(self.expr(node.args[0]), ty), ty)
        if fname == "wide_vectors":
            # set.add skips llvmlite's check of the attribute name (as runtime.wide_vectors)
            set.add(self.fn.attributes, '"prefer-vector-width"="512"')
            return Const(None)
        args = [self.expr(a) for a in node.args] if fname != "empty" else [self.expr(node.args[0])]
        if fname == "np.fmod":
            a, b = (self.materialize(x) for x in args)
            ty = promote(a.ty, b.ty)
            if not is_float(ty):
                raise NotImplementedError("integer np.fmod")
            return Val(self.b.frem(self.cast(a, ty), self.cast(b, ty), flags=self.flags), ty)
        if fname == "np.isfinite":
            v = self.materialize(args[0])
            if not is_float(v.ty):
                return Const(True)
            d = self.b.fsub(v.v, v.v, flags=self.flags)
            return Val(self.b.fcmp_ordered("ord", d, d, flags=self.flags), "bool")
        if fname == "np.sign":
            v = self.materialize(args[0])
            B, t = self.b, LL[v.ty]
            one, neg, zero = ir.Constant(t, 1), ir.Constant(t, -1), ir.Constant(t, 0)
            if is_float(v.ty):           # numba: x > 0 -> 1, x < 0 -> -1, else x (0, NaN)
                r = B.select(B.fcmp_ordered("<", v.v, zero), neg, v.v)
                return Val(B.select(B.fcmp_ordered(">", v.v, zero), one, r), v.ty)
            if is_signed(v.ty):
                r = B.select(B.icmp_signed(">", v.v, zero), one, neg)
                return Val(B.select(B.icmp_unsigned("==", v.v, zero), zero, r), v.ty)
            return Val(B.select(B.icmp_unsigned("==", v.v, zero), zero, one), v.ty)
        if fname == "np.power":
            a, b = (self.materialize(x) for x in args)
            ty = promote(a.ty, b.ty)
            if not is_float(ty):
                raise NotImplementedError("integer np.power")
            return self.intrinsic("llvm.pow", ty, [self.cast(a, ty), self.cast(b, ty)], self.flags)
        if fname == "np.abs" or (fname == "abs" and not is_float(self._ty(args[0]))):
            v = self.materialize(args[0])
            if is_float(v.ty):
                return self.intrinsic("llvm.fabs", v.ty, [v.v], self.flags)
            if not is_signed(v.ty):
                return v
            neg = self.b.icmp_signed("<", v.v, ir.Constant(LL[v.ty], 0))
            return Val(self.b.select(neg, self.b.neg(v.v), v.v), v.ty)
        if fname in ("np.ceil", "np.trunc", "np.rint"):
            v = self.materialize(args[0])
            return self.intrinsic("llvm." + fname[3:], v.ty, [v.v], self.flags)
        if fname in ("np.sqrt", "np.floor", "abs", "math.sqrt", "math.floor"):
            v = self.materialize(args[0])
            if not is_float(v.ty):
                if fname == "abs":
                    neg = self.b.icmp_signed("<", v.v, ir.Constant(LL[v.ty], 0))
                    return Val(self.b.select(neg, self.b.neg(v.v), v.v), v.ty)
                v = Val(self.cast(v, "float64"), "float64")
            name = {"np.sqrt": "llvm.sqrt", "math.sqrt": "llvm.sqrt", "np.floor": "llvm.floor",
                    "math.floor": "llvm.floor", "abs": "llvm.fabs"}[fname]
            return self.intrinsic(name, v.ty, [v.v], self.flags)
        if fname in ("radd", "rmaximum", "rminimum", "fmaximum", "fminimum"):
            a, b = (self.materialize(x) for x in args)
            ty = promote(a.ty, b.ty)
            x, y = self.cast(a, ty), self.cast(b, ty)
            if fname == "radd":
                return Val(self.b.fadd(x, y, flags=REDUCE_FLAGS), ty)
            name = "llvm.maximum" if "max" in fname else "llvm.minimum"
            return self.intrinsic(name, ty, [x, y], REDUCE_FLAGS if fname[0] == "r" else ())
        if fname == "fetch_add":
            old = self.b.atomic_rmw("add", args[0].v, ir.Constant(I64, 1), "seq_cst")
            return Val(old, "uint64")
        if fname == "flat":
            return args[0]
        if fname == "scalar_of":
            a = args[0]
            if isinstance(a, Val) and isinstance(a.ty, tuple) and a.ty[0] == "arr":
                v = self.b.load(a.v, align=SIZE[a.ty[1]])
                if a.ty[1] == "bool":
                    v = self.b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
                return Val(v, a.ty[1])
            return a
        if fname == "empty":                       # a row buffer inside a loop
            dt = self._dtype_arg(node.args[1])
            n = self.cast(args[0], "uint64")
            nbytes = self.b.mul(n, ir.Constant(I64, SIZE[dt]))
            if SCRATCH_ALIGN:        # aligned_alloc: size rounded up to the alignment
                a = ir.Constant(I64, SCRATCH_ALIGN)
                nbytes = self.b.and_(self.b.add(nbytes, ir.Constant(I64, SCRATCH_ALIGN - 1)),
                                     ir.Constant(I64, -SCRATCH_ALIGN))
                raw = self.b.call(self._libc("aligned_alloc"), [a, nbytes])
            else:
                raw = self.b.call(self._libc("malloc"), [nbytes])
            self._unless_null(raw)
            p = self.b.bitcast(raw, MEM[dt].as_pointer())
            self.scratch[-1].append(p)
            return Val(p, ("arr", dt))
        if fname == "_pow2":
            return self._pow2(self.materialize(args[0]))
        if fname == "_split_exponent":
            return self._split_exponent(self.materialize(args[0]))
        mf = _Mathfns.get()
        if fname in mf.funcs or fname in mf.rt_funcs:
            vals = [self.materialize(a) for a in args]
            if fname in mf.rt_funcs:          # integer helpers: both operands one type
                ty = promote(vals[0].ty, vals[1].ty)
                vals = [Val(self.cast(v, ty), ty) for v in vals]
            fn = self._mathfn(fname, tuple(v.ty for v in vals))
            r = self.b.call(fn, [v.v for v in vals])
            return Val(r, vals[0].ty)
        raise NotImplementedError(f"{self.name}: call {fname}")

    def _mathfn(self, fname, tys):
        key = (fname, tys)
        fn = self.mathfns.get(key)
        if fn is None:
            mf = _Mathfns.get()
            rt = fname in mf.rt_funcs
            sub = FunctionBuilder(self.module, (mf.rt_funcs if rt else mf.funcs)[fname],
                                  list(tys), mf.rt_env if rt else mf.env,
                                  f"{fname}__{'_'.join(tys)}", is_kernel=False,
                                  flags=() if rt else ("contract",), mathfns=self.mathfns)
            fn = self.mathfns[key] = sub.build()
        return fn

    def _pow2(self, v):
        fty, ity, mant, bias = (F32, I32, 23, 127) if v.ty == "float32" else (F64, I64, 52, 1023)
        k = self.b.fptosi(v.v, ity)
        bits = self.b.shl(self.b.add(k, ir.Constant(ity, bias)), ir.Constant(ity, mant))
        return Val(self.b.bitcast(bits, fty), v.ty)

    def _split_exponent(self, v):
        fty, ity, mant, bias = (F32, I32, 23, 127) if v.ty == "float32" else (F64, I64, 52, 1023)
        one, sqrt_half = ((0x3F800000, 0x3F3504F3) if mant == 23
                          else (0x3FF0000000000000, 0x3FE6A09E667F3BCD))
        B = self.b
        i = B.add(B.bitcast(v.v, ity), ir.Constant(ity, one - sqrt_half))
        e = B.sub(B.lshr(i, ir.Constant(ity, mant)), ir.Constant(ity, bias))
        mbits = B.add(B.and_(i, ir.Constant(ity, (1 << mant) - 1)), ir.Constant(ity, sqrt_half))
        return Val(None, ("pytup", [Val(B.bitcast(mbits, fty), v.ty), Val(B.sitofp(e, fty), v.ty)]))


# ---- kernels ----------------------------------------------------------------------------------
def kernel_module(name, fn_ast, param_types, triple="", data_layout=""):
    """(ir.Module, info) for one kernel. info: name, param_types, outputs [(name, dtype)],
    output_sizes (the parameter giving each output's size, None for 0-d), threaded."""
    mod = ir.Module(name=name)
    if triple:
        mod.triple = triple
    if data_layout:
        mod.data_layout = data_layout
    fb = FunctionBuilder(mod, fn_ast, param_types, {"np": np, "math": math}, name,
                         is_kernel=True)
    fb.build()
    info = {"name": name, "param_types": param_types, "outputs": fb.outputs,
            "output_sizes": fb.output_sizes,
            "threaded": "counter" in [a.arg for a in fn_ast.args.args]}
    return mod, info


# ---- the fast call: a CPython builtin (METH_FASTCALL) around a kernel ---------------------
# CPython and NumPy object layouts read here (64-bit builds; stable ABI of both):
#   PyObject: ob_refcnt @0, ob_type @8; PyVarObject ob_size @16; PyTupleObject ob_item @24
#   PyArrayObject: data @16, descr @56, flags @64 (NPY_ARRAY_C_CONTIGUOUS = 1);
#   PyArray_Descr: type_num @28 (NumPy 1.x and 2.x)
# The builtin's `self` is a context tuple made by llvm_kernels: (fallback, numpy.ndarray,
# int, tuple, numpy.empty, (), 0, the outputs' dtypes...).
CTX_FALLBACK, CTX_NDARRAY, CTX_INT, CTX_TUPLE, CTX_EMPTY, CTX_UNIT, CTX_ZERO, CTX_DTYPES = \
    range(8)


def fastcall_wrapper(module, fn, info, type_nums):
    """`<name>__fast(ctx, args, nargs)`: a METH_FASTCALL builtin calling the kernel `fn`.

    It checks every argument (an exact numpy.ndarray, C-contiguous, of the compiled dtype's
    `type_nums[k]`; an exact int that fits int64; a tuple of such ints of the compiled
    length), allocates the outputs with numpy.empty, runs the kernel without the GIL and
    returns the outputs' tuple (0 for a threaded kernel), as numba's dispatcher does, or
    raises MemoryError where the kernel could not allocate a row buffer. Any
    argument it does not take is handed, with all the others, to ctx's fallback (the
    Kernel's general path), whose result it returns."""
    ptr = I8.as_pointer()
    pptr = ptr.as_pointer()
    i32 = I32

    def decl(name, ret, args):
        f = module.globals.get(name)
        return f if f is not None else ir.Function(module, ir.FunctionType(ret, args), name)
    as_ll = decl("PyLong_AsLongLong", I64, [ptr])
    err_occurred = decl("PyErr_Occurred", ptr, [])
    err_clear = decl("PyErr_Clear", ir.VoidType(), [])
    vcall = decl("PyObject_Vectorcall", ptr, [ptr, pptr, I64, ptr])
    save = decl("PyEval_SaveThread", ptr, [])
    restore = decl("PyEval_RestoreThread", ir.VoidType(), [ptr])
    tuple_new = decl("PyTuple_New", ptr, [I64])
    tuple_set = decl("PyTuple_SetItem", i32, [ptr, I64, ptr])
    incref = decl("Py_IncRef", ir.VoidType(), [ptr])
    decref = decl("Py_DecRef", ir.VoidType(), [ptr])

    w = ir.Function(module, ir.FunctionType(ptr, [ptr, pptr, I64]), info["name"] + "__fast")
    ctx, args, nargs = w.args
    entry = w.append_basic_block("entry")
    fallback = w.append_basic_block("fallback")
    b = ir.IRBuilder(entry)

    def at_entry():                                     # allocas before any check
        eb = ir.IRBuilder(entry)
        eb.position_at_start(entry)
        return eb

    def field(obj, offset, ty):
        return b.load(b.bitcast(b.gep(obj, [ir.Constant(I64, offset)]), ty.as_pointer()))

    def item(tup, i):                                   # a tuple's item i (borrowed)
        return field(tup, 24 + 8 * i, ptr)

    def check(cond):                                    # continue if cond, else fall back
        ok = w.append_basic_block("ok")
        b.cbranch(cond, ok, fallback)
        b.position_at_end(ok)

    def as_int64(obj):
        check(b.icmp_unsigned("==", field(obj, 8, ptr), item(ctx, CTX_INT)))
        v = b.call(as_ll, [obj])
        bad = w.append_basic_block("int_error")
        good = w.append_basic_block("int_ok")
        maybe = b.icmp_signed("==", v, ir.Constant(I64, -1))
        b.cbranch(maybe, bad, good)
        b.position_at_end(bad)                          # -1, or an overflow
        err = b.call(err_occurred, [])
        clear = w.append_basic_block("int_overflow")
        b.cbranch(b.icmp_unsigned("!=", err, ir.Constant(ptr, None)), clear, good)
        b.position_at_end(clear)
        b.call(err_clear, [])
        b.branch(fallback)
        b.position_at_end(good)
        return v

    types = info["param_types"]
    check(b.icmp_signed("==", nargs, ir.Constant(I64, len(types))))
    values = []
    for k, (t, p) in enumerate(zip(types, fn.args)):
        obj = b.load(b.gep(args, [ir.Constant(I64, k)]))
        if isinstance(t, tuple) and t[0] == "arr":
            check(b.icmp_unsigned("==", field(obj, 8, ptr), item(ctx, CTX_NDARRAY)))
            check(b.icmp_unsigned("!=", b.and_(field(obj, 64, i32), ir.Constant(i32, 1)),
                                  ir.Constant(i32, 0)))
            check(b.icmp_signed("==", field(field(obj, 56, ptr), 28, i32),
                                ir.Constant(i32, type_nums[k])))
            values.append(b.bitcast(field(obj, 16, ptr), p.type))
        elif isinstance(t, tuple) and t[0] == "tup":
            n = t[1]
            check(b.icmp_unsigned("==", field(obj, 8, ptr), item(ctx, CTX_TUPLE)))
            check(b.icmp_signed("==", field(obj, 16, I64), ir.Constant(I64, n)))
            buf = at_entry().alloca(I64, size=max(n, 1))
            for j in range(n):
                b.store(as_int64(item(obj, j)), b.gep(buf, [ir.Constant(I64, j)]))
            values.append(buf)
        else:
            values.append(as_int64(obj))
    outs = []
    call_args = at_entry().alloca(ptr, size=2)
    null = ir.Constant(ptr, None)
    long_from = decl("PyLong_FromLongLong", ptr, [I64])
    get_slice = decl("PySequence_GetSlice", ptr, [ptr, I64, I64])

    def phi(*incoming):                                 # the object from each block
        out = b.phi(ptr)
        for value, block in incoming:
            out.add_incoming(value, block)
        return out

    def aligned_empty(n, nbytes, dtype_obj):
        """numpy.empty(n + pad)[off:off + n], its data on a 64-byte boundary (NULL with
        the error set where an allocation failed)."""
        pad = ir.Constant(I64, OUTPUT_ALIGN // nbytes)
        count = b.call(long_from, [b.add(n, pad)])
        got_count, done = w.append_basic_block("count_ok"), w.append_basic_block("aligned")
        start = b.block
        b.cbranch(b.icmp_unsigned("==", count, null), done, got_count)
        b.position_at_end(got_count)
        whole = empty(count, dtype_obj)
        b.call(decref, [count])
        got_whole = w.append_basic_block("whole_ok")
        after_whole = b.block
        b.cbranch(b.icmp_unsigned("==", whole, null), done, got_whole)
        b.position_at_end(got_whole)
        data = b.ptrtoint(field(whole, 16, ptr), I64)
        skip = b.and_(b.sub(ir.Constant(I64, 0), data), ir.Constant(I64, OUTPUT_ALIGN - 1))
        first = b.udiv(skip, ir.Constant(I64, nbytes))
        view = b.call(get_slice, [whole, first, b.add(first, n)])
        b.call(decref, [whole])                         # the view keeps it alive
        sliced = b.block
        b.branch(done)
        b.position_at_end(done)
        return phi((null, start), (null, after_whole), (view, sliced))

    def empty(size_obj, dtype_obj):                     # numpy.empty(size, dtype)
        b.store(size_obj, b.gep(call_args, [ir.Constant(I64, 0)]))
        b.store(dtype_obj, b.gep(call_args, [ir.Constant(I64, 1)]))
        return b.call(vcall, [item(ctx, CTX_EMPTY), call_args, ir.Constant(I64, 2), null])

    for i, size in enumerate(info["output_sizes"]):
        dtype_obj = item(ctx, CTX_DTYPES + i)
        if size is None:
            out = empty(item(ctx, CTX_UNIT), dtype_obj)
        else:                       # a large output: a view that starts on a cache line
            nbytes = SIZE[info["outputs"][i][1]]
            n = values[size]
            size_obj = b.load(b.gep(args, [ir.Constant(I64, size)]))
            small_bb, large_bb = w.append_basic_block("small"), w.append_basic_block("large")
            out_bb = w.append_basic_block("allocated")
            b.cbranch(b.icmp_signed("<", n, ir.Constant(I64, ALIGNED_OUTPUT_BYTES // nbytes)),
                      small_bb, large_bb)
            b.position_at_end(small_bb)
            small = empty(size_obj, dtype_obj)
            small_end = b.block
            b.branch(out_bb)
            b.position_at_end(large_bb)
            large = aligned_empty(n, nbytes, dtype_obj)
            large_end = b.block
            b.branch(out_bb)
            b.position_at_end(out_bb)
            out = phi((small, small_end), (large, large_end))
        failed = w.append_basic_block("empty_failed")
        made = w.append_basic_block("empty_ok")
        b.cbranch(b.icmp_unsigned("==", out, ir.Constant(ptr, None)), failed, made)
        b.position_at_end(failed)                      # MemoryError & co: raise it
        for o in outs:
            b.call(decref, [o])
        b.ret(ir.Constant(ptr, None))
        b.position_at_end(made)
        outs.append(out)
    out_ptrs = [b.bitcast(field(o, 16, ptr), p.type)
                for o, p in zip(outs, fn.args[len(types):])]
    state = b.call(save, [])
    status = b.call(fn, values + out_ptrs)
    b.call(restore, [state])
    no_memory = w.append_basic_block("no_memory")       # a row buffer was not allocated
    done = w.append_basic_block("done")
    b.cbranch(b.icmp_signed("!=", status, ir.Constant(I32, 0)), no_memory, done)
    b.position_at_end(no_memory)
    for o in outs:
        b.call(decref, [o])
    b.call(decl("PyErr_NoMemory", ptr, []), [])
    b.ret(ir.Constant(ptr, None))
    b.position_at_end(done)
    if info["threaded"]:
        zero = item(ctx, CTX_ZERO)
        b.call(incref, [zero])
        b.ret(zero)
    else:
        result = b.call(tuple_new, [ir.Constant(I64, len(outs))])
        for i, o in enumerate(outs):                    # steals each reference
            b.call(tuple_set, [result, ir.Constant(I64, i), o])
        b.ret(result)
    b = ir.IRBuilder(fallback)
    b.ret(b.call(vcall, [item(ctx, CTX_FALLBACK), args, nargs, ir.Constant(ptr, None)]))
    return w
