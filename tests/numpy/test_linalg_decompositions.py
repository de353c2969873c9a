"""fnad.numpy.linalg's functions on qr, eigh, svd and eig against jax.numpy.linalg: qr (every
mode), eigh, eigvalsh, eig, eigvals, svd (full, thin, values only, hermitian), svdvals, pinv,
lstsq,
matrix_rank, cond, norm's ord 2 / -2 / 'nuc', slogdet(method='qr') and the array-API names
(matrix_norm, matrix_transpose, outer, cross, trace, diagonal, vecdot, matmul, tensordot,
tensorinv, tensorsolve, multi_dot).

Each case is a function of the inputs whose value is unique: eigenvectors and singular
vectors are unique only up to a sign or phase per column, so the cases that return them fix
that gauge first (each column times conj(v₀ⱼ)/|v₀ⱼ|), or return what does not depend on
it (projectors, reconstructions, |v|²). For each: the value, grad of a weighted sum, jvp,
vjp and a Hessian-vector product against jax (jax under jit), in float64 and complex128
(x64 on in both libraries), and for the core cases also in float32, complex64 and with
batch dimensions; vmap against a Python loop and jax.vmap; and under jit on the numba and
xla backends. Matrices are drawn with well-separated singular values / eigenvalues. Then the
errors a user can hit, each with its type and message.
"""
from __future__ import annotations

import functools
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from checks import assert_trees_close, raises_with

import fnad
import fnad.numpy as fnp
from fnad import lax
from fnad.primitives import decompositions as dec

jax = pytest.importorskip("jax", reason="jax not installed: it is the oracle here")
import jax.numpy as jnp  # noqa: E402

TOL = {np.float32: dict(rtol=5e-4, atol=5e-5), np.float64: dict(rtol=1e-8, atol=1e-10)}
BATCH = (2, 3)


def _rng(*names) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32("/".join(map(str, names)).encode()))


def _real(dtype):
    return np.float64 if np.dtype(dtype).itemsize >= 8 and np.dtype(dtype) != np.complex64 \
        else np.float32


# ---- inputs ----------------------------------------------------------------------------------
def normal(rng, dtype, *shape):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _unitary(rng, dtype, batch, n):
    q, _ = np.linalg.qr(normal(rng, np.complex128 if np.dtype(dtype).kind == "c"
                               else np.float64, *batch, n, n))
    return q


def spectral(rng, dtype, m, n, batch=(), values=None, hermitian=False):
    """[*batch, m, n] = U diag(values) Vᴴ with random unitary U, V (V = U if hermitian):
    singular values (eigenvalues if hermitian) as given, default 1, 2.5, 4, ... descending."""
    k = min(m, n)
    values = np.asarray(values if values is not None else 1.0 + 1.5 * np.arange(k)[::-1])
    u = _unitary(rng, dtype, batch, m)[..., :k]
    v = u if hermitian else _unitary(rng, dtype, batch, n)[..., :k]
    return ((u * values) @ np.conj(np.swapaxes(v, -1, -2))).astype(dtype)


def diagonalizable(rng, dtype, n, batch=()):
    """S diag(1, 2, ..., n) S⁻¹ with a well-conditioned S: distinct real eigenvalues."""
    s = normal(rng, dtype, *batch, n, n) * 0.3 + 2 * np.eye(n)
    return ((s * np.arange(1.0, n + 1)) @ np.linalg.inv(s)).astype(dtype)


def hermitian(rng, dtype, n, batch=()):
    """Hermitian, eigenvalues spread over [-n, n] (gaps about 2)."""
    return spectral(rng, dtype, n, n, batch, np.linspace(-n, n, n) + 0.3, hermitian=True)


# ---- cases ---------------------------------------------------------------------------------
def fix_columns(np_, v):
    """v with column j times conj(v₀ⱼ)/|v₀ⱼ|: unique for distinct eigen/singular values."""
    row = v[..., :1, :]
    return v * (np_.conj(row) / np_.abs(row))


def fixed_svd(np_, u, s, vh):
    """u's first k columns and vh's first k rows with u's gauge fixed, as one [.., m+k, k]
    array (rows of u, then vhᴴ's rows)."""
    k = s.shape[-1]
    row = u[..., :1, :k]
    c = np_.conj(row) / np_.abs(row)                                   # [..., 1, k]
    vh_fixed = vh[..., :k, :] * np_.swapaxes(np_.conj(c), -1, -2)
    return np_.concatenate([u[..., :, :k] * c, np_.swapaxes(vh_fixed, -1, -2)], axis=-2)


def projector(np_, x):                                 # x xᴴ: the projector onto x's columns
    return x @ np_.conj(np_.swapaxes(x, -1, -2))


@dataclass(frozen=True)
class Case:
    """fn(linalg, np, *args) -> one array; make(rng, dtype, batch) -> the arguments (each
    differentiated unless `diff` says which); complex: whether complex inputs are run."""
    fn: Callable
    make: Callable
    complex: bool = True
    batched: bool = True
    diff: tuple | None = None
    hvp: bool = True                                   # False: no second derivative in jax


def _one(make_one):
    return lambda rng, dt, batch: (make_one(rng, dt, batch),)


def _spec(m, n, **kw):
    return _one(lambda rng, dt, batch: spectral(rng, dt, m, n, batch, **kw))


def _herm(n):
    return _one(lambda rng, dt, batch: hermitian(rng, dt, n, batch))


CASES = {
    # qr: Householder Q and R are unique (LAPACK's signs), so compared as they are
    "qr_reduced_q": Case(lambda L, np_, a: L.qr(a)[0], _spec(5, 3)),
    "qr_reduced_r": Case(lambda L, np_, a: L.qr(a).R, _spec(5, 3)),
    "qr_full_alias": Case(lambda L, np_, a: L.qr(a, mode="full").Q, _spec(4, 3)),
    "qr_complete_q": Case(lambda L, np_, a: L.qr(a, mode="complete").Q, _spec(5, 3)),
    "qr_complete_r": Case(lambda L, np_, a: L.qr(a, mode="complete")[1], _spec(5, 3)),
    "qr_square": Case(lambda L, np_, a: np_.concatenate(L.qr(a), axis=-1), _spec(4, 4)),
    "qr_wide_q": Case(lambda L, np_, a: L.qr(a)[0], _spec(3, 5)),
    "qr_wide_r": Case(lambda L, np_, a: L.qr(a, mode="complete")[1], _spec(3, 5)),
    "qr_mode_r": Case(lambda L, np_, a: L.qr(a, mode="r"), _spec(4, 2)),
    # eigh
    "eigh_values": Case(lambda L, np_, a: L.eigh(a).eigenvalues, _herm(4)),
    "eigh_vectors": Case(lambda L, np_, a: fix_columns(np_, L.eigh(a)[1]), _herm(4)),
    "eigh_abs2_vectors": Case(lambda L, np_, a: np_.abs(L.eigh(a).eigenvectors) ** 2,
                              _herm(3)),
    "eigh_upper_no_symmetrize": Case(
        lambda L, np_, a: fix_columns(np_, L.eigh(a, UPLO="U", symmetrize_input=False)[1]),
        _herm(3)),
    "eigvalsh": Case(lambda L, np_, a: L.eigvalsh(a), _herm(5)),
    "eigvalsh_nonsymmetric_input": Case(lambda L, np_, a: L.eigvalsh(a), _spec(4, 4)),
    # eigvals (eig's eigenvectors have no derivative in jax.numpy, see the errors below)
    # (first order only: their JVP needs the eigenvectors, whose derivative needs opting in)
    "eigvals": Case(lambda L, np_, a: L.eigvals(a),
                    _one(lambda rng, dt, batch: diagonalizable(rng, dt, 4, batch)), hvp=False),
    "eigvals_sum_of_squares": Case(lambda L, np_, a: np_.sum(L.eigvals(a) ** 2, axis=-1),
                                   _spec(3, 3), hvp=False),   # = tr(A²): real, smooth
    # svd
    "svd_values_tall": Case(lambda L, np_, a: L.svd(a, compute_uv=False), _spec(5, 3)),
    "svd_values_wide": Case(lambda L, np_, a: L.svd(a, full_matrices=False)[1], _spec(2, 4)),
    "svd_thin_tall": Case(lambda L, np_, a: fixed_svd(np_, *L.svd(a, full_matrices=False)),
                          _spec(5, 3)),
    "svd_thin_wide": Case(lambda L, np_, a: fixed_svd(np_, *L.svd(a, full_matrices=False)),
                          _spec(3, 4)),
    "svd_full_square": Case(lambda L, np_, a: fixed_svd(np_, *L.svd(a)), _spec(3, 3)),
    "svd_reconstruction": Case(
        lambda L, np_, a: (lambda u, s, vh: (u * s[..., None, :].astype(u.dtype)) @ vh)(
            *L.svd(a, full_matrices=False)), _spec(4, 3)),
    "svd_left_projector": Case(lambda L, np_, a: projector(np_, L.svd(a, False)[0]),
                               _spec(5, 2)),
    "svd_hermitian_values": Case(lambda L, np_, a: L.svd(a, hermitian=True, compute_uv=False),
                                 _herm(4)),
    "svd_hermitian_vectors": Case(
        lambda L, np_, a: fixed_svd(np_, *L.svd(a, hermitian=True)), _herm(4)),
    "svdvals": Case(lambda L, np_, a: L.svdvals(a), _spec(3, 6)),
    # pinv / lstsq / cond / norms
    "pinv_tall": Case(lambda L, np_, a: L.pinv(a), _spec(5, 3)),
    "pinv_wide": Case(lambda L, np_, a: L.pinv(a), _spec(2, 4)),
    "pinv_hermitian": Case(lambda L, np_, a: L.pinv(a, hermitian=True), _herm(3)),
    "pinv_rank_deficient": Case(lambda L, np_, a: L.pinv(a, rtol=0.1),
                                _spec(4, 3, values=[3.0, 2.0, 1e-3])),
    "pinv_rcond": Case(lambda L, np_, a: L.pinv(a, rcond=1e-3), _spec(3, 3)),
    "lstsq_tall_x": Case(lambda L, np_, a, b: L.lstsq(a, b)[0],
                         lambda rng, dt, batch: (spectral(rng, dt, 5, 3), normal(rng, dt, 5, 2)),
                         batched=False),
    "lstsq_vector_resid": Case(lambda L, np_, a, b: L.lstsq(a, b)[1],
                               lambda rng, dt, batch: (spectral(rng, dt, 5, 3),
                                                       normal(rng, dt, 5)), batched=False),
    "lstsq_wide_min_norm": Case(lambda L, np_, a, b: L.lstsq(a, b, rcond=1e-3)[0],
                                lambda rng, dt, batch: (spectral(rng, dt, 2, 4),
                                                        normal(rng, dt, 2)), batched=False),
    "lstsq_singular_values": Case(lambda L, np_, a, b: L.lstsq(a, b)[3],
                                  lambda rng, dt, batch: (spectral(rng, dt, 4, 3),
                                                          normal(rng, dt, 4)),
                                  batched=False, diff=(0,)),
    "cond_2": Case(lambda L, np_, a: L.cond(a), _spec(4, 3)),
    "cond_minus_2": Case(lambda L, np_, a: L.cond(a, -2), _spec(3, 3)),
    "cond_fro": Case(lambda L, np_, a: L.cond(a, "fro"), _spec(3, 3)),
    "cond_1": Case(lambda L, np_, a: L.cond(a, 1), _spec(3, 3)),
    "cond_inf": Case(lambda L, np_, a: L.cond(a, np.inf), _spec(3, 3)),
    "norm_2": Case(lambda L, np_, a: L.norm(a, 2, axis=(-2, -1)), _spec(4, 3)),
    "norm_minus_2": Case(lambda L, np_, a: L.norm(a, -2, axis=(-1, -2)), _spec(3, 4)),
    "norm_nuc": Case(lambda L, np_, a: L.norm(a, "nuc", axis=(-2, -1)), _spec(3, 3)),
    "norm_2_no_axis": Case(lambda L, np_, a: L.norm(a, 2), _spec(3, 4), batched=False),
    "norm_nuc_moved_axes_keepdims": Case(
        lambda L, np_, a: L.norm(np_.stack([a, 2 * a], axis=-2), "nuc", axis=(-1, -3),
                                 keepdims=True),                     # [..., 3, 2, 4]
        _spec(3, 4)),
    "matrix_norm_2": Case(lambda L, np_, a: L.matrix_norm(a, ord=2), _spec(3, 3)),
    "matrix_norm_fro_keepdims": Case(lambda L, np_, a: L.matrix_norm(a, keepdims=True),
                                     _spec(3, 2)),
    "slogdet_qr_logabsdet": Case(lambda L, np_, a: L.slogdet(a, method="qr")[1],
                                 _spec(4, 4), complex=False),
    "slogdet_qr_sign": Case(lambda L, np_, a: L.slogdet(-a, method="qr").sign * 1.5,
                            _spec(3, 3), complex=False),
    # the array-API names
    "matrix_transpose": Case(lambda L, np_, a: L.matrix_transpose(a), _spec(2, 3)),
    "outer": Case(lambda L, np_, a, b: L.outer(a, b),
                  lambda rng, dt, batch: (normal(rng, dt, 3), normal(rng, dt, 4)),
                  batched=False),
    "cross": Case(lambda L, np_, a, b: L.cross(a, b),
                  lambda rng, dt, batch: (normal(rng, dt, *batch, 3), normal(rng, dt, 3))),
    "cross_axis0": Case(lambda L, np_, a, b: L.cross(a, b, axis=0),
                        lambda rng, dt, batch: (normal(rng, dt, 3, 2), normal(rng, dt, 3, 2)),
                        batched=False),
    "trace_offset": Case(lambda L, np_, a: L.trace(a, offset=1), _spec(3, 4)),
    "diagonal_offset": Case(lambda L, np_, a: L.diagonal(a, offset=-1), _spec(4, 3)),
    "vecdot": Case(lambda L, np_, a, b: L.vecdot(a, b),
                   lambda rng, dt, batch: (normal(rng, dt, *batch, 4), normal(rng, dt, 4))),
    "matmul": Case(lambda L, np_, a, b: L.matmul(a, b),
                   lambda rng, dt, batch: (normal(rng, dt, *batch, 2, 3), normal(rng, dt, 3, 4))),
    "tensordot": Case(lambda L, np_, a, b: L.tensordot(a, b, axes=1),
                      lambda rng, dt, batch: (normal(rng, dt, 2, 3), normal(rng, dt, 3, 4)),
                      batched=False),
    "tensorinv": Case(lambda L, np_, a: L.tensorinv(a.reshape(2, 3, 6), ind=2),
                      _spec(6, 6), batched=False),
    "tensorsolve": Case(lambda L, np_, a, b: L.tensorsolve(a.reshape(2, 3, 6), b),
                        lambda rng, dt, batch: (spectral(rng, dt, 6, 6), normal(rng, dt, 2, 3)),
                        batched=False),
    "tensorsolve_axes": Case(lambda L, np_, a, b: L.tensorsolve(a.reshape(6, 2, 3), b,
                                                                axes=(0,)),
                             lambda rng, dt, batch: (spectral(rng, dt, 6, 6),
                                                     normal(rng, dt, 2, 3)), batched=False),
    "multi_dot": Case(lambda L, np_, a, b, c, d: L.multi_dot([a, b, c, d]),
                      lambda rng, dt, batch: (normal(rng, dt, 5), normal(rng, dt, 5, 2),
                                              normal(rng, dt, 2, 6), normal(rng, dt, 6, 3)),
                      batched=False),
}


class Lib:
    def __init__(self, ad, np_):
        self.ad, self.np = ad, np_


FNAD, JAX = Lib(fnad, fnp), Lib(jax, jnp)


def probes(name, np_args, dtype, out_shape, out_dtype):
    rng = _rng(name, np.dtype(dtype).name, "probes")
    return {"w": normal(rng, out_dtype, *out_shape),
            "tangents": tuple(normal(rng, np.asarray(x).dtype, *np.shape(x)) for x in np_args),
            "cotangent": normal(rng, out_dtype, *out_shape)}


def run_all(lib: Lib, fn, np_args, pr, diff, hvp=True) -> dict:
    """value, grad, jvp, vjp and hvp of fn(*args) (the args at `diff` differentiated)."""
    args = tuple(lib.np.asarray(x) for x in np_args)

    def part(*d):                                      # fn of the differentiated args
        full = list(args)
        for i, x in zip(diff, d):
            full[i] = x
        return fn(*full)
    dargs = tuple(args[i] for i in diff)
    tangents = tuple(pr["tangents"][i] for i in diff)
    argnums = tuple(range(len(dargs)))
    loss = lambda *a: lib.np.sum(lib.np.real(part(*a) * lib.np.asarray(pr["w"])))  # noqa: E731
    out, pullback = lib.ad.vjp(part, *dargs)
    res = {
        "value": out,
        "grad": lib.ad.grad(loss, argnums)(*dargs),
        "jvp": lib.ad.jvp(part, dargs, tangents),
        "vjp": pullback(lib.np.asarray(pr["cotangent"])),
    }
    if hvp:
        res["hvp"] = lib.ad.jvp(lib.ad.grad(loss, argnums), dargs, tangents)[1]
    return res


def assert_close(got, want, dtype, what):
    assert_trees_close(got, want, **TOL[_real(dtype)], what=what)


def check_case(name, dtype, batch=()):
    case = CASES[name]
    np_args = case.make(_rng(name, np.dtype(dtype).name, batch), dtype, batch)
    diff = case.diff if case.diff is not None else tuple(range(len(np_args)))
    out = jax.eval_shape(lambda *a: case.fn(jnp.linalg, jnp, *a), *np_args)
    pr = probes(name, np_args, dtype, out.shape, out.dtype)
    hvp = case.hvp and name in CORE                     # second order: the CORE cases
    want = jax.jit(lambda *a: run_all(JAX, functools.partial(case.fn, jnp.linalg, jnp),
                                      a, pr, diff, hvp))(*np_args)
    got = run_all(FNAD, functools.partial(case.fn, fnp.linalg, fnp), np_args, pr, diff, hvp)
    for t in want:
        assert_close(got[t], want[t], dtype, f"{name}{list(batch)} {t}")


# Every case in float64 and complex128 (the tight checks); one or two cases of each function
# (CORE) in float32 and complex64 (dtypes and the looser arithmetic) and with batch dims.
CORE = ["qr_reduced_q", "qr_complete_q", "qr_wide_r", "qr_mode_r", "eigh_vectors", "eigvalsh",
        "eigvals", "svd_thin_tall", "svd_thin_wide", "svd_values_tall", "svd_hermitian_vectors",
        "pinv_tall", "pinv_wide", "lstsq_tall_x", "cond_2", "cond_fro", "norm_nuc",
        "slogdet_qr_logabsdet", "multi_dot", "tensorsolve"]
ALL = sorted(CASES)
COMPLEX = sorted(n for n, c in CASES.items() if c.complex)


@pytest.mark.parametrize("name", CORE)
def test_transforms_match_jax_float32(name):
    check_case(name, np.float32)


@pytest.mark.parametrize("name", ALL)
def test_transforms_match_jax_float64(name, x64):
    check_case(name, np.float64)


@pytest.mark.parametrize("name", [n for n in CORE if CASES[n].complex])
def test_transforms_match_jax_complex64(name):
    check_case(name, np.complex64)


@pytest.mark.parametrize("name", COMPLEX)
def test_transforms_match_jax_complex128(name, x64):
    check_case(name, np.complex128)


@pytest.mark.parametrize("name", [n for n in CORE if CASES[n].batched])
def test_batched_inputs_match_jax(name):
    check_case(name, np.float32, batch=BATCH)


@pytest.mark.parametrize("name", [n for n in CORE if CASES[n].batched and CASES[n].complex])
def test_batched_complex_inputs_match_jax(name, x64):
    check_case(name, np.complex128, batch=(2,))


# ---- vmap and jit ---------------------------------------------------------------------------
VMAP = ["qr_complete_q", "qr_wide_r", "eigh_vectors", "svd_thin_tall", "svd_hermitian_vectors",
        "pinv_tall", "cond_2", "norm_nuc", "slogdet_qr_logabsdet", "svdvals"]


@pytest.mark.parametrize("name", VMAP)
def test_vmap_matches_a_loop_and_jax(name):
    case = CASES[name]
    m = 3
    np_args = case.make(_rng(name, "vmap"), np.float32, (m,))
    f = functools.partial(case.fn, fnp.linalg, fnp)
    jf = functools.partial(case.fn, jnp.linalg, jnp)
    got = fnad.vmap(f)(*np_args)
    loop = np.stack([np.asarray(f(*(x[i] for x in np_args))) for i in range(m)])
    np.testing.assert_allclose(np.asarray(got), loop, rtol=1e-6, atol=1e-6)
    assert_close(got, jax.vmap(jf)(*np_args), np.float32, f"{name} vmap")
    g = fnad.vmap(fnad.grad(lambda a: fnp.sum(f(a))))(*np_args)
    g_loop = np.stack([np.asarray(fnad.grad(lambda a: fnp.sum(f(a)))(x))
                       for x in np_args[0]])
    np.testing.assert_allclose(np.asarray(g), g_loop, rtol=1e-5, atol=1e-6)
    assert_close(g, jax.vmap(jax.grad(lambda a: jnp.sum(jf(a))))(*np_args), np.float32,
                 f"{name} vmap of grad")


@pytest.mark.parametrize("backend", ["numba", "xla"])
@pytest.mark.parametrize("name", ["qr_complete_q", "eigh_vectors", "svd_thin_wide", "pinv_wide",
                                  "lstsq_tall_x", "norm_2"])
def test_jit_on_a_backend_matches_eager(name, backend):
    case = CASES[name]
    np_args = case.make(_rng(name, "jit"), np.float32, ())
    f = functools.partial(case.fn, fnp.linalg, fnp)
    loss = lambda *a: fnp.sum(f(*a))                   # noqa: E731
    want = (f(*np_args), fnad.grad(loss)(*np_args))
    got = fnad.jit(lambda *a: (f(*a), fnad.grad(loss)(*a)), backend=backend)(*np_args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-6)


# ---- values that have no derivative: ranks, raw QR, integer inputs ---------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_matrix_rank_matches_jax(dtype):
    rng = _rng("rank", np.dtype(dtype).name)
    full = spectral(rng, dtype, 4, 3)
    low = spectral(rng, dtype, 5, 4, (2,), values=[3.0, 1.0, 1e-9, 0.0])
    herm = hermitian(rng, dtype, 4)
    for args, kw in [((full,), {}), ((low,), {}), ((low, 1e-1), {}), ((full,), dict(tol=0.5)),
                     ((herm,), dict(hermitian=True)), ((np.zeros(3, dtype),), {}),
                     ((np.array([0, 2.0], dtype),), {}), ((low, np.array([1e-12, 0.5])), {})]:
        got, want = fnp.linalg.matrix_rank(*args, **kw), jnp.linalg.matrix_rank(*args, **kw)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=f"{kw}")
        assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(fnp.linalg.matrix_rank(low), [2, 2])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64], ids=str)
def test_qr_raw_and_lstsq_rank_match_jax(dtype, x64):
    rng = _rng("raw", np.dtype(dtype).name)
    for shape in [(4, 3), (2, 3, 5)]:
        a = normal(rng, dtype, *shape)
        for got, want in zip(fnp.linalg.qr(a, mode="raw"), jnp.linalg.qr(a, mode="raw")):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    a, b = spectral(rng, dtype, 5, 3, values=[2.0, 1.0, 0.0]), normal(rng, dtype, 5, 2)
    for rcond in [None, 1e-3, -1.0]:
        got, want = fnp.linalg.lstsq(a, b, rcond), jnp.linalg.lstsq(a, b, rcond)
        assert int(got[2]) == int(want[2]) and np.asarray(got[2]).dtype == want[2].dtype
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-4, atol=1e-5)
    got = fnp.linalg.lstsq(a, b, numpy_resid=True)
    want = jnp.linalg.lstsq(a, b, numpy_resid=True)
    assert got[1].shape == want[1].shape == (0,)                     # rank 2 < 3: none


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64], ids=str)
def test_eig_matches_jax(dtype, x64):
    rng = _rng("eig", np.dtype(dtype).name)
    for a in [normal(rng, dtype, 4, 4), normal(rng, dtype, 2, 3, 3),
              diagonalizable(rng, dtype, 3)]:
        (w, v), (jw, jv) = fnp.linalg.eig(a), jnp.linalg.eig(a)
        for g, t in [(w, jw), (v, jv), (fnp.linalg.eigvals(a), jnp.linalg.eigvals(a))]:
            assert g.shape == t.shape and g.dtype == t.dtype
            np.testing.assert_allclose(np.asarray(g), np.asarray(t), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(a @ v), np.asarray(v * w[..., None, :]),
                                   rtol=1e-4, atol=1e-4)


def test_integer_inputs_become_floats_as_in_jax():
    a = np.array([[2, 1], [1, 3]], np.int32)
    for f in ["eigvalsh", "svdvals", "pinv", "cond", "matrix_rank"]:
        got, want = getattr(fnp.linalg, f)(a), getattr(jnp.linalg, f)(a)
        assert np.asarray(got).dtype == np.asarray(want).dtype, f
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, err_msg=f)
    q, r = fnp.linalg.qr(a)
    assert q.dtype == np.float32 and np.allclose(np.asarray(q @ r), a, atol=1e-5)


def test_matches_numpy_and_reconstructs(x64):
    rng = _rng("numpy")
    a = normal(rng, np.float64, 2, 5, 3)
    u, s, vh = fnp.linalg.svd(a)
    np.testing.assert_allclose(np.asarray(s), np.linalg.svd(a, compute_uv=False), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(u[..., :3] * s[..., None, :] @ vh), a, atol=1e-12)
    np.testing.assert_allclose(np.asarray(fnp.swapaxes(u, -1, -2) @ u), np.eye(5)[None].repeat(
        2, 0), atol=1e-12)
    h = hermitian(rng, np.complex128, 4)
    w, v = fnp.linalg.eigh(h)
    np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(h), rtol=1e-12)
    np.testing.assert_allclose(np.asarray((v * w[None, :]) @ fnp.conj(v.T)), h, atol=1e-12)
    q, r = fnp.linalg.qr(a, mode="complete")
    np.testing.assert_allclose(np.asarray(q @ r), a, atol=1e-12)
    np.testing.assert_allclose(np.asarray(fnp.tril(r, -1)), 0)
    np.testing.assert_allclose(np.asarray(fnp.linalg.pinv(a)), np.linalg.pinv(a), atol=1e-12)
    np.testing.assert_allclose(np.asarray(fnp.linalg.norm(a, "nuc", axis=(1, 2))),
                               np.linalg.norm(a, "nuc", axis=(1, 2)), rtol=1e-12)


def test_empty_matrices_as_jax():
    for shape in [(0, 3), (3, 0), (2, 0, 0)]:
        a = np.zeros(shape, np.float32)
        for f in [lambda L, x: L.qr(x), lambda L, x: L.qr(x, mode="complete"),
                  lambda L, x: L.svd(x), lambda L, x: L.svd(x, full_matrices=False),
                  lambda L, x: L.svdvals(x), lambda L, x: L.pinv(x)]:
            for g, w in zip(jax.tree_util.tree_leaves(f(fnp.linalg, a)),
                            jax.tree_util.tree_leaves(f(jnp.linalg, a))):
                assert g.shape == w.shape and g.dtype == w.dtype
                np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    w, v = fnp.linalg.eigh(np.zeros((2, 0, 0), np.float32))
    assert w.shape == (2, 0) and v.shape == (2, 0, 0)


def test_nan_inputs_give_nans_as_jax():
    a = np.array([[[1.0, np.nan], [2.0, 3.0]], [[2.0, 1.0], [1.0, 2.0]]], np.float32)
    for f in [lambda L, x: L.eigh(x), lambda L, x: L.svd(x), lambda L, x: L.eig(x),
              lambda L, x: L.eigvals(x), lambda L, x: L.pinv(x), lambda L, x: L.qr(x)]:
        for g, w in zip(jax.tree_util.tree_leaves(f(fnp.linalg, a)),
                        jax.tree_util.tree_leaves(f(jnp.linalg, a))):
            g, w = np.asarray(g), np.asarray(w)
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
            np.testing.assert_allclose(g[1], w[1], rtol=1e-5, atol=1e-6)   # the finite one


def test_lax_linalg_subset_by_index_slices_the_full_decomposition(x64):
    rng = _rng("subset")
    a = spectral(rng, np.float64, 5, 4)
    u, s, vh = lax.linalg.svd(a, full_matrices=False, subset_by_index=(1, 3))
    u_all, s_all, vh_all = lax.linalg.svd(a, full_matrices=False)
    np.testing.assert_array_equal(np.asarray(s), np.asarray(s_all)[1:3])
    np.testing.assert_array_equal(np.asarray(u), np.asarray(u_all)[:, 1:3])
    np.testing.assert_array_equal(np.asarray(vh), np.asarray(vh_all)[1:3])
    h = hermitian(rng, np.float64, 4)
    v, w = lax.linalg.eigh(h, subset_by_index=(2, 4))
    np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(h)[2:], rtol=1e-12)
    assert v.shape == (4, 2)
    # derivatives are those of the full decomposition, sliced (jax's CPU code has none)
    g = fnad.grad(lambda x: fnp.sum(lax.linalg.svd(x, full_matrices=False,
                                                   subset_by_index=(0, 2))[1]))(a)
    want = jax.grad(lambda x: jnp.sum(jax.lax.linalg.svd(x, full_matrices=False)[1][:2]))(a)
    np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-10, atol=1e-12)


def test_cost_analysis_counts_the_decompositions():
    x = np.ones((2, 4, 3), np.float32)
    cost = lambda f: fnad.jit(f).lower(x).compile().cost_analysis()["flops"]   # noqa: E731
    k = 3                                                    # geqrf 2mnk - 2k³/3 = 54 each
    assert cost(lambda x: dec.geqrf(x)) == 2 * (2 * 4 * 3 * k - 2 * k ** 3 / 3)
    assert cost(lambda x: dec.svd(x, compute_uv=False)) == 2 * (4 * 4 * 9 - 4 * 27 / 3)
    assert cost(lambda x: dec.svd(x, full_matrices=False)) == 2 * (14 * 4 * 9 + 8 * 27)
    assert cost(lambda x: dec.eigh(x[..., :3, :], symmetrize_input=False)) == 2 * 9 * 27
    assert cost(lambda x: dec.eig(x[..., :3, :])) == 2 * 25 * 27
    assert cost(lambda x: dec.eig(x[..., :3, :], compute_left_eigenvectors=False,
                                  compute_right_eigenvectors=False)) == 2 * 10 * 27
    assert cost(lambda x: dec.qr(x)) > cost(lambda x: dec.qr(x, full_matrices=False)) \
        > cost(lambda x: dec.geqrf(x))


# ---- errors ------------------------------------------------------------------------------
def test_errors_name_what_was_wrong():
    v, m23, m33 = np.ones(3, np.float32), np.ones((2, 3), np.float32), np.eye(3, dtype=np.float32)
    raises_with(lambda: fnp.linalg.qr(v), "qr", "[..., m, n]", "(3,)", exc=ValueError)
    raises_with(lambda: fnp.linalg.qr(m23, mode="economic"), "Unsupported QR", "'economic'",
                exc=ValueError)
    raises_with(lambda: fnp.linalg.eigh(m23), "eigh", "square", "(2, 3)")
    raises_with(lambda: fnp.linalg.eigh(m33, UPLO="X"), "UPLO", "'X'", exc=ValueError)
    raises_with(lambda: fnp.linalg.eigvalsh(v), "eigh", "rank >= 2", "(3,)")
    raises_with(lambda: fnp.linalg.svd(v), "svd", "rank >= 2")
    raises_with(lambda: fnp.linalg.pinv(m33, rtol=0.1, rcond=0.1), "only one of rtol and rcond",
                exc=ValueError)
    raises_with(lambda: fnp.linalg.pinv(v), "pinv", "(3,)", exc=ValueError)
    raises_with(lambda: fnp.linalg.matrix_rank(m33, 0.1, tol=0.1), "only one of tol or rtol",
                exc=ValueError)
    raises_with(lambda: fnp.linalg.lstsq(m33, np.ones(2, np.float32)), "Leading dimensions",
                exc=ValueError)
    raises_with(lambda: fnp.linalg.lstsq(np.ones((3, 2, 2)), np.ones(3)), "3-dimensional",
                "two-dimensional", exc=TypeError)
    raises_with(lambda: fnp.linalg.lstsq(m33, np.ones((3, 2, 2))), "one or two-dimensional",
                exc=TypeError)
    raises_with(lambda: fnp.linalg.cond(v), "at least 2D", exc=ValueError)
    raises_with(lambda: fnp.linalg.cond(np.ones((0, 2))), "must not be empty", exc=ValueError)
    raises_with(lambda: fnp.linalg.cond(m23, 1), "must be square", "p=1", exc=ValueError)
    raises_with(lambda: fnp.linalg.norm(m33, "bad"), "Invalid order 'bad'", exc=ValueError)
    raises_with(lambda: fnp.linalg.slogdet(m33.astype(np.complex64), method="qr"), "complex",
                exc=NotImplementedError)
    raises_with(lambda: fnp.linalg.slogdet(m33, method="cholesky"), "unknown method",
                exc=ValueError)
    raises_with(lambda: fnp.linalg.matrix_transpose(v), "at least 2 dimensions", exc=ValueError)
    raises_with(lambda: fnp.linalg.outer(m33, v), "one-dimensional", exc=ValueError)
    raises_with(lambda: fnp.linalg.cross(np.ones(2), v), "3-dimensional vectors", exc=ValueError)
    raises_with(lambda: fnp.linalg.tensorinv(np.ones((2, 3, 4))), "tensorinv is only possible",
                exc=ValueError)
    raises_with(lambda: fnp.linalg.tensorinv(m33, ind=0), "positive integer", exc=ValueError)
    raises_with(lambda: fnp.linalg.tensorsolve(np.ones((2, 3, 4)), np.ones((3,))),
                "leading shape of a must match", exc=ValueError)
    raises_with(lambda: fnp.linalg.tensorsolve(np.ones((2, 3, 4)), np.ones((2, 3))),
                "prod(a.shape[:b.ndim])", exc=ValueError)
    raises_with(lambda: fnp.linalg.multi_dot([m33]), "at least two arrays", exc=ValueError)
    raises_with(lambda: fnp.linalg.multi_dot([m33, np.ones((3, 3, 3)), m33]),
                "two-dimensional", exc=ValueError)
    raises_with(lambda: fnp.linalg.multi_dot([m23, m23]), "must match first dimension",
                exc=ValueError)


def test_lax_linalg_errors():
    i33, f23 = np.eye(3, dtype=np.int32), np.ones((2, 3), np.float32)
    raises_with(lambda: dec.eig(f23), "eig", "square matrices", "(2, 3)")
    for fn in (dec.qr, dec.svd, dec.geqrf, dec.eig,
               lambda x: dec.eigh(x, symmetrize_input=False)):   # (symmetrized: float32)
        raises_with(lambda: fn(i33), "does not accept dtype int32")
    raises_with(lambda: dec.eigh(f23), "eigh", "square matrices", "(2, 3)")
    raises_with(lambda: dec.svd(f23, subset_by_index=(1, 2)), "full_matrices and subset_by_index",
                exc=ValueError)
    raises_with(lambda: dec.svd(f23, full_matrices=False, subset_by_index=(1, 3)),
                "0 <= start < end <= 2", exc=ValueError)
    raises_with(lambda: dec.eigh(np.eye(3, dtype=np.float32), subset_by_index=(2,)),
                "pair (start, end)", exc=ValueError)


def test_derivatives_jax_does_not_define_are_errors():
    f23 = np.ones((2, 3), np.float32) + np.eye(2, 3, dtype=np.float32)
    raises_with(lambda: fnad.jvp(lambda x: dec.svd(x)[0], (f23,), (f23,)), "full_matrices=True",
                "square matrices only", "(2, 3)", exc=NotImplementedError)
    raises_with(lambda: fnad.grad(lambda x: fnp.sum(fnp.linalg.qr(x, mode="raw")[1]))(f23),
                "geqrf", "not differentiable", exc=NotImplementedError)
    raises_with(lambda: fnad.grad(lambda x: fnp.sum(fnp.linalg.svd(x)[0]))(f23),
                "full_matrices=False", exc=NotImplementedError)
    raises_with(lambda: fnad.grad(lambda x: fnp.sum(fnp.linalg.svd(x)[1]))(f23),
                "full_matrices=False", exc=NotImplementedError)           # so does jax
    raises_with(lambda: fnad.grad(lambda x: fnp.sum(fnp.abs(fnp.linalg.eig(x)[0])))(f23[:, :2]),
                "enable_eigvec_derivs=True", exc=NotImplementedError)     # so does jax
    a = f23[:, :2]
    g = fnad.grad(lambda x: fnp.real(fnp.sum(fnp.linalg.eigvals(x))))      # = tr(a): ones
    np.testing.assert_allclose(np.asarray(g(a)), np.eye(2), atol=1e-6)
    raises_with(lambda: fnad.jacfwd(g)(a), "enable_eigvec_derivs=True",   # as jax: no second
                exc=NotImplementedError)                                  # derivative
    # but the square case, the thin case and values only all work
    for f in [lambda x: fnp.linalg.svd(x, compute_uv=False), lambda x: fnp.linalg.svdvals(x),
              lambda x: fnp.linalg.svd(x, full_matrices=False)[0],
              lambda x: fnp.linalg.svd(x @ x.T)[0]]:
        assert np.all(np.isfinite(np.asarray(fnad.grad(lambda x: fnp.sum(f(x)))(f23))))
