"""x[idx] and x.at[idx] under vmap, grad, vmap-of-grad and grad-of-vmap, against jax.

Each case is one function written once against a numpy module (`fnad.numpy` or
`jax.numpy`) and run on the same float32 inputs by both libraries: basic slices,
integer arrays (repeated and negative indices, one or two of them, adjacent or not),
static boolean masks, None, Ellipsis and traced scalar indices for x[idx]; and
.at[idx].set/add/multiply/min/max/get with repeated indices. vmap maps x, the indices
and the updates together and one at a time, at axis 0 and at the last axis. Set with
repeated indices is implementation-defined in jax, so it is only tested with one value
for every position (a broadcast scalar) or with unique indices. Gradients of
.at[].multiply with respect to the updates need unique indices (in jax and fnad), so
only x is differentiated there.

Every test runs with vmap's "has no batching rule" warning turned into an error: no
primitive may fall back to the per-member loop.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest

import fnad
import fnad.numpy
from fnad import core, tree_util

jax = pytest.importorskip("jax", reason="jax (jax.numpy) is the oracle of this module")

pytestmark = pytest.mark.filterwarnings("error:.*has no batching rule")

B = 3                                                  # batch size of every vmap
TOL = 1e-5
f32, i32 = np.float32, np.int32


class Case(NamedTuple):
    """fn(jnp, *args) -> an array; draw(rng) -> one member's args; argnums: float args."""
    name: str
    fn: Callable
    draw: Callable
    argnums: tuple


def _floats(rng, shape):
    return rng.uniform(-2, 2, shape).astype(f32)


def _repeated(rng, n, size, shape):
    """int32 indices in [-size, size) of `shape` (n = the size of the indexed dim), where the
    first and last entries name the same element (so at least one index repeats)."""
    i = rng.integers(-n, n, size).astype(i32)
    i[-1] = i[0] - n if i[0] >= 0 else i[0] + n         # the same element, spelt the other way
    return i.reshape(shape)


def _unique(rng, n, size):
    """`size` distinct indices into a dim of n, some of them negative."""
    i = rng.permutation(n)[:size].astype(i32)
    return np.where(rng.random(size) < 0.5, i - n, i).astype(i32)


MASK4 = np.array([True, False, True, True])
MASK5 = np.array([False, True, True, False, True])

GETITEM = [
    Case("slices", lambda jnp, x: x[1:3, ::-2, 1:],
         lambda rng: (_floats(rng, (4, 5, 3)),), (0,)),
    Case("none-ellipsis-int", lambda jnp, x: x[None, ..., -1, None],
         lambda rng: (_floats(rng, (4, 5, 3)),), (0,)),
    Case("int-array-repeated", lambda jnp, x, i: x[i],
         lambda rng: (_floats(rng, (4, 5, 3)), _repeated(rng, 4, 6, (6,))), (0,)),
    Case("int-array-2d-middle", lambda jnp, x, i: x[:, i],
         lambda rng: (_floats(rng, (4, 5, 3)), _repeated(rng, 5, 6, (2, 3))), (0,)),
    Case("two-arrays-apart", lambda jnp, x, i, j: x[i, :, j],
         lambda rng: (_floats(rng, (4, 5, 3)), _repeated(rng, 4, 4, (4,)),
                      _repeated(rng, 3, 4, (4,))), (0,)),
    Case("two-arrays-adjacent-broadcast", lambda jnp, x, i, j: x[1:, i, j],
         lambda rng: (_floats(rng, (4, 5, 3)), _repeated(rng, 5, 6, (2, 3)),
                      _repeated(rng, 3, 3, (3,))), (0,)),
    Case("static-bool", lambda jnp, x: x[MASK4, 1:] + x[:3, MASK5][..., :1, :],
         lambda rng: (_floats(rng, (4, 5, 3)),), (0,)),
    Case("static-bool-and-array", lambda jnp, x, i: x[MASK4, :, i],
         lambda rng: (_floats(rng, (4, 5, 3)), _repeated(rng, 3, 3, (3,))), (0,)),
    Case("traced-scalars", lambda jnp, x, i, j: x[i] * x[1, j, None],
         lambda rng: (_floats(rng, (4, 5, 3)), np.array(rng.integers(-4, 4), i32),
                      np.array(rng.integers(-5, 5), i32)), (0,)),
    Case("array-ellipsis-none", lambda jnp, x, i: x[..., i, None],
         lambda rng: (_floats(rng, (4, 5, 3)), _repeated(rng, 3, 5, (5,))), (0,)),
]

AT = [
    Case("add-rows-repeated", lambda jnp, x, i, u: x.at[i].add(u),
         lambda rng: (_floats(rng, (6, 3)), _repeated(rng, 6, 5, (5,)), _floats(rng, (5, 3))),
         (0, 2)),
    Case("add-2d-indices-and-int", lambda jnp, x, i, u: x.at[i, 1].add(u),
         lambda rng: (_floats(rng, (6, 3)), _repeated(rng, 6, 6, (2, 3)),
                      _floats(rng, (2, 3))), (0, 2)),
    Case("add-slice-and-array", lambda jnp, x, i, u: x.at[1:3, i].add(u),
         lambda rng: (_floats(rng, (4, 5)), _repeated(rng, 5, 3, (3,)), _floats(rng, (2, 3))),
         (0, 2)),
    Case("add-out-of-bounds-dropped", lambda jnp, x, i, u: x.at[i].add(u),
         lambda rng: (_floats(rng, (6,)), rng.integers(-9, 9, 8).astype(i32),
                      _floats(rng, (8,))), (0, 2)),
    Case("multiply-repeated", lambda jnp, x, i, u: x.at[i].multiply(u),
         lambda rng: (_floats(rng, (6, 3)), _repeated(rng, 6, 5, (5,)), _floats(rng, (5, 3))),
         (0,)),
    Case("min-repeated", lambda jnp, x, i, u: x.at[i].min(u),
         lambda rng: (_floats(rng, (6,)), _repeated(rng, 6, 8, (8,)), _floats(rng, (8,))),
         (0, 2)),
    Case("max-repeated", lambda jnp, x, i, u: x.at[i].max(u),
         lambda rng: (_floats(rng, (6,)), _repeated(rng, 6, 8, (8,)), _floats(rng, (8,))),
         (0, 2)),
    Case("max-rows-repeated", lambda jnp, x, i, u: x.at[i].max(u),
         lambda rng: (_floats(rng, (6, 3)), _repeated(rng, 6, 5, (5,)), _floats(rng, (5, 3))),
         (0, 2)),
    Case("set-unique", lambda jnp, x, i, u: x.at[i].set(u),
         lambda rng: (_floats(rng, (6, 3)), _unique(rng, 6, 4), _floats(rng, (4, 3))), (0, 2)),
    Case("set-repeated-one-value", lambda jnp, x, i, u: x.at[i].set(u),
         lambda rng: (_floats(rng, (6, 3)), _repeated(rng, 6, 5, (5,)),
                      np.array(rng.uniform(-2, 2), f32)), (0, 2)),
    Case("get-repeated", lambda jnp, x, i: x.at[i].get(),
         lambda rng: (_floats(rng, (6, 3)), _repeated(rng, 6, 7, (7,))), (0,)),
    Case("get-2d-indices-and-slice", lambda jnp, x, i: x.at[i, 1:].get(),
         lambda rng: (_floats(rng, (6, 3)), _repeated(rng, 6, 6, (3, 2))), (0,)),
]

CASES = GETITEM + AT


# ---- the harness ----------------------------------------------------------------------------
def _both(case):
    """The case as an fnad function and as a jax function of the same arguments (NumPy
    arrays, e.g. unmapped ones under vmap, become the library's arrays first)."""
    def on(jnp):
        return lambda *a: case.fn(jnp, *[jnp.asarray(v) if isinstance(v, np.ndarray) else v
                                         for v in a])
    return on(fnad.numpy), on(jax.numpy)


def _loss(f, lib):
    """Σ sin(f(...)): a scalar whose cotangent differs at every output element."""
    return lambda *a: lib.numpy.sum(lib.numpy.sin(f(*a)))


def _axes_options(n: int):
    """All mapped at 0; all at the last axis; each argument mapped alone (x at its last axis,
    the others at 0); x unmapped and the rest mapped."""
    opts = [(0,) * n, (-1,) * n]
    opts += [tuple((-1 if k == 0 else 0) if j == k else None for j in range(n))
             for k in range(n)]
    if n > 1:
        opts.append((None,) + (0,) * (n - 1))
    return list(dict.fromkeys(opts))


def _members(case, axes):
    """B members' args, and the args stacked along `axes` (None: unmapped, member 0's value
    for every member)."""
    drawn = [case.draw(np.random.default_rng(seed)) for seed in range(B)]
    members = [tuple(m[k] if ax is not None else drawn[0][k] for k, ax in enumerate(axes))
               for m in drawn]
    stacked = tuple(members[0][k] if ax is None else np.stack([m[k] for m in members], axis=ax)
                    for k, ax in enumerate(axes))
    return members, stacked


def _stack(per_member, axis=0):
    """Per-member pytrees of jax results stacked leafwise along `axis`."""
    return jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs], axis),
                                  *per_member)


def _close(got, want, what: str):
    got_leaves, want_leaves = tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves), what
    for g, w in zip(got_leaves, want_leaves, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (what, g.shape, w.shape, g.dtype)
        np.testing.assert_allclose(g, w, rtol=TOL, atol=TOL, err_msg=what)


# One test per case runs every transform, so that jax compiles each of the case's ops once
# (in one process). The oracle of a vmapped computation is jax run on each member (the
# definition of vmap; jax's own vmap would compile anew for every in_axes choice), plus
# jax.vmap itself for the first in_axes choice.
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_transforms_match_jax(case):
    f, jf = _both(case)
    g = fnad.grad(_loss(f, fnad), argnums=case.argnums)
    jg = jax.grad(_loss(jf, jax), argnums=case.argnums)
    args = case.draw(np.random.default_rng(0))
    _close(f(*args), jf(*args), "value")
    _close(g(*args), jg(*args), "grad")
    for n, axes in enumerate(_axes_options(len(args))):
        members, batched = _members(case, axes)
        got = fnad.vmap(f, in_axes=axes)(*batched)
        _close(got, _stack([jf(*m) for m in members]), f"vmap, in_axes={axes}")
        if n == 0:
            _close(got, jax.vmap(jf, in_axes=axes)(*batched), f"jax.vmap, in_axes={axes}")
        per = [jg(*m) for m in members]
        _close(fnad.vmap(g, in_axes=axes)(*batched), _stack(per),
               f"vmap of grad, in_axes={axes}")
        # d/da Σ_b loss(member b): a mapped argument's gradient stacks the members' along
        # its axis; an unmapped one's sums them
        want = tuple(np.sum([np.asarray(p[j]) for p in per], axis=0) if axes[k] is None
                     else _stack([p[j] for p in per], axes[k])
                     for j, k in enumerate(case.argnums))
        got = fnad.grad(_loss(fnad.vmap(f, in_axes=axes), fnad), argnums=case.argnums)(*batched)
        _close(got, want, f"grad of vmap, in_axes={axes}")


def test_the_warning_filter_catches_the_loop_fallback(scratch_primitives):
    # The module's filterwarnings mark must turn vmap's loop fallback into an error, or the
    # tests above could not notice a missing batching rule.
    lonely_p = core.Primitive("no_rule_for_test")
    core.abstract_eval_rules[lonely_p] = lambda x: x
    from fnad.backends import get_backend
    get_backend("numpy").impl_rules[lonely_p] = lambda x: x
    with pytest.raises(UserWarning, match="'no_rule_for_test' has no batching rule"):
        fnad.vmap(lambda x: lonely_p.bind(x))(np.ones((2, 3), f32))
    with warnings.catch_warnings():                    # and a rule-backed x[i] stays silent
        warnings.simplefilter("error")
        fnad.vmap(lambda x, i: x[i])(np.ones((2, 3), f32), np.array([[0, 2], [1, 1]], i32))
