"""The numba backend's dot_general (backends/numba_cpu/gemm.py): large products run in
chunks on the backend's threads with BLAS at one thread; results equal np.matmul's, the
BLAS thread count is restored, and every dot_general layout goes through the same views
as the NumPy reference (backends/numpy_ref/linalg.py `_as_matmul`)."""
from __future__ import annotations

import contextlib
import os

import numpy as np
import pytest

pytest.importorskip("numba", reason="the numba backend needs numba (not installed)")

from fnad.backends.numba_cpu import gemm  # noqa: E402
from fnad.backends.numpy_ref.linalg import _as_matmul, _dot_general  # noqa: E402

RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("a_shape,b_shape", [
    ((300, 200), (200, 150)),            # rows in chunks
    ((16, 64, 96), (16, 96, 96)),        # batch entries in chunks
    ((2, 3, 96, 128), (2, 3, 128, 128)),  # two batch dims
    ((33, 4000), (4000, 70)),            # fewer rows than one chunk per thread
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_chunked_matmul_equals_numpy(a_shape, b_shape, dtype):
    a, b = rand(*a_shape, dtype=dtype), rand(*b_shape, dtype=dtype)
    assert np.prod(a.shape) * b.shape[-1] >= gemm.SMALL       # the chunked path
    tol = 2e-4 if dtype == np.float32 else 1e-11      # blocking changes the sum order
    out = gemm.matmul(a, b)
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=tol, atol=tol)
    from fnad.backends.numba_cpu.threads import NUM_THREADS
    if NUM_THREADS > 1 and gemm.blas_threads() is not None:   # chunks: an aligned output
        assert out.ctypes.data % 64 == 0


def test_transposed_operands_and_blas_threads_restored():
    a, b = rand(256, 512), rand(384, 512)
    blas = gemm.blas_threads()
    before = blas[1]() if blas else None
    tol = 2e-4                  # sums of 512 products of size ~1: the order changes the last bits
    np.testing.assert_allclose(gemm.matmul(a, b.T), a @ b.T, rtol=tol, atol=tol)
    np.testing.assert_allclose(gemm.matmul(a.T.copy().T, b.T), a @ b.T, rtol=tol, atol=tol)
    if blas:
        assert blas[1]() == before


DIMS = [  # (lhs shape, rhs shape, dimension_numbers): the layouts a transformer step uses
    ((8, 16, 32), (32, 24), (((2,), (0,)), ((), ()))),            # x @ W
    ((8, 16, 24), (32, 24), (((2,), (1,)), ((), ()))),            # g @ W^T
    ((8, 16, 32), (8, 16, 24), (((0, 1), (0, 1)), ((), ()))),     # x^T @ g (weight grad)
    ((8, 16, 24), (8, 16, 32), (((0, 1), (0, 1)), ((), ()))),
    ((4, 2, 16, 8), (4, 2, 16, 8), (((3,), (3,)), ((0, 1), (0, 1)))),   # q @ k^T
    ((4, 2, 16, 16), (4, 2, 16, 8), (((3,), (2,)), ((0, 1), (0, 1)))),  # p @ v
    ((4, 2, 16, 8), (4, 2, 16, 16), (((2,), (2,)), ((0, 1), (0, 1)))),  # dq^T-like
    ((2, 16, 4, 8), (2, 4, 8, 16), (((3,), (2,)), ((0, 2), (0, 1)))),   # batch not leading
    ((5,), (5,), (((0,), (0,)), ((), ()))),                          # vector dot
    ((3, 5), (5,), (((1,), (0,)), ((), ()))),                        # matvec
    ((5, 3), (5, 4), (((0,), (0,)), ((), ()))),
]


@pytest.mark.parametrize("ls,rs,dn", DIMS)
def test_layouts_match_einsum(ls, rs, dn):
    lhs, rhs = rand(*ls, dtype=np.float64), rand(*rs, dtype=np.float64)
    (lc, rc), (lb, rb) = dn
    letters = iter("abcdefghijklmnop")
    lsub = [next(letters) for _ in ls]
    rsub = [None] * len(rs)
    for i, j in zip(lc + lb, rc + rb):
        rsub[j] = lsub[i]
    rsub = [s or next(letters) for s in rsub]
    out = ([lsub[i] for i in lb] + [s for i, s in enumerate(lsub) if i not in lc + lb]
           + [s for j, s in enumerate(rsub) if j not in rc + rb])
    want = np.einsum(f"{''.join(lsub)},{''.join(rsub)}->{''.join(out)}", lhs, rhs)
    params = dict(dimension_numbers=dn, precision=None, preferred_element_type=None)
    np.testing.assert_allclose(_dot_general(lhs, rhs, **params), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gemm.dot_general(lhs, rhs, **params), want,
                               rtol=1e-12, atol=1e-12)


# ---- a product planned once for its operands' shapes (gemm.Product) ------------------------
PLANNED = DIMS + [
    ((3, 5), (4, 5), (((1,), (1,)), ((), ()))),                      # x @ W^T: a swap
    ((5, 2, 3), (2, 5, 4), (((0,), (1,)), ((1,), (0,)))),           # permuted: a copy
    ((), (), (((), ()), ((), ()))),                                  # scalars
    ((64, 512), (512, 320), (((1,), (0,)), ((), ()))),               # >= SMALL: chunked
]


@pytest.mark.parametrize("ls,rs,dn", PLANNED)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_planned_product_equals_dot_general_bit_for_bit(ls, rs, dn, dtype):
    """Product (the layout decided once) returns what dot_general returns, every bit, for
    C-ordered operands, Fortran-ordered copies of them, whole products on one thread
    (alone) and NumPy scalars, also inside one_blas_thread; the BLAS's thread count is
    restored."""
    lhs, rhs = rand(*ls, dtype=dtype), rand(*rs, dtype=dtype)
    params = dict(dimension_numbers=dn, precision=None, preferred_element_type=None)
    product = gemm.Product(ls, np.dtype(dtype), rs, np.dtype(dtype), **params)
    blas = gemm.blas_threads()
    before = blas[1]() if blas else None
    def other_strides(x):                        # a Fortran-ordered copy (rank >= 2)
        return np.asfortranarray(x) if x.ndim >= 2 else x
    for a, b in [(lhs, rhs), (other_strides(lhs), other_strides(rhs)),
                 (lhs[()] if not ls else lhs, rhs[()] if not rs else rhs)]:
        want = gemm.dot_general(a, b, **params)
        got = product(a, b)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        with gemm.one_blas_thread:               # (as in a compiled loop's body)
            np.testing.assert_array_equal(product(a, b), want)
    with gemm._blas_at_one_thread(blas) if blas else contextlib.nullcontext():
        alone = product(lhs, rhs, alone=True)
        np.testing.assert_array_equal(alone, gemm.dot_general(lhs, rhs, alone=True, **params))
    if blas:
        assert blas[1]() == before


def test_a_planned_product_casts_as_dot_general():
    """float16/bfloat16 accumulate in float32 and come back in their dtype; mixed dtypes
    and preferred_element_type give dot_general's result dtype (and its values)."""
    import ml_dtypes
    dn = (((1,), (0,)), ((), ()))
    cases = [(np.float16, np.float16, None), (ml_dtypes.bfloat16, ml_dtypes.bfloat16, None),
             (np.float16, np.float16, np.dtype(np.float32)), (np.int8, np.int8, None),
             (np.int32, np.int32, np.dtype(np.int64)), (np.float32, np.float32,
                                                        np.dtype(np.float64)),
             (np.float16, np.float32, None), (np.int8, np.float32, None)]
    for ldt, rdt, pref in cases:
        lhs = (rand(6, 7) * 4).astype(ldt)
        rhs = (rand(7, 3) * 4).astype(rdt)
        params = dict(dimension_numbers=dn, precision=None, preferred_element_type=pref)
        product = gemm.Product(lhs.shape, lhs.dtype, rhs.shape, rhs.dtype, **params)
        want, got = gemm.dot_general(lhs, rhs, **params), product(lhs, rhs)
        assert got.dtype == want.dtype, (ldt, rdt, pref)
        np.testing.assert_array_equal(got, want)


def test_a_planned_product_decides_its_layout_once():
    """The ways an operand becomes a matrix, decided from the shapes alone: as it is (-1),
    a reshape (0), a reshape and a swap (1), a transpose and a reshape (2)."""
    def how(ls, rs, dn):
        p = gemm.Product(ls, np.dtype(np.float32), rs, np.dtype(np.float32),
                         dimension_numbers=dn)
        return p.lhs[0], p.rhs[0]
    assert how((16, 32), (32, 24), (((1,), (0,)), ((), ()))) == (-1, -1)      # as they are
    assert how((8, 16, 32), (32, 24), (((2,), (0,)), ((), ()))) == (0, -1)     # a reshape
    assert how((8, 16, 24), (32, 24), (((2,), (1,)), ((), ()))) == (0, 1)      # W^T: a swap
    assert how((8, 16, 32), (8, 16, 24), (((0, 1), (0, 1)), ((), ()))) == (1, 0)
    assert how((2, 16, 4, 8), (2, 4, 8, 16), (((3,), (2,)), ((0, 2), (0, 1)))) == (2, -1)


def test_weight_gradient_layout_copies_nothing():
    x, g = rand(8, 16, 32), rand(8, 16, 24)
    a, b, shape, _ = _as_matmul(x, g, (((0, 1), (0, 1)), ((), ())), None)
    assert np.shares_memory(a, x) and np.shares_memory(b, g) and shape == (32, 24)
    w = rand(32, 24)
    a, b, _, _ = _as_matmul(g, w, (((2,), (1,)), ((), ())), None)      # g @ W^T
    assert np.shares_memory(a, g) and np.shares_memory(b, w)


# ---- independent products side by side (gemm.products_together) ----------------------------
def _bound(dn):
    import functools

    from fnad.backends.numba_cpu import _dot_general
    return functools.partial(_dot_general, dimension_numbers=dn, precision=None,
                             preferred_element_type=None)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_together_equal_each_product(dtype):
    """A weight's dX = g @ W^T and dW = x^T @ g, whole products on the threads, equal
    each product computed alone; the BLAS thread count is restored."""
    x, g, w = rand(8, 128, 256, dtype=dtype), rand(8, 128, 768, dtype=dtype), \
        rand(256, 768, dtype=dtype)
    dx = _bound((((2,), (1,)), ((), ())))
    dw = _bound((((0, 1), (0, 1)), ((), ())))
    calls = ((dx, g, w, 1024 * 768 * 256), (dw, x, g, 256 * 1024 * 768))
    blas = gemm.blas_threads()
    before = blas[1]() if blas else None
    got = gemm.products_together(calls)
    tol = 2e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(got[0], g @ w.T, rtol=tol, atol=tol)
    np.testing.assert_allclose(got[1], np.einsum("btk,btn->kn", x, g), rtol=tol, atol=tol)
    assert got[0].shape == (8, 128, 256) and got[1].shape == (256, 768)
    assert got[0].dtype == got[1].dtype == dtype
    if blas:
        assert blas[1]() == before


def test_products_together_with_batch_dims():
    """Attention's backward dP = dO @ V^T and dV = P^T @ dO ([B, H] batch dims)."""
    d_o, v, p = rand(4, 2, 64, 32), rand(4, 2, 64, 32), rand(4, 2, 64, 64)
    dp = _bound((((3,), (3,)), ((0, 1), (0, 1))))
    dv = _bound((((2,), (2,)), ((0, 1), (0, 1))))
    got = gemm.products_together(((dp, d_o, v, 4 * 2 * 64 * 32 * 64),
                                  (dv, p, d_o, 4 * 2 * 64 * 64 * 32)))
    np.testing.assert_allclose(got[0], d_o @ v.swapaxes(-1, -2), rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(got[1], p.swapaxes(-1, -2) @ d_o, rtol=2e-4, atol=2e-4)


def test_makespan_decides_between_whole_and_chunked_products(monkeypatch):
    monkeypatch.setattr(gemm, "NUM_THREADS", 2)
    assert gemm._makespan([5, 5]) == 5 and gemm._makespan([5, 5, 5, 5]) == 10
    assert gemm._makespan([5, 5, 5]) == 10          # 1.33 of an even share: chunked
    assert gemm._makespan([9, 2, 3, 4]) == 9
    seen = []

    def product(a, b, alone=False):
        seen.append(alone)
        return a @ b
    m = rand(64, 64)
    gemm.products_together(((product, m, m, 1), (product, m, m, 1), (product, m, m, 1)))
    assert seen == [False] * 3                      # three on two threads: one at a time
    if gemm.blas_threads() is not None:
        seen.clear()
        gemm.products_together(((product, m, m, 1), (product, m, m, 1)))
        assert seen == [True, True]


def test_jit_runs_a_weights_two_gradient_products_together():
    """The backward pass of x @ W: its dX and dW (independent, adjacent) are one
    products_together call in the driver, and the gradients equal the NumPy reference's."""
    import fnad
    import fnad.numpy as fnp

    def loss(w, x):
        return fnp.sum(fnp.tanh(x @ w) ** 2)
    x, w = rand(8, 128, 256), rand(256, 768) * 0.05
    grad = fnad.jit(fnad.grad(loss, argnums=(0, 1)), backend="numba")
    assert "products_together((" in grad.lower(w, x).source
    got = grad(w, x)
    want = fnad.jit(fnad.grad(loss, argnums=(0, 1)), backend="numpy")(w, x)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-4)


# ---- the BLAS at one thread around a compiled loop (gemm.one_blas_thread) -------------------
def _settable_blas():
    blas = gemm.blas_threads()
    if blas is None:
        pytest.skip("no OpenBLAS with a settable thread count in this process (macOS "
                    "Accelerate, MKL): one_blas_thread leaves the BLAS as it is")
    return blas


def test_one_blas_thread_sections_nest_overlap_and_restore():
    """The BLAS stays at one thread while any section is open, in this thread or another;
    the count it had comes back when the last one closes (also after an exception)."""
    import threading
    blas = _settable_blas()
    before = blas[1]()
    blas[0](2)
    try:
        with gemm.one_blas_thread:
            assert blas[1]() == 1
            with gemm.one_blas_thread:
                assert blas[1]() == 1
            assert blas[1]() == 1
            entered, leave = threading.Event(), threading.Event()

            def other():                   # opens while this one is open, closes after it
                with gemm.one_blas_thread:
                    entered.set()
                    leave.wait(10)
            t = threading.Thread(target=other)
            t.start()
            assert entered.wait(10)
        assert blas[1]() == 1              # the other thread's section is still open
        leave.set()
        t.join(10)
        assert blas[1]() == 2
        with pytest.raises(RuntimeError, match="inside"):
            with gemm.one_blas_thread:
                raise RuntimeError("inside a section")
        assert blas[1]() == 2
    finally:
        blas[0](before)


def test_a_compiled_loops_products_run_with_the_blas_at_one_thread():
    """A scan and a while loop whose bodies multiply matrices: the products inside see the
    BLAS at one thread (a callback in the body reads the count), the count is restored
    after the loop, also when the body raises, and the results equal the NumPy reference's."""
    import fnad
    import fnad.numpy as fnp
    from fnad import lax
    blas = _settable_blas()
    before = blas[1]()
    blas[0](2)
    seen = []

    def count(x):
        seen.append(blas[1]())
        return x

    def rnn(w, xs):
        def cell(h, x):
            h = fnp.tanh(x @ w + h @ w)
            return fnad.pure_callback(count, h, h), h
        return lax.scan(cell, fnp.zeros((4, 8), fnp.float32), xs)

    def power(w):
        return lax.while_loop(lambda c: c[0] < 3,
                              lambda c: (c[0] + 1, fnp.tanh(c[1] @ w)),
                              (0, fnp.ones((8, 8), fnp.float32)))[1]
    w, xs = rand(8, 8) * 0.3, rand(5, 4, 8)
    try:
        got = fnad.jit(rnn, backend="numba")(w, xs)
        assert seen and set(seen) == {1} and blas[1]() == 2
        assert "with one_blas_thread:" in fnad.jit(rnn, backend="numba").lower(w, xs).source
        want = fnad.jit(rnn, backend="numpy")(w, xs)
        for a, b in zip(fnad.tree_util.tree_leaves(got), fnad.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(fnad.jit(power, backend="numba")(w)),
                                   np.asarray(fnad.jit(power, backend="numpy")(w)),
                                   rtol=1e-5, atol=1e-6)
        assert blas[1]() == 2

        def fails(x):
            raise ValueError("raised in the loop body")

        def bad(w, xs):
            return lax.scan(lambda h, x: (fnad.pure_callback(fails, h, x @ w + h), None),
                            fnp.zeros((4, 8), fnp.float32), xs)[0]
        with pytest.raises(ValueError, match="raised in the loop body"):
            fnad.jit(bad, backend="numba")(w, xs)
        assert blas[1]() == 2
    finally:
        blas[0](before)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork: POSIX only")
def test_a_forked_child_starts_with_no_section_open():
    """Forked while another thread's section is open: in the child (which has only the
    forking thread) the BLAS's count is back to what it was, and sections open and close."""
    import threading
    blas = _settable_blas()
    before = blas[1]()
    blas[0](2)
    entered, leave = threading.Event(), threading.Event()

    def other():
        with gemm.one_blas_thread:
            entered.set()
            leave.wait(10)
    t = threading.Thread(target=other)
    t.start()
    try:
        assert entered.wait(10) and blas[1]() == 1
        pid = os.fork()
        if pid == 0:                                   # the child
            ok = blas[1]() == 2 and gemm.one_blas_thread.open == 0
            with gemm.one_blas_thread:
                ok = ok and blas[1]() == 1
            ok = ok and blas[1]() == 2
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert blas[1]() == 1                          # here the section is still open
    finally:
        leave.set()
        t.join(10)
        blas[0](before)


# ---- x @ W^T the other way round (gemm.flipped) ----------------------------------------------
@pytest.mark.parametrize("m,k,n", [(32, 512, 512), (8, 128, 200), (2, 128, 16)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_product_with_a_transposed_right_operand_runs_the_other_way_round(m, k, n, dtype):
    """x @ W^T with fewer rows than columns is computed as (W @ x^T)^T: the same values
    (each a dot product of the same two vectors), a column-major result; eager dot_general,
    a planned product and the chunked path alike."""
    _settable_blas()
    x, w = rand(m, k, dtype=dtype), rand(n, k, dtype=dtype)
    assert gemm.flipped(x, w.T)
    assert not gemm.flipped(w, x.T) and not gemm.flipped(x, np.ascontiguousarray(w.T))
    assert not gemm.flipped(x[:, :127], w[:, :127].T)           # K < 128: as it is
    assert not gemm.flipped(x, w[:8 * m - 1].T)                 # N < 8 M: as it is
    dn = (((1,), (1,)), ((), ()))
    params = dict(dimension_numbers=dn, precision=None, preferred_element_type=None)
    want = np.einsum("mk,nk->mn", x.astype(np.float64), w.astype(np.float64))
    tol = 1e-4 if dtype == np.float32 else 1e-12
    product = gemm.Product(x.shape, x.dtype, w.shape, w.dtype, **params)
    assert product.column_major
    for got in (gemm.dot_general(x, w, **params), product(x, w), gemm.matmul(x, w.T),
                product(x, w, alone=True)):
        assert got.shape == (m, n) and got.dtype == dtype
        assert got.flags.f_contiguous and not got.flags.c_contiguous
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * k)


def test_a_kernel_reads_a_column_major_product_by_strides():
    """Under jit the driver hands the column-major product to the kernel that reads it as
    a strided view (no copy first), with the NumPy backend's numbers."""
    import fnad
    import fnad.numpy as fnp
    _settable_blas()

    def f(x, w):
        return (x @ w.T) * 2.0 + 1.0
    x, w = rand(16, 128), rand(256, 128)
    jitted = fnad.jit(f, backend="numba")
    assert "*S(" in jitted.lower(x, w).source
    np.testing.assert_allclose(np.asarray(jitted(x, w)),
                               np.asarray(fnad.jit(f, backend="numpy")(x, w)),
                               rtol=1e-5, atol=1e-5)
    assert fnp.asarray(jitted(x, w)).shape == (16, 256)
