"""fnad.scipy.stats.gaussian_kde: Gaussian kernel density estimation, as
jax.scipy.stats.gaussian_kde (a pytree: it passes through jit, vmap and grad).

    dataset [d, n], weights [n] (Σ w = 1), neff = 1/Σ w²
    factor = neff^(-1/(d+4)) (scott) or (neff (d+2)/4)^(-1/(d+4)) (silverman), or given
    covariance = cov(dataset, aweights=w)·factor²,  inv_cov its inverse
    pdf(x) = Σ_i w_i N(x; dataset_i, covariance)         (logpdf through logsumexp)
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad import lax, random
from fnad.numpy._core import check_arraylike, promote_dtypes_inexact
from fnad.scipy import special
from fnad.tree_util import register_pytree_node_class

__all__ = ["gaussian_kde"]

_FIELDS = ("neff", "dataset", "weights", "covariance", "inv_cov")


def _chol_solve(L, b):                                  # (L Lᵀ)⁻¹ b, L [d, d], b [d, m]
    y = lax.linalg.triangular_solve(L, b, left_side=True, lower=True)
    return lax.linalg.triangular_solve(L, y, left_side=True, lower=True, transpose_a=True)


@register_pytree_node_class
class gaussian_kde:
    """A Gaussian KDE of `dataset` [d, n] (or [n]) with bandwidth `bw_method`
    ('scott', 'silverman', a scalar factor or a callable of the kde) and optional `weights`."""

    __slots__ = _FIELDS

    def __init__(self, dataset, bw_method=None, weights=None):
        check_arraylike("gaussian_kde", dataset)
        dataset = jnp.atleast_2d(dataset)
        if np.issubdtype(dataset.dtype, np.complexfloating):
            raise NotImplementedError("gaussian_kde does not support complex data")
        if not dataset.size > 1:
            raise ValueError("`dataset` input should have multiple elements.")
        d, n = dataset.shape
        if weights is not None:
            check_arraylike("gaussian_kde", weights)
            dataset, weights = promote_dtypes_inexact(dataset, weights)
            weights = jnp.atleast_1d(weights)
            weights = weights / jnp.sum(weights)
            if weights.ndim != 1:
                raise ValueError("`weights` input should be one-dimensional.")
            if len(weights) != n:
                raise ValueError("`weights` input should be of length n")
        else:
            dataset, = promote_dtypes_inexact(dataset)
            weights = jnp.full(n, 1.0 / n, dtype=dataset.dtype)
        self._set("dataset", dataset)
        self._set("weights", weights)
        neff = self._set("neff", 1 / jnp.sum(weights ** 2))
        bw_method = "scott" if bw_method is None else bw_method
        if isinstance(bw_method, str) and bw_method == "scott":
            factor = jnp.power(neff, -1.0 / (d + 4))
        elif isinstance(bw_method, str) and bw_method == "silverman":
            factor = jnp.power(neff * (d + 2) / 4.0, -1.0 / (d + 4))
        elif jnp.isscalar(bw_method) and not isinstance(bw_method, str):
            factor = bw_method
        elif callable(bw_method):
            factor = bw_method(self)
        else:
            raise ValueError("`bw_method` should be 'scott', 'silverman', a scalar, "
                             "or a callable.")
        data_covariance = jnp.atleast_2d(jnp.cov(dataset, rowvar=1, bias=False,
                                                 aweights=weights))          # [d, d]
        self._set("covariance", data_covariance * factor ** 2)
        self._set("inv_cov", jnp.linalg.inv(data_covariance) / factor ** 2)

    def _set(self, name, value):
        object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name, value):
        raise AttributeError(f"gaussian_kde is immutable: cannot set {name!r}")

    def tree_flatten(self):
        return tuple(getattr(self, f) for f in _FIELDS), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        kde = cls.__new__(cls)
        for name, value in zip(_FIELDS, children):
            kde._set(name, value)
        return kde

    @property
    def d(self):
        return self.dataset.shape[0]

    @property
    def n(self):
        return self.dataset.shape[1]

    def evaluate(self, points):
        """The density at points [d, m] (or [d] / [m] when d = 1) -> [m]."""
        check_arraylike("evaluate", points)
        points = self._reshape_points(points)
        return _kernel_eval(False, self.dataset.T, self.weights[:, None], points.T,
                            self.inv_cov)[:, 0]

    def __call__(self, points):
        return self.evaluate(points)

    def pdf(self, x):
        """The density (evaluate)."""
        return self.evaluate(x)

    def logpdf(self, x):
        """The log density, through logsumexp."""
        check_arraylike("logpdf", x)
        x = self._reshape_points(x)
        return _kernel_eval(True, self.dataset.T, self.weights[:, None], x.T,
                            self.inv_cov)[:, 0]

    def integrate_gaussian(self, mean, cov):
        """∫ kde(x)·N(x; mean, cov) dx."""
        mean = jnp.atleast_1d(jnp.squeeze(mean))
        cov = jnp.atleast_2d(cov)
        if mean.shape != (self.d,):
            raise ValueError(f"mean does not have dimension {self.d}")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"covariance does not have dimension {self.d}")
        L = jnp.linalg.cholesky(self.covariance + cov)
        norm = 1.0 / (jnp.sqrt(2 * np.pi) ** self.d * jnp.prod(jnp.diag(L)))
        return _kernel_convolve(L, norm, self.dataset, self.weights, mean)

    def integrate_box_1d(self, low, high):
        """∫_low^high kde(x) dx for a one-dimensional kde (scalar limits)."""
        if self.d != 1:
            raise ValueError("integrate_box_1d() only handles 1D pdfs")
        if np.ndim(low) != 0 or np.ndim(high) != 0:
            raise ValueError("the limits of integration in integrate_box_1d must be scalars")
        sigma = jnp.squeeze(jnp.sqrt(self.covariance))
        low = jnp.squeeze((low - self.dataset) / sigma)
        high = jnp.squeeze((high - self.dataset) / sigma)
        return jnp.sum(self.weights * (special.ndtr(high) - special.ndtr(low)))

    def integrate_kde(self, other):
        """∫ self(x)·other(x) dx."""
        if other.d != self.d:
            raise ValueError("KDEs are not the same dimensionality")
        L = jnp.linalg.cholesky(self.covariance + other.covariance)
        norm = 1.0 / (jnp.sqrt(2 * np.pi) ** self.d * jnp.prod(jnp.diag(L)))
        sm, lg = (self, other) if self.n < other.n else (other, self)
        result = jnp.stack([_kernel_convolve(L, norm, lg.dataset, lg.weights, sm.dataset[:, i])
                            for i in range(sm.n)])                         # [n_small]
        return jnp.sum(result * sm.weights)

    def resample(self, key, shape=()):
        """Draws [d, *shape]: a data point chosen by weight plus N(0, covariance) noise."""
        ind_key, eps_key = random.split(key)
        ind = random.choice(ind_key, self.n, shape=shape, p=self.weights)
        eps = random.multivariate_normal(eps_key, jnp.zeros(self.d, self.covariance.dtype),
                                         self.covariance, shape=shape,
                                         dtype=self.dataset.dtype).T
        return self.dataset[:, ind] + eps

    def integrate_box(self, low_bounds, high_bounds, maxpts=None):
        del low_bounds, high_bounds, maxpts
        raise NotImplementedError("only 1D box integrations are supported; use "
                                  "`integrate_box_1d`")

    def set_bandwidth(self, bw_method=None):
        del bw_method
        raise NotImplementedError("dynamically changing the bandwidth method is not supported")

    def _reshape_points(self, points):
        if np.issubdtype(jnp.asarray(points).dtype, np.complexfloating):
            raise NotImplementedError("gaussian_kde does not support complex coordinates")
        points = jnp.atleast_2d(points)
        d, m = points.shape
        if d != self.d:
            if d == 1 and m == self.d:
                points = jnp.reshape(points, (self.d, 1))
            else:
                raise ValueError(f"points have dimension {d}, dataset has dimension {self.d}")
        return points


def _kernel_convolve(L, norm, target, weights, mean):   # target [d, n], mean [d]
    diff = target - mean[:, None]                                           # [d, n]
    arg = 0.5 * jnp.sum(diff * _chol_solve(L, diff), axis=0)               # [n]
    return norm * jnp.sum(jnp.exp(-arg) * weights)


def _kernel_eval(in_log, points, values, xi, precision):
    """Σ_i values_i N(xi; points_i, precision⁻¹): points [n, d], values [n, 1], xi [m, d]."""
    points, values, xi, precision = promote_dtypes_inexact(points, values, xi, precision)
    d = points.shape[1]
    if xi.shape[1] != d:
        raise ValueError("points and xi must have same trailing dim")
    if precision.shape != (d, d):
        raise ValueError("precision matrix must match data dims")
    whitening = jnp.linalg.cholesky(precision)                              # [d, d] lower
    points = jnp.dot(points, whitening)                                     # [n, d]
    xi = jnp.dot(xi, whitening)                                             # [m, d]
    log_norm = jnp.sum(jnp.log(jnp.diag(whitening))) - 0.5 * d * np.log(2 * np.pi)
    sq = jnp.sum(jnp.square(points[None, :, :] - xi[:, None, :]), axis=-1)  # [m, n]
    arg = log_norm - 0.5 * sq                                               # [m, n]
    if in_log:
        return special.logsumexp(jnp.log(values[:, 0])[None, :, None] + arg[:, :, None],
                                 axis=1)                                    # [m, 1]
    return jnp.sum(values[None, :, :] * jnp.exp(arg)[:, :, None], axis=1)   # [m, 1]
