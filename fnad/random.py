"""fnad.random: jax.random's counter-based PRNGs (threefry2x32, rbg, unsafe_rbg) and samplers.

Owns the keys and the samplers built on them; the PRNG implementations themselves (the
threefry2x32 hash, rbg's and unsafe_rbg's use of lax.rng_bit_generator) are rows of the
table in fnad/_prng_impls.py, and every sampler draws its bits, splits and folds through
the row of its key's implementation. Imports only fnad.lax, fnad.numpy, fnad.dtypes,
fnad.prng, fnad._prng_impls and fnad.config at import time (gamma and orthogonal import
fnad.batching, fnad.custom and fnad.initializers inside the call: those import this module).
Everything is written with fnad.lax ops, so it runs eagerly and under fnad's
transformations. The other distributions (cauchy ... gamma, dirichlet, geometric) are in
fnad/_random_dists.py, re-exported here: jax.random's own formulas on the same draws, so
they track jax's values to a few ulp; poisson, binomial and multinomial (jax's rejection and
inversion samplers, the same counts for the same key) are in fnad/_random_counts.py.

Keys come in jax's two forms. `PRNGKey(seed)` gives a *raw* key, a uint32 array of the
implementation's key shape ((2,) for threefry2x32, (4,) for rbg and unsafe_rbg); `key(seed)`
gives a *typed* key, a 0-d array of dtype key<fry> / key<rbg> / key<urbg>
(fnad.prng.PRNGKeyArray) over those words, which carries its implementation. A raw key
carries none: it is read as a key of config `jax_default_prng_impl` (default
"threefry2x32"), as in jax, and must have that implementation's trailing size. Every
function here takes either; split, fold_in and clone answer in the form they were given.
`key_data` and `wrap_key_data` convert; `impl=` (a name or key dtype) picks the
implementation of `key`, `PRNGKey`, `wrap_key_data` and `key_dtype`.

threefry2x32's bits follow jax 0.10's default `jax_threefry_partitionable=True` (counters
are the flat index as a uint64 split into hi/lo words, the two hash outputs xor-ed); set
`config.update("jax_threefry_partitionable", False)` (or use the context manager
`fnad.threefry_partitionable(False)`) for jax's original layout (it also changes how rbg
splits and folds). It is a config option, so jitted functions trace again when it changes.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fnad import dtypes as _dtypes
from fnad import lax
from fnad import prng as _prng
from fnad import numpy as jnp
from fnad._prng_impls import (PRNG_IMPLS, PRNGImpl, default_impl, resolve_impl, threefry2x32,
                              threefry_2x32 as _threefry_2x32)
from fnad.config import config

__all__ = ["PRNGKey", "ball", "bernoulli", "beta", "binomial", "bits", "categorical", "cauchy",
           "chisquare", "choice", "clone", "dirichlet", "double_sided_maxwell", "exponential",
           "f", "fold_in", "gamma", "generalized_normal", "geometric", "gumbel", "key",
           "key_data", "key_dtype", "key_impl", "laplace", "loggamma", "logistic", "lognormal",
           "maxwell", "multinomial", "multivariate_normal", "normal", "orthogonal", "pareto",
           "permutation", "poisson", "rademacher", "randint", "rayleigh", "split", "t",
           "threefry2x32", "threefry_2x32", "triangular", "truncated_normal", "uniform", "wald",
           "weibull_min", "wrap_key_data"]


_U32 = np.dtype(np.uint32)
_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


# ---- keys --------------------------------------------------------------------------------
def _typed(name: str, keys, single: bool = False) -> _prng.PRNGKeyArray:
    """`keys` as a typed key array: typed keys as they are, raw keys (uint32[..., *key_shape])
    wrapped as keys of the default implementation (config jax_default_prng_impl)."""
    if _prng.is_key_array(keys):
        return keys
    impl = default_impl()
    k = jnp.asarray(keys)
    n = len(impl.key_shape)
    if k.dtype != _U32 or k.ndim < n or k.shape[k.ndim - n:] != impl.key_shape:
        want = f"a raw PRNG key of shape {impl.key_shape}" if single else \
            f"raw PRNG keys of shape (..., {', '.join(map(str, impl.key_shape))})"
        raise TypeError(f"{name}: expected {want} and dtype uint32 for the default PRNG "
                        f"implementation {impl.name} (config jax_default_prng_impl; from "
                        f"fnad.random.PRNGKey), got shape {k.shape} dtype {k.dtype}")
    return _prng.PRNGKeyArray(k, impl.name)


def _check_key(name: str, key) -> _prng.PRNGKeyArray:
    """One key, raw or typed, as a 0-d typed key array (raw keys: the default impl's)."""
    k = _typed(name, key, single=True)
    if k.shape:
        raise ValueError(f"{name} accepts a single key, but was given a key array of "
                         f"shape {k.shape} != (). Use fnad.vmap for batching.")
    return k


def _impl(key: _prng.PRNGKeyArray) -> PRNGImpl:
    return PRNG_IMPLS[key._impl]


def threefry_2x32(key, count):
    """jax's `threefry_2x32`: hash uint32 `count` (any shape) by halves -> same shape. `key`
    is a threefry2x32 key (raw uint32[2] or typed key<fry>)."""
    if _prng.is_key_array(key):
        if key.shape or key._impl != "threefry2x32":
            raise TypeError(f"threefry_2x32: expected one threefry2x32 key, got a key array "
                            f"of shape {key.shape} dtype {key.dtype}")
        key = key._base
    k = jnp.asarray(key)
    if k.shape != (2,) or k.dtype != _U32:
        raise TypeError(f"threefry_2x32: expected a raw threefry2x32 key of shape (2,) and "
                        f"dtype uint32, got shape {k.shape} dtype {k.dtype}")
    return _threefry_2x32(k, count)


def PRNGKey(seed, *, impl=None) -> jnp.ndarray:
    """A raw key (uint32[2] for threefry2x32, uint32[4] for rbg and unsafe_rbg; `impl`
    defaults to config jax_default_prng_impl) from an integer seed, as jax.random.PRNGKey.

    With jax_enable_x64 the 64-bit seed splits into [hi, lo] words; without it the
    seed is first wrapped to int32 (so the high word is 0), exactly as jax does (rbg and
    unsafe_rbg repeat those two words).
    """
    return resolve_impl(impl, "PRNGKey").seed(_seed_words(seed, "PRNGKey"))


def _seed_words(seed, name: str):
    if _prng.is_key_array(seed):
        raise TypeError(f"{name} accepts a scalar seed, but was given a PRNG key.")
    if isinstance(seed, (bool, np.bool_)) or (
            not isinstance(seed, (int, np.integer)) and not hasattr(seed, "dtype")):
        raise TypeError(f"{name}: seed must be an integer, got {type(seed).__name__}")
    if hasattr(seed, "dtype") and not isinstance(seed, np.integer):
        s = jnp.asarray(seed)
        if s.ndim:
            raise TypeError(f"{name} accepts a scalar seed, but was given an array of "
                            f"shape {s.shape} != (). Use vmap for batching")
        if not _dtypes.is_int(s.dtype):
            raise TypeError(f"{name}: seed must be an integer, got dtype {s.dtype}")
        lo = lax.convert_element_type(s, np.uint32)                   # wraps mod 2**32
        if s.dtype.itemsize == 8:
            hi = lax.convert_element_type(lax.shift_right_logical(s, 32), np.uint32)
        else:
            hi = jnp.zeros((), _U32)
        return jnp.stack([hi, lo])
    seed = int(seed)
    if not -2 ** 63 <= seed < 2 ** 63:
        raise OverflowError(f"{name}: seed {seed} does not fit in int64")
    u = seed % 2 ** 64
    hi = u >> 32 if config.jax_enable_x64 else 0                      # x32: seed is int32
    return jnp.asarray(np.array([hi, u & 0xFFFFFFFF], np.uint32))


def _impl_or_dtype(impl, dtype, where: str) -> PRNGImpl:
    """The implementation named by `impl` or by `dtype` (a key dtype or name; not both), as
    jax's key and wrap_key_data take them; the default where neither is given."""
    if dtype is not None:
        if impl is not None:
            raise ValueError(f"Cannot specify both `impl` and `dtype` arguments to "
                             f"fnad.random.{where}")
        impl = dtype
    return resolve_impl(impl, where)


def key(seed, *, impl=None, dtype=None) -> _prng.PRNGKeyArray:
    """A typed key (a 0-d array of dtype key<fry>, key<rbg> or key<urbg>) from an integer
    seed, as jax.random.key: the words of PRNGKey(seed, impl=impl). `impl` (or `dtype`, a
    key dtype or name) defaults to config jax_default_prng_impl."""
    impl = _impl_or_dtype(impl, dtype, "key")
    return _prng.PRNGKeyArray(impl.seed(_seed_words(seed, "key")), impl.name)


def _as_given(key, keys: _prng.PRNGKeyArray):
    """Typed `keys` in the form `key` came in: their raw words if it was raw."""
    return keys if _prng.is_key_array(key) else keys._base


def key_data(keys) -> jnp.ndarray:
    """The uint32 words of keys, uint32[..., *key_shape]: a typed key array's base, or raw
    keys as they are (checked against the default implementation's key shape)."""
    return _typed("key_data", keys)._base


def split(key, num: int | Sequence[int] = 2) -> jnp.ndarray:
    """`num` new keys from `key`: [num] (or [*num] for a tuple) keys, typed if `key` is,
    else raw uint32[*num, *key_shape], by the key's implementation."""
    k = _check_key("split", key)
    shape = tuple(int(d) for d in num) if isinstance(num, Sequence) else (int(num),)
    if any(d < 0 for d in shape):
        raise ValueError(f"split: num must be non-negative, got {num}")
    return _as_given(key, _prng.PRNGKeyArray(_impl(k).split(k._base, shape), k._impl))


def fold_in(key, data) -> jnp.ndarray:
    """A new key from `key` and a 32-bit integer `data`, by the key's implementation."""
    k = _check_key("fold_in", key)
    if np.ndim(data):
        raise TypeError(f"fold_in accepts a scalar, but was given an array of shape "
                        f"{np.shape(data)} != (). Use vmap for batching.")
    if isinstance(data, (int, np.integer)):
        d = jnp.asarray(np.array(int(data) % 2 ** 32, np.uint32))
    else:
        d = lax.convert_element_type(jnp.asarray(data), np.uint32)
    return _as_given(key, _prng.PRNGKeyArray(_impl(k).fold_in(k._base, d), k._impl))


# ---- bits ----------------------------------------------------------------------------------
def _random_bits(key: _prng.PRNGKeyArray, bit_width: int, shape: tuple[int, ...]):
    """`shape` unsigned ints of `bit_width` bits from one typed key, by its implementation."""
    return _impl(key).random_bits(key._base, bit_width, shape)


def bits(key, shape: Sequence[int] = (), dtype=None) -> jnp.ndarray:
    """Uniform random bits: unsigned integers of `shape` (default dtype uint32, or uint64
    under jax_enable_x64)."""
    k = _check_key("bits", key)
    dtype = np.dtype(np.uint64 if config.jax_enable_x64 else np.uint32) if dtype is None \
        else _dtypes.canonicalize_dtype(dtype)
    if dtype.kind != "u":
        raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dtype}")
    return _random_bits(k, dtype.itemsize * 8, _shape(shape))


# ---- helpers -------------------------------------------------------------------------------
def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    out = tuple(int(d) for d in shape)
    if any(d < 0 for d in out):
        raise ValueError(f"shape must contain non-negative integers, got {out}")
    return out


def _check_shape(name: str, shape, *param_shapes) -> None:
    if param_shapes:
        got = np.broadcast_shapes(shape, *param_shapes)
        if got != tuple(shape):
            raise ValueError(f"{name} parameter shapes must be broadcast-compatible with shape "
                             f"argument, and the result of broadcasting the shapes must equal "
                             f"the shape argument, but got result {got} for shape argument "
                             f"{tuple(shape)}.")


def _float_dtype(name: str, dtype):
    dtype = _dtypes.canonicalize_dtype(_dtypes.default_float_dtype() if dtype is None
                                       else dtype)
    if not _dtypes.is_float(dtype):
        raise ValueError(f"dtype argument to `{name}` must be a float dtype, got {dtype}")
    return dtype


def _bcast(x, shape):
    """x (scalar or broadcast-compatible) broadcast to `shape`."""
    return jnp.broadcast_to(x, shape)


# ---- samplers ------------------------------------------------------------------------------
def uniform(key, shape: Sequence[int] = (), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in [minval, maxval) of `shape`.

    jax's mantissa trick: the top nmant random bits become the mantissa of a float in
    [1, 2), minus 1. Without a bitcast primitive the float is built as m * 2**-nmant
    (exact in the target dtype), so with the default range [0, 1) the values equal jax's
    bit for bit in every float dtype (also under vmap). Other ranges: float16/bfloat16
    equal jax's; in float32/float64 XLA fuses u * (maxval - minval) + minval into one
    rounding (FMA), fnad rounds twice, so values may differ by 1 ulp of the product.
    Samplers built on uniform (normal, exponential, gumbel, truncated_normal) use fnad's
    erf_inv/log, which differ from XLA's: close to jax's, not bit-exact (tests allow 128
    ulp in float32/64, where normal's tails reach ~90; 16 in float16/bfloat16).
    """
    k = _check_key("uniform", key)
    shape = _shape(shape)
    dtype = _float_dtype("uniform", dtype)
    _check_shape("uniform", shape, np.shape(minval), np.shape(maxval))
    finfo = _dtypes.finfo(dtype)
    nbits, nmant = finfo.bits, int(finfo.nmant)
    if nbits not in _UINT:
        raise TypeError(f"uniform only accepts 8-, 16-, 32-, or 64-bit dtypes, got {dtype} "
                        f"({nbits} bits)")
    rng_bits = 8 if nmant < 8 else nbits
    b = _random_bits(k, rng_bits, shape)
    mant = lax.shift_right_logical(b, rng_bits - nmant)               # [shape] < 2**nmant
    # m * 2**-nmant is exact in float32 only when m fits its 24-bit significand: go via
    # a wide float, then round (exactly) to dtype.
    wide = np.float64 if nbits == 64 else np.float32
    floats = lax.mul(lax.convert_element_type(mant, wide), float(2.0 ** -nmant))
    floats = lax.convert_element_type(floats, dtype)                 # exact: m / 2**nmant
    lo = lax.convert_element_type(jnp.asarray(minval), dtype)
    hi = lax.convert_element_type(jnp.asarray(maxval), dtype)
    out = lax.add(lax.mul(floats, lax.sub(_bcast(hi, shape), _bcast(lo, shape))),
                  _bcast(lo, shape))
    return lax.max(_bcast(lo, shape), out)


def normal(key, shape: Sequence[int] = (), dtype=None):
    """Standard normal floats: sqrt(2) * erf_inv(u), u ~ uniform(nextafter(-1, 0), 1)."""
    key = _check_key("normal", key)
    dtype = _float_dtype("normal", dtype)
    lo = float(np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype)))
    u = uniform(key, shape, dtype, lo, 1.0)
    return lax.mul(lax.erf_inv(u), float(np.sqrt(np.array(2.0, dtype))))


def exponential(key, shape: Sequence[int] = (), dtype=None):
    """Exponential(1) floats: -log1p(-u)."""
    key = _check_key("exponential", key)
    dtype = _float_dtype("exponential", dtype)
    return lax.neg(lax.log1p(lax.neg(uniform(key, shape, dtype))))


def gumbel(key, shape: Sequence[int] = (), dtype=None):
    """Standard Gumbel floats: -log(-log(u)), u ~ uniform(tiny, 1) (jax's mode='low')."""
    key = _check_key("gumbel", key)
    dtype = _float_dtype("gumbel", dtype)
    tiny = float(_dtypes.finfo(dtype).tiny)
    return lax.neg(lax.log(lax.neg(lax.log(uniform(key, shape, dtype, tiny, 1.0)))))


def bernoulli(key, p=0.5, shape: Sequence[int] | None = None):
    """Booleans, True with probability p: uniform(key, shape) < p (jax's mode='low')."""
    k = _check_key("bernoulli", key)
    p = jnp.asarray(p)
    if not _dtypes.is_float(p.dtype):
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {p.dtype}.")
    shape = p.shape if shape is None else _shape(shape)
    _check_shape("bernoulli", shape, p.shape)
    return lax.lt(uniform(k, shape, p.dtype), _bcast(p, shape))


def randint(key, shape: Sequence[int], minval, maxval, dtype=None):
    """Integers in [minval, maxval) of `shape` (jax's algorithm: two words per value,
    combined modulo the span; 8/16-bit dtypes sampled as int32 and cast), equal to jax's."""
    k = _check_key("randint", key)
    shape = _shape(shape)
    dtype = _dtypes.canonicalize_dtype(_dtypes.default_int_dtype() if dtype is None
                                       else dtype)
    if not _dtypes.is_int(dtype):
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    _check_shape("randint", shape, np.shape(minval), np.shape(maxval))
    info = np.iinfo(dtype)
    static = [v for v in (minval, maxval) if isinstance(v, (int, np.integer))]
    if len(static) == 2 and int(minval) >= int(maxval):
        raise ValueError(f"randint: minval ({minval}) must be less than maxval ({maxval})")
    if any(isinstance(v, (float, np.floating)) for v in (minval, maxval)):
        raise TypeError("randint: minval and maxval must be integers")
    if info.bits < 32:
        # as jax: 8- and 16-bit integers are sampled as int32 (less modulo bias), the bounds
        # clipped to [min, max + 1] of `dtype`, then cast
        def clip32(v, hi):
            v = lax.convert_element_type(jnp.asarray(v), np.int32)
            return jnp.clip(v, int(info.min), hi)
        return lax.convert_element_type(
            randint(k, shape, clip32(minval, int(info.max)), clip32(maxval, int(info.max) + 1),
                    np.int32), dtype)

    def clip_convert(v):
        if isinstance(v, (int, np.integer)):
            return jnp.asarray(np.array(min(max(int(v), info.min), info.max), dtype))
        v = jnp.asarray(v)
        wide = np.int64 if config.jax_enable_x64 else np.int32
        return lax.convert_element_type(jnp.clip(v, max(info.min, np.iinfo(wide).min),
                                                 min(info.max, np.iinfo(wide).max)), dtype)

    maxval_out_of_range = isinstance(maxval, (int, np.integer)) and int(maxval) > info.max
    lo, hi = clip_convert(minval), clip_convert(maxval)
    lo, hi = _bcast(lo, shape), _bcast(hi, shape)
    nbits = info.bits
    k1, k2 = split(k)
    higher, lower = _random_bits(k1, nbits, shape), _random_bits(k2, nbits, shape)
    udt = _UINT[nbits]
    span = lax.convert_element_type(lax.sub(hi, lo), udt)
    span = lax.select(lax.le(hi, lo), jnp.ones(shape, udt), span)   # empty range -> minval
    if maxval_out_of_range:
        span = lax.select(lax.gt(hi, lo), lax.add(span, 1), span)
    zero = lax.eq(span, jnp.zeros(shape, udt))                       # span wrapped: full range
    safe = lax.select(zero, jnp.ones(shape, udt), span)

    def rem(x):                                                       # XLA: x rem 0 = x
        return lax.select(zero, x, lax.rem(x, safe))
    mult = rem(jnp.full(shape, 2 ** (nbits // 2), udt))               # 2**nbits % span
    mult = rem(lax.mul(mult, mult))
    off = rem(lax.add(lax.mul(rem(higher), mult), rem(lower)))
    return lax.add(lo, lax.convert_element_type(off, dtype))


def truncated_normal(key, lower, upper, shape: Sequence[int] | None = None, dtype=None):
    """Normal floats truncated to the open interval (lower, upper) (inverse-CDF method)."""
    k = _check_key("truncated_normal", key)
    dtype = _float_dtype("truncated_normal", dtype)
    if shape is None:
        shape = np.broadcast_shapes(np.shape(lower), np.shape(upper))
    else:
        shape = _shape(shape)
        _check_shape("truncated_normal", shape, np.shape(lower), np.shape(upper))
    sqrt2 = float(np.sqrt(np.array(2.0, dtype)))
    lower = lax.convert_element_type(jnp.asarray(lower), dtype)
    upper = lax.convert_element_type(jnp.asarray(upper), dtype)
    a = lax.erf(lax.div(lower, sqrt2))
    b = lax.erf(lax.div(upper, sqrt2))
    u = uniform(k, shape, dtype, minval=a, maxval=b)
    out = lax.mul(lax.erf_inv(u), sqrt2)
    lo = _nextafter(lax.stop_gradient(lower), np.inf, dtype)
    hi = _nextafter(lax.stop_gradient(upper), -np.inf, dtype)
    return jnp.clip(out, lo, hi)


def _nextafter(x, toward: float, dtype):
    """np.nextafter(x, toward) for concrete x; for traced x, x moved by one ulp of |x|
    (a clamp bound only, so that approximation keeps samples inside the interval)."""
    try:
        v = np.asarray(x)
    except Exception:                                                  # a tracer
        finfo = _dtypes.finfo(dtype)
        step = lax.max(lax.mul(lax.abs(x), float(finfo.eps)), float(finfo.tiny))
        return lax.add(x, step) if toward > 0 else lax.sub(x, step)
    return jnp.asarray(np.nextafter(v.astype(dtype), np.array(toward, dtype)))


def categorical(key, logits, axis: int = -1, shape: Sequence[int] | None = None):
    """Samples of index along `axis` with probabilities softmax(logits) (Gumbel max):
    argmax(logits + gumbel noise). Result shape: logits' shape without `axis`, or
    `shape` (which must end with that batch shape)."""
    k = _check_key("categorical", key)
    logits = jnp.asarray(logits)
    nd = logits.ndim
    if not -nd <= axis < nd:
        raise ValueError(f"categorical: axis {axis} is out of bounds for logits of rank {nd}")
    batch_shape = tuple(np.delete(logits.shape, axis))
    shape = batch_shape if shape is None else _shape(shape)
    _check_shape("categorical", shape, batch_shape)
    prefix = shape[:len(shape) - len(batch_shape)]
    ax = axis - nd if axis >= 0 else axis                             # negative axis
    logits_shape = list(shape[len(shape) - len(batch_shape):])
    logits_shape.insert(ax % nd, logits.shape[ax])
    noise = gumbel(k, (*prefix, *logits_shape), logits.dtype)
    expanded = lax.reshape(logits, (1,) * len(prefix) + logits.shape)
    return jnp.argmax(noise + expanded, axis=ax)


def _shuffle(key, x, axis: int):
    """jax's shuffle: sort by fresh random 32-bit keys, ceil(3 ln n / ln(2**32 - 1)) rounds."""
    rounds = int(np.ceil(3 * np.log(max(1, x.size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        key, subkey = split(key)
        sort_keys = _random_bits(subkey, 32, x.shape)
        _, x = lax.sort_key_val(sort_keys, x, axis)
    return x


def permutation(key, x, axis: int = 0):
    """A random permutation of range(x) (x an int) or of x's entries along `axis`."""
    k = _check_key("permutation", key)
    if isinstance(x, (int, np.integer)):
        return _shuffle(k, jnp.arange(int(x)), 0)
    x = jnp.asarray(x)
    if x.ndim == 0:
        raise TypeError("permutation: x must be an integer or at least 1-dimensional")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"permutation: axis {axis} is out of bounds for rank {x.ndim}")
    axis %= x.ndim
    if x.ndim == 1:
        return _shuffle(k, x, axis)
    ind = _shuffle(k, jnp.arange(x.shape[axis]), 0)
    return jnp.take(x, ind, axis=axis)


def choice(key, a, shape: Sequence[int] = (), replace: bool = True, p=None, axis: int = 0):
    """Samples from a (an int n: range(n)) along `axis`: uniform with replacement via
    randint, without replacement via a permutation prefix; `p` weights use Gumbel top-k /
    inverse CDF as jax."""
    k = _check_key("choice", key)
    shape = _shape(shape)
    if isinstance(a, (int, np.integer)):
        n, arr = int(a), None
    else:
        arr = jnp.asarray(a)
        if arr.ndim == 0:
            raise ValueError("choice: a must be an integer or at least 1-dimensional")
        n = arr.shape[axis]
    size = math.prod(shape)
    if not replace and size > n:
        raise ValueError("choice: cannot take a larger sample than population when "
                         "replace=False")
    if p is None:
        if replace:
            ind = randint(k, shape, 0, n)
        else:
            ind = lax.reshape(permutation(k, n)[:size], shape)
    else:
        p = jnp.asarray(p)
        if p.shape != (n,):
            raise ValueError(f"choice: p must be of shape ({n},), got {p.shape}")
        if replace:
            cdf = jnp.cumsum(p)
            r = lax.mul(cdf[-1], lax.sub(1.0, uniform(k, shape, p.dtype)))
            ind = jnp.searchsorted(cdf, r, side="left").astype(np.int32)
        else:
            g = lax.add(gumbel(k, (n,), p.dtype), jnp.log(p))
            ind = lax.reshape(lax.top_k(g, size)[1], shape)
    if arr is None:
        return ind
    return jnp.take(arr, lax.reshape(ind, (size,)), axis=axis).reshape(
        arr.shape[:axis] + shape + arr.shape[axis + 1:])


def clone(key):
    """A copy of `key` (the identity: fnad arrays are immutable and never donated)."""
    return key


def key_impl(keys) -> str:
    """The name of the PRNG implementation of `keys`: a typed key array's own, the default
    (config jax_default_prng_impl) for raw keys. A string, as jax's for its built-in
    implementations."""
    return _typed("key_impl", keys)._impl


def wrap_key_data(key_bits_array, *, impl=None, dtype=None) -> _prng.PRNGKeyArray:
    """Typed keys over raw key words uint32[..., *key_shape] (the array's leading shape) of
    implementation `impl` (or `dtype`; default config jax_default_prng_impl), as
    jax.random.wrap_key_data."""
    impl = _impl_or_dtype(impl, dtype, "wrap_key_data")
    if _prng.is_key_array(key_bits_array):
        raise TypeError("wrap_key_data: the argument is already a typed key array")
    return _prng.wrap(jnp.asarray(key_bits_array), impl.name)


def key_dtype(impl_spec=None):
    """The dtype of typed keys of implementation `impl_spec` (a name or key dtype; default
    config jax_default_prng_impl): key<fry>, key<rbg> or key<urbg>."""
    return resolve_impl(impl_spec, "key_dtype").dtype


# the other distributions (fnad/_random_dists.py imports the samplers above)
from fnad._random_dists import (ball, beta, cauchy, chisquare, dirichlet,  # noqa: E402
                                double_sided_maxwell, f, gamma, generalized_normal, geometric,
                                laplace, loggamma, logistic, lognormal, maxwell,
                                multivariate_normal, orthogonal, pareto, rademacher, rayleigh,
                                t, triangular, wald, weibull_min)
from fnad._random_counts import binomial, multinomial, poisson  # noqa: E402
