"""fnad.scipy.linalg against jax.scipy.linalg (and scipy.linalg where JAX lacks a feature).

Values in float32/complex64 (eager and under jit on the test backend), gradients in
float64/complex128 against jax.grad (first order; second order for expm), vmap against a
Python loop, batch dimensions, and every error a user can hit (type and message).
"""
import warnings

import numpy as np
import pytest
import scipy.linalg as sl

import fnad
import fnad.scipy.linalg as L
from checks import rand, spd, traced, well_conditioned

try:
    import jax
    import jax.numpy as jjnp
    import jax.scipy.linalg as jsl
except ImportError:  # pragma: no cover
    jax = jjnp = jsl = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed")


def upper(shape, dtype=np.float32, seed=0):
    return np.triu(rand(shape, dtype, seed) + 2 * np.eye(shape[-1])).astype(dtype)


def _wide(x):
    x = np.asarray(x)
    if x.dtype.kind in "iub":
        return x
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def lu_args(shape, dtype, seed=0):
    lu_, piv = sl.lu_factor(well_conditioned(shape, np.complex128 if np.dtype(dtype).kind == "c"
                                 else np.float64, seed))
    return lu_.astype(dtype), piv.astype(np.int32)


# name -> (fnad fun, jax fun (called with jsl), argument makers, differentiable arg indices)
def case(f, jf, makers, diff=None):
    return f, jf, makers, tuple(range(len(makers))) if diff is None else diff


A4, B42 = (lambda d: well_conditioned((4, 4), d)), (lambda d: rand((4, 2), d, 5))
CASES = {
    "solve": case(L.solve, lambda: jsl.solve, [A4, B42]),
    "solve-vector": case(L.solve, lambda: jsl.solve, [A4, lambda d: rand((4,), d, 5)]),
    "solve-sym": case(lambda a, b: L.solve(a, b, assume_a="sym"),
                      lambda: lambda a, b: jsl.solve(a, b, assume_a="sym"),
                      [lambda d: spd((4, 4), d), B42]),
    "solve-pos": case(lambda a, b: L.solve(a, b, assume_a="pos"),
                      lambda: lambda a, b: jsl.solve(a, b, assume_a="pos"),
                      [lambda d: spd((4, 4), d), B42]),
    "solve-pos-lower-batched": case(
        lambda a, b: L.solve(a, b, assume_a="pos", lower=True),
        lambda: lambda a, b: jsl.solve(a, b, assume_a="pos", lower=True),
        [lambda d: spd((2, 4, 4), d), lambda d: rand((2, 4, 3), d, 5)]),
    "solve-pos-vector": case(lambda a, b: L.solve(a, b, assume_a="pos"),
                             lambda: lambda a, b: jsl.solve(a, b, assume_a="pos"),
                             [lambda d: spd((4, 4), d), lambda d: rand((4,), d, 5)]),
    "cholesky": case(L.cholesky, lambda: jsl.cholesky, [lambda d: spd((4, 4), d)]),
    "cholesky-lower-batched": case(lambda a: L.cholesky(a, lower=True),
                                   lambda: lambda a: jsl.cholesky(a, lower=True),
                                   [lambda d: spd((2, 3, 3), d)]),
    "cho_factor": case(lambda a: L.cho_factor(a)[0], lambda: lambda a: jsl.cho_factor(a)[0],
                       [lambda d: spd((4, 4), d)]),
    "cho_solve-upper": case(lambda a, b: L.cho_solve(L.cho_factor(a), b),
                            lambda: lambda a, b: jsl.cho_solve(jsl.cho_factor(a), b),
                            [lambda d: spd((4, 4), d), B42]),
    "cho_solve-lower-batched": case(
        lambda a, b: L.cho_solve(L.cho_factor(a, lower=True), b),
        lambda: lambda a, b: jsl.cho_solve(jsl.cho_factor(a, lower=True), b),
        [lambda d: spd((2, 4, 4), d), lambda d: rand((4, 3), d, 5)]),
    "cho_solve-vector": case(lambda a, b: L.cho_solve((a, True), b),
                             lambda: lambda a, b: jsl.cho_solve((a, True), b),
                             [lambda d: np.linalg.cholesky(spd((4, 4), d)),
                              lambda d: rand((4,), d, 5)]),
    "det": case(L.det, lambda: jsl.det, [lambda d: well_conditioned((5, 5), d)]),
    "det-batched": case(L.det, lambda: jsl.det, [lambda d: well_conditioned((2, 3, 3), d)]),
    "inv": case(L.inv, lambda: jsl.inv, [A4]),
    "lu": case(L.lu, lambda: jsl.lu, [A4]),
    "lu-wide": case(L.lu, lambda: jsl.lu, [lambda d: rand((3, 5), d)]),
    "lu-tall-permute_l": case(lambda a: L.lu(a, permute_l=True),
                              lambda: lambda a: jsl.lu(a, permute_l=True),
                              [lambda d: rand((5, 3), d)]),
    "lu_factor": case(L.lu_factor, lambda: jsl.lu_factor, [A4]),
    "lu_factor-batched": case(L.lu_factor, lambda: jsl.lu_factor,
                              [lambda d: well_conditioned((2, 4, 4), d)]),
    "eigh": case(L.eigh, lambda: jsl.eigh, [lambda d: spd((4, 4), d)]),
    "eigh-eigvals_only-upper": case(lambda a: L.eigh(a, lower=False, eigvals_only=True),
                                    lambda: lambda a: jsl.eigh(a, lower=False,
                                                               eigvals_only=True),
                                    [lambda d: spd((2, 4, 4), d)]),
    "svd": case(L.svd, lambda: jsl.svd, [lambda d: rand((4, 3), d)],
                diff=()),                      # no derivative of full U (4 x 3), as jax
    "svd-square": case(L.svd, lambda: jsl.svd, [lambda d: rand((3, 3), d)]),
    "svd-thin-batched": case(lambda a: L.svd(a, full_matrices=False),
                             lambda: lambda a: jsl.svd(a, full_matrices=False),
                             [lambda d: rand((2, 3, 4), d)]),
    "svd-values": case(lambda a: L.svd(a, compute_uv=False),
                       lambda: lambda a: jsl.svd(a, compute_uv=False),
                       [lambda d: rand((3, 4), d)]),
    "qr-full": case(L.qr, lambda: jsl.qr, [lambda d: rand((4, 3), d)]),
    "qr-economic-batched": case(lambda a: L.qr(a, mode="economic"),
                                lambda: lambda a: jsl.qr(a, mode="economic"),
                                [lambda d: rand((2, 5, 3), d)]),
    "qr-r": case(lambda a: L.qr(a, mode="r"), lambda: lambda a: jsl.qr(a, mode="r"),
                 [lambda d: rand((3, 4), d)]),
    "qr-pivoting": case(lambda a: L.qr(a, mode="economic", pivoting=True),
                        lambda: lambda a: jsl.qr(a, mode="economic", pivoting=True),
                        [lambda d: rand((5, 4), d)]),
    "qr-r-pivoting": case(lambda a: L.qr(a, mode="r", pivoting=True),
                          lambda: lambda a: jsl.qr(a, mode="r", pivoting=True),
                          [lambda d: rand((3, 4), d)], diff=()),
    "expm-small": case(L.expm, lambda: jsl.expm, [lambda d: 0.01 * rand((4, 4), d)]),
    "expm-mid": case(L.expm, lambda: jsl.expm, [lambda d: 0.5 * rand((4, 4), d)]),
    "expm-one": case(L.expm, lambda: jsl.expm, [lambda d: 1.2 * rand((4, 4), d)]),
    "expm-two": case(L.expm, lambda: jsl.expm, [lambda d: 2.0 * rand((3, 3), d)]),
    "expm-scaled": case(L.expm, lambda: jsl.expm, [lambda d: 4.0 * rand((4, 4), d)]),
    "expm-batched": case(L.expm, lambda: jsl.expm, [lambda d: rand((2, 3, 3), d)]),
    "expm-upper": case(lambda a: L.expm(a, upper_triangular=True),
                       lambda: lambda a: jsl.expm(a, upper_triangular=True),
                       [lambda d: upper((4, 4), d)]),
    "expm_frechet": case(L.expm_frechet, lambda: jsl.expm_frechet,
                         [lambda d: rand((3, 3), d), lambda d: rand((3, 3), d, 3)]),
    "expm_frechet-only": case(lambda a, e: L.expm_frechet(a, e, compute_expm=False),
                              lambda: lambda a, e: jsl.expm_frechet(a, e, compute_expm=False),
                              [lambda d: 3 * rand((3, 3), d), lambda d: rand((3, 3), d, 3)]),
    "hessenberg": case(L.hessenberg, lambda: jsl.hessenberg, [lambda d: rand((5, 5), d)],
                       diff=()),                # jax's has no derivative
    "hessenberg-q-batched": case(lambda a: L.hessenberg(a, calc_q=True),
                                 lambda: lambda a: jsl.hessenberg(a, calc_q=True),
                                 [lambda d: rand((2, 4, 4), d)], diff=()),
    "hessenberg-q-2x2": case(lambda a: L.hessenberg(a, calc_q=True),
                             lambda: lambda a: jsl.hessenberg(a, calc_q=True),
                             [lambda d: rand((2, 2), d)], diff=()),
    "block_diag": case(L.block_diag, lambda: jsl.block_diag,
                       [lambda d: rand((2, 2), d), lambda d: rand((3,), d, 1),
                        lambda d: rand((1, 2), d, 2)]),
    "polar-svd-right": case(lambda a: L.polar(a, method="svd"),
                            lambda: lambda a: jsl.polar(a, method="svd"),
                            [lambda d: rand((4, 3), d)]),
    "polar-svd-left-batched": case(lambda a: L.polar(a, "left", method="svd"),
                                   lambda: lambda a: jsl.polar(a, "left", method="svd"),
                                   [lambda d: rand((2, 3, 4), d)]),
    "polar-qdwh": case(L.polar, lambda: jsl.polar, [lambda d: rand((4, 3), d)],
                       diff=()),                # jax's while_loop has no reverse mode
    "toeplitz": case(L.toeplitz, lambda: jsl.toeplitz,
                     [lambda d: rand((4,), d), lambda d: rand((3,), d, 1)]),
    "toeplitz-c-only": case(L.toeplitz, lambda: jsl.toeplitz, [lambda d: rand((4,), d)]),
    "toeplitz-batched": case(L.toeplitz, lambda: jsl.toeplitz,
                             [lambda d: rand((2, 4), d), lambda d: rand((3,), d, 1)]),
    "hankel": case(L.hankel, lambda: jsl.hankel,
                   [lambda d: rand((4,), d), lambda d: rand((3,), d, 1)]),
    "hankel-c-only-batched": case(L.hankel, lambda: jsl.hankel, [lambda d: rand((2, 3), d)]),
    "circulant": case(L.circulant, lambda: jsl.circulant, [lambda d: rand((2, 4), d)]),
    "companion": case(L.companion, lambda: jsl.companion, [lambda d: rand((5,), d) + 2]),
    "fiedler": case(L.fiedler, lambda: jsl.fiedler, [lambda d: rand((2, 4), d).real]),
    "leslie": case(L.leslie, lambda: jsl.leslie,
                   [lambda d: rand((4,), d), lambda d: rand((3,), d, 1)]),
}
for _mode in ("full", "same", "valid"):
    for _n in (2, 6):
        CASES[f"convolution_matrix-{_mode}-{_n}"] = case(
            lambda a, _m=_mode, _k=_n: L.convolution_matrix(a, _k, _m),
            lambda _m=_mode, _k=_n: lambda a: jsl.convolution_matrix(a, _k, _m),
            [lambda d: rand((4,), d)])
for _k in range(1, 7):
    CASES[f"fiedler_companion-{_k}"] = case(L.fiedler_companion, lambda: jsl.fiedler_companion,
                                            [lambda d, _k=_k: rand((_k,), d) + 2])
for _t in (0, 1, 2, "N", "T", "C"):
    for _lo in (False, True):
        CASES[f"solve_triangular-{_t}-{'lower' if _lo else 'upper'}"] = case(
            lambda a, b, _t=_t, _lo=_lo: L.solve_triangular(a, b, trans=_t, lower=_lo),
            lambda _t=_t, _lo=_lo: lambda a, b: jsl.solve_triangular(a, b, trans=_t,
                                                                     lower=_lo),
            [A4, B42])
CASES["solve_triangular-unit-batched"] = case(
    lambda a, b: L.solve_triangular(a, b, lower=True, unit_diagonal=True),
    lambda: lambda a, b: jsl.solve_triangular(a, b, lower=True, unit_diagonal=True),
    [lambda d: well_conditioned((2, 4, 4), d), lambda d: rand((2, 4, 3), d, 5)])
CASES["solve_triangular-vector"] = case(
    lambda a, b: L.solve_triangular(a, b, trans="C"),
    lambda: lambda a, b: jsl.solve_triangular(a, b, trans="C"),
    [A4, lambda d: rand((4,), d, 5)])
for _t in (0, 1, 2):
    CASES[f"lu_solve-{_t}"] = case(
        lambda lu_, piv, b, _t=_t: L.lu_solve((lu_, piv), b, trans=_t),
        lambda _t=_t: lambda lu_, piv, b: jsl.lu_solve((lu_, piv), b, trans=_t),
        [lambda d: lu_args((4, 4), d)[0], lambda d: lu_args((4, 4), d)[1], B42], diff=(0, 2))
CASES["lu_solve-vector"] = case(
    lambda lu_, piv, b: L.lu_solve((lu_, piv), b),
    lambda: lambda lu_, piv, b: jsl.lu_solve((lu_, piv), b),
    [lambda d: lu_args((4, 4), d)[0], lambda d: lu_args((4, 4), d)[1],
     lambda d: rand((4,), d, 5)], diff=(0, 2))
for _mode in ("left", "right"):
    for _conj in (False, True):
        CASES[f"qr_multiply-{_mode}-{'conj' if _conj else 'plain'}"] = case(
            lambda a, c, _m=_mode, _c=_conj: L.qr_multiply(a, c, _m, conjugate=_c),
            lambda _m=_mode, _c=_conj: lambda a, c: jsl.qr_multiply(a, c, _m, conjugate=_c),
            [lambda d: rand((5, 3), d),
             (lambda d: rand((3, 2), d, 4)) if _mode == "left" else
             (lambda d: rand((2, 5), d, 4))], diff=())
CASES["qr_multiply-vector-pivoting"] = case(
    lambda a, c: L.qr_multiply(a, c, pivoting=True),
    lambda: lambda a, c: jsl.qr_multiply(a, c, pivoting=True),
    [lambda d: rand((4, 5), d), lambda d: rand((4,), d, 4)], diff=())

DTYPES = [np.float32, np.complex64]
REAL_ONLY = {"fiedler"}


def _check_close(ours, theirs, rtol, atol):
    ours, theirs = jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        o, t = np.asarray(o), np.asarray(t)
        assert o.dtype == t.dtype and o.shape == t.shape, (o.dtype, t.dtype, o.shape, t.shape)
        np.testing.assert_allclose(o, t, rtol=rtol, atol=atol)


# eager in float32 and complex64 for every case; under jit (traced) for every third case
VALUE_RUNS = [(n, False, 0) for n in CASES] + [(n, False, 1) for n in CASES] + \
    [(n, True, 0) for n in list(CASES)[::3]]


@needs_jax
@pytest.mark.parametrize("name,jit,which", VALUE_RUNS,
                         ids=[f"{n}-{'jit' if j else 'eager'}-{w}" for n, j, w in VALUE_RUNS])
def test_value_matches_jax(name, jit, which):
    dtype = DTYPES[which]
    f, jf, makers, _ = CASES[name]
    args = [m(dtype) for m in makers]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = (traced(f) if jit else f)(*args)
    theirs = jax.jit(jf())(*args)                  # one compile, not one per op
    scale = max(1.0, max(np.abs(np.asarray(t)).max(initial=0)
                         for t in jax.tree_util.tree_leaves(theirs)))
    _check_close(ours, theirs, 2e-4, 2e-5 * scale)


GRAD_CASES = [n for n in CASES if CASES[n][3]]


# float64 for every case; complex128 for every other one (the constructors of special
# matrices only move entries: their complex gradients add nothing to the real ones)
GRAD_RUNS = [(n, 0) for n in GRAD_CASES] + [(n, 1) for n in GRAD_CASES[::2]]


@needs_jax
@pytest.mark.parametrize("name,which", GRAD_RUNS,
                         ids=[f"{n}-{'complex128' if w else 'float64'}" for n, w in GRAD_RUNS])
def test_gradient_matches_jax(name, which, x64):
    dtype = DTYPES[which]
    f, jf, makers, diff = CASES[name]
    args = [_wide(m(dtype)) for m in makers]
    rng = np.random.default_rng(7)
    outs = jax.tree_util.tree_leaves(f(*args))
    weights = [rng.standard_normal(np.shape(o)) for o in outs]

    def scalar(fun, xp):
        def s(*xs):
            leaves = jax.tree_util.tree_leaves(fun(*xs))
            return sum(xp.sum(xp.real(o) * w) + xp.sum(xp.imag(o) * w)
                       for o, w in zip(leaves, weights) if o.dtype.kind in "fc")
        return s
    import fnad.numpy as fjnp
    ours = fnad.grad(scalar(f, fjnp), argnums=diff)(*args)
    theirs = jax.jit(jax.grad(scalar(jf(), jjnp), argnums=diff))(   # one compile, not one
        *[jjnp.asarray(a) for a in args])                            # per op
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-7, atol=1e-9)


# ---- expm: every Padé degree, squarings, second derivatives --------------------------------
@needs_jax
@pytest.mark.parametrize("scale", [1e-3, 0.1, 0.4, 1.5, 3.0, 20.0])
def test_expm_every_pade_branch_and_its_gradients_match_jax_x64(scale, x64):
    a = scale * rand((4, 4), np.float64, 3) / 2     # ‖A‖₁ spans the 64-bit thresholds
    np.testing.assert_allclose(L.expm(a), jsl.expm(a), rtol=1e-12)
    np.testing.assert_allclose(L.expm(a), sl.expm(a), rtol=1e-11, atol=1e-13)
    w = rand((4, 4), np.float64, 9)

    def loss(xp, expm):
        return lambda x: xp.sum(xp.sin(expm(x)) * w)
    import fnad.numpy as fjnp
    np.testing.assert_allclose(fnad.grad(loss(fjnp, L.expm))(a),
                               jax.grad(loss(jjnp, jsl.expm))(a), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fnad.hessian(loss(fjnp, L.expm))(a),
                               jax.hessian(loss(jjnp, jsl.expm))(a), rtol=1e-8, atol=1e-10)


@needs_jax
@pytest.mark.parametrize("scale", [0.2, 1.0, 6.0])
def test_expm_float32_branches_and_gradient(scale):
    a = scale * rand((3, 3), np.float32, 4)
    np.testing.assert_allclose(L.expm(a), jsl.expm(a), rtol=2e-5, atol=2e-6)
    g = fnad.grad(lambda x: L.expm(x).sum())(a)
    np.testing.assert_allclose(g, jax.grad(lambda x: jsl.expm(x).sum())(a), rtol=1e-4,
                               atol=1e-5)


def test_expm_frechet_matches_scipy_and_is_expms_jvp(x64):
    a, e = rand((4, 4), np.float64, 1), rand((4, 4), np.float64, 2)
    expm_a, frechet = L.expm_frechet(a, e)
    ref_expm, ref_frechet = sl.expm_frechet(a, e)
    np.testing.assert_allclose(expm_a, ref_expm, rtol=1e-12)
    np.testing.assert_allclose(frechet, ref_frechet, rtol=1e-10)
    _, t = fnad.jvp(L.expm, (a,), (e,))
    np.testing.assert_allclose(t, frechet, rtol=1e-14)


def test_expm_beyond_max_squarings_is_nan():
    a = 40 * np.eye(2, dtype=np.float32)        # 3 squarings needed
    assert np.isnan(np.asarray(L.expm(a, max_squarings=2))).all()
    assert np.isfinite(np.asarray(L.expm(a))).all()


# ---- vmap ------------------------------------------------------------------------------
VMAP_CASES = {
    "solve-pos": (lambda a, b: L.solve(a, b, assume_a="pos"), [spd((3, 4, 4)), rand((3, 4))]),
    "solve_triangular": (lambda a, b: L.solve_triangular(a, b, trans=1),
                         [well_conditioned((3, 4, 4)), rand((3, 4, 2))]),
    "cho_solve": (lambda a, b: L.cho_solve(L.cho_factor(a), b), [spd((3, 4, 4)), rand((3, 4))]),
    "lu": (L.lu, [well_conditioned((3, 4, 4))]),
    "lu_solve": (lambda lu_, piv, b: L.lu_solve((lu_, piv), b, trans=2),
                 [np.stack([lu_args((4, 4), np.float32, s)[0] for s in range(3)]),
                  np.stack([lu_args((4, 4), np.float32, s)[1] for s in range(3)]),
                  rand((3, 4, 2))]),
    "expm": (L.expm, [np.stack([s * rand((3, 3), np.float32, i)
                                for i, s in enumerate((0.1, 1, 5))])]),
    "eigh-generalized": (lambda a, b: L.eigh(a, b), [spd((3, 4, 4)), spd((3, 4, 4), seed=2)]),
    "toeplitz": (L.toeplitz, [rand((3, 4)), rand((3, 5))]),
    "polar": (lambda a: L.polar(a, method="svd"), [rand((3, 4, 2))]),
    "qr_multiply": (lambda a, c: L.qr_multiply(a, c, "left"), [rand((3, 4, 3)), rand((3, 3))]),
}


@pytest.mark.parametrize("name", list(VMAP_CASES))
def test_vmap_matches_a_loop(name):
    f, args = VMAP_CASES[name]
    ours = fnad.vmap(f)(*args)
    loop = [f(*(x[i] for x in args)) for i in range(args[0].shape[0])]
    ours_l = fnad.tree_util.tree_leaves(ours)
    for k, o in enumerate(ours_l):
        ref = np.stack([np.asarray(fnad.tree_util.tree_leaves(r)[k]) for r in loop])
        np.testing.assert_allclose(np.asarray(o), ref, rtol=1e-4, atol=1e-5)


# ---- generalized eigh (not in JAX) -------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("type_", [1, 2, 3])
@pytest.mark.parametrize("lower", [True, False])
def test_generalized_eigh_matches_scipy(type_, dtype, lower, x64):
    a, b = spd((4, 4), dtype, 1) - 3 * np.eye(4), spd((4, 4), dtype, 2)
    w, v = L.eigh(a, b, lower=lower, type=type_)
    rw, rv = sl.eigh(a, b, lower=lower, type=type_)
    np.testing.assert_allclose(w, rw, rtol=1e-10)
    v = np.asarray(v)
    phase = np.sum(np.conj(v) * rv, axis=0)                      # vectors up to a phase
    np.testing.assert_allclose(np.abs(phase), np.abs(np.sum(np.conj(rv) * rv, axis=0)),
                               rtol=1e-8)
    # residual and SciPy's normalization
    lhs = {1: a @ v, 2: a @ b @ v, 3: b @ a @ v}[type_]
    rhs = (b @ v if type_ == 1 else v) * w
    np.testing.assert_allclose(lhs, rhs, atol=1e-9)
    norm = np.conj(v.T) @ (np.linalg.inv(b) if type_ == 3 else b) @ v
    np.testing.assert_allclose(norm, np.eye(4), atol=1e-10)
    np.testing.assert_allclose(L.eigh(a, b, type=type_, eigvals_only=True), rw, rtol=1e-10)


def test_eigh_eigvals_subset_matches_scipy(x64):
    a = spd((5, 5), np.float64)
    w, v = L.eigh(a, eigvals=(1, 3))
    rw, rv = sl.eigh(a, subset_by_index=(1, 3))
    np.testing.assert_allclose(w, rw, rtol=1e-12)
    np.testing.assert_allclose(np.abs(v), np.abs(rv), rtol=1e-8)


def test_generalized_eigh_gradient_matches_finite_differences(x64):
    a, b = spd((3, 3), np.float64, 1), spd((3, 3), np.float64, 2)
    da, db = rand((3, 3), np.float64, 3), rand((3, 3), np.float64, 4)
    da, db = da + da.T, db + db.T

    def f(a, b):
        return L.eigh(a, b, eigvals_only=True)
    _, t = fnad.jvp(f, (a, b), (da, db))
    h = 1e-6
    fd = (np.asarray(f(a + h * da, b + h * db)) - np.asarray(f(a - h * da, b - h * db))) / (2 * h)
    np.testing.assert_allclose(t, fd, rtol=1e-6, atol=1e-8)


# ---- eigh_tridiagonal, qr raw (SciPy), the static special matrices -------------------------
@needs_jax
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eigh_tridiagonal_matches_jax_and_scipy(dtype, x64):
    d, e = rand((6,), dtype, 1), rand((5,), dtype, 2)
    w = L.eigh_tridiagonal(d, e, eigvals_only=True)
    np.testing.assert_allclose(w, jsl.eigh_tridiagonal(d, e, eigvals_only=True),
                               rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-6)
    w, v = L.eigh_tridiagonal(d, e)
    rw, rv = sl.eigh_tridiagonal(d, e)
    np.testing.assert_allclose(w, rw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.abs(v), np.abs(rv), rtol=1e-3, atol=1e-4)
    wi = L.eigh_tridiagonal(d, e, eigvals_only=True, select="i", select_range=(1, 3))
    np.testing.assert_allclose(wi, jsl.eigh_tridiagonal(d, e, eigvals_only=True, select="i",
                                                        select_range=(1, 3)), rtol=1e-4)


def test_eigh_tridiagonal_complex_offdiagonal(x64):
    d, e = rand((4,), np.complex128, 1), rand((3,), np.complex128, 2)
    t = np.diag(d.real) + np.diag(e, 1) + np.diag(np.conj(e), -1)
    w, v = L.eigh_tridiagonal(d, e)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(t), rtol=1e-10)
    np.testing.assert_allclose(t @ np.asarray(v), np.asarray(v) * np.asarray(w), atol=1e-10)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5)])
@pytest.mark.parametrize("pivoting", [False, True])
def test_qr_raw_matches_scipy(shape, pivoting, x64):
    a = rand(shape, np.float64)
    ours = L.qr(a, mode="raw", pivoting=pivoting)
    ref = sl.qr(a, mode="raw", pivoting=pivoting)
    (h, tau), r = ours[:2]
    (rh, rtau), rr = ref[:2]
    np.testing.assert_allclose(h, rh, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(tau, rtau, rtol=1e-10)
    np.testing.assert_allclose(r, rr, rtol=1e-10, atol=1e-12)
    if pivoting:
        np.testing.assert_array_equal(ours[2], ref[2])


STATIC = [("hilbert", (5,)), ("invhilbert", (6,)), ("pascal", (6,)), ("pascal", (6, "lower")),
          ("pascal", (6, "upper")), ("invpascal", (6,)), ("invpascal", (6, "lower")),
          ("invpascal", (6, "upper")), ("helmert", (5,)), ("helmert", (5, True)),
          ("hadamard", (8,)), ("dft", (5,)), ("dft", (6, "sqrtn")), ("dft", (4, "n")),
          ("hilbert", (0,)), ("hadamard", (1,))]


@needs_jax
@pytest.mark.parametrize("x64_on", [False, True])
@pytest.mark.parametrize("name,args", STATIC, ids=[f"{n}{a}" for n, a in STATIC])
def test_static_special_matrices_match_jax_and_scipy(name, args, x64_on):
    from checks import x64_everywhere
    import contextlib
    with x64_everywhere() if x64_on else contextlib.nullcontext():
        ours, theirs = getattr(L, name)(*args), getattr(jsl, name)(*args)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=1e-5)
        exact = getattr(sl, name)(*args)
        np.testing.assert_allclose(ours, exact, rtol=1e-6 if ours.dtype.itemsize <= 8 and
                                   ours.dtype.kind != "c" and not x64_on else 1e-12, atol=1e-6)


def test_invhilbert_is_exact_for_large_n(x64):
    # jax goes through Gamma functions; the exact integers here invert hilbert(n)
    np.testing.assert_array_equal(L.invhilbert(10), sl.invhilbert(10, exact=True).astype(float))


def test_lu_and_solve_traces_to_the_decompositions():
    a = well_conditioned((4, 4))
    names = {e.primitive.name for e in fnad.make_jaxpr(L.lu)(a).jaxpr.eqns}
    assert "lu" in names
    names = {e.primitive.name for e in
             fnad.make_jaxpr(lambda a: L.solve(a, a, assume_a="pos"))(spd((4, 4))).jaxpr.eqns}
    assert {"cholesky", "custom_linear_solve"} <= names


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_hessenberg_jvp_matches_finite_differences(dtype, x64):
    a, da = rand((4, 4), dtype, 1), rand((4, 4), dtype, 2)

    def f(a):
        return L.hessenberg(a, calc_q=True)
    _, (th, tq) = fnad.jvp(f, (a,), (da,))
    eps = 1e-6
    (hp, qp), (hm, qm) = f(a + eps * da), f(a - eps * da)
    np.testing.assert_allclose(th, (np.asarray(hp) - np.asarray(hm)) / (2 * eps), atol=1e-7)
    np.testing.assert_allclose(tq, (np.asarray(qp) - np.asarray(qm)) / (2 * eps), atol=1e-7)


def test_lu_takes_a_batch_unlike_jax():
    a = rand((2, 3, 4))
    p, l_, u = L.lu(a)
    for i in range(2):
        for o, r in zip((p[i], l_[i], u[i]), jsl.lu(a[i]) if jsl else sl.lu(a[i])):
            np.testing.assert_allclose(o, r, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(p) @ np.asarray(l_) @ np.asarray(u), a, atol=1e-6)


def test_batched_vector_b_warns_as_jax():
    a, b = well_conditioned((2, 4, 4)), rand((2, 4))
    with pytest.warns(FutureWarning, match="deprecated"):
        ours = L.solve_triangular(a, b, lower=True)
    ref = np.stack([sl.solve_triangular(a[i], b[i], lower=True) for i in range(2)])
    np.testing.assert_allclose(ours, ref, rtol=1e-5)


# ---- errors -------------------------------------------------------------------------------
ERRORS = [
    (lambda: L.solve(np.eye(2), np.ones(2), assume_a="diag"), ValueError, "assume_a"),
    (lambda: L.solve(np.ones((2, 3)), np.ones(2), assume_a="pos"), ValueError, "square"),
    (lambda: L.solve(np.eye(3), np.ones(2), assume_a="pos"), ValueError, "incompatible"),
    (lambda: L.solve_triangular(np.eye(2), np.ones(2), trans=3), ValueError, "trans"),
    (lambda: L.solve_triangular(np.ones((2, 3)), np.ones(2)), ValueError, "square"),
    (lambda: L.solve_triangular(np.eye(3), np.ones(2)), ValueError, "length must be 3"),
    (lambda: L.cholesky(np.ones(3)), ValueError, "square"),
    (lambda: L.cho_solve((np.eye(3), True), np.ones((2, 2))), ValueError, "dimension -2"),
    (lambda: L.lu(np.ones(3)), ValueError, "matrix"),
    (lambda: L.lu_solve((np.eye(2), np.zeros(2, np.int32)), np.ones(2), trans=3), ValueError,
     "trans"),
    (lambda: L.lu_solve((np.eye(2), np.zeros(2)), np.ones(2)), TypeError, "integers"),
    (lambda: L.qr(np.eye(2), mode="complete"), ValueError, "Unsupported QR"),
    (lambda: L.qr(np.ones(2)), ValueError, "matrix"),
    (lambda: L.qr_multiply(np.eye(2), np.ones(2), mode="up"), ValueError, "mode"),
    (lambda: L.qr_multiply(np.ones((3, 2)), np.ones((3, 1)), "left"), ValueError, "Q @ c"),
    (lambda: L.qr_multiply(np.ones((3, 2)), np.ones((1, 2))), ValueError, "c @ Q"),
    (lambda: L.eigh(np.eye(2), type=4), ValueError, "type"),
    (lambda: L.eigh(np.eye(2), type=2), ValueError, "need b"),
    (lambda: L.eigh(np.eye(2), np.eye(3)), ValueError, "same size"),
    (lambda: L.eigh_tridiagonal(np.ones(3, np.float32), np.ones(2, np.complex64)), TypeError,
     "same dtype"),
    (lambda: L.eigh_tridiagonal(np.ones(3, np.int32), np.ones(2, np.int32)), TypeError,
     "supported"),
    (lambda: L.eigh_tridiagonal(np.ones(3, np.float32), np.ones(2, np.float32), select="v"),
     NotImplementedError, "select='v'"),
    (lambda: L.eigh_tridiagonal(np.ones(3, np.float32), np.ones(2, np.float32), select="i"),
     ValueError, "select_range"),
    (lambda: L.eigh_tridiagonal(np.ones(3, np.float32), np.ones(3, np.float32)), ValueError,
     "[n-1]"),
    (lambda: L.polar(np.ones(3)), ValueError, "2-D"),
    (lambda: L.polar(np.eye(2), side="up"), ValueError, "side"),
    (lambda: L.polar(np.eye(2), method="newton"), ValueError, "method"),
    (lambda: L.polar(np.ones((2, 3))), NotImplementedError, "qdwh"),
    (lambda: L.expm(np.ones((2, 3))), ValueError, "square"),
    (lambda: L.hessenberg(np.ones((2, 3))), ValueError, "square"),
    (lambda: L.expm_frechet(np.eye(2), np.eye(3)), ValueError, "same shape"),
    (lambda: L.expm_frechet(np.ones(2), np.ones(2)), ValueError, "square"),
    (lambda: L.block_diag(np.ones((1, 2, 2))), ValueError, "at most 2 dimensions"),
    (lambda: L.hankel(1.0), ValueError, "1-dimensional"),
    (lambda: L.leslie(np.ones(1), np.ones(0)), ValueError, "at least 2"),
    (lambda: L.leslie(np.ones(3), np.ones(3)), ValueError, "one less"),
    (lambda: L.companion(np.ones(1)), ValueError, "at least 2"),
    (lambda: L.fiedler_companion(np.ones(0)), ValueError, "nonzero"),
    (lambda: L.convolution_matrix(np.ones(3), 0), ValueError, "positive"),
    (lambda: L.convolution_matrix(np.ones(3), 2, "wrap"), ValueError, "mode"),
    (lambda: L.convolution_matrix(1.0, 2), ValueError, "1-dimensional"),
    (lambda: L.hadamard(6), ValueError, "power of 2"),
    (lambda: L.helmert(0), ValueError, "positive"),
    (lambda: L.dft(4, "half"), ValueError, "scale"),
    (lambda: L.dft(4, dtype=np.float32), ValueError, "complex"),
    (lambda: L.pascal(3, "diag"), ValueError, "kind"),
    (lambda: L.hilbert(-1), ValueError, "non-negative"),
    (lambda: L.hilbert(2.5), TypeError, "static integer"),
]


@pytest.mark.parametrize("fn,exc,words", ERRORS, ids=[e[2] for e in ERRORS])
def test_errors(fn, exc, words):
    with pytest.raises(exc) as info:
        fn()
    assert words in str(info.value), str(info.value)
