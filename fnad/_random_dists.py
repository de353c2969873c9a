"""More of jax.random's distributions, re-exported by fnad.random: transforms of its
uniform and normal draws (cauchy ... orthogonal), the gamma family (gamma, loggamma, beta,
dirichlet, chisquare, f, t) and geometric.

Each applies jax.random's formula to the same draws jax makes, so the values equal jax's up
to the few ulp by which fnad's log, erf_inv and tan differ from XLA's; gamma's
Marsaglia–Tsang loop splits its keys as jax's does, so it takes the same accept/reject
decisions. Written with fnad.lax and fnad.numpy ops: they run eagerly and under fnad's
transformations.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fnad import dtypes as _dtypes
from fnad import lax
from fnad import numpy as jnp
from fnad.random import (_bcast, _check_key, _check_shape, _float_dtype, _shape, bernoulli,
                         exponential, normal, split, uniform)

# ---- more distributions: transforms of uniform / normal draws (jax's formulas) -------------
# Each applies jax.random's formula to the same uniform/normal/exponential draw jax makes, so
# the values equal jax's up to the few ulp by which fnad's log/erf_inv/tan differ from XLA's.
def _check_safe_cast(name: str, dtype, *args) -> None:
    for x in args:
        if _dtypes.result_type(x, dtype) != dtype:
            raise _dtypes.TypePromotionError(
                f"In arguments to {name}, cannot safely cast argument of type "
                f"{jnp.asarray(x).dtype} to {dtype}")


def _param_shape(name: str, shape, *params) -> tuple[int, ...]:
    """jax's _check_broadcast_shapes: `shape`, or the parameters' broadcast shape."""
    shapes = [np.shape(p) for p in params]
    if shape is None:
        return tuple(np.broadcast_shapes(*shapes)) if shapes else ()
    shape = _shape(shape)
    _check_shape(name, shape, *shapes)
    return shape


def _as(x, dtype):
    return lax.convert_element_type(jnp.asarray(x), dtype)


def cauchy(key, shape: Sequence[int] = (), dtype=None):
    """Standard Cauchy floats: tan(π (u - 1/2)), u ~ uniform(eps, 1)."""
    k = _check_key("cauchy", key)
    dtype = _float_dtype("cauchy", dtype)
    u = uniform(k, _shape(shape), dtype, float(_dtypes.finfo(dtype).eps), 1.0)
    return lax.tan(lax.mul(lax.sub(u, 0.5), float(np.pi)))


def laplace(key, shape: Sequence[int] = (), dtype=None):
    """Standard Laplace floats: sign(u) log1p(-|u|), u ~ uniform(-1 + epsneg, 1)."""
    k = _check_key("laplace", key)
    dtype = _float_dtype("laplace", dtype)
    u = uniform(k, _shape(shape), dtype, -1.0 + float(_dtypes.finfo(dtype).epsneg), 1.0)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


def logistic(key, shape: Sequence[int] = (), dtype=None):
    """Standard logistic floats: log(u) - log1p(-u), u ~ uniform(tiny, 1)."""
    k = _check_key("logistic", key)
    dtype = _float_dtype("logistic", dtype)
    u = uniform(k, _shape(shape), dtype, float(_dtypes.finfo(dtype).tiny), 1.0)
    return lax.sub(lax.log(u), lax.log1p(lax.neg(u)))


_ONE_F32 = np.float32(1)                      # jax's default sigma


def lognormal(key, sigma=_ONE_F32, shape: Sequence[int] | None = None, dtype=None):
    """Log-normal floats exp(sigma · z), z ~ normal; shape defaults to sigma's."""
    k = _check_key("lognormal", key)
    dtype = _float_dtype("lognormal", dtype)
    shape = _param_shape("lognormal", shape, sigma)
    _check_safe_cast("lognormal", dtype, sigma)
    return lax.exp(lax.mul(normal(k, shape, dtype), _bcast(_as(sigma, dtype), shape)))


def pareto(key, b, shape: Sequence[int] | None = None, dtype=None):
    """Pareto floats with shape parameter b (support x >= 1): exp(e / b), e ~ exponential."""
    k = _check_key("pareto", key)
    dtype = _float_dtype("pareto", dtype)
    shape = _param_shape("pareto", shape, b)
    _check_safe_cast("pareto", dtype, b)
    return lax.exp(lax.div(exponential(k, shape, dtype), _bcast(_as(b, dtype), shape)))


def rademacher(key, shape: Sequence[int] = (), dtype=None):
    """±1 with equal probability (default dtype int): 2 · bernoulli(0.5) - 1."""
    k = _check_key("rademacher", key)
    dtype = _dtypes.canonicalize_dtype(_dtypes.default_int_dtype() if dtype is None
                                       else dtype)
    b = lax.convert_element_type(bernoulli(k, 0.5, _shape(shape)), dtype)
    return lax.convert_element_type(lax.sub(lax.mul(b, 2), 1), dtype)


def rayleigh(key, scale, shape: Sequence[int] | None = None, dtype=None):
    """Rayleigh floats: scale · sqrt(-2 log u), u ~ uniform."""
    k = _check_key("rayleigh", key)
    dtype = _float_dtype("rayleigh", dtype)
    shape = _param_shape("rayleigh", shape, scale)
    _check_safe_cast("rayleigh", dtype, scale)
    u = uniform(k, shape, dtype)
    return lax.mul(_bcast(_as(scale, dtype), shape), lax.sqrt(lax.mul(lax.log(u), -2.0)))


def maxwell(key, shape: Sequence[int] = (), dtype=None):
    """One-sided Maxwell floats: the norm of 3 standard normals, ‖z‖, z ~ normal(shape + (3,))."""
    k = _check_key("maxwell", key)
    dtype = _float_dtype("maxwell", dtype)
    z = normal(k, (*_shape(shape), 3), dtype)                       # [*shape, 3]
    return lax.sqrt(jnp.sum(lax.mul(z, z), axis=-1))


def double_sided_maxwell(key, loc, scale, shape: Sequence[int] = (), dtype=None):
    """Double-sided Maxwell floats: ±maxwell · scale + loc (a rademacher sign). As jax, the
    result's shape is shape + broadcast(loc, scale) (shape=() means the parameters' shape)."""
    k = _check_key("double_sided_maxwell", key)
    dtype = _float_dtype("double_sided_maxwell", dtype)
    shape = _shape(shape)
    params = tuple(np.broadcast_shapes(np.shape(loc), np.shape(scale)))
    shape = (params if not shape else shape) + params
    k_max, k_sign = split(k)
    m = maxwell(k_max, shape, dtype)
    sign = rademacher(k_sign, shape, dtype)
    return lax.add(lax.mul(lax.mul(sign, m), _as(scale, dtype)), _as(loc, dtype))


def weibull_min(key, scale, concentration, shape: Sequence[int] = (), dtype=None):
    """Weibull floats: scale · (-log1p(-u)) ** (1 / concentration), u ~ uniform."""
    k = _check_key("weibull_min", key)
    dtype = _float_dtype("weibull_min", dtype)
    u = uniform(k, _shape(shape), dtype)
    return jnp.power(lax.neg(lax.log1p(lax.neg(u))), 1.0 / jnp.asarray(concentration)) * scale


def triangular(key, left, mode, right, shape: Sequence[int] | None = None, dtype=None):
    """Triangular floats on [left, right] peaked at mode (inverse CDF of u ~ uniform)."""
    k = _check_key("triangular", key)
    dtype = _float_dtype("triangular", dtype)
    shape = _param_shape("triangular", shape, left, mode, right)
    _check_safe_cast("triangular", dtype, left, mode, right)
    lo, mo, hi = (_bcast(_as(v, dtype), shape) for v in (left, mode, right))
    fc = lax.div(lax.sub(mo, lo), lax.sub(hi, lo))
    u = uniform(k, shape, dtype)
    out1 = lax.add(lo, lax.sqrt(lax.mul(lax.mul(u, lax.sub(hi, lo)), lax.sub(mo, lo))))
    out2 = lax.sub(hi, lax.sqrt(lax.mul(lax.mul(lax.sub(1.0, u), lax.sub(hi, lo)),
                                        lax.sub(hi, mo))))
    return lax.select(lax.lt(u, fc), out1, out2)


def wald(key, mean, shape: Sequence[int] | None = None, dtype=None):
    """Wald (inverse Gaussian, scale 1) floats (Michael, Schucany & Haas: a normal draw, then
    a uniform to pick one of the two roots)."""
    k = _check_key("wald", key)
    dtype = _float_dtype("wald", dtype)
    shape = _param_shape("wald", shape, mean)
    _check_safe_cast("wald", dtype, mean)
    k1, k2 = split(k)
    mu = _bcast(_as(mean, dtype), shape)
    v = normal(k1, shape, dtype)
    z = uniform(k2, shape, dtype)
    y = lax.integer_pow(v, 2)
    y_sq = lax.integer_pow(y, 2)
    mu_sq = lax.integer_pow(mu, 2)
    sqrt_term = lax.sqrt(lax.add(lax.mul(lax.mul(4.0, mu), y), lax.mul(mu_sq, y_sq)))
    x = lax.sub(lax.add(mu, lax.div(lax.mul(mu_sq, y), 2.0)),
                lax.mul(lax.div(mu, 2.0), sqrt_term))
    return lax.select(lax.le(z, lax.div(mu, lax.add(mu, x))), x, lax.div(mu_sq, x))


def generalized_normal(key, p: float, shape: Sequence[int] = (), dtype=None):
    """Generalized normal floats, density ∝ exp(-|x|^p): ±gamma(1/p) ** (1/p)."""
    k = _check_key("generalized_normal", key)
    dtype = _float_dtype("generalized_normal", dtype)
    shape = _shape(shape)
    k_g, k_r = split(k)
    g = gamma(k_g, 1 / p, shape, dtype)
    r = rademacher(k_r, shape, dtype)
    return r * g ** (1 / p)


def ball(key, d: int, p: float = 2, shape: Sequence[int] = (), dtype=None):
    """Points uniform in the d-dimensional unit p-norm ball: [*shape, d]."""
    k = _check_key("ball", key)
    dtype = _float_dtype("ball", dtype)
    shape = _shape(shape)
    d = _concrete_int("ball", d)
    k1, k2 = split(k)
    g = generalized_normal(k1, p, (*shape, d), dtype)               # [*shape, d]
    e = exponential(k2, shape, dtype)                               # [*shape]
    return g / ((jnp.sum(jnp.abs(g) ** p, axis=-1) + e) ** (1 / p))[..., None]


def _concrete_int(name: str, v) -> int:
    try:
        return int(np.asarray(v))
    except Exception as e:                                          # a tracer
        raise TypeError(f"{name}: the dimension must be a concrete integer (not traced): "
                        f"{e}") from None


def multivariate_normal(key, mean, cov, shape: Sequence[int] | None = None, dtype=None,
                        method: str = "cholesky"):
    """Normal vectors with mean [..., n] and covariance cov [..., n, n]: mean + L z, L a
    factor with L Lᵀ = cov (method 'cholesky', 'eigh': V √W, or 'svd': U √S), z ~
    normal(shape + (n,)). Result [*shape, n]; shape defaults to the broadcast batch shape
    of mean and cov."""
    k = _check_key("multivariate_normal", key)
    if method not in {"svd", "eigh", "cholesky"}:
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    mean, cov = jnp.asarray(mean), jnp.asarray(cov)
    inexact = _dtypes.to_inexact_dtype(_dtypes.result_type(mean, cov))
    mean, cov = _as(mean, inexact), _as(cov, inexact)
    dtype = mean.dtype if dtype is None else _dtypes.canonicalize_dtype(dtype)
    if not _dtypes.is_float(dtype):
        raise ValueError(f"dtype argument to `multivariate_normal` must be a float dtype, "
                         f"got {dtype}")
    if mean.ndim < 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == "
                         f"{mean.ndim}")
    if cov.ndim < 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == "
                         f"{cov.ndim}")
    n = mean.shape[-1]
    if cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, "
                         f"but got cov.shape == {cov.shape}.")
    if shape is None:
        shape = tuple(np.broadcast_shapes(mean.shape[:-1], cov.shape[:-2]))
    else:
        shape = _shape(shape)
        _check_shape("normal", shape, mean.shape[:-1], cov.shape[:-2])
    if method == "svd":                                             # cov = U S Vᵀ: U √S
        u, s, _ = jnp.linalg.svd(cov)
        factor = u * jnp.sqrt(s[..., None, :])
    elif method == "eigh":                                          # cov = V W Vᵀ: V √W
        w, v = jnp.linalg.eigh(cov)
        factor = v * jnp.sqrt(w[..., None, :])
    else:
        factor = jnp.linalg.cholesky(cov)                           # [..., n, n]
    z = normal(k, (*shape, n), dtype)                               # [*shape, n]
    # [..., n, n] @ [*shape, n, 1] -> [*shape, n]
    return mean + jnp.matmul(factor, z[..., None])[..., 0]


def orthogonal(key, n: int, shape: Sequence[int] = (), dtype=None, m: int | None = None):
    """Haar-random [*shape, n, m] matrices with orthonormal columns (n >= m) or rows: the Q of
    the QR of a normal [max, min] matrix, columns signed so that diag(R) > 0 (m defaults to
    n). Real float dtypes only."""
    from fnad.batching import vmap                                  # fnad.batching imports us
    from fnad.initializers import _householder_q
    k = _check_key("orthogonal", key)
    dtype = _float_dtype("orthogonal", dtype)
    shape = _shape(shape)
    n = _concrete_int("orthogonal", n)
    m = n if m is None else _concrete_int("orthogonal", m)
    rows, cols = max(n, m), min(n, m)
    z = normal(k, (*shape, rows, cols), dtype)                      # [*shape, rows, cols]
    if 0 in z.shape:
        q = jnp.zeros(z.shape, dtype)
    else:
        qr = _householder_q
        for _ in shape:
            qr = vmap(qr)
        q = qr(z)                                                   # [*shape, rows, cols]
    return jnp.swapaxes(q, -1, -2) if n < m else q


# ---- gamma and its family --------------------------------------------------------------------
def _gamma_one(key, alpha, log_space: bool):
    """One Gamma(alpha) draw (Marsaglia & Tsang), jax's `_gamma_one` step for step: the same
    key splits and the same normal/uniform draws, so the same accept/reject decisions.

        alpha < 1: boost to alpha + 1, multiply by u ** (1 / alpha)
        d = alpha - 1/3, c = 1 / (3 sqrt d);  repeat: x ~ N until v = (1 + c x)^3 > 0,
        u ~ U; accept when u < 1 - 0.0331 x^4 or log u < x^2 / 2 + d (1 - v + log v)
        -> d v (or log d + log v + log boost in log space)
    """
    dtype = alpha.dtype
    boost_mask = lax.ge(alpha, 1.0)
    alpha_orig = alpha
    alpha = lax.select(boost_mask, alpha, lax.add(alpha, 1.0))
    d = lax.sub(alpha, 1.0 / 3.0)
    c = lax.div(1.0 / 3.0, lax.sqrt(d))
    zero, one = jnp.zeros((), dtype), jnp.ones((), dtype)

    def cond_fn(kXVU):
        _, X, V, U = kXVU
        return lax.bitwise_and(
            lax.ge(U, lax.sub(1.0, lax.mul(0.0331, lax.mul(X, X)))),
            lax.ge(lax.log(U), lax.add(lax.mul(X, 0.5),
                                       lax.mul(d, lax.add(lax.sub(1.0, V), lax.log(V))))))

    def next_xv(kxv):
        k, subkey = split(kxv[0])
        x = normal(subkey, (), dtype)
        return k, x, lax.add(1.0, lax.mul(x, c))

    def body_fn(kXVU):
        k, x_key, u_key = split(kXVU[0], 3)
        _, x, v = lax.while_loop(lambda kxv: lax.le(kxv[2], 0.0), next_xv,
                                 (x_key, zero, -one))
        return k, lax.mul(x, x), lax.mul(lax.mul(v, v), v), uniform(u_key, (), dtype)

    k, subkey = split(key)                            # the start state passes cond_fn
    _, _, V, _ = lax.while_loop(cond_fn, body_fn, (k, zero, one, one + one))
    if log_space:
        log_samples = lax.neg(exponential(subkey, (), dtype))
        log_boost = lax.select(lax.bitwise_or(boost_mask, lax.eq(log_samples, 0.0)), zero,
                               lax.mul(log_samples, lax.div(1.0, alpha_orig)))
        return lax.add(lax.add(lax.log(d), lax.log(V)), log_boost)
    samples = lax.sub(1.0, uniform(subkey, (), dtype))
    boost = lax.select(boost_mask, one, lax.pow(samples, lax.div(1.0, alpha_orig)))
    return lax.mul(lax.mul(d, V), boost)


def _gamma_raw(key, a, log_space: bool):
    """Gamma draws for every entry of `a`, the i-th (row-major) from split(key, a.size)[i]
    (`key` a typed key), differentiable in `a` by jax's implicit reparameterization: with
    u = P(a, x) held fixed (P the regularized incomplete gamma function, the CDF the sample
    inverts),

        dx/da = -(∂P/∂a) / (∂P/∂x) = lax.random_gamma_grad(a, x)
        d log x / da = random_gamma_grad(a, x) / x   (log_space; x = exp(log x), or the
                                                      smallest normal float where that is 0)
    """
    from fnad.batching import vmap                                  # fnad.batching imports us
    from fnad.custom import custom_jvp
    from fnad.custom_batching import sequential_vmap

    def one(k, x):
        return _gamma_one(k, x, log_space)

    @sequential_vmap
    def one_by_one(keys, alphas):                     # under vmap too: a loop over the batch
        return lax.map(lambda kx: one(*kx), (keys, alphas))

    def sample(a):
        n = a.size
        if n == 0:
            return a
        keys = split(key, n)                                        # [n] keys
        alphas = lax.reshape(a, (n,))
        # as jax: vmapped for threefry keys; for rbg and unsafe_rbg, whose bits a vmap over
        # keys draws from the first key only, one entry (and batch member) at a time
        flat = vmap(one)(keys, alphas) if key._impl == "threefry2x32" \
            else one_by_one(keys, alphas)
        return lax.reshape(flat, a.shape)

    @custom_jvp
    def draw(a):
        return sample(a)

    @draw.defjvp
    def draw_jvp(primals, tangents):
        (a,), (a_dot,) = primals, tangents
        out = draw(a)                       # not sample(a): a second derivative comes here
        if not log_space:
            return out, lax.mul(a_dot, lax.random_gamma_grad(a, out))
        x = lax.exp(out)
        x = lax.select(lax.eq(x, 0.0), jnp.full(x.shape, _dtypes.finfo(x.dtype).tiny, x.dtype),
                       x)
        return out, lax.mul(a_dot, lax.div(lax.random_gamma_grad(a, x), x))
    return draw(a)


def _gamma_sampler(name: str, key, a, shape, dtype, log_space: bool):
    k = _check_key(name, key)
    dtype = _float_dtype("gamma", dtype)
    if shape is None:
        shape = np.shape(a)
    else:
        shape = _shape(shape)
        _check_shape(name, shape, np.shape(a))
    a = _bcast(_as(a, dtype), shape)
    return _gamma_raw(k, a, log_space)


def gamma(key, a, shape: Sequence[int] | None = None, dtype=None):
    """Gamma(a, 1) floats, jax's Marsaglia–Tsang rejection sampler (one while loop per
    entry, vectorised by vmap); shape defaults to a's. Differentiable in `a` (implicit
    reparameterization through lax.random_gamma_grad, as jax)."""
    return _gamma_sampler("gamma", key, a, shape, dtype, log_space=False)


def loggamma(key, a, shape: Sequence[int] | None = None, dtype=None):
    """log of Gamma(a, 1) floats, computed in log space (accurate for small a)."""
    return _gamma_sampler("loggamma", key, a, shape, dtype, log_space=True)


def beta(key, a, b, shape: Sequence[int] | None = None, dtype=None):
    """Beta(a, b) floats: G_a / (G_a + G_b) from two log-gamma draws (scaled by their max)."""
    k = _check_key("beta", key)
    dtype = _float_dtype("beta", dtype)
    _check_safe_cast("beta", dtype, a, b)
    shape = _param_shape("beta", shape, a, b)
    key_a, key_b = split(k)
    log_ga = loggamma(key_a, _bcast(_as(a, dtype), shape), shape, dtype)
    log_gb = loggamma(key_b, _bcast(_as(b, dtype), shape), shape, dtype)
    log_max = lax.max(log_ga, log_gb)
    ga, gb = lax.exp(lax.sub(log_ga, log_max)), lax.exp(lax.sub(log_gb, log_max))
    return lax.div(ga, lax.add(ga, gb))


def dirichlet(key, alpha, shape: Sequence[int] | None = None, dtype=None):
    """Dirichlet(alpha [..., K]) vectors [*shape, K]: softmax of K log-gamma draws."""
    k = _check_key("dirichlet", key)
    dtype = _float_dtype("dirichlet", dtype)
    if np.ndim(alpha) < 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == "
                         f"{np.ndim(alpha)}")
    if shape is None:
        shape = np.shape(alpha)[:-1]
    else:
        shape = _shape(shape)
        _check_shape("dirichlet", shape, np.shape(alpha)[:-1])
    log_g = loggamma(k, _as(alpha, dtype), (*shape, np.shape(alpha)[-1]), dtype)
    e = jnp.exp(log_g - lax.stop_gradient(jnp.max(log_g, axis=-1, keepdims=True)))
    return e / jnp.sum(e, axis=-1, keepdims=True)                   # [*shape, K]


def chisquare(key, df, shape: Sequence[int] | None = None, dtype=None):
    """Chi-square(df) floats: 2 · exp(loggamma(df / 2))."""
    k = _check_key("chisquare", key)
    dtype = _float_dtype("chisquare", dtype)
    shape = _param_shape("chisquare", shape, df)
    _check_safe_cast("chisquare", dtype, df)
    half_df = lax.div(_as(df, dtype), 2.0)
    return lax.mul(lax.exp(loggamma(k, half_df, shape, dtype)), 2.0)


def f(key, dfnum, dfden, shape: Sequence[int] | None = None, dtype=None):
    """F(dfnum, dfden) floats: (χ²_num / dfnum) / (χ²_den / dfden)."""
    k = _check_key("f", key)
    dtype = _float_dtype("f", dtype)
    shape = _param_shape("f", shape, dfnum, dfden)
    _check_safe_cast("f", dtype, dfnum, dfden)
    dfnum, dfden = _bcast(_as(dfnum, dtype), shape), _bcast(_as(dfden, dtype), shape)
    key_den, key_num = split(k)
    num = lax.div(chisquare(key_num, dfnum, shape, dtype), dfnum)
    den = lax.div(chisquare(key_den, dfden, shape, dtype), dfden)
    return lax.div(num, den)


def t(key, df, shape: Sequence[int] | None = None, dtype=None):
    """Student's t(df) floats: z · sqrt((df / 2) / G), z ~ normal, G ~ gamma(df / 2)."""
    k = _check_key("t", key)
    dtype = _float_dtype("t", dtype)
    shape = _param_shape("t", shape, df)
    _check_safe_cast("t", dtype, df)
    key_n, key_g = split(k)
    z = normal(key_n, shape, dtype)
    half_df = _bcast(lax.div(_as(df, dtype), 2.0), shape)
    g = gamma(key_g, half_df, shape, dtype)
    return lax.mul(z, lax.sqrt(lax.div(half_df, g)))


# ---- discrete ------------------------------------------------------------------------------
def geometric(key, p, shape: Sequence[int] | None = None, dtype=None):
    """Geometric(p) integers >= 1 (trials to the first success): floor(log u / log1p(-p)) + 1,
    u ~ uniform in p's float dtype (u = 0 mapped to 1, as jax)."""
    k = _check_key("geometric", key)
    dtype = _dtypes.canonicalize_dtype(_dtypes.default_int_dtype() if dtype is None
                                       else dtype)
    if not _dtypes.is_int(dtype):
        raise ValueError(f"dtype argument to `geometric` must be an int dtype, got {dtype}")
    shape = _param_shape("geometric", shape, p)
    p = jnp.asarray(p)
    p = _as(p, _dtypes.to_inexact_dtype(p.dtype))
    u = uniform(k, shape, p.dtype)
    u = jnp.where(u == 0, 1, u)
    g = lax.add(lax.floor(lax.div(lax.log(u), _bcast(lax.log1p(lax.neg(p)), shape))), 1.0)
    return lax.convert_element_type(g, dtype)
