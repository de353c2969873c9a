"""fnad.experimental.ode: `odeint`, as jax.experimental.ode.

Integrates dy/dt = func(y, t, *args) from t[0] with the Dormand–Prince 5(4) Runge–Kutta
pair (seven stages, the last reused as the next step's first: "FSAL") and an adaptive
step, reporting y at every time of `t` by the pair's 4th-order dense-output polynomial.

- A step from (t, y) of size h computes the stages k_i = func(y + h Σ_j β_ij k_j,
  t + α_i h), the 5th-order solution y1 = y + h Σ c_i k_i and the error estimate
  h Σ (c_i - ĉ_i) k_i (ĉ the embedded 4th-order weights). It is accepted when the RMS of
  error / (atol + rtol·max(|y|, |y1|)) is at most 1; either way the next h is the current
  one times clip(0.9·ratio^(-1/5), 0.2 (1 when accepted), 10), at most `hmax`.
- The first step size is Hairer, Nørsett & Wanner's heuristic (order 4).
- Between accepted steps, y at a requested time is a 4th-order polynomial through y, y1,
  the midpoint value from the dense-output weights, and the slopes at both ends.
- Reverse mode is the adjoint method (Chen et al. 2018, appendix C): one odeint backwards
  per interval of an augmented state (y, ȳ, t̄, args̄), with dynamics (-f, -ȳᵀ∂f/∂y,
  -ȳᵀ∂f/∂t, -ȳᵀ∂f/∂args) written with the time reversed, so the integrator only steps
  forwards. The derivative is thus that of the exact flow, to the solver's tolerance.

Everything runs under one jit (func is closure-converted so the values it closes over are
arguments); the state is raveled into one vector (`fnad.flatten_util.ravel_pytree`).
"""
from __future__ import annotations

import operator

import numpy as np

import fnad
import fnad.numpy as jnp
from fnad import lax, tree_util
from fnad.custom import closure_convert, custom_vjp
from fnad.flatten_util import ravel_pytree

__all__ = ["odeint"]

# The Dormand–Prince tableau: nodes α, stage weights β, 5th-order weights c, and c - ĉ.
_ALPHA = [1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0]
_BETA = [[1 / 5],
         [3 / 40, 9 / 40],
         [44 / 45, -56 / 15, 32 / 9],
         [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
         [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
         [35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84]]
_C = [35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0]
_C_ERR = [35 / 384 - 1951 / 21600, 0.0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
          -2187 / 6784 + 12231 / 42400, 11 / 84 - 649 / 6300, -1 / 60]
# Weights of the stages for y at the step's midpoint (the dense output at θ = 1/2).
_C_MID = [6025192743 / 30085553152 / 2, 0.0, 51252292925 / 65400821598 / 2,
          -2691868925 / 45128329728 / 2, 187940372067 / 1594534317056 / 2,
          -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2]


def _stages(f, y0, f0, t0, h):
    """The seven stage slopes [7, n] of the step of size h from (t0, y0), f0 = f(y0, t0)."""
    dtype = f0.dtype
    beta = np.zeros((6, 7))
    for i, row in enumerate(_BETA):
        beta[i, :len(row)] = row
    beta = jnp.asarray(beta, dtype)
    alpha = jnp.asarray(_ALPHA, h.dtype)

    def stage(i, k):
        yi = y0 + h.astype(dtype) * jnp.dot(beta[i - 1], k)
        return k.at[i].set(f(yi, t0 + h * alpha[i - 1]))
    k = jnp.zeros((7, f0.shape[0]), dtype).at[0].set(f0)
    return lax.fori_loop(1, 7, stage, k)


def _quartic(y0, y1, k, h):
    """Coefficients (highest power first) of the dense-output polynomial on [0, 1]."""
    hh = h.astype(y0.dtype)
    y_mid = y0 + hh * jnp.dot(jnp.asarray(_C_MID, y0.dtype), k)
    d0, d1 = hh * k[0], hh * k[-1]
    a = -2 * d0 + 2 * d1 - 8 * y0 - 8 * y1 + 16 * y_mid
    b = 5 * d0 - 3 * d1 + 18 * y0 + 14 * y1 - 32 * y_mid
    c = -4 * d0 + d1 - 11 * y0 - 5 * y1 + 16 * y_mid
    return jnp.stack([a, b, c, d0, y0])


def _first_step(f, t0, y0, f0, rtol, atol, order: int = 4):
    scale = atol + jnp.abs(y0) * rtol
    d0 = jnp.linalg.norm(y0 / scale)
    d1 = jnp.linalg.norm(f0 / scale)
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    f1 = f(y0 + h0.astype(y0.dtype) * f0, t0 + h0)
    d2 = jnp.linalg.norm((f1 - f0) / scale) / h0
    h1 = jnp.where((d1 <= 1e-15) & (d2 <= 1e-15), jnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / jnp.maximum(d1, d2)) ** (1.0 / (order + 1.0)))
    return jnp.minimum(100.0 * h0, h1)


def _error_ratio(err, rtol, atol, y0, y1):
    tol = atol + rtol * jnp.maximum(jnp.abs(y0), jnp.abs(y1))
    r = err / tol.astype(err.dtype)
    sq = jnp.real(r) ** 2 + jnp.imag(r) ** 2 if jnp.iscomplexobj(r) else r * r
    return jnp.sqrt(jnp.mean(sq))


def _next_step(h, ratio, safety=0.9, grow=10.0, shrink=0.2, order=5.0):
    low = jnp.where(ratio < 1, 1.0, shrink)
    factor = jnp.minimum(grow, jnp.maximum(ratio ** (-1.0 / order) * safety, low))
    return jnp.where(ratio == 0, h * grow, h * factor)


def _integrate(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    """ys [len(ts), n] for the raveled state y0 [n]."""
    def f(y, t):
        return func(y, t, *args)

    def to_target(carry, target):
        def more(state):
            i, _, _, t, h, _, _ = state
            return (t < target) & (i < mxstep) & (h > 0)

        def step(state):
            i, y, fy, t, h, last_t, coeff = state
            k = _stages(f, y, fy, t, h)
            hh = h.astype(y.dtype)
            y1 = y + hh * jnp.dot(jnp.asarray(_C, y.dtype), k)
            ratio = _error_ratio(hh * jnp.dot(jnp.asarray(_C_ERR, y.dtype), k), rtol, atol,
                                 y, y1)
            h_next = jnp.clip(_next_step(h, ratio), 0.0, hmax)
            ok = ratio <= 1.0
            pick = (lambda new, old: jnp.where(ok, new, old))
            return (i + 1, pick(y1, y), pick(k[-1], fy), pick(t + h, t), h_next,
                    pick(t, last_t), pick(_quartic(y, y1, k, h), coeff))
        state = lax.while_loop(more, step, (0,) + tuple(carry))
        _, y, fy, t, h, last_t, coeff = state
        theta = (target - last_t) / (t - last_t)
        return (y, fy, t, h, last_t, coeff), jnp.polyval(coeff, theta.astype(coeff.dtype))

    f0 = f(y0, ts[0])
    h0 = jnp.clip(_first_step(f, ts[0], y0, f0, rtol, atol), 0.0, hmax)
    coeff = jnp.stack([y0] * 5)
    _, ys = lax.scan(to_target, (y0, f0, ts[0], h0, ts[0], coeff), ts[1:])
    return jnp.concatenate([y0[None], ys])


_odeint = custom_vjp(_integrate, nondiff_argnums=(0, 1, 2, 3, 4))


def _odeint_fwd(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    ys = _odeint(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _odeint_bwd(func, rtol, atol, mxstep, hmax, res, g):
    ys, ts, args = res

    def augmented(state, minus_t, *args):          # the adjoint system, in reversed time
        y, y_bar = state[0], state[1]
        y_dot, pullback = fnad.vjp(func, y, -minus_t, *args)
        return (-y_dot, *pullback(y_bar))

    def interval(carry, i):
        y_bar, t0_bar, args_bar = carry
        t_bar = jnp.real(jnp.dot(func(ys[i], ts[i], *args), g[i]))
        t0_bar = t0_bar - t_bar
        out = odeint(augmented, (ys[i], y_bar, t0_bar, args_bar),
                     jnp.stack([-ts[i], -ts[i - 1]]), *args, rtol=rtol, atol=atol,
                     mxstep=mxstep, hmax=hmax)
        _, y_bar, t0_bar, args_bar = tree_util.tree_map(operator.itemgetter(1), out)
        return (y_bar + g[i - 1], t0_bar, args_bar), t_bar

    init = (g[-1], jnp.zeros((), ts.dtype), tree_util.tree_map(jnp.zeros_like, args))
    (y_bar, t0_bar, args_bar), rev_t_bars = lax.scan(
        interval, init, jnp.arange(ts.shape[0] - 1, 0, -1))
    ts_bar = jnp.concatenate([t0_bar[None], rev_t_bars[::-1]])
    return (y_bar, ts_bar, *args_bar)


_odeint.defvjp(_odeint_fwd, _odeint_bwd)


def _ravel_first(func, unravel):
    def flat_func(y_flat, t, *args):
        return ravel_pytree(func(unravel(y_flat), t, *args))[0]
    return flat_func


def _wrapper(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    y_flat, unravel = ravel_pytree(y0)
    with fnad.default_matmul_precision("highest"):
        ys = _odeint(_ravel_first(func, unravel), rtol, atol, mxstep, hmax, y_flat, ts,
                     *args)
    return fnad.vmap(unravel)(ys)


_jitted = fnad.jit(_wrapper, static_argnums=(0, 1, 2, 3, 4))


def odeint(func, y0, t, *args, rtol: float = 1.4e-8, atol: float = 1.4e-8,
           mxstep=float("inf"), hmax=float("inf")):
    """y at each time of `t` (strictly increasing floats) for dy/dt = func(y, t, *args),
    y(t[0]) = y0 (a pytree of arrays); shape: y0's with a leading axis of len(t).
    Differentiable (reverse mode, by the adjoint method) in y0, t and args."""
    for leaf in tree_util.tree_leaves(args):
        try:
            jnp.asarray(leaf)
        except TypeError:
            raise TypeError(f"The contents of odeint *args must be arrays or scalars, but "
                            f"got {leaf!r}.") from None
    t = jnp.asarray(t)
    if not jnp.issubdtype(t.dtype, jnp.floating):
        raise TypeError(f"t must be an array of floats, but got {t}.")
    converted, consts = closure_convert(func, y0, t[0], *args)
    return _jitted(converted, rtol, atol, mxstep, hmax, y0, t, *args, *consts)
