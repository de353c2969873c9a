"""Kernel source for one fusion group of the numba backend: a loop nest with typed scalar code.

Owns `kernel_source(group, eqns)`: the loop nest, stages, buffers, loads and stores of a
group (plan.py) around the scalar code of scalar_ops.py. Knows nothing about the driver or
caching (codegen.py).

Shape of a kernel (softmax over rows of [M, N]: domain [M, N], inner dims {1})::

    @numba.njit(error_model='numpy', cache=True, no_cfunc_wrapper=True, nogil=True)
    def kernel(sz, a0, s0):
        n0 = sz[0]                                # sizes are an argument (a uint64 array):
        n1 = sz[1]                                # one kernel serves every shape
        x0 = a0                                   # inputs: contiguous, flat (rank 1)
        o0 = empty(s0, np.float32)                # outputs (s0: their size;
                                                  # runtime.empty, as np.empty)
        p0 = o0
        b0 = empty(n1, np.float32)                # a row buffer
        for i0 in range(n0):
            r1 = -inf                             # stage 0: m = max(x)
            for i1 in range(n1): r1 = rmaximum(r1, x0[i0 * n1 + i1])
            r2 = 0                                # stage 1: e = exp(x - m); s = sum(e)
            for i1 in range(n1): ... b0[i1] = e; r2 = radd(r2, e)
            for i1 in range(n1): p0[i0 * n1 + i1] = b0[i1] / r2      # stage 2
        return (o0,)

Values are scalars in the loop body: `v3 = v1 * v2` (scalar_ops.py). Loop indices are
unsigned, so numba adds no negative-index wraparound that would stop LLVM from vectorizing.
A kernel over at least THREADED_MIN elements is *threaded*: it takes its outputs and a chunk
counter instead, and threads.run_threaded runs it on several threads. Every kernel releases
the GIL, so that the driver can also run independent smaller ones side by side
(threads.run_together).

An input that the driver made as a view (a slice, transpose... of another value) is read
where it is, by strides, instead of being copied to a contiguous array first: the kernel
takes a flat array over its memory and its strides (threads.strided), and each of its dims
is a loop of its own.
"""
from __future__ import annotations

import math

from fnad.backends.numba_cpu import plan as pl
from fnad.backends.numba_cpu.scalar_ops import (combine, const, emit_rules, kind, np_name,
                                                red_identity)

# No fast-math flags on a kernel: every operation rounds as NumPy's (no FMA contraction of
# a*b + c, no x / c turned into x * (1/c), no reassociation), so a fused chain of arithmetic
# gives the eager result bit for bit. A reduction's accumulation step alone is reassociable
# (runtime.radd & co.), which it needs to vectorize. `no_cfunc_wrapper`: numba would also
# build a C-callable wrapper of every function (for first-class function values), which
# nothing here calls; dropping it took the GPT step's 22 kernels from 5.8-7.2 s of compile
# to 5.4-6.8 s in one process (about 8%), the machine code of the kernels unchanged.
NJIT_OPTIONS = "error_model='numpy', cache=True, no_cfunc_wrapper=True"
THREADED_MIN = 1 << 18        # elements: below this (~0.2 ms of work) one thread is as fast


# ---- the kernel ---------------------------------------------------------------------------------
class _Emitter:
    """Lines with indentation, fresh names, and what the module must import."""

    def __init__(self):
        self.lines: list[str] = []
        self.depth = 1
        self.n = 0
        self.imports: set[str] = set()                  # mathfns names
        self.runtime: set[str] = set()                  # runtime helper names

    def line(self, s: str):
        self.lines.append("    " * self.depth + s)

    def fresh(self, prefix="t") -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def tmp(self, expr: str) -> str:
        name = self.fresh()
        self.line(f"{name} = {expr}")
        return name

    @staticmethod
    def out_dtype(eqn):
        return eqn.outvars[0].aval.dtype

    @staticmethod
    def out_kind(eqn):
        return kind(eqn.outvars[0].aval.dtype)


def _merge_dims(domain, inner, dmaps, strided_dmaps=()):
    """Runs of adjacent non-unit domain dims that every dmap treats alike (one loop each).
    A value read by strides (`strided_dmaps`) keeps each of its dims a loop of its own:
    its dims need not merge in memory."""
    pos = [{d: k for k, d in enumerate(dm) if d is not None} for dm in dmaps]
    apart = [{d for d in dm if d is not None} for dm in strided_dmaps]

    def can_merge(a, b):
        if (a in inner) != (b in inner):
            return False
        if any(a in dims and b in dims for dims in apart):
            return False
        for dm, p in zip(dmaps, pos):
            pa, pb = p.get(a), p.get(b)
            if (pa is None) != (pb is None):
                return False
            if pa is not None and not (pb > pa and all(dm[k] is None for k in range(pa + 1, pb))):
                return False
        return True

    runs: list[list[int]] = []
    for d, n in enumerate(domain):
        if n == 1:
            continue
        if runs and can_merge(runs[-1][-1], d):
            runs[-1].append(d)
        else:
            runs.append([d])
    return runs


class _Layout:
    """Loop dims (merged runs of domain dims) and index expressions of values.

    Sizes are not constants in the source: the kernel takes them as its first argument
    `sz` (n0, n1, ...), so one kernel serves every shape with the same structure. `sz` is
    a uint64 array, where a tuple of ints would need an `np.uint64(...)` conversion per
    size, and numba spent about 2 ms compiling each such call."""

    def __init__(self, domain, inner, dmaps, strided_dmaps=()):
        self.runs = _merge_dims(domain, inner, dmaps, strided_dmaps)
        self.sizes = [math.prod(domain[d] for d in run) for run in self.runs]
        self.inner = [m for m, run in enumerate(self.runs) if run[0] in inner]
        self.outer = [m for m, run in enumerate(self.runs) if run[0] not in inner]
        self._masks: dict = {}                          # dmap -> mask (asked per value)
        self._indices: dict = {}                        # dmap -> index expression

    def mask(self, dmap) -> frozenset:
        mask = self._masks.get(dmap)
        if mask is None:
            present = {d for d in dmap if d is not None}
            mask = self._masks[dmap] = frozenset(m for m, run in enumerate(self.runs)
                                                 if run[0] in present)
        return mask

    def index(self, dmap) -> str:
        """Flat (row-major) index of a value with this dmap at loop point (i0, i1, ...)."""
        text = self._indices.get(dmap)
        if text is None:
            where = {d: k for k, d in enumerate(dmap) if d is not None}
            dims = sorted((where[run[-1]], m) for m, run in enumerate(self.runs)
                          if run[-1] in where)
            text = self._indices[dmap] = _flat([m for _, m in dims])
        return text

    def strided_index(self, dmap, k: int) -> str:
        """Index of input k, read by strides (t<k>_<j>: its stride along dim j, in elements),
        at loop point (i0, i1, ...); each of its dims is a loop of its own."""
        run_of = {run[0]: m for m, run in enumerate(self.runs)}
        terms = [f"i{run_of[d]} * t{k}_{j}" for j, d in enumerate(dmap)
                 if d is not None and d in run_of]
        return " + ".join(terms) or "0"

    def inner_index(self) -> str:
        return _flat(self.inner)

    def inner_size(self) -> str:
        return " * ".join(f"n{m}" for m in self.inner) or "1"


def _flat(dims: list) -> str:
    """sum_k i_k * prod(n_j for j after k): the row-major index over loop dims `dims`."""
    terms = []
    for k, m in enumerate(dims):
        later = [f"n{j}" for j in dims[k + 1:]]
        terms.append(f"i{m}" if not later else f"i{m} * " + " * ".join(later))
    return " + ".join(terms) if terms else "0"


def kernel_key(g: pl.Group, eqns: list):
    """A summary of everything `kernel_source(g, eqns)` reads, with the Vars replaced by
    their places in the group (unhashable where a param is: the caller checks). Groups with
    equal keys (a model's layers, the optimizer update of each parameter) get the same
    source, sizes and threading: code generation computes each once.

    Covers: the domain and inner dims; each input's dmap and aval; per member its
    primitive, params, operand and output avals (the scalar rules read those), output
    dmaps, resolved operands (a Literal as the constant it is written as) and whether it
    is a unit reduction; which member values are outputs."""
    place: dict = {}                                    # member outvar -> (member, k)
    for pos, i in enumerate(g.members):
        for k, v in enumerate(eqns[i].outvars):
            place[v] = (pos, k)
    in_place = {}
    inputs = []
    for k, (v, dm) in enumerate(g.inputs):
        in_place[(v, dm)] = k
        inputs.append((dm, v.aval))
    members = []
    for i in g.members:
        e = eqns[i]
        ops = []
        for r in g.operands[i]:
            if r[0] == "lit":
                ops.append(("lit", const(r[1].val, r[1].aval.dtype)))
            elif r[0] == "m":
                ops.append(place[r[1]])
            else:
                ops.append(in_place[(r[1], r[2])])
        params = e.params
        members.append((e.primitive, tuple(sorted(params.items())) if len(params) > 1
                        else tuple(params.items()),
                        tuple([x.aval for x in e.invars]), tuple([v.aval for v in e.outvars]),
                        tuple([g.dmaps[v] for v in e.outvars]), tuple(ops),
                        i in g.unit_reductions))
    return (g.domain, g.inner, tuple(inputs), tuple(members),
            tuple([place[v] for v in g.outputs]))


class Stages:
    """When each member value of a fusion group is available, for the loop body.

    level[v]: the stage after which v exists (a reduction's result is one stage later than
    its operand); stage_of[i]: the stage whose inner loop accumulates reduction member i;
    is_inner[v]: whether v varies along the inner (reduced) dims; nstages: the number of
    inner loops; buffers: inner values read in a later stage than their own and not
    outputs, each kept in a buffer named b<k> (an output is read back from itself)."""

    def __init__(self, g: pl.Group, members: list, L: _Layout, outs: dict):
        inner_set = set(L.inner)
        self.level, self.stage_of, self.is_inner = level, stage_of, is_inner = {}, {}, {}
        for i, e in zip(g.members, members):
            v = e.outvars[0]
            is_inner[v] = bool(L.mask(g.dmaps[v]) & inner_set)
            lv = 0
            for r in g.operands[i]:
                if r[0] == "m":
                    lv = max(lv, level[r[1]])
            if e.primitive in pl.REDUCTIONS and i not in g.unit_reductions:
                stage_of[i] = lv
                level[v] = lv + 1
            else:
                level[v] = lv
        inner_levels = [level[v] for v in level if is_inner[v]] + list(stage_of.values())
        self.nstages = (max(inner_levels) + 1) if L.inner and inner_levels else 0
        crossing: set = set()
        for i, e in zip(g.members, members):
            t = stage_of.get(i, level[e.outvars[0]])
            if not (is_inner[e.outvars[0]] or i in stage_of):
                continue
            for r in g.operands[i]:
                if r[0] == "m" and is_inner[r[1]] and level[r[1]] < t:
                    crossing.add(r[1])
        self.crossing = crossing
        self.buffers = {v: f"b{k}" for k, v in enumerate(u for u in level if u in crossing
                                                         and u not in outs)}


def emit_body(E, g: pl.Group, members: list, L: _Layout, st: Stages, outs: dict,
              in_name: dict, in_mask: dict, rules: dict, array, buf_index: str,
              input_index=None) -> None:
    """The group's computation at one point of the outer loops (shared by the numba and
    cuda kernels): outer values, then per stage an inner loop that accumulates the
    stage's reductions and computes its inner values, then the values that depend on them.

    in_name[(var, dmap)] -> input number k; in_mask[k]: its loop mask (empty: a scalar
    already read into x<k>); `array(k)`: the name of input k's flat array; `buf_index`:
    where the current inner point's value sits in a stage buffer; `rules`: the scalar
    emitters (scalar_ops.emit_rules, or the cuda backend's); `input_index(k, dmap)`: where
    input k's value at the current point sits in its array (default: row-major, L.index)."""
    inner_set = set(L.inner)
    level, stage_of, is_inner = st.level, st.stage_of, st.is_inner
    crossing, buffers = st.crossing, st.buffers
    names = {v: E.fresh("v") for v in level}          # member var -> its scalar name
    outer_loads: dict = {}

    def operand(r, stage_cache):
        if r[0] == "lit":
            return const(r[1].val, r[1].aval.dtype)
        if r[0] == "in":
            k = in_name[(r[1], r[2])]
            if not in_mask[k]:
                return f"x{k}"
            cache = stage_cache if in_mask[k] & inner_set else outer_loads
            if ("in", k) not in cache:
                at = L.index(r[2]) if input_index is None else input_index(k, r[2])
                cache[("in", k)] = E.tmp(f"{array(k)}[{at}]")
            return cache[("in", k)]
        v = r[1]
        if stage_cache is not None and is_inner[v] and v in crossing \
                and stage_cache["stage"] > level[v]:
            if ("m", v) not in stage_cache:
                src = (f"p{outs[v]}[{L.index(g.dmaps[v])}]" if v in outs
                       else f"{buffers[v]}[{buf_index}]")
                stage_cache[("m", v)] = E.tmp(src)
            return stage_cache[("m", v)]
        return names[v]

    def store(v):
        if v in outs:
            E.line(f"p{outs[v]}[{L.index(g.dmaps[v])}] = {names[v]}")
        if v in buffers:
            E.line(f"{buffers[v]}[{buf_index}] = {names[v]}")

    def compute(i, e, stage_cache):
        xs = [operand(r, stage_cache) for r in g.operands[i]]
        if i in g.unit_reductions:
            expr = xs[0]                                # over size-1 dims: a copy
        else:
            expr = rules[e.primitive].emit(E, xs, e)
        v = e.outvars[0]
        E.line(f"{names[v]} = {expr}")
        store(v)

    def outer_values(lv):
        for i, e in zip(g.members, members):
            v = e.outvars[0]
            if i not in stage_of and not is_inner[v] and level[v] == lv:
                compute(i, e, None)

    outer_values(0)
    for t in range(st.nstages):
        accs = {}
        for i, e in zip(g.members, members):
            if stage_of.get(i) == t:
                dt = e.outvars[0].aval.dtype
                accs[i] = acc = E.fresh("r")
                E.line(f"{acc} = {const(red_identity(e.primitive, dt), dt)}")
        body_start = E.depth
        for m in L.inner:
            E.line(f"for i{m} in range(n{m}):")
            E.depth += 1
        cache = {"stage": t}
        for i, e in zip(g.members, members):
            v = e.outvars[0]
            if stage_of.get(i) == t:
                x = operand(g.operands[i][0], cache)
                combine(E, e.primitive, accs[i], x, v.aval.dtype)
            elif i not in stage_of and is_inner[v] and level[v] == t:
                compute(i, e, cache)
        E.depth = body_start
        for i, e in zip(g.members, members):
            if stage_of.get(i) == t:
                v = e.outvars[0]
                E.line(f"{names[v]} = {accs[i]}")
                store(v)
        outer_values(t + 1)


def kernel_source(g: pl.Group, eqns: list, name: str = "kernel", strided=frozenset()):
    """(source of the njit function `name`, mathfns names, runtime names, sizes, threaded).

    Arguments: `sz`, the loop sizes (omitted for a rank-0 domain); the group's inputs in
    order (arrays, or rank-0 buffers; an input whose number is in `strided` is two
    arguments: a flat array over its memory from its first element and its strides in
    elements, threads.strided(x), so that a view such as x[..., ::2] is read in place
    instead of copied; an array of rank >= 1 comes flat, as the driver passes it: the
    kernel indexes it as it is, where a `flat(a)` view of any rank cost numba about 1 ms
    of compile per array); then either the sizes of the outputs of rank > 0, as ints (it
    allocates and returns a tuple of the outputs, flat: the driver reshapes them), or,
    when `threaded`, the output
    arrays themselves, a chunk counter and the number of chunks (it fills the chunks of
    the outermost loop it claims; see threads.run_threaded). `sizes` is the `sz` to pass.
    """
    E = _Emitter()
    members = [eqns[i] for i in g.members]
    outs = {v: k for k, v in enumerate(g.outputs)}
    dmaps = [dm for _, dm in g.inputs] + [g.dmaps[v] for e in members for v in e.outvars]
    L = _Layout(g.domain, g.inner, dmaps, [g.inputs[k][1] for k in sorted(strided)])
    st = Stages(g, members, L, outs)
    buffers = st.buffers

    total = math.prod(L.sizes)
    threaded = bool(L.outer) and total >= THREADED_MIN and L.sizes[L.outer[0]] >= 2

    # -- prologue: 512-bit vectors (runtime.wide_vectors), sizes, flat inputs, outputs --
    E.runtime.add("wide_vectors")
    E.line("wide_vectors()")
    args = ["sz"] if L.runs else []
    for m in range(len(L.runs)):                # unsigned: indices need no wraparound check
        E.line(f"n{m} = sz[{m}]")
    in_name = {}
    in_mask = {}
    for k, (v, dm) in enumerate(g.inputs):
        args.append(f"a{k}")
        m = L.mask(dm)
        in_mask[k] = m
        if not m:
            if v.aval.shape:
                E.line(f"x{k} = a{k}[0]")
            else:
                E.runtime.add("scalar_of")
                E.line(f"x{k} = scalar_of(a{k})")
        else:
            E.line(f"x{k} = a{k}")
        if k in strided:
            args.append(f"st{k}")
            for j, d in enumerate(dm):
                if d is not None:
                    E.line(f"t{k}_{j} = np.uint64(st{k}[{j}])")
        in_name[(v, dm)] = k
    for v, k in outs.items():
        if threaded:
            args.append(f"o{k}")
        else:
            shape = "()"
            if v.aval.shape:
                shape = f"s{k}"
                args.append(shape)
            E.runtime.add("empty")
            E.line(f"o{k} = empty({shape}, {np_name(v.aval.dtype)})")
        if v.aval.shape or threaded:
            E.line(f"p{k} = o{k}")
        else:                                   # a rank-0 output: its 1-element view
            E.runtime.add("flat")
            E.line(f"p{k} = flat(o{k})")

    def alloc_buffers():
        for v, b in buffers.items():
            E.runtime.add("empty")
            E.line(f"{b} = empty({L.inner_size()}, {np_name(v.aval.dtype)})")

    # -- loops --
    if threaded:
        m0 = L.outer[0]
        args += ["counter", "chunks"]
        E.runtime.add("fetch_add")
        E.line("ch = np.uint64(chunks)")
        E.line("one = np.uint64(1)")
        E.line("while True:")
        E.depth += 1
        E.line("c = fetch_add(counter)")             # uint64
        E.line("if c >= ch:")
        E.line("    break")
        alloc_buffers()
        E.line(f"for i{m0} in range(c * n{m0} // ch, (c + one) * n{m0} // ch):")
        E.depth += 1
        rest = L.outer[1:]
    else:
        alloc_buffers()
        rest = L.outer
    for m in rest:
        E.line(f"for i{m} in range(n{m}):")
        E.depth += 1

    emit_body(E, g, members, L, st, outs, in_name, in_mask, emit_rules,
              array=lambda k: f"x{k}", buf_index=L.inner_index(),
              input_index=lambda k, dm: (L.strided_index(dm, k) if k in strided
                                         else L.index(dm)))

    E.depth = 1
    if threaded:
        E.line("return 0")
    else:
        E.line("return (" + "".join(f"o{k}, " for k in range(len(outs))) + ")")
    head = [f"@numba.njit({NJIT_OPTIONS}, nogil=True)",
            f"def {name}({', '.join(args)}):"]
    return "\n".join(head + E.lines) + "\n", E.imports, E.runtime, tuple(L.sizes), threaded
