"""Typed PRNG key arrays (fnad.random.key, fnad/prng.py) against jax's key<fry> arrays.

Every operation runs in both libraries on the same keys: a key result must have jax's
shape and words (key_data), any other result jax's value; what jax refuses fnad refuses.
"""
import numpy as np
import pytest

import fnad
import fnad.numpy as fnp
from fnad import lax as flax
from fnad import random as fr

jax = pytest.importorskip("jax", reason="jax is the oracle for typed PRNG keys")
jnp, jlax, jr = jax.numpy, jax.lax, jax.random


def _words(x):
    """A key array's words, or any other result, as a NumPy array."""
    if hasattr(x, "dtype") and str(x.dtype) == "key<fry>":
        lib = jr if type(x).__module__.startswith("jax") else fr
        return ("key", tuple(x.shape), np.asarray(lib.key_data(x)))
    return ("value", None, np.asarray(x))


def _same(got, want):
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    (gk, gs, gv), (wk, ws, wv) = _words(got), _words(want)
    assert (gk, gs) == (wk, ws), f"{gk}{gs} against jax's {wk}{ws}"
    assert gv.dtype == wv.dtype
    if gv.dtype.kind == "f":                     # samplers: a few ulp from jax's erf_inv...
        np.testing.assert_allclose(gv, wv, rtol=2e-6)
    else:                                        # key words, indices, booleans: exact
        np.testing.assert_array_equal(gv, wv)


# Each case: fn(np_module, lax_module, keys of shape (2, 3), one key) in either library.
CASES = {
    "index": lambda n, l, ks, k: ks[1],
    "index_ellipsis": lambda n, l, ks, k: ks[..., 2],
    "index_slices": lambda n, l, ks, k: ks[:, ::-2],
    "index_none": lambda n, l, ks, k: ks[None, 1],
    "index_array": lambda n, l, ks, k: ks[n.array([1, 0, 1])],
    "index_mask": lambda n, l, ks, k: ks[n.array([[True, False, True], [False, True, True]])],
    "iterate": lambda n, l, ks, k: list(ks),
    "len": lambda n, l, ks, k: n.asarray(len(ks)),
    "at_set": lambda n, l, ks, k: ks.at[1, 2].set(k),
    "at_set_row": lambda n, l, ks, k: ks.at[0].set(ks[1]),
    "at_get": lambda n, l, ks, k: ks.at[:, 1].get(),
    "eq": lambda n, l, ks, k: ks == k,
    "eq_rows": lambda n, l, ks, k: ks == ks[0],
    "ne": lambda n, l, ks, k: ks != ks[:, :1],
    "m_reshape": lambda n, l, ks, k: ks.reshape(3, 2),
    "m_reshape_tuple": lambda n, l, ks, k: ks.reshape((-1,)),
    "m_ravel": lambda n, l, ks, k: ks.ravel(),
    "m_flatten": lambda n, l, ks, k: ks.flatten(),
    "m_T": lambda n, l, ks, k: ks.T,
    "m_transpose": lambda n, l, ks, k: ks.transpose(1, 0),
    "m_swapaxes": lambda n, l, ks, k: ks.swapaxes(0, -1),
    "m_squeeze": lambda n, l, ks, k: ks[:1].squeeze(0),
    "m_take": lambda n, l, ks, k: ks.take(n.array([4, 0])),
    "m_copy": lambda n, l, ks, k: ks.copy(),
    "reshape": lambda n, l, ks, k: n.reshape(ks, (3, 2)),
    "ravel": lambda n, l, ks, k: n.ravel(ks),
    "transpose": lambda n, l, ks, k: n.transpose(ks),
    "permute_dims": lambda n, l, ks, k: n.permute_dims(ks, (1, 0)),
    "swapaxes": lambda n, l, ks, k: n.swapaxes(ks, 0, 1),
    "moveaxis": lambda n, l, ks, k: n.moveaxis(ks[None], 0, -1),
    "squeeze": lambda n, l, ks, k: n.squeeze(ks[:, :1]),
    "expand_dims": lambda n, l, ks, k: n.expand_dims(ks, (-1, 0)),
    "broadcast_to": lambda n, l, ks, k: n.broadcast_to(k, (2, 2)),
    "broadcast_rows": lambda n, l, ks, k: n.broadcast_to(ks[0], (4, 3)),
    "flip": lambda n, l, ks, k: n.flip(ks),
    "flip_axis": lambda n, l, ks, k: n.flip(ks, -1),
    "roll": lambda n, l, ks, k: n.roll(ks, 2),
    "roll_axis": lambda n, l, ks, k: n.roll(ks, 1, axis=1),
    "take": lambda n, l, ks, k: n.take(ks, n.array([2, 0]), axis=1),
    "take_flat": lambda n, l, ks, k: n.take(ks, n.array([5, 1])),
    "repeat": lambda n, l, ks, k: n.repeat(ks, 2, axis=0),
    "repeat_flat": lambda n, l, ks, k: n.repeat(ks, 2),
    "tile": lambda n, l, ks, k: n.tile(ks, 2),
    "tile_2d": lambda n, l, ks, k: n.tile(k, (2, 3)),
    "split": lambda n, l, ks, k: n.split(ks, 3, axis=1),
    "array_split": lambda n, l, ks, k: n.array_split(ks, 2, axis=-1),
    "concatenate": lambda n, l, ks, k: n.concatenate([ks, ks[:1]]),
    "concatenate_none": lambda n, l, ks, k: n.concatenate([ks, ks], axis=None),
    "stack": lambda n, l, ks, k: n.stack([k, k, k]),
    "stack_last": lambda n, l, ks, k: n.stack([ks, ks], axis=-1),
    "where": lambda n, l, ks, k: n.where(n.array([True, False, True]), ks, ks[::-1]),
    "where_scalar_key": lambda n, l, ks, k: n.where(n.array([[True], [False]]), ks, k),
    "zeros_like": lambda n, l, ks, k: n.zeros_like(ks),
    "ones_like": lambda n, l, ks, k: n.ones_like(k),
    "full_like": lambda n, l, ks, k: n.full_like(ks, k),
    "asarray": lambda n, l, ks, k: n.asarray(ks),
    "array": lambda n, l, ks, k: n.array(k),
    "copy": lambda n, l, ks, k: n.copy(ks),
    "array_equal": lambda n, l, ks, k: n.array_equal(ks, ks),
    "array_equal_not": lambda n, l, ks, k: n.array_equal(ks, ks[::-1]),
    "lax_slice": lambda n, l, ks, k: l.slice(ks, (0, 1), (2, 3), (1, 2)),
    "lax_dynamic_slice": lambda n, l, ks, k: l.dynamic_slice(ks, (1, 1), (1, 2)),
    "lax_dynamic_update_slice": lambda n, l, ks, k: l.dynamic_update_slice(ks, ks[:1, :2],
                                                                            (1, 1)),
    "lax_index_in_dim": lambda n, l, ks, k: l.index_in_dim(ks, 1, axis=1),
    "lax_dynamic_index_in_dim": lambda n, l, ks, k: l.dynamic_index_in_dim(ks, 1, 0, False),
    "lax_reshape": lambda n, l, ks, k: l.reshape(ks, (3, 2)),
    "lax_broadcast": lambda n, l, ks, k: l.broadcast(ks, (2,)),
    "lax_broadcast_in_dim": lambda n, l, ks, k: l.broadcast_in_dim(ks[0], (2, 3), (1,)),
    "lax_squeeze": lambda n, l, ks, k: l.squeeze(ks[:1], (0,)),
    "lax_expand_dims": lambda n, l, ks, k: l.expand_dims(ks, (1,)),
    "lax_rev": lambda n, l, ks, k: l.rev(ks, (0, 1)),
    "lax_transpose": lambda n, l, ks, k: l.transpose(ks, (1, 0)),
    "lax_concatenate": lambda n, l, ks, k: l.concatenate([ks, ks], 1),
    "lax_select_n": lambda n, l, ks, k: l.select_n(n.array([[0, 1, 0], [1, 1, 0]]), ks,
                                                   ks[::-1]),
    "lax_select_n_scalar": lambda n, l, ks, k: l.select_n(n.array(1), ks, ks[::-1]),
    "lax_select": lambda n, l, ks, k: l.select(n.array([[True, False, True]] * 2), ks,
                                               ks[::-1]),
}


def _keys(rand):
    return rand.split(rand.key(7), (2, 3)), rand.key(11)


@pytest.mark.parametrize("name", sorted(CASES))
def test_key_array_ops_match_jax(name):
    fn = CASES[name]
    _same(fn(fnp, flax, *_keys(fr)), fn(jnp, jlax, *_keys(jr)))


@pytest.mark.parametrize("seed", [0, 42, -5, 2 ** 31 - 1])
def test_key_words_and_derived_keys_match_jax(seed):
    for make in (lambda r: r.key(seed), lambda r: r.split(r.key(seed), 4),
                 lambda r: r.split(r.key(seed), (2, 2)), lambda r: r.fold_in(r.key(seed), 9),
                 lambda r: r.clone(r.key(seed)),
                 lambda r: r.wrap_key_data(np.array([[1, 2], [3, seed % 7]], np.uint32))):
        _same(make(fr), make(jr))
    raw = fr.PRNGKey(seed)
    assert raw.shape == (2,) and raw.dtype == np.uint32     # PRNGKey stays raw, as in jax
    np.testing.assert_array_equal(np.asarray(fr.split(raw)),
                                  np.asarray(fr.key_data(fr.split(fr.key(seed)))))


@pytest.mark.parametrize("sample", [
    lambda r, k: r.normal(k, (3,)), lambda r, k: r.uniform(k, (2, 2)),
    lambda r, k: r.randint(k, (4,), 0, 9), lambda r, k: r.bernoulli(k, 0.3, (5,)),
    lambda r, k: r.permutation(k, 6), lambda r, k: r.gamma(k, 2.0, (3,)),
    lambda r, k: r.categorical(k, np.log(np.array([0.2, 0.3, 0.5], np.float32)), shape=(4,)),
    lambda r, k: r.bits(k, (3,)), lambda r, k: r.poisson(k, 3.0, (4,)),
])
def test_samplers_take_typed_keys(sample):
    got = sample(fr, fr.key(3))
    np.testing.assert_allclose(np.asarray(got), np.asarray(sample(jr, jr.key(3))), rtol=2e-6)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(sample(fr, fr.PRNGKey(3))))


def test_transformations_carry_keys():
    fks, jks = fr.split(fr.key(1), 4), jr.split(jr.key(1), 4)
    draw = (lambda r: lambda k: r.normal(r.split(k)[1], (2,)))
    # jit: keys in and out
    _same(fnad.jit(lambda k: fr.split(k, 3))(fks[0]), jax.jit(lambda k: jr.split(k, 3))(jks[0]))
    # vmap, in_axes counted in the key's own dims (a negative one too), and out_axes
    for in_axes in (0, -1):
        _same(fnad.vmap(draw(fr), in_axes=in_axes)(fks), jax.vmap(draw(jr), in_axes=in_axes)(jks))
    _same(fnad.vmap(lambda k: fr.split(k, 3), out_axes=-1)(fks),
          jax.vmap(lambda k: jr.split(k, 3), out_axes=-1)(jks))
    _same(fnad.vmap(lambda k: fr.split(k, 3), out_axes=1)(fks[:2]),
          jax.vmap(lambda k: jr.split(k, 3), out_axes=1)(jks[:2]))
    _same(fnad.vmap(fr.key)(fnp.arange(3)), jax.vmap(jr.key)(jnp.arange(3)))
    # scan over keys, a key in the carry of while_loop, keys out of cond
    _same(fnad.lax.scan(lambda c, k: (c + fr.normal(k), k), 0.0, fks),
          jax.lax.scan(lambda c, k: (c + jr.normal(k), k), 0.0, jks))

    def walk(r, lx):
        return lx.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, r.split(c[1])[0]),
                             (0, r.key(5)))[1]
    _same(walk(fr, fnad.lax), walk(jr, jax.lax))
    _same(fnad.lax.cond(False, lambda: fks[0], lambda: fks[1]),
          jax.lax.cond(False, lambda: jks[0], lambda: jks[1]))
    # grad of a function of a key and a float
    np.testing.assert_allclose(
        fnad.grad(lambda x, k: x * fr.normal(k))(2.0, fks[2]),
        jax.grad(lambda x, k: x * jr.normal(k))(2.0, jks[2]), rtol=1e-6)
    with pytest.raises(ValueError, match="out of range for a key array of rank 1"):
        fnad.vmap(draw(fr), in_axes=1)(fks)


def test_key_dtype_and_printing():
    k, jk = fr.key(0), jr.key(0)
    assert str(k.dtype) == str(jk.dtype) == "key<fry>" and k.dtype == fr.key_dtype()
    assert (k.shape, k.ndim, k.size, k.itemsize) == (jk.shape, jk.ndim, jk.size, jk.itemsize)
    assert repr(k) == repr(jk) and str(fr.split(k, 2)) == str(jr.split(jk, 2))
    d = fnad.dtypes
    assert d.issubdtype(k.dtype, d.prng_key) and d.issubdtype(k.dtype, d.extended)
    assert fnp.issubdtype(k.dtype, d.prng_key) and not fnp.issubdtype(k.dtype, np.integer)
    assert not d.issubdtype(np.uint32, d.prng_key)
    assert fr.key_impl(k) == str(jr.key_impl(jk))
    tree = {"rng": k, "w": fnp.ones(2)}
    paths = [fnad.tree_util.keystr(p) for p, _ in fnad.tree_util.tree_leaves_with_path(tree)]
    jpaths = [jax.tree_util.keystr(p) for p, _ in
              jax.tree_util.tree_leaves_with_path({"rng": jk, "w": jnp.ones(2)})]
    assert paths == jpaths


@pytest.mark.parametrize("bad, words", [
    (lambda ks, k: k + 1, "add does not accept dtype key<fry>"),
    (lambda ks, k: -k, "neg does not accept"),
    (lambda ks, k: ks < ks, "lt does not accept"),
    (lambda ks, k: np.asarray(k), "key_data"),
    (lambda ks, k: bool(k), "cannot be converted to boolean"),
    (lambda ks, k: float(k), "Python number"),
    (lambda ks, k: hash(k), "unhashable"),
    (lambda ks, k: k.astype(np.uint32), "key_data"),
    (lambda ks, k: len(k), "unsized"),
    (lambda ks, k: fnp.sum(ks), "PRNGKeyArray"),
    (lambda ks, k: fnp.concatenate([ks, fnp.zeros(3, np.uint32)]), "only be combined"),
    (lambda ks, k: fnp.asarray(ks, np.uint32), "key_data"),
    (lambda ks, k: fr.split(ks), "split accepts a single key, but was given a key array"),
    (lambda ks, k: fr.normal(ks), "normal accepts a single key"),
    (lambda ks, k: fr.randint(ks, (2,), 0, 3), "randint accepts a single key"),
    (lambda ks, k: fr.key(fnp.arange(3)), "key accepts a scalar seed"),
    (lambda ks, k: fr.wrap_key_data(np.zeros((3, 3), np.uint32)), "end with (2,)"),
    (lambda ks, k: fr.wrap_key_data(np.zeros((3, 2), np.int32)), "dtype = uint32"),
    (lambda ks, k: fr.wrap_key_data(k), "already a typed key"),
    (lambda ks, k: fnp.reshape(ks, (6,), order="F"), "order='F'"),
    (lambda ks, k: fnp.flip(ks, 2), "axis 2 is out of bounds for a key array of rank 2"),
])
def test_what_keys_refuse(bad, words):
    ks, k = fr.split(fr.key(0), (2, 3)), fr.key(1)
    with pytest.raises((TypeError, ValueError, NotImplementedError)) as info:
        bad(ks, k)
    assert words in str(info.value)
