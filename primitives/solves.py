"""Implicitly differentiated solves: `lax.custom_linear_solve` and `lax.custom_root`.

custom_linear_solve(matvec, b, solve, transpose_solve) returns x = solve(matvec, b) and
differentiates it as the solution of A x = b, never through `solve` (which may be an
iterative loop that reverse mode cannot go through):

    A x = b  =>  A dx = db - dA x       (dA x: matvec's JVP in its closed-over values)
    dx = solve(db - dA x)               the same solve, linear in its right-hand side
    transpose: b̄ = transpose_solve(x̄)   (Aᵀ b̄ = x̄, with vecmat = Aᵀ from linear_transpose)

It is the primitive `custom_linear_solve` with four sub-jaxprs (matvec, vecmat, solve,
transpose_solve; vecmat and transpose_solve may be None) whose operands are each one's
closed-over values (`const_lengths` of them, in that order) followed by the flattened b.
Its JVP binds it again on the tangent right-hand side; its transpose binds it with the
roles exchanged (matvec <-> vecmat, solve <-> transpose_solve); its batching rule batches
every sub-jaxpr with b and x mapped. Once no transformation follows (a backend's
compile), it is a call of its param `call_jaxpr`: `solve` as a function of all operands.

custom_root(f, guess, solve, tangent_solve) returns x* = solve(f, guess), differentiated
by the implicit function theorem at f(x*, θ) = 0: ∂f/∂x dx* = -∂f/∂θ dθ, so
dx* = -tangent_solve(∂f/∂x, ∂f/∂θ dθ): a custom_jvp whose operands are the closed-over
values θ of f, solve and the linearized tangent_solve.
"""
from __future__ import annotations

from fnad import tree_util
from fnad.core import (Primitive, Zero, abstract_eval_rules, batch_rules, eager_rules,
                       get_aval, is_undefined, jvp_rules, transpose_rules)
from fnad.ir import ClosedJaxpr, eval_jaxpr
from fnad.primitives._batching import bdim_at_front
from fnad.tracing import trace_to_subjaxpr

__all__ = ["custom_linear_solve", "custom_root"]


MATVEC, VECMAT, SOLVE, TSOLVE = range(4)    # the sub-jaxprs, in params["jaxprs"] (a tuple)


def _transposed(t: tuple) -> tuple:
    """matvec <-> vecmat, solve <-> transpose_solve (jaxprs, const lists or lengths)."""
    return (t[VECMAT], t[MATVEC], t[TSOLVE], t[SOLVE])


def _split(args, const_lengths) -> tuple[tuple, list]:
    """(the four const lists, b) of the operands."""
    out, i = [], 0
    for n in const_lengths:
        out.append(list(args[i:i + n]))
        i += n
    return tuple(out), list(args[i:])


def _stage(fun, avals, what: str) -> tuple[ClosedJaxpr, list, object]:
    """`fun(*flat)` staged at `avals`: (jaxpr over consts + inputs, consts, out tree)."""
    trees: list = []

    def flat(*xs):
        leaves, tree = tree_util.tree_flatten(fun(*xs))
        trees.append(tree)
        return leaves
    closed, consts = trace_to_subjaxpr(flat, list(avals), what)
    return closed, consts, trees[0]


def _check_like_b(what: str, out_avals, b_avals, tree, b_tree) -> None:
    if tree != b_tree or [(a.shape, a.dtype) for a in out_avals] != \
            [(a.shape, a.dtype) for a in b_avals]:
        got = ", ".join(a.str_short() for a in out_avals)
        want = ", ".join(a.str_short() for a in b_avals)
        raise TypeError(f"custom_linear_solve: {what} must return values shaped like b "
                        f"({want}, structure {b_tree}); it returned {got} (structure {tree})")


# ---- custom_linear_solve -----------------------------------------------------------------
custom_linear_solve_p = Primitive("custom_linear_solve", multiple_results=True)


def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric: bool = False,
                        has_aux: bool = False):
    """x = solve(matvec, b), differentiated as the solution of matvec(x) = b (JAX's API).

    `matvec` is linear (b's pytree structure in and out); `solve(matvec, b)` and
    `transpose_solve(vecmat, b)` need not be differentiable. Reverse mode needs
    `transpose_solve`, or `symmetric=True` (then `solve` serves for both). With
    `has_aux`, solve returns (x, aux) and so does this function.
    """
    from fnad.ad import linear_transpose
    if transpose_solve is None and symmetric:
        transpose_solve = solve
    b_leaves, b_tree = tree_util.tree_flatten(b)
    b_avals = [get_aval(x) for x in b_leaves]

    def unflat(leaves):
        return tree_util.tree_unflatten(b_tree, list(leaves))

    mv, mv_consts, mv_tree = _stage(lambda *x: matvec(unflat(x)), b_avals,
                                    "custom_linear_solve matvec")
    _check_like_b("matvec", mv.out_avals, b_avals, mv_tree, b_tree)

    def solver(fn, op):
        def run(*x):
            out = fn(op, unflat(x))
            if has_aux:
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise TypeError("custom_linear_solve with has_aux=True: the solve "
                                    "function must return a pair (x, aux)")
                return (out[0], out[1])
            return (out, None)
        return run

    sv, sv_consts, sv_tree = _stage(solver(solve, matvec), b_avals,
                                    "custom_linear_solve solve")
    n = len(b_leaves)
    x_tree, aux_tree = sv_tree.children()
    _check_like_b("solve", sv.out_avals[:n], b_avals, x_tree, b_tree)
    vm = tv = None
    vm_consts, tv_consts = [], []
    if transpose_solve is not None:
        if symmetric:
            vecmat, (vm, vm_consts) = matvec, (mv, mv_consts)
        else:
            vecmat_flat = linear_transpose(lambda x: matvec(x), b)

            def vecmat(y):
                x, = vecmat_flat(y)
                return x
            vm, vm_consts, vm_tree = _stage(lambda *y: vecmat(unflat(y)), b_avals,
                                            "custom_linear_solve vecmat")
        tv, tv_consts, tv_tree = _stage(solver(transpose_solve, vecmat), b_avals,
                                        "custom_linear_solve transpose_solve")
        _check_like_b("transpose_solve", tv.out_avals[:n], b_avals, tv_tree.children()[0],
                      b_tree)
    consts = (mv_consts, vm_consts, sv_consts, tv_consts)
    outs = _bind([c for cs in consts for c in cs] + b_leaves,
                 tuple(len(c) for c in consts), (mv, vm, sv, tv))
    x, aux = tree_util.tree_unflatten(sv_tree, outs)
    return (x, aux) if has_aux else x


def custom_linear_solve_abstract_eval(*avals, const_lengths, jaxprs, call_jaxpr):
    return jaxprs[SOLVE].out_avals
abstract_eval_rules[custom_linear_solve_p] = custom_linear_solve_abstract_eval


def custom_linear_solve_eager(*args, const_lengths, jaxprs, call_jaxpr):
    consts, b = _split(args, const_lengths)
    return eval_jaxpr(jaxprs[SOLVE].jaxpr, [], *consts[SOLVE], *b)
eager_rules[custom_linear_solve_p] = custom_linear_solve_eager


def custom_linear_solve_jvp(primals, tangents, *, const_lengths, jaxprs, call_jaxpr):
    from fnad.ad import instantiate, jvp
    from fnad.primitives.elementwise import sub
    params = dict(const_lengths=const_lengths, jaxprs=jaxprs, call_jaxpr=call_jaxpr)
    outs = custom_linear_solve_p.bind(*primals, **params)
    consts, b = _split(primals, const_lengths)
    dconsts, db = _split(tangents, const_lengths)
    n = len(b)
    rhs = [instantiate(t) if type(t) is Zero else t for t in db]
    out_avals = jaxprs[SOLVE].out_avals
    moving = any(type(t) is not Zero for t in dconsts[MATVEC])
    if not moving and all(type(t) is Zero for t in db):
        return outs, [Zero(a.to_tangent_aval()) for a in out_avals]
    if moving:                                                # - dA x
        x = outs[:n]

        def apply(*c):
            return eval_jaxpr(jaxprs[MATVEC].jaxpr, [], *c, *x)
        _, dax = jvp(apply, tuple(consts[MATVEC]), tuple(instantiate(t) if type(t) is Zero
                                                         else t for t in dconsts[MATVEC]))
        rhs = [sub(r, d) for r, d in zip(rhs, dax)]
    dx = custom_linear_solve_p.bind(*[c for cs in consts for c in cs], *rhs, **params)
    return outs, list(dx[:n]) + [Zero(a.to_tangent_aval()) for a in out_avals[n:]]
jvp_rules[custom_linear_solve_p] = custom_linear_solve_jvp


def custom_linear_solve_transpose(cts, *args, const_lengths, jaxprs, call_jaxpr):
    from fnad.ad import instantiate
    if jaxprs[TSOLVE] is None:
        raise TypeError("custom_linear_solve: reverse-mode differentiation needs "
                        "transpose_solve (or symmetric=True)")
    consts, b = _split(args, const_lengths)
    if any(is_undefined(c) for cs in consts for c in cs):
        raise NotImplementedError("custom_linear_solve: transposing with respect to the "
                                  "values matvec or solve close over is not supported")
    n = len(b)
    if any(type(ct) is not Zero for ct in cts[n:]):
        raise NotImplementedError("custom_linear_solve: a cotangent for has_aux's aux "
                                  "output cannot be transposed")
    ct_b = _bind([c for cs in _transposed(consts) for c in cs] +
                 [instantiate(ct) for ct in cts[:n]],
                 _transposed(const_lengths), _transposed(jaxprs))
    return [None] * sum(const_lengths) + list(ct_b[:n])
transpose_rules[custom_linear_solve_p] = custom_linear_solve_transpose


def custom_linear_solve_batch(vals, dims, *, const_lengths, jaxprs, call_jaxpr):
    """Every sub-jaxpr batched with b and x mapped along axis 0 (an unmapped b is
    broadcast): simpler than finding which of them stay unmapped, and exact."""
    from fnad.batching import batch_jaxpr
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    consts, b = _split(vals, const_lengths)
    cdims, bdims = _split(dims, const_lengths)
    n = len(b)
    batched = []
    for j, cd in zip(jaxprs, cdims):
        if j is None:
            batched.append(None)
            continue
        bj, _ = batch_jaxpr(j, size, [d is not None for d in cd] + [True] * n, True)
        batched.append(bj)
    new_consts = [c if d is None else bdim_at_front(c, d, size)
                  for cs, ds in zip(consts, cdims) for c, d in zip(cs, ds)]
    new_b = [bdim_at_front(x, d, size) for x, d in zip(b, bdims)]
    outs = _bind(new_consts + new_b, const_lengths, batched)
    return outs, [0] * len(outs)
batch_rules[custom_linear_solve_p] = custom_linear_solve_batch


def _call_jaxpr(jaxprs: tuple, lengths: tuple) -> ClosedJaxpr:
    """`solve` as a function of all the equation's operands: what jit runs in place of a
    custom_linear_solve (the param `call_jaxpr`, inlined as custom_jvp_call's is)."""
    j = jaxprs[SOLVE]
    start, count = sum(lengths[:SOLVE]), lengths[SOLVE]
    in_avals = [a for jx, k in zip(jaxprs, lengths) if jx is not None
                for a in jx.in_avals[:k]]

    def call(*ops):
        return eval_jaxpr(j.jaxpr, [], *ops[start:start + count], *ops[sum(lengths):])
    closed, consts = trace_to_subjaxpr(call, in_avals + list(j.in_avals[count:]),
                                       "custom_linear_solve's solve")
    assert not consts, "the sub-jaxprs close over nothing"
    return closed


def _bind(args, const_lengths: tuple, jaxprs: tuple) -> list:
    return custom_linear_solve_p.bind(*args, const_lengths=tuple(const_lengths),
                                      jaxprs=tuple(jaxprs),
                                      call_jaxpr=_call_jaxpr(jaxprs, const_lengths))


# ---- custom_root ----------------------------------------------------------------------------
def custom_root(f, initial_guess, solve, tangent_solve, has_aux: bool = False):
    """x* = solve(f, initial_guess), a root of f, differentiated by the implicit function
    theorem with respect to the values f closes over (JAX's API): `tangent_solve(g, y)`
    solves g(x) = y for the linear map g = ∂f/∂x at x* (for a scalar, `lambda g, y: y /
    g(1.0)`). With `has_aux`, solve returns (x*, aux)."""
    from fnad.ad import jvp, linearize
    from fnad.custom import custom_jvp
    from fnad.primitives.elementwise import neg
    from fnad.primitives.shape_ops import zeros_like_array
    guess, tree = tree_util.tree_flatten(initial_guess)
    avals = [get_aval(g) for g in guess]

    def unflat(xs):
        return tree_util.tree_unflatten(tree, list(xs))

    fj, f_consts, f_tree = _stage(lambda *x: f(unflat(x)), avals, "custom_root f")
    if f_tree != tree or [a.shape for a in fj.out_avals] != [a.shape for a in avals]:
        raise TypeError(f"custom_root: f must return values shaped like initial_guess "
                        f"(structure {tree}); it returned structure {f_tree}")

    def run_solve(*x):
        out = solve(f, unflat(x))
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError("custom_root with has_aux=True: solve must return a pair "
                                "(solution, aux)")
            return out
        return (out, None)
    sj, s_consts, s_tree = _stage(run_solve, avals, "custom_root solve")
    sol_tree, _ = s_tree.children()
    if sol_tree != tree:
        raise TypeError(f"custom_root: solve must return a solution shaped like "
                        f"initial_guess (structure {tree}); it returned {sol_tree}")
    n = len(guess)

    def lin_solve(*xb):
        x, rhs = unflat(xb[:n]), unflat(xb[n:])
        _, g = linearize(f, x)
        return tangent_solve(g, rhs)
    lj, l_consts, l_tree = _stage(lin_solve, avals + avals, "custom_root tangent_solve")
    if l_tree != tree:
        raise TypeError(f"custom_root: tangent_solve must return values shaped like "
                        f"initial_guess (structure {tree}); it returned {l_tree}")

    @custom_jvp
    def root(fc, sc, lc, g):
        return eval_jaxpr(sj.jaxpr, [], *sc, *g)

    @root.defjvp
    def root_jvp(primals, tangents):
        fc, sc, lc, g = primals
        outs = root(fc, sc, lc, g)
        x = outs[:n]
        _, rhs = jvp(lambda *c: eval_jaxpr(fj.jaxpr, [], *c, *x), tuple(fc),
                     tuple(tangents[0]))
        dx = [neg(t) for t in eval_jaxpr(lj.jaxpr, [], *lc, *x, *rhs)]
        return outs, dx + [zeros_like_array(a) for a in outs[n:]]

    outs = root(list(f_consts), list(s_consts), list(l_consts), list(guess))
    x, aux = tree_util.tree_unflatten(s_tree, outs)
    return (x, aux) if has_aux else x

