"""fnad.passes: each rewrite on small jaxprs (what it removes, that the result typechecks
and evaluates to the same values, that the signature is kept), `optimize`, and the fusion
plans of softmax, RMSNorm, layer norm, an elementwise chain, an MLP and AdamW."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import fnad
import fnad.numpy as jnp
from fnad import lax, passes
from fnad.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var, eval_jaxpr, typecheck_jaxpr
from fnad.passes import (cse, dce, dce_jaxpr, fold_constants, inline, optimize, plan_fusion,
                         simplify)
from fnad.primitives import elementwise as ew
from fnad.primitives import logic as lg
from fnad.primitives import reductions as red
from fnad.primitives import shape_ops as sh
from fnad.remat import checkpoint_name, remat_p

rng = np.random.default_rng(0)


# ---- helpers --------------------------------------------------------------------------------
def rand(*shape, dtype=np.float32):
    return jnp.asarray(rng.standard_normal(shape).astype(dtype))


def names(closed) -> list[str]:
    """The primitive names of the top-level eqns."""
    j = closed.jaxpr if isinstance(closed, ClosedJaxpr) else closed
    return [e.primitive.name for e in j.eqns]


def all_names(closed) -> list[str]:
    """Primitive names of every eqn, sub-jaxprs included."""
    j = closed.jaxpr if isinstance(closed, ClosedJaxpr) else closed
    out = []
    for e in j.eqns:
        out.append(e.primitive.name)
        for p in e.params.values():
            for sub in (p if isinstance(p, tuple) else (p,)):
                if isinstance(sub, (ClosedJaxpr, Jaxpr)):
                    out += all_names(sub)
    return out


def run(closed: ClosedJaxpr, *args):
    return [np.asarray(o) for o in eval_jaxpr(closed.jaxpr, closed.consts, *args)]


def check_same(before: ClosedJaxpr, after: ClosedJaxpr, *args, rtol=1e-5, atol=1e-6):
    """`after` typechecks, has `before`'s signature, and computes the same values."""
    typecheck_jaxpr(before.jaxpr)
    typecheck_jaxpr(after.jaxpr)
    assert after.jaxpr.invars == before.jaxpr.invars
    assert after.out_avals == before.out_avals         # shapes, dtypes and weak types
    for a, b in zip(run(before, *args), run(after, *args)):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol)


def build(invars, eqns, outvars, constvars=(), consts=()) -> ClosedJaxpr:
    closed = ClosedJaxpr(Jaxpr(list(constvars), list(invars), eqns, outvars), list(consts))
    typecheck_jaxpr(closed.jaxpr)
    return closed


def eqn(prim, invars, **params) -> JaxprEqn:
    """An eqn of `prim` on `invars` with fresh outvars of the avals its rule gives."""
    from fnad.core import abstract_eval
    outs = abstract_eval(prim, [a.aval for a in invars], params)
    return JaxprEqn(prim, list(invars), params, [Var(a) for a in outs])


F32 = fnad.core.ShapedArray((3, 4), np.float32)


# ---- DCE ---------------------------------------------------------------------------------------
def test_dce_drops_unused_eqns_and_keeps_signature():
    def f(x, y):
        unused = jnp.cos(x) * y                         # staged, never returned
        del unused
        return jnp.sin(x)
    c = fnad.make_jaxpr(f)(rand(3), rand(3))
    assert names(c) == ["cos", "mul", "sin"]
    d = dce(c)
    assert names(d) == ["sin"]
    assert len(d.jaxpr.invars) == 2                     # y stays an input, unread
    check_same(c, d, rand(3), rand(3))


def test_last_reads_and_read_counts_of_a_straight_line_program():
    from fnad.passes.dce import last_read_at, last_reads, read_counts
    a, b, c, d = (Var(F32) for _ in range(4))
    one = Literal(np.float32(1), fnad.core.ShapedArray((), np.float32))
    reads = [[a, b], [a, one], [c, c], [b, d]]             # step i reads reads[i]
    assert last_read_at(reads, outputs=[d]) == {a: 1, b: 3, c: 2, d: 4}  # d: after the end
    assert last_read_at(reads) == {a: 1, b: 3, c: 2, d: 3}
    assert last_reads(reads, keep=[d]) == {1: [a], 2: [c], 3: [b]}   # d: an output, kept
    assert read_counts(reads, outputs=[d, d]) == {a: 2, b: 2, c: 2, d: 3}
    assert read_counts([]) == {}


def test_dce_keeps_effects_also_inside_sub_jaxprs():
    seen = []

    def f(x):
        fnad.debug.callback(lambda v: seen.append(float(v)), x[0])
        lax.cond(x[0] > 0, lambda v: fnad.debug.callback(lambda: seen.append("cond")) or v,
                 lambda v: v, x)                        # outputs unused, an effect inside
        return x * 2
    c = fnad.make_jaxpr(f)(rand(3))
    d = dce(c)
    assert names(d).count("debug_callback") == 1
    assert "cond" in names(d)
    seen.clear()
    x = jnp.asarray(np.array([1.0, 2.0, 3.0], np.float32))
    run(d, x)
    assert seen == [1.0, "cond"]


def test_dce_prunes_scan_carry_ys_and_operands():
    def f(x, w):
        def body(c, xi):
            a, b = c
            # b feeds nothing used; ys unused; a needs w
            return (a * w + xi, b + jnp.sin(xi)), jnp.cos(xi)
        (a, _), _ = lax.scan(body, (jnp.float32(0), jnp.float32(1)), x)
        return a
    x, w = rand(5), jnp.float32(0.5)
    c = fnad.make_jaxpr(f)(x, w)
    d = dce(c)
    (scan_eqn,) = [e for e in d.jaxpr.eqns if e.primitive.name == "scan"]
    assert scan_eqn.params["num_carry"] == 1
    assert len(scan_eqn.outvars) == 1                   # the used carry only
    body = scan_eqn.params["jaxpr"].jaxpr
    assert sorted(e.primitive.name for e in body.eqns) == ["add", "mul"]
    check_same(c, d, x, w)


def test_dce_scan_keeps_a_carry_the_used_part_reads():
    def f(x):
        def body(c, xi):
            a, b = c
            return (a + b * xi, b * 2.0), xi            # b only matters through a
        (a, _), _ = lax.scan(body, (jnp.float32(0), jnp.float32(1)), x)
        return a
    x = rand(4)
    c = fnad.make_jaxpr(f)(x)
    d = dce(c)
    (scan_eqn,) = [e for e in d.jaxpr.eqns if e.primitive.name == "scan"]
    assert scan_eqn.params["num_carry"] == 2
    assert len(scan_eqn.outvars) == 2                   # no ys
    check_same(c, d, x)


def test_dce_prunes_cond_outputs_and_operands():
    def f(p, x, y):
        a, _ = lax.cond(p > 0, lambda x, y: (x * 2, jnp.sin(y)),
                        lambda x, y: (x + 1, jnp.cos(y)), x, y)
        return a
    args = (jnp.float32(1.0), rand(3), rand(3))
    c = fnad.make_jaxpr(f)(*args)
    d = dce(c)
    (cond_eqn,) = [e for e in d.jaxpr.eqns if e.primitive.name == "cond"]
    assert len(cond_eqn.outvars) == 1 and len(cond_eqn.invars) == 2   # index and x
    assert all(len(b.jaxpr.invars) == 1 for b in cond_eqn.params["branches"])
    assert "sin" not in all_names(d) and "cos" not in all_names(d)
    check_same(c, d, *args)
    check_same(c, d, jnp.float32(-1.0), *args[1:])


def test_dce_prunes_checkpoint_and_while_inside():
    def f(x):
        a, _ = fnad.checkpoint(lambda x: (jnp.sin(x), jnp.cos(x)))(x)
        _, b = lax.while_loop(lambda c: c[0] < 3,
                              lambda c: (c[0] + 1, c[1] * 2 + jnp.exp(c[1]) * 0), (0, x))
        return a + b
    x = rand(3)
    c = fnad.make_jaxpr(f)(x)
    d = dce(c)
    (ck,) = [e for e in d.jaxpr.eqns if e.primitive is remat_p]
    assert len(ck.outvars) == 1 and "cos" not in all_names(d)
    (wh,) = [e for e in d.jaxpr.eqns if e.primitive.name == "while"]
    assert len(wh.outvars) == 2                         # the loop's signature is kept
    check_same(c, d, x)


def test_dce_jaxpr_of_partial_eval_is_the_pass_without_recursion():
    c = fnad.make_jaxpr(lambda x: lax.cond(x > 0, lambda v: (v, jnp.sin(v)),
                                           lambda v: (v, jnp.cos(v)), x)[0])(jnp.float32(1))
    flat, used = fnad.partial_eval.dce_jaxpr(c.jaxpr, prune_invars=True)
    assert flat.eqns[-1] is c.jaxpr.eqns[-1] and used == [True]        # cond untouched
    deep, _ = dce_jaxpr(c.jaxpr)
    assert len(deep.eqns[-1].outvars) == 1              # the pass narrows it


def test_dce_drops_unused_constants():
    big = np.arange(6, dtype=np.float32)
    c = fnad.make_jaxpr(lambda x: (x + 1, jnp.asarray(big) * x)[0])(rand(6))
    assert len(c.jaxpr.constvars) == 1
    d = dce(c)
    assert not d.jaxpr.constvars and not d.consts
    check_same(c, d, rand(6))


# ---- CSE ---------------------------------------------------------------------------------------
def test_cse_merges_equal_eqns_commutative_too():
    def f(x, y):
        return jnp.sin(x) + jnp.sin(x), x * y - y * x, jnp.exp(x) * 2.0 + jnp.exp(x) * 2.0
    args = rand(3), rand(3)
    c = fnad.make_jaxpr(f)(*args)
    d = dce(cse(c))
    got = names(d)
    assert got.count("sin") == 1 and got.count("mul") == 2 and got.count("exp") == 1
    check_same(c, d, *args)


def test_cse_tells_literals_apart_by_bits():
    c = fnad.make_jaxpr(lambda x: (x * 0.0, x * -0.0))(rand(3))
    d = cse(c)
    assert names(d) == ["mul", "mul"]
    a, b = run(d, jnp.asarray(np.float32([-1.0, 1.0, 2.0])))
    assert np.signbit(a[0]) and not np.signbit(b[0])


def test_cse_never_merges_effects_nor_prevent_cse_checkpoints():
    x = Var(F32)
    cb = fnad.make_jaxpr(lambda v: fnad.debug.callback(print, v) or v)(rand(3, 4))
    cb_eqn = cb.jaxpr.eqns[0]
    e1 = cb_eqn.replace(invars=[x])
    e2 = cb_eqn.replace(invars=[x])
    assert names(cse(build([x], [e1, e2], [x]))) == ["debug_callback"] * 2

    ck = fnad.make_jaxpr(fnad.checkpoint(jnp.sin))(rand(3, 4)).jaxpr.eqns[0]
    assert ck.params["prevent_cse"] is True
    k1, k2 = ck.replace(invars=[x], outvars=[Var(F32)]), ck.replace(invars=[x],
                                                                       outvars=[Var(F32)])
    kept = cse(build([x], [k1, k2], [k1.outvars[0], k2.outvars[0]]))
    assert names(kept) == ["checkpoint", "checkpoint"]
    params = dict(ck.params, prevent_cse=False)
    k1, k2 = k1.replace(params=params), k2.replace(params=params)
    before = build([x], [k1, k2], [k1.outvars[0], k2.outvars[0]])
    merged = cse(before)
    assert names(merged) == ["checkpoint"]
    check_same(before, merged, rand(3, 4))


def test_cse_inside_scan_bodies_and_on_grad():
    def f(x):
        return lax.scan(lambda c, xi: (c + jnp.sin(xi) * jnp.sin(xi), xi), 0.0, x)[0]
    x = rand(4)
    c = fnad.make_jaxpr(f)(x)
    d = cse(c)
    assert all_names(d).count("sin") == 1
    check_same(c, d, x)

    def ln(x):
        m = x.mean(-1, keepdims=True)
        return ((x - m) / jnp.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)).sum()
    x = rand(4, 8)
    c = fnad.make_jaxpr(fnad.grad(ln))(x)
    d = dce(cse(c))
    assert len(d.jaxpr.eqns) < len(c.jaxpr.eqns)
    check_same(c, d, x, rtol=1e-4, atol=1e-5)


# ---- constant folding -----------------------------------------------------------------------
def test_fold_scalar_literals():
    def f(x):
        k = jnp.exp(jnp.float32(2.0)) * jnp.float32(3.0)   # staged on literals
        return x * k, k
    x = rand(3)
    c = fnad.make_jaxpr(f)(x)
    assert names(c) == ["exp", "mul", "mul"]
    d = fold_constants(c)
    assert names(d) == ["mul"]
    assert type(d.jaxpr.outvars[1]) is Literal          # a jaxpr output became a Literal
    check_same(c, d, x)


def test_fold_splats_stay_broadcasts_of_literals():
    def f(x):
        return x + jnp.ones((3, 4)) * 2.0
    x = rand(3, 4)
    c = fnad.make_jaxpr(f)(x)
    d = dce(fold_constants(c))
    assert names(d) == ["broadcast_in_dim", "add"]
    assert type(d.jaxpr.eqns[0].invars[0]) is Literal and d.jaxpr.eqns[0].invars[0].val == 2
    assert not d.jaxpr.constvars
    check_same(c, d, x)


def test_fold_array_constants_and_size_limit():
    table = np.arange(12, dtype=np.float32).reshape(3, 4)
    c = fnad.make_jaxpr(lambda x: x + (jnp.asarray(table) * 2.0 + 1.0))(rand(3, 4))
    assert names(c) == ["mul", "add", "add"]
    d = dce(fold_constants(c))
    assert names(d) == ["add"] and len(d.consts) == 1
    np.testing.assert_array_equal(np.asarray(d.consts[0]), table * 2 + 1)
    check_same(c, d, rand(3, 4))
    small = dce(fold_constants(c, max_const_size=4))    # 12 elements: not stored
    assert names(small) == names(c)
    none = dce(fold_constants(c, max_const_size=0))
    assert names(none) == names(c) and len(none.consts) == 1


def test_fold_iota_kept_but_its_reduction_folded():
    c = fnad.make_jaxpr(lambda x: x + jnp.arange(5).sum())(jnp.int32(1))
    d = dce(fold_constants(c))
    assert names(d) == ["add"]
    check_same(c, d, jnp.int32(3))
    c = fnad.make_jaxpr(lambda x: x + jnp.arange(5))(rand(5))
    assert "iota" in names(dce(fold_constants(c)))     # not turned into a constant


def test_fold_nan_and_inside_scan_without_constants():
    def f(x):
        def body(c, xi):
            k = jnp.log(jnp.float32(4.0)) / jnp.float32(2.0)
            return c + xi * k, lax.div(jnp.float32(0.0), jnp.float32(0.0))
        return lax.scan(body, 0.0, x)
    x = rand(4)
    c = fnad.make_jaxpr(f)(x)
    d = fold_constants(c)
    (scan_eqn,) = d.jaxpr.eqns
    body = scan_eqn.params["jaxpr"]
    assert not body.consts and not body.jaxpr.constvars
    assert [e.primitive.name for e in body.jaxpr.eqns] == ["mul", "add"]
    assert np.isnan(np.asarray(body.jaxpr.outvars[1].val))
    a, b = run(c, x), run(d, x)
    np.testing.assert_allclose(b[0], a[0], rtol=1e-6)
    assert np.isnan(b[1]).all() and np.isnan(a[1]).all()


# ---- simplify -------------------------------------------------------------------------------
def test_simplify_removes_shape_identities():
    x = Var(F32)
    e = [eqn(lg.convert_element_type_p, [x], new_dtype=np.dtype(np.float32), weak_type=False)]
    e.append(eqn(sh.reshape_p, [e[-1].outvars[0]], new_sizes=(3, 4)))
    e.append(eqn(sh.broadcast_in_dim_p, [e[-1].outvars[0]], shape=(3, 4),
                 broadcast_dimensions=(0, 1)))
    e.append(eqn(sh.transpose_p, [e[-1].outvars[0]], permutation=(0, 1)))
    e.append(eqn(sh.squeeze_p, [e[-1].outvars[0]], dimensions=()))
    e.append(eqn(sh.rev_p, [e[-1].outvars[0]], dimensions=()))
    e.append(eqn(red.reduce_sum_p, [e[-1].outvars[0]], axes=()))
    e.append(eqn(sh.slice_p, [e[-1].outvars[0]], start_indices=(0, 0), limit_indices=(3, 4),
                 strides=None))
    e.append(eqn(sh.pad_p, [e[-1].outvars[0], Literal(np.float32(0), F32.update(shape=()))],
                 padding_config=((0, 0, 0), (0, 0, 0))))
    e.append(eqn(sh.concatenate_p, [e[-1].outvars[0]], dimension=0))
    i = Literal(np.int32(0), fnad.core.ShapedArray((), np.int32))
    e.append(eqn(sh.dynamic_slice_p, [e[-1].outvars[0], i, i], slice_sizes=(3, 4)))
    before = build([x], e, [e[-1].outvars[0]])
    after = simplify(before)
    assert names(after) == [] and after.jaxpr.outvars == [x]   # the output is the input
    check_same(before, after, rand(3, 4))


def test_simplify_composes_broadcasts_transposes_reshapes():
    x = Var(fnad.core.ShapedArray((3,), np.float32))
    b1 = eqn(sh.broadcast_in_dim_p, [x], shape=(3, 1), broadcast_dimensions=(0,))
    b2 = eqn(sh.broadcast_in_dim_p, [b1.outvars[0]], shape=(2, 3, 4),
             broadcast_dimensions=(1, 2))
    t1 = eqn(sh.transpose_p, [b2.outvars[0]], permutation=(2, 0, 1))
    t2 = eqn(sh.transpose_p, [t1.outvars[0]], permutation=(0, 2, 1))
    r1 = eqn(sh.reshape_p, [t2.outvars[0]], new_sizes=(4, 6))
    r2 = eqn(sh.reshape_p, [r1.outvars[0]], new_sizes=(24,))
    s1 = eqn(red.reduce_sum_p, [b1.outvars[0]], axes=(1,))   # over a size-1 axis: a reshape
    before = build([x], [b1, b2, t1, t2, r1, r2, s1], [r2.outvars[0], s1.outvars[0]])
    after = dce(simplify(before))
    assert names(after) == ["broadcast_in_dim", "transpose", "reshape"]
    assert after.jaxpr.eqns[0].params["broadcast_dimensions"] == (1,)
    assert after.jaxpr.outvars[1] is x
    check_same(before, after, rand(3))


def test_simplify_arithmetic_identities():
    def f(x, y, p):
        a = x + 0.0
        b = jnp.zeros(3) + a                            # broadcast zero on the left
        c = (b - 0.0) * 1.0 / 1.0
        d = ew.neg(ew.neg(c))
        e = lax.integer_pow(d, 1)
        g = lg.select_n(p, e, e)                        # equal cases
        h = lg.select_n(jnp.ones(3, bool), y, g)        # a constant predicate: g
        return h * jnp.ones(3)
    args = rand(3), rand(3), jnp.asarray(np.array([True, False, True]))
    c = fnad.make_jaxpr(f)(*args)
    d = dce(simplify(c))
    assert names(d) == [] and d.jaxpr.outvars == [c.jaxpr.invars[0]]
    check_same(c, d, *args)


def test_simplify_scalar_operands_and_keeps_types():
    def f(x, s):
        a = x * jnp.full((3,), 2.0)                     # broadcast of a literal: the scalar
        b = a + lax.broadcast_in_dim(s, (3,), ())       # broadcast of a traced scalar too
        return b, lg.convert_element_type(s, np.float32, False)
    args = rand(3), 1.5                                 # s: a weakly typed f32 scalar
    c = fnad.make_jaxpr(f)(*args)
    d = dce(simplify(c))
    assert names(d) == ["mul", "add", "convert_element_type"]   # weak -> strong stays
    assert d.out_avals[1].weak_type is False
    assert [a.aval.shape for a in d.jaxpr.eqns[1].invars] == [(3,), ()]
    check_same(c, d, *args)


def test_simplify_outer_products_are_multiplications():
    """dot_generals contracting only size-1 dims (or none) become a mul of broadcasts, with
    dot_general's values bit for bit; other products stay."""
    from fnad.primitives.linalg import dot_general
    cases = [  # (lhs, rhs, dimension_numbers, becomes a mul)
        (rand(6, 1), rand(4, 1), (((1,), (1,)), ((), ())), True),          # x @ y^T, K = 1
        (rand(3, 5, 1), rand(7, 1), (((2,), (1,)), ((), ())), True),       # an RNN's read-out
        (rand(2, 3, 1), rand(2, 1, 4), (((2,), (1,)), ((0,), (0,))), True),   # batched
        (rand(3), rand(4), (((), ()), ((), ())), True),                    # no contraction
        (rand(6, 2), rand(2, 4), (((1,), (0,)), ((), ())), False),         # K = 2
        (jnp.asarray(np.arange(6, dtype=np.int32).reshape(6, 1)),
         jnp.asarray(np.arange(4, dtype=np.int32).reshape(1, 4)), (((1,), (0,)), ((), ())),
         False),                                                           # integers
        (rand(3, 2, 1), rand(2, 1, 4), (((2,), (1,)), ((1,), (0,))), False),  # batch not first
    ]
    for lhs, rhs, dn, becomes in cases:
        c = fnad.make_jaxpr(lambda a, b: dot_general(a, b, dn))(lhs, rhs)
        d = dce(simplify(c))
        assert ("mul" in names(d) and "dot_general" not in names(d)) == becomes, (dn, names(d))
        typecheck_jaxpr(d.jaxpr)
        assert d.out_avals == c.out_avals
        np.testing.assert_array_equal(run(d, lhs, rhs)[0], run(c, lhs, rhs)[0])


def test_simplify_grad_leftovers_and_scan_bodies():
    def f(x):
        y = lax.scan(lambda c, xi: (c + lg.convert_element_type(xi, np.float32) * 1.0, c),
                     0.0, x)[0]
        return jnp.sum(jnp.tanh(x) * 2.0 + x.astype(jnp.float32)) + y
    x = rand(4)
    c = fnad.make_jaxpr(fnad.grad(f))(x)
    d = dce(simplify(fold_constants(c)))
    assert "convert_element_type" not in all_names(d)
    assert len(all_names(d)) < len(all_names(c))
    check_same(c, d, x)


def test_simplify_sums_of_pads_become_concatenates():
    # the cotangent of x in jnp.split / x[..., ::2], x[..., 1::2] is a sum of zero pads;
    # they join into concatenates (RoPE and the q, k, v split of a transformer's backward)
    def split3(x):
        a, b, c = jnp.split(x, 3, axis=1)
        return jnp.sum(jnp.sin(a) * 2.0 + jnp.cos(b) * c)

    def interleave(x):
        e, o = x[..., ::2], x[..., 1::2]
        return jnp.sum(jnp.sin(e) * o + o)

    def split_middle(x):                              # rows 1:3 and 3:6 of 7: one pad (1, 1)
        return jnp.sum(jnp.exp(x[1:3])) + jnp.sum(jnp.sin(x[3:6]))

    for f, x in ((split3, rand(4, 9, 5)), (interleave, rand(3, 4, 8)),
                 (split_middle, rand(7, 4))):
        c = fnad.make_jaxpr(fnad.grad(f))(x)
        assert "pad" in names(c) and "add_any" in names(c)
        d = dce(simplify(c))
        kept = [n for n in names(d) if n == "pad"]
        assert "concatenate" in names(d), f.__name__
        assert len(kept) == (1 if f is split_middle else 0), names(d)
        check_same(c, d, x, rtol=0, atol=0)                 # the same bits: only copies
        np.testing.assert_array_equal(np.asarray(run(d, x)[0]),
                                      np.asarray(fnad.grad(f)(x)))


def test_simplify_sums_of_pads_that_stay_sums():
    x = Var(fnad.core.ShapedArray((2, 3), np.float32))
    zero = Literal(np.float32(0), fnad.core.ShapedArray((), np.float32))
    one = Literal(np.float32(1), fnad.core.ShapedArray((), np.float32))

    def pad(v, cfg, value=zero):
        return eqn(sh.pad_p, [v, value], padding_config=cfg)
    cases = [
        (((0, 0, 0), (0, 2, 0)), ((0, 0, 0), (1, 1, 0))),     # overlapping footprints
        (((0, 0, 0), (0, 3, 0)), ((0, 0, 0), (3, 0, 0))),     # adjacent but padded with 1
        (((0, 0, 0), (0, 4, 0)), ((0, 0, 0), (4, 0, 0))),     # a gap between them
        (((1, 0, 0), (0, 3, 0)), ((0, 1, 0), (3, 0, 0))),     # they differ in two dims
        (((0, 0, 0), (0, -1, 0)), ((0, 0, 0), (-1, 0, 0))),   # negative padding (a crop)
    ]
    for i, (ca, cb) in enumerate(cases):
        value = one if i == 1 else zero
        pa, pb = pad(x, ca, value), pad(x, cb, value)
        s = eqn(ew.add_any_p, [pa.outvars[0], pb.outvars[0]])
        before = build([x], [pa, pb, s], [s.outvars[0]])
        after = simplify(before)
        assert names(after) == ["pad", "pad", "add_any"], (i, names(after))
    # a pad output read twice: joining would keep both pads and add a copy
    pa, pb = pad(x, ((0, 0, 0), (0, 3, 0))), pad(x, ((0, 0, 0), (3, 0, 0)))
    s = eqn(ew.add_any_p, [pa.outvars[0], pb.outvars[0]])
    t = eqn(ew.mul_p, [pa.outvars[0], s.outvars[0]])
    before = build([x], [pa, pb, s, t], [t.outvars[0]])
    assert names(simplify(before)) == ["pad", "pad", "add_any", "mul"]


# ---- inline ---------------------------------------------------------------------------------
def _jit():
    return importlib.import_module("fnad.jit").jit


def test_inline_nested_jit_always():
    g = _jit()(lambda x: jnp.sin(x) * 2.0)
    c = fnad.make_jaxpr(lambda x: g(x) + g(x + 1.0))(rand(3))
    assert names(c).count("jit") == 2
    d = inline(c)
    assert "jit" not in all_names(d) and names(d).count("sin") == 2
    check_same(c, d, rand(3))                           # each inlined copy has fresh vars


def _custom_softplus():
    @fnad.custom_jvp
    def softplus(x):
        return jnp.log1p(jnp.exp(x))
    # a deliberately scaled rule: tells the custom rule apart from the function's own
    softplus.defjvp(lambda p, t: (softplus(p[0]), 3.0 * t[0] * fnad.nn.sigmoid(p[0])))
    return softplus


def test_inline_custom_jvp_only_when_lowering_so_grad_keeps_the_rule():
    sp = _custom_softplus()
    c = fnad.make_jaxpr(lambda x: jnp.sum(sp(x)))(rand(3))
    kept = optimize(c)
    assert "custom_jvp_call" in names(kept)
    x = rand(3)

    def grad_of(closed):
        return np.asarray(fnad.grad(lambda x: eval_jaxpr(closed.jaxpr, closed.consts, x)[0])(x))
    sig = 1 / (1 + np.exp(-np.asarray(x)))
    np.testing.assert_allclose(grad_of(kept), 3 * sig, rtol=1e-5)   # the user's rule
    lowered = optimize(c, lowering=True)
    assert names(lowered) == ["exp", "log1p", "reduce_sum"]
    np.testing.assert_allclose(grad_of(lowered), sig, rtol=1e-5)    # plain math: why lowering
    check_same(c, lowered, x)


def test_inline_custom_vjp_name_stop_gradient_and_in_scan_bodies():
    @fnad.custom_vjp
    def clip_grad(x):
        return x * 1.5
    clip_grad.defvjp(lambda x: (clip_grad(x), None), lambda _, g: (jnp.clip(g, -1, 1),))
    sp = _custom_softplus()

    def f(x):
        y = checkpoint_name(clip_grad(x), "y") + lax.stop_gradient(x)
        return lax.scan(lambda c, xi: (c + sp(xi), c), 0.0, y)
    x = rand(4)
    c = fnad.make_jaxpr(f)(x)
    d = inline(c, lowering=True)
    assert not {"custom_vjp_call", "custom_jvp_call", "name", "stop_gradient"} & \
        set(all_names(d))
    assert names(inline(c)) == names(c)                 # nothing AD needs goes by default
    check_same(c, d, x)


def test_inline_checkpoint_except_the_backward_recompute():
    f = fnad.checkpoint(lambda x: jnp.sin(jnp.sin(x)))
    x = rand(3)
    fwd = fnad.make_jaxpr(lambda x: f(x).sum())(x)
    assert names(fwd) == ["checkpoint", "reduce_sum"]
    assert names(inline(fwd, lowering=True)) == ["sin", "sin", "reduce_sum"]
    back = fnad.make_jaxpr(fnad.grad(lambda x: f(x).sum()))(x)
    ck = [e for e in back.jaxpr.eqns if e.primitive is remat_p]
    assert ck and all(e.params["differentiated"] for e in ck)
    low = optimize(back, lowering=True)
    assert "checkpoint" in names(low)                   # stays a call: no CSE into it
    check_same(back, low, x)
    no_prevent = fnad.checkpoint(lambda x: jnp.sin(jnp.sin(x)), prevent_cse=False)
    back2 = fnad.make_jaxpr(fnad.grad(lambda x: no_prevent(x).sum()))(x)
    assert "checkpoint" not in names(optimize(back2, lowering=True))


def test_inline_keeps_output_types_exact():
    # a jit whose output is its (weakly typed) input bound to a strong jit output type
    x = Var(fnad.core.ShapedArray((), np.float32, weak_type=True))
    inner_in = Var(fnad.core.ShapedArray((), np.float32))
    sub = ClosedJaxpr(Jaxpr([], [inner_in], [], [inner_in]), [])
    jit_p = importlib.import_module("fnad.jit").jit_p
    e = eqn(jit_p, [x], jaxpr=sub, name="id", backend=None)
    before = build([x], [e], e.outvars)
    after = inline(before)
    assert names(after) == ["convert_element_type"]
    assert after.out_avals[0].weak_type is False
    check_same(before, after, 2.0)


# ---- optimize -------------------------------------------------------------------------------
def _mlp_loss(params, x, y):
    (w1, b1), (w2, b2) = params
    h = jnp.maximum(x @ w1 + b1, 0.0)
    logits = h @ w2 + b2
    return -jnp.mean(jnp.sum(fnad.nn.log_softmax(logits) * y, axis=-1))


def _mlp_args():
    params = ((rand(8, 16) * 0.3, rand(16) * 0.1), (rand(16, 4) * 0.3, rand(4) * 0.1))
    y = jnp.asarray(np.eye(4, dtype=np.float32)[rng.integers(0, 4, 5)])
    return params, rand(5, 8), y


@pytest.mark.parametrize("lowering", [False, True])
def test_optimize_grads_with_control_flow_and_custom_rules(lowering):
    sp = _custom_softplus()

    def f(x, w):
        h = fnad.checkpoint(lambda v: jnp.tanh(v @ w))(x)
        c, ys = lax.scan(lambda c, r: (c * 0.5 + sp(r).sum(), c), 0.0, h)
        z = lax.cond(c > 0, lambda v: v * 2.0, lambda v: v - 1.0, ys)
        k = lax.fori_loop(0, 3, lambda i, v: v * 1.0 + jnp.float32(0.0) * i, z)
        return jnp.sum(k ** 2) + c
    args = rand(4, 3), rand(3, 3)
    for fn in (f, fnad.grad(f, argnums=(0, 1))):
        c = fnad.make_jaxpr(fn)(*args)
        d = optimize(c, lowering=lowering)
        assert len(all_names(d)) < len(all_names(c))
        check_same(c, d, *args, rtol=1e-4, atol=1e-5)
        assert optimize(d, lowering=lowering) is d      # a fixed point, bodies included
    w = fnad.make_jaxpr(lambda x: lax.while_loop(lambda v: v.sum() < 10.0,
                                                 lambda v: v * 2.0 + 0.0, x))(rand(3))
    d = optimize(w, lowering=lowering)
    (body,) = [e.params["body_jaxpr"] for e in d.jaxpr.eqns]
    assert [e.primitive.name for e in body.jaxpr.eqns] == ["mul"]
    x = jnp.asarray(np.float32([0.5, 1.0, 0.25]))
    check_same(w, d, x)


def test_optimize_mlp_grad_reaches_a_fixed_point():
    args = _mlp_args()
    c = fnad.make_jaxpr(fnad.value_and_grad(_mlp_loss))(*args)
    d = optimize(c, lowering=True)
    assert len(d.jaxpr.eqns) < len(c.jaxpr.eqns)
    leaves = fnad.tree_util.tree_leaves(args)
    check_same(c, d, *leaves, rtol=1e-4, atol=1e-5)
    assert optimize(d, lowering=True) is d              # nothing left to do
    assert not d.jaxpr.constvars                        # every input was traced


# ---- fusion planning ------------------------------------------------------------------------
def check_plan(closed: ClosedJaxpr, plan) -> None:
    """Every eqn in exactly one group; groups in a runnable order; each group convex;
    inputs/outputs exactly the values crossing its boundary; levels match shapes."""
    j = closed.jaxpr
    n = len(j.eqns)
    where = {}
    for g, grp in enumerate(plan):
        assert list(grp.eqns) == sorted(grp.eqns) and grp.kind in passes.fusion.KINDS
        for i in grp.eqns:
            assert i not in where, f"eqn {i} in two groups"
            where[i] = g
    assert sorted(where) == list(range(n))
    defined = {v: i for i, e in enumerate(j.eqns) for v in e.outvars}
    consumers = {i: set() for i in range(n)}
    for i, e in enumerate(j.eqns):
        for a in e.invars:
            if type(a) is Var and a in defined:
                consumers[defined[a]].add(i)
    available = set(j.invars) | set(j.constvars)
    read_outside = {v for v in j.outvars if type(v) is Var}
    for i, e in enumerate(j.eqns):
        read_outside |= {a for a in e.invars if type(a) is Var and a in defined
                         and where[defined[a]] != where[i]}
    for g, grp in enumerate(plan):
        members = set(grp.eqns)
        ins = [a for i in grp.eqns for a in j.eqns[i].invars
               if type(a) is Var and defined.get(a) not in members]
        assert set(grp.inputs) == set(ins) and len(grp.inputs) == len(set(ins))
        assert set(grp.inputs) <= available, "a group reads a value not yet computed"
        outs = {v for i in grp.eqns for v in j.eqns[i].outvars if v in read_outside}
        assert set(grp.outputs) == outs
        available |= outs
        # convexity: nothing reachable from a member through a non-member is a member
        frontier = [c for i in members for c in consumers[i] if c not in members]
        seen = set(frontier)
        while frontier:
            k = frontier.pop()
            for c in consumers[k]:
                assert c not in members, f"group {g} is not convex"
                if c not in seen:
                    seen.add(c)
                    frontier.append(c)
        if grp.kind == "single":
            assert len(grp.eqns) == 1
            continue
        for i, level in zip(grp.eqns, grp.levels):
            t = j.eqns[i].outvars[0].aval.shape
            axes = set(grp.reduce_axes)
            s_out = tuple(d for k, d in enumerate(grp.shape) if k not in axes)
            s_keep = tuple(1 if k in axes else d for k, d in enumerate(grp.shape))
            ok = {"full": t == grp.shape, "row": bool(axes) and t in (s_out, s_keep),
                  "scalar": t == ()}
            assert ok[level], (i, level, t, grp.shape)


def plan_of(fn, *args, lowering=True):
    closed = optimize(fnad.make_jaxpr(fn)(*args), lowering=lowering)
    plan = plan_fusion(closed)
    check_plan(closed, plan)
    return closed, plan


def kinds(closed, plan) -> list[tuple[str, list[str]]]:
    return [(g.kind, [closed.jaxpr.eqns[i].primitive.name for i in g.eqns]) for g in plan]


def test_fusion_elementwise_chain_is_one_group():
    closed, plan = plan_of(lambda x, y: jnp.tanh(x * 2.0 + y) * jnp.exp(-x) + 1.0,
                           rand(16, 8), rand(16, 8))
    assert [g.kind for g in plan] == ["elementwise"]
    assert plan[0].shape == (16, 8) and len(plan[0].outputs) == 1


def test_fusion_softmax_is_one_group():
    closed, plan = plan_of(lambda x: fnad.nn.softmax(x, axis=-1), rand(6, 10))
    assert [g.kind for g in plan] == ["softmax-like"]
    g, = plan
    assert g.shape == (6, 10) and g.reduce_axes == (1,)
    got = kinds(closed, plan)[0][1]
    assert got.count("reduce_max") == 1 and got.count("reduce_sum") == 1


def test_fusion_rmsnorm_and_layernorm_are_one_group_each():
    def rmsnorm(x, w):
        return x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w

    def layernorm(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5) * g + b
    _, plan = plan_of(rmsnorm, rand(4, 8), rand(8))
    assert [g.kind for g in plan] == ["softmax-like"]
    assert "row" in plan[0].levels and set(plan[0].inputs) and len(plan[0].outputs) == 1
    closed, plan = plan_of(layernorm, rand(4, 8), rand(8), rand(8))
    assert [g.kind for g in plan] == ["softmax-like"]
    assert kinds(closed, plan)[0][1].count("reduce_sum") == 2


def test_fusion_reduction_group_and_incompatible_axes():
    closed, plan = plan_of(lambda x: jnp.sum(jnp.exp(x) * 2.0, axis=0), rand(5, 7))
    assert [g.kind for g in plan] == ["reduction"]
    assert plan[0].reduce_axes == (0,)
    closed, plan = plan_of(lambda x: (jnp.sum(x * x, axis=0), jnp.sum(x * x, axis=1)),
                           rand(5, 7))
    reds = [g for g in plan if g.kind == "reduction"]
    assert len(reds) == 2 and {g.reduce_axes for g in reds} == {(0,), (1,)}


def test_fusion_mlp_keeps_dots_single_and_fuses_bias_relu():
    closed, plan = plan_of(lambda x, w1, b1, w2: jnp.maximum(x @ w1 + b1, 0.0) @ w2,
                           rand(16, 8), rand(8, 32), rand(32), rand(32, 4))
    got = kinds(closed, plan)
    assert got[0] == ("single", ["dot_general"]) and got[-1] == ("single", ["dot_general"])
    assert [k for k, _ in got] == ["single", "elementwise", "single"]
    assert sorted(got[1][1]) == ["add", "broadcast_in_dim", "max"]


def test_fusion_mlp_training_step_plan_is_valid():
    args = _mlp_args()

    def step(params, x, y):
        loss, grads = fnad.value_and_grad(_mlp_loss)(params, x, y)
        new = fnad.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
        return loss, new
    closed, plan = plan_of(lambda *a: step(*a), *args)
    dots = [g for g in plan if any(closed.jaxpr.eqns[i].primitive.name == "dot_general"
                                   for i in g.eqns)]
    assert all(g.kind == "single" for g in dots) and len(dots) == 5
    assert len(plan) < len(closed.jaxpr.eqns) / 2     # most eqns are fused


def test_fusion_adamw_update_is_one_elementwise_group():
    def adamw(p, g, m, v, t):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        mh = m / (1 - 0.9 ** t)
        vh = v / (1 - 0.999 ** t)
        return p - 1e-3 * (mh / (jnp.sqrt(vh) + 1e-8) + 0.01 * p), m, v
    closed, plan = plan_of(adamw, rand(4, 8), rand(4, 8), rand(4, 8), rand(4, 8) ** 2,
                           jnp.float32(3))
    assert [g.kind for g in plan] == ["elementwise"]
    g, = plan
    assert len(g.outputs) == 3 and "scalar" in g.levels    # the bias corrections
    # global-norm clipping before the update: reduce to a scalar, then elementwise
    closed, plan = plan_of(lambda g, p: p - 0.1 * g / jnp.maximum(jnp.sqrt(jnp.sum(g * g)),
                                                                  1.0), rand(4, 8), rand(4, 8))
    assert [g.kind for g in plan] == ["softmax-like"]


def test_fusion_never_makes_a_cycle_through_a_dot():
    x, w = Var(fnad.core.ShapedArray((4, 4), np.float32)), \
        Var(fnad.core.ShapedArray((4, 4), np.float32))
    a = eqn(ew.exp_p, [x])
    d = eqn(importlib.import_module("fnad.primitives.linalg").dot_general_p,
            [a.outvars[0], w], dimension_numbers=(((1,), (0,)), ((), ())),
            precision=None, preferred_element_type=None)
    c = eqn(ew.add_p, [a.outvars[0], d.outvars[0]])
    closed = build([x, w], [a, d, c], [c.outvars[0]])
    plan = plan_fusion(closed)
    check_plan(closed, plan)
    assert len(plan) == 3                               # exp cannot join add across the dot


def test_fusion_transposed_broadcast_of_a_row_is_not_fused_as_a_row():
    x = Var(fnad.core.ShapedArray((4, 4), np.float32))
    s = eqn(red.reduce_sum_p, [x], axes=(1,))
    t = eqn(sh.broadcast_in_dim_p, [s.outvars[0]], shape=(4, 4), broadcast_dimensions=(1,))
    y = eqn(ew.mul_p, [x, t.outvars[0]])
    r = eqn(sh.broadcast_in_dim_p, [s.outvars[0]], shape=(4, 4), broadcast_dimensions=(0,))
    z = eqn(ew.add_p, [y.outvars[0], r.outvars[0]])
    closed = build([x], [s, t, y, r, z], [z.outvars[0]])
    plan = plan_fusion(closed)
    check_plan(closed, plan)
    group_of = {i: g for g in plan for i in g.eqns}
    assert group_of[1] is not group_of[0]               # s -> t along the wrong axis
    assert group_of[3] is group_of[0]                   # s -> r along the kept axis


def test_fusion_plans_of_grads_are_valid():
    def block(x, w, g):
        h = x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g
        a = fnad.nn.softmax(h @ w @ h.T / 4.0, axis=-1)
        return jnp.sum(fnad.nn.gelu(a @ h) ** 2)
    args = rand(6, 8), rand(8, 8), rand(8)
    for lowering in (False, True):
        closed, plan = plan_of(fnad.grad(block, argnums=(0, 1, 2)), *args, lowering=lowering)
        assert any(g.kind == "softmax-like" for g in plan)
    closed = fnad.make_jaxpr(fnad.grad(block))(*args)  # unoptimized: still a valid plan
    check_plan(closed, plan_fusion(closed))


def test_optimized_jaxprs_still_transform():
    """jit binds the optimized jaxpr (lowering=False), which grad and vmap may still
    transform: scalar operands, folded literals and pruned bodies must keep working."""
    def f(x, s):
        y = x * jnp.full(x.shape, 2.0) + lax.broadcast_in_dim(s, x.shape, ())
        c, ys = lax.scan(lambda c, r: (c + jnp.sum(r * 1.0) * s, c), 0.0, y)
        z = lg.select_n(lax.broadcast_in_dim(s > 0, x.shape, ()), y, jnp.tanh(y))
        return c + jnp.sum(z * jnp.exp(jnp.float32(0.5))) + jnp.sum(ys)
    x, s = rand(3, 4), jnp.float32(0.7)
    c = fnad.make_jaxpr(f)(x, s)
    names_before = all_names(c)
    d = optimize(c)
    assert all_names(c) == names_before                 # the input is not modified
    assert len(all_names(d)) < len(names_before)

    def call(closed):
        return lambda x, s: eval_jaxpr(closed.jaxpr, closed.consts, x, s)[0]
    assert not any(e.primitive.name == "broadcast_in_dim" for e in d.jaxpr.eqns)
    grad = lambda g: fnad.grad(g, argnums=(0, 1))                      # noqa: E731
    vmap = lambda g: fnad.vmap(g, in_axes=(0, None))                   # noqa: E731
    vmap_grad = lambda g: fnad.vmap(fnad.grad(g), in_axes=(0, None))   # noqa: E731
    for transform, xs in ((grad, x), (vmap, rand(2, 3, 4)), (vmap_grad, rand(2, 3, 4))):
        want = fnad.tree_util.tree_leaves(transform(call(c))(xs, s))
        got = fnad.tree_util.tree_leaves(transform(call(d))(xs, s))
        for a, b in zip(want, got, strict=True):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-5)
