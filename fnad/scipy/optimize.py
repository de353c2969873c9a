"""fnad.scipy.optimize: jax.scipy.optimize's `minimize` (methods "BFGS" and
"l-bfgs-experimental-do-not-rely-on-this") and its strong-Wolfe `line_search`.

Composed from fnad.numpy and fnad.lax.while_loop (no new primitives, no host round trips),
so `fnad.jit` compiles a whole minimization and `fnad.vmap` batches it. The iterations are
JAX's, step for step, so results agree with jax.scipy.optimize to rounding:

  line search (Nocedal & Wright, Algorithm 3.5), along p from x, φ(α) = f(x + α p):
    α₁ = min(1, 2.02 (f(x) - f_prev) / φ'(0)) with f_prev the previous iterate's value,
    then α_{i+1} = 2 α_i. Strong Wolfe conditions, c1 = 1e-4, c2 = 0.9:
      W1  φ(α) ≤ φ(0) + c1 α φ'(0)          (sufficient decrease)
      W2  |φ'(α)| ≤ -c2 φ'(0)                (curvature)
    α_i breaks W1 (or φ(α_i) ≥ φ(α_{i-1})): zoom in [α_{i-1}, α_i]; α_i meets W2: done;
    φ'(α_i) ≥ 0: zoom in [α_i, α_{i-1}].
  zoom (Algorithm 3.6): the trial α_j is the minimizer of the cubic through (lo, hi, the
    previous hi) if it lies inside the bracket by 20 % of its width, else of the quadratic
    through (lo, φ'(lo), hi) if inside by 10 %, else the bisection; then shrink the bracket.
    It fails after 30 trials, or once |hi - lo| is at most 1e-5 (32 bits) / 1e-10 (64 bits).
    (JAX tests the signed hi - lo, so its zoom entered with hi < lo, which happens whenever
    the trial step overshoots the minimum along p, stops after one trial and the
    minimization reports failure: BFGS from Rosenbrock's (-1.2, 1) stops at iteration 8 with
    status 3 in JAX and converges in 34 iterations here. Where JAX's zoom does not meet that
    case the iterations are the same.)
  BFGS (Algorithm 6.1): p = -H g; s = α p; y = g₊ - g; ρ = 1 / (yᵀ s);
    H₊ = (I - ρ s yᵀ) H (I - ρ y sᵀ) + ρ s sᵀ  (kept as H where ρ is not finite).
    Stops when ‖g‖_norm < gtol (norm = inf), the line search fails, or after maxiter.
  L-BFGS (Algorithm 7.5): p from the two-loop recursion over the last `maxcor` pairs (s, y)
    with H₀ = γ I, γ = sᵀy / yᵀy; stops as BFGS, or when f decreases by less than ftol,
    or after maxfun / maxgrad evaluations.

`minimize` differs from jax's in the zoom's stopping test above, in its errors (a clear
message for an unknown method, option, or a non-1-D x0), in promoting an integer x0 to the
default float dtype, and in BFGS keeping x0's dtype where f computes in a wider one (JAX's
BFGS raises there).
Status codes (OptimizeResults.status) are JAX's: BFGS 0 converged, 1 maxiter, 3 line search
failed in zoom, 5 line search reached its maxiter, -1 otherwise; L-BFGS 0 converged,
1 maxiter, 2 maxfun, 3 maxgrad, 4 progress below ftol, 5 line search failed.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

import fnad.numpy as jnp
from fnad import dtypes, lax
from fnad.ad import value_and_grad
from fnad.numpy._core import promote_dtypes_inexact

__all__ = ["LineSearchResults", "OptimizeResults", "line_search", "minimize"]


class OptimizeResults(NamedTuple):
    """What `minimize` returns (jax.scipy.optimize.OptimizeResults).

    x: the final point [n]; success: converged and the line search did not fail;
    status: the solver's end code (see the module docstring); fun: f(x); jac: ∇f(x) [n];
    hess_inv: BFGS's inverse Hessian estimate [n, n] (None for L-BFGS); nfev, njev: the
    number of evaluations of f and of ∇f; nit: the number of iterations.
    """
    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any


def _int(v):
    """v as the default integer dtype (int64 with x64, else int32), as JAX's counters."""
    return jnp.asarray(v, dtype=dtypes.canonicalize_dtype(np.int64))


def _pick(cond, new: NamedTuple, old: NamedTuple) -> NamedTuple:
    """Field by field, `new` where `cond` else `old` (for the fields `new` has)."""
    return old._replace(**{k: jnp.where(cond, v, getattr(old, k))
                           for k, v in new._asdict().items()})


# ---- line search ------------------------------------------------------------------------------
class _Point(NamedTuple):
    """A step α along the line with φ(α) and φ'(α)."""
    a: Any
    phi: Any
    dphi: Any


class _Zoom(NamedTuple):
    lo: _Point            # the best step so far meeting W1
    hi: _Point            # the other end of the bracket
    rec_a: Any            # the previous hi (the third point of the cubic)
    rec_phi: Any
    star: _Point          # the accepted step ...
    g_star: Any           # ... and ∇f there
    j: Any                # trials made
    done: Any
    failed: Any


def _cubic_argmin(a, fa, fpa, b, fb, c, fc):
    """The minimizer of the cubic through (a, fa) with slope fpa, (b, fb) and (c, fc)."""
    db, dc = b - a, c - a                                  # p(a + t) = A t³ + B t² + fpa t + fa
    rb, rc = fb - fa - fpa * db, fc - fa - fpa * dc
    denom = (db * dc) ** 2 * (db - dc)
    A = (dc ** 2 * rb - db ** 2 * rc) / denom
    B = (-dc ** 3 * rb + db ** 3 * rc) / denom
    return a + (-B + jnp.sqrt(B * B - 3.0 * A * fpa)) / (3.0 * A)


def _quadratic_argmin(a, fa, fpa, b, fb):
    """The minimizer of the quadratic through (a, fa) with slope fpa and (b, fb)."""
    db = b - a
    curv = (fb - fa - fpa * db) / (db * db)                 # p(a + t) = curv t² + fpa t + fa
    return a - fpa / (2.0 * curv)


def _zoom(phi_dphi_g, breaks_w1, meets_w2, lo: _Point, hi: _Point, g0, skip):
    """Shrink the bracket [lo, hi] to a step meeting both Wolfe conditions (a while_loop,
    run zero times where `skip`). Returns the final _Zoom state."""
    dtype = lo.phi.dtype
    min_width = 1e-5 if dtypes.finfo(lo.a.dtype).bits < 64 else 1e-10
    init = _Zoom(lo=lo, hi=hi, rec_a=(lo.a + hi.a) / 2.0, rec_phi=(lo.phi + hi.phi) / 2.0,
                 star=_Point(jnp.ones_like(lo.a), lo.phi, lo.dphi), g_star=g0,
                 j=_int(0), done=jnp.bool_(False), failed=jnp.bool_(False))

    def trial_step(s: _Zoom):
        width = s.hi.a - s.lo.a               # signed, as JAX, in the interior tests
        left, right = jnp.minimum(s.lo.a, s.hi.a), jnp.maximum(s.lo.a, s.hi.a)
        cubic = _cubic_argmin(s.lo.a, s.lo.phi, s.lo.dphi, s.hi.a, s.hi.phi, s.rec_a,
                              s.rec_phi)
        quad = _quadratic_argmin(s.lo.a, s.lo.phi, s.lo.dphi, s.hi.a, s.hi.phi)
        use_cubic = (s.j > 0) & (cubic > left + 0.2 * width) & (cubic < right - 0.2 * width)
        use_quad = ~use_cubic & (quad > left + 0.1 * width) & (quad < right - 0.1 * width)
        bisect = (s.lo.a + s.hi.a) / 2.0
        a_j = jnp.where(use_cubic, cubic, jnp.where(use_quad, quad, bisect))
        return a_j.astype(s.lo.a.dtype), width

    def body(s: _Zoom) -> _Zoom:
        a_j, width = trial_step(s)
        phi_j, dphi_j, g_j = phi_dphi_g(a_j)
        new = _Point(a_j, phi_j.astype(dtype), dphi_j.astype(s.lo.dphi.dtype))
        too_high = breaks_w1(a_j, new.phi) | (new.phi >= s.lo.phi)   # new hi = trial
        accept = meets_w2(new.dphi) & ~too_high                       # stop at the trial
        flip = ~too_high & ~accept & (new.dphi * (s.hi.a - s.lo.a) >= 0)  # new hi = old lo
        move_lo = ~too_high & ~accept                                 # new lo = trial
        s = s._replace(
            hi=_pick(too_high, new, _pick(flip, s.lo, s.hi)),
            lo=_pick(move_lo, new, s.lo),
            rec_a=jnp.where(too_high | flip, s.hi.a, jnp.where(move_lo, s.lo.a, s.rec_a)),
            rec_phi=jnp.where(too_high | flip, s.hi.phi,
                              jnp.where(move_lo, s.lo.phi, s.rec_phi)),
            star=_pick(accept, new, s.star),
            g_star=jnp.where(accept, g_j.astype(s.g_star.dtype), s.g_star),
            done=s.done | accept, j=s.j + 1)
        return s._replace(failed=s.failed | (jnp.abs(width) <= min_width) | (s.j >= 30))

    return lax.while_loop(lambda s: ~s.done & ~skip & ~s.failed, body, init)


class _Search(NamedTuple):
    prev: _Point          # α_{i-1}, φ, φ'
    star: _Point
    g_star: Any
    i: Any                # the next trial's number, from 1
    nfev: Any
    done: Any
    failed: Any


class LineSearchResults(NamedTuple):
    """What `line_search` returns (JAX's _LineSearchResults).

    failed: no step met the strong Wolfe conditions; nit: iterations; nfev, ngev:
    evaluations of f and ∇f; k: nit + 1; a_k: the step; f_k, g_k: f and ∇f at x + a_k p;
    status: 0 passed, 1 zoom failed, 3 maxiter reached.
    """
    failed: Any
    nit: Any
    nfev: Any
    ngev: Any
    k: Any
    a_k: Any
    f_k: Any
    g_k: Any
    status: Any


def line_search(f: Callable, xk, pk, old_fval=None, old_old_fval=None, gfk=None,
                c1: float = 1e-4, c2: float = 0.9, maxiter: int = 20) -> LineSearchResults:
    """A step α along pk from xk meeting the strong Wolfe conditions (module docstring),
    as JAX's line search (jax._src.scipy.optimize.line_search; jax does not export it).

    f: x [n] -> scalar; xk, pk: [n], pk a descent direction; old_fval, gfk: f(xk) and
    ∇f(xk) when known (else computed: one more evaluation); old_old_fval: f at the previous
    iterate, which sets the first trial step (1 without it).
    """
    xk, pk = promote_dtypes_inexact(jnp.asarray(xk), jnp.asarray(pk))
    real = pk.real.dtype if dtypes.is_complex(pk.dtype) else pk.dtype

    def phi_dphi_g(t):
        phi, g = value_and_grad(f)(xk + jnp.asarray(t, dtype=pk.dtype) * pk)
        return phi, jnp.real(jnp.dot(g, pk)), g

    evaluated = old_fval is None or gfk is None
    if evaluated:
        phi_0, dphi_0, gfk = phi_dphi_g(0.0)
    else:
        phi_0, dphi_0 = jnp.asarray(old_fval), jnp.real(jnp.dot(gfk, pk))
    if old_old_fval is None:
        first = jnp.ones((), real)
    else:
        guess = 1.01 * 2 * (phi_0 - old_old_fval) / dphi_0
        first = jnp.where(guess > 1, 1.0, guess)

    def breaks_w1(a, phi):
        return phi > phi_0 + c1 * a * dphi_0

    def meets_w2(dphi):
        return jnp.abs(dphi) <= -c2 * dphi_0

    zero = jnp.zeros((), first.dtype)                   # steps α have first's dtype, as JAX
    init = _Search(prev=_Point(zero, phi_0, dphi_0), star=_Point(zero, phi_0, dphi_0),
                   g_star=gfk, i=_int(1), nfev=_int(1 if evaluated else 0),
                   done=jnp.bool_(False), failed=jnp.bool_(False))

    def body(s: _Search) -> _Search:
        a_i = jnp.where(s.i == 1, first, s.prev.a * 2.0).astype(zero.dtype)
        phi_i, dphi_i, g_i = phi_dphi_g(a_i)
        cur = _Point(a_i, phi_i, dphi_i)
        zoom_up = breaks_w1(a_i, phi_i) | ((phi_i >= s.prev.phi) & (s.i > 1))
        accept = meets_w2(dphi_i) & ~zoom_up
        zoom_down = (dphi_i >= 0) & ~zoom_up & ~accept
        zoomed = zoom_up | zoom_down                # one bracket: [prev, cur] or [cur, prev]
        z = _zoom(phi_dphi_g, breaks_w1, meets_w2, _pick(zoom_up, s.prev, cur),
                  _pick(zoom_up, cur, s.prev), gfk, ~zoomed)
        star = _pick(accept, cur, _pick(zoomed, z.star, s.star))
        return _Search(prev=cur, star=star,
                       g_star=jnp.where(accept, g_i, jnp.where(zoomed, z.g_star, s.g_star)),
                       i=s.i + 1, nfev=s.nfev + 1 + z.j, done=s.done | accept | zoomed,
                       failed=s.failed | (zoomed & z.failed))

    s = lax.while_loop(lambda s: ~s.done & (s.i <= maxiter) & ~s.failed, body, init)
    status = _int(jnp.where(s.failed, 1, jnp.where(s.i > maxiter, 3, 0)))
    a_k = s.star.a
    if dtypes.finfo(a_k.dtype).bits != 64:   # as JAX: a floor keeps 32-bit steps from stalling
        a_k = jnp.where(jnp.abs(a_k) < 1e-8, jnp.sign(a_k) * 1e-8, a_k)
    return LineSearchResults(failed=s.failed | ~s.done, nit=s.i - 1, nfev=s.nfev,
                             ngev=s.nfev, k=s.i, a_k=a_k, f_k=s.star.phi, g_k=s.g_star,
                             status=status)


# ---- BFGS -------------------------------------------------------------------------------------
class _BFGS(NamedTuple):
    x: Any
    f: Any
    g: Any
    H: Any                # the inverse Hessian estimate [n, n]
    f_prev: Any           # f at the previous iterate (the line search's first step)
    k: Any
    nfev: Any
    converged: Any
    failed: Any
    ls_status: Any


def _bfgs(fun, x0, maxiter=None, norm=np.inf, gtol=1e-5, line_search_maxiter=10):
    n = x0.shape[0]
    maxiter = 200 * n if maxiter is None else maxiter
    f0, g0 = value_and_grad(fun)(x0)
    init = _BFGS(x=x0, f=f0, g=g0, H=jnp.eye(n, dtype=x0.dtype),
                 f_prev=f0 + jnp.linalg.norm(g0) / 2, k=_int(0), nfev=_int(1),
                 converged=jnp.linalg.norm(g0, ord=norm) < gtol, failed=jnp.bool_(False),
                 ls_status=_int(0))

    def body(s: _BFGS) -> _BFGS:
        p = -jnp.dot(s.H, s.g)                                       # [n]
        ls = line_search(fun, s.x, p, old_fval=s.f, old_old_fval=s.f_prev, gfk=s.g,
                         maxiter=line_search_maxiter)
        step = ls.a_k * p                                            # s_k [n]
        dg = ls.g_k - s.g                                            # y_k [n]
        rho = jnp.reciprocal(jnp.dot(dg, step))
        eye = jnp.eye(n, dtype=rho.dtype)
        w = eye - rho * jnp.outer(step, dg)                          # I - ρ s yᵀ  [n, n]
        H = jnp.dot(jnp.dot(w, s.H), w.T) + rho * jnp.outer(step, step)
        H = jnp.where(jnp.isfinite(rho), H, s.H).astype(s.H.dtype)
        return _BFGS(x=(s.x + step).astype(s.x.dtype), f=ls.f_k.astype(s.f.dtype),
                     g=ls.g_k.astype(s.g.dtype), H=H, f_prev=s.f, k=s.k + 1,
                     nfev=s.nfev + ls.nfev,
                     converged=jnp.linalg.norm(ls.g_k, ord=norm) < gtol, failed=ls.failed,
                     ls_status=ls.status)

    s = lax.while_loop(lambda s: ~s.converged & ~s.failed & (s.k < maxiter), body, init)
    status = jnp.where(s.converged, 0, jnp.where(s.k == maxiter, 1,
                                                 jnp.where(s.failed, 2 + s.ls_status, -1)))
    return OptimizeResults(x=s.x, success=s.converged & ~s.failed, status=status, fun=s.f,
                           jac=s.g, hess_inv=s.H, nfev=s.nfev, njev=s.nfev, nit=s.k)


# ---- L-BFGS -----------------------------------------------------------------------------------
class _LBFGS(NamedTuple):
    x: Any
    f: Any
    g: Any
    S: Any                # the last maxcor steps s, oldest first [m, n]
    Y: Any                # their gradient changes y [m, n]
    rho: Any              # 1 / (yᵀ s) [m]
    gamma: Any            # H₀ = γ I
    k: Any
    nfev: Any
    converged: Any
    failed: Any
    status: Any


def _two_loop(s: _LBFGS):
    """-H g by the two-loop recursion over the stored pairs (the last min(k, m))."""
    m = s.rho.shape[0]
    used = jnp.minimum(s.k, m)

    def newest_first(j, carry):
        q, alpha = carry
        i = m - 1 - j
        a_i = s.rho[i] * jnp.real(jnp.dot(jnp.conj(s.S[i]), q)).astype(s.rho.dtype)
        return q - a_i * jnp.conj(s.Y[i]), alpha.at[i].set(a_i)

    q, alpha = lax.fori_loop(0, used, newest_first, (-jnp.conj(s.g), jnp.zeros_like(s.rho)))

    def oldest_first(j, r):
        i = m - used + j
        b_i = s.rho[i] * jnp.real(jnp.dot(s.Y[i], r)).astype(s.rho.dtype)
        return r + (alpha[i] - b_i) * s.S[i]

    return lax.fori_loop(0, used, oldest_first, s.gamma * q)


def _push(history, new):
    """history [m, ...] with its oldest entry dropped and `new` appended."""
    return jnp.roll(history, -1, axis=0).at[-1].set(new)


def _lbfgs(fun, x0, maxiter=None, norm=np.inf, maxcor=10, ftol=2.220446049250313e-09,
           gtol=1e-05, maxfun=None, maxgrad=None, maxls=20):
    n, dtype = x0.shape[0], x0.dtype
    if maxiter is None and maxfun is None and maxgrad is None:
        maxiter = 200 * n
    maxiter, maxfun, maxgrad = (np.inf if v is None else v for v in (maxiter, maxfun, maxgrad))
    f0, g0 = value_and_grad(fun)(x0)
    init = _LBFGS(x=x0, f=f0, g=g0, S=jnp.zeros((maxcor, n), dtype),
                  Y=jnp.zeros((maxcor, n), dtype), rho=jnp.zeros((maxcor,), dtype),
                  gamma=jnp.ones((), dtype), k=_int(0), nfev=_int(1),
                  converged=jnp.bool_(False), failed=jnp.bool_(False), status=_int(0))

    def body(s: _LBFGS) -> _LBFGS:
        p = _two_loop(s)                                             # [n]
        ls = line_search(fun, s.x, p, old_fval=s.f, gfk=s.g, maxiter=maxls)
        step = jnp.asarray(ls.a_k).astype(p.dtype) * p               # s_k [n]
        dg = ls.g_k - s.g                                            # y_k [n]
        sy = jnp.real(jnp.dot(dg, step))
        status = _int(jnp.where(ls.failed, 5, jnp.where(
            s.k >= maxiter, 1, jnp.where(s.nfev >= maxfun, 2, jnp.where(
                s.nfev >= maxgrad, 3, jnp.where(s.f - ls.f_k < ftol, 4, 0))))))
        converged = jnp.linalg.norm(ls.g_k, ord=norm) < gtol
        return _LBFGS(x=(s.x + step).astype(s.x.dtype), f=ls.f_k.astype(s.f.dtype),
                      g=ls.g_k.astype(s.g.dtype), S=_push(s.S, step), Y=_push(s.Y, dg),
                      rho=_push(s.rho, jnp.reciprocal(sy).astype(dg.dtype)),
                      gamma=(sy / jnp.real(jnp.dot(jnp.conj(dg), dg))).astype(s.g.dtype),
                      k=s.k + 1, nfev=s.nfev + ls.nfev, converged=converged,
                      failed=(status > 0) & ~converged,
                      status=jnp.where(converged, 0, status))

    s = lax.while_loop(lambda s: ~s.converged & ~s.failed, body, init)
    return OptimizeResults(x=s.x, success=s.converged & ~s.failed, status=s.status, fun=s.f,
                           jac=s.g, hess_inv=None, nfev=s.nfev, njev=s.nfev, nit=s.k)


# ---- minimize ---------------------------------------------------------------------------------
_METHODS = {"bfgs": (_bfgs, ("maxiter", "norm", "gtol", "line_search_maxiter")),
            "l-bfgs-experimental-do-not-rely-on-this":
                (_lbfgs, ("maxiter", "norm", "maxcor", "ftol", "gtol", "maxfun", "maxgrad",
                          "maxls"))}


def minimize(fun: Callable, x0, args: tuple = (), *, method: str, tol: float | None = None,
             options: Mapping[str, Any] | None = None) -> OptimizeResults:
    """The minimizer of the scalar function fun(x, *args) from the start x0 [n], as
    jax.scipy.optimize.minimize; gradients by fnad.value_and_grad.

    method: "BFGS" or "l-bfgs-experimental-do-not-rely-on-this" (any case). options (as
    JAX): BFGS maxiter (200 n), norm (inf), gtol (1e-5), line_search_maxiter (10);
    L-BFGS maxiter, norm, maxcor (10), ftol (2.2e-9), gtol, maxfun, maxgrad, maxls (20).
    tol is accepted and unused, as in JAX (set gtol in options). Works under fnad.jit (the
    iterations are while_loops); returns OptimizeResults.
    """
    if not isinstance(args, tuple):
        raise TypeError(f"minimize: args must be a tuple, got {type(args).__name__}")
    if not isinstance(method, str) or method.lower() not in _METHODS:
        raise ValueError(f"minimize: method {method!r} is not supported; fnad (as JAX) has "
                         "'BFGS' and 'l-bfgs-experimental-do-not-rely-on-this'")
    solver, allowed = _METHODS[method.lower()]
    options = dict(options or {})
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise TypeError(f"minimize: unknown option(s) {unknown} for method {method!r}; it "
                        f"takes {list(allowed)}")
    x0 = jnp.asarray(x0)
    if x0.ndim != 1:
        raise ValueError(f"minimize: x0 must be 1-D (shape (n,)), got shape {x0.shape}")
    if not dtypes.is_inexact(x0.dtype):
        x0 = x0.astype(dtypes.canonicalize_dtype(np.float64))
    return solver(lambda x: fun(x, *args), x0, **options)
