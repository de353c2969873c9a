"""The convolution wrappers against jax.lax (conv_dimension_numbers, padtype_to_pads, conv,
conv_with_general_padding, conv_transpose, conv_general_dilated_patches), a small CNN's
gradients under jit on each backend, and the errors. The primitive itself (values against
a looped reference, JVPs, transposes, vmap, jax) is covered by tests/specs/spec_convolution.py
through test_primitives.py and test_batching.py."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import fnad
from fnad import lax

try:
    import jax
except ImportError:  # pragma: no cover - exercised only without the dev extra
    jax = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed (the oracle)")
RNG = np.random.default_rng(0)


def _normal(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


@needs_jax
@pytest.mark.parametrize("specs", [("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC"),
                                   ("NWHC", "WHIO", "CHWN"), ("NCH", "OIH", "NHC"),
                                   ("NDHWC", "DHWIO", "NDHWC")])
def test_dimension_numbers_match_jax(specs):
    shape = (2,) * len(specs[0])
    ours = lax.conv_dimension_numbers(shape, shape, specs)
    theirs = jax.lax.conv_dimension_numbers(shape, shape, specs)
    assert tuple(map(tuple, ours)) == tuple(map(tuple, theirs))
    assert lax.conv_dimension_numbers(shape, shape, None) == tuple(
        map(tuple, jax.lax.conv_dimension_numbers(shape, shape, None)))


@needs_jax
def test_padtype_to_pads_matches_jax():
    for n, k, s, kind in itertools.product(range(1, 8), range(1, 5), range(1, 4),
                                           ["SAME", "SAME_LOWER", "VALID"]):
        ours = lax.padtype_to_pads((n,), (k,), (s,), kind)
        theirs = jax.lax.padtype_to_pads((n,), (k,), (s,), kind)
        assert [tuple(p) for p in ours] == [tuple(p) for p in theirs], (n, k, s, kind)


@needs_jax
def test_conv_and_conv_with_general_padding_match_jax():
    x, w = _normal(2, 3, 8, 7), _normal(4, 3, 3, 2)
    for strides, padding in [((1, 1), "SAME"), ((2, 1), "VALID"), ((1, 2), ((1, 0), (2, 1)))]:
        np.testing.assert_allclose(lax.conv(x, w, strides, padding),
                                   jax.lax.conv(x, w, strides, padding), rtol=1e-5, atol=1e-5)
    args = (x, w, (2, 1), ((1, 2), (0, -1)), (1, 2), (2, 1))
    np.testing.assert_allclose(lax.conv_with_general_padding(*args),
                               jax.lax.conv_with_general_padding(*args), rtol=1e-5, atol=1e-5)


@needs_jax
@pytest.mark.parametrize("padding", ["SAME", "VALID", ((1, 2),)])
@pytest.mark.parametrize("transpose_kernel", [False, True])
def test_conv_transpose_matches_jax(padding, transpose_kernel):
    for k, s, d in itertools.product(range(1, 5), range(1, 4), (1, 2)):
        x, w = _normal(2, 5, 3), _normal(k, 3, 3)          # NHC, HIO (I = O = 3)
        ours = lax.conv_transpose(x, w, (s,), padding, rhs_dilation=(d,),
                                  transpose_kernel=transpose_kernel)
        theirs = jax.lax.conv_transpose(x, w, (s,), padding, rhs_dilation=(d,),
                                        transpose_kernel=transpose_kernel)
        assert ours.shape == theirs.shape, (k, s, d)
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5, err_msg=str((k, s, d)))


def test_conv_transpose_with_the_kernel_transposed_is_the_gradient():
    """conv_transpose(g, w, s, pads, transpose_kernel=True) is the VJP of a stride-s
    convolution with respect to its input, when the pads are those of the VJP."""
    x, w = _normal(2, 9, 8, 3), _normal(3, 3, 3, 4)        # NHWC, HWIO
    dn = ("NHWC", "HWIO", "NHWC")
    y, vjp = fnad.vjp(lambda x: lax.conv_general_dilated(x, w, (2, 2), "VALID",
                                                         dimension_numbers=dn), x)
    g = _normal(*y.shape)
    # in = 9: dilated g spans 7, window 3: pads (2, 2); in = 8: spans 5, pads (2, 3)
    got = lax.conv_transpose(g, w, (2, 2), ((2, 2), (2, 3)), dimension_numbers=dn,
                             transpose_kernel=True)
    np.testing.assert_allclose(got, vjp(g)[0], rtol=1e-5, atol=1e-5)


@needs_jax
@pytest.mark.parametrize("dn", [None, ("NHWC", "HWIO", "NHWC")])
def test_patches_match_jax(dn):
    x = _normal(2, 3, 6, 5) if dn is None else _normal(2, 6, 5, 3)
    for filt, strides, padding in [((2, 2), (1, 1), "VALID"), ((3, 2), (2, 1), "SAME")]:
        ours = lax.conv_general_dilated_patches(x, filt, strides, padding,
                                                dimension_numbers=dn)
        theirs = jax.lax.conv_general_dilated_patches(x, filt, strides, padding,
                                                      dimension_numbers=dn)
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)


@needs_jax
def test_half_precision_with_a_float32_result_matches_jax():
    x, w = _normal(2, 3, 7, dtype=np.float16), _normal(2, 3, 3, dtype=np.float16)
    ours = lax.conv_general_dilated(x, w, (1,), "SAME", preferred_element_type=np.float32)
    theirs = jax.lax.conv_general_dilated(x, w, (1,), "SAME",
                                          preferred_element_type=np.float32)
    assert ours.dtype == theirs.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-3)


@needs_jax
def test_shape_tuples_and_permutations_match_jax():
    specs = ("NHWC", "HWIO", "NHWC")
    for strides, pads in [((2, 1), "SAME"), ((1, 3), "VALID"), ((2, 2), ((1, -1), (2, 0)))]:
        assert lax.conv_shape_tuple((2, 3, 9, 8), (4, 3, 3, 2), strides, pads) == tuple(
            int(d) for d in jax.lax.conv_shape_tuple((2, 3, 9, 8), (4, 3, 3, 2), strides, pads))
        args = ((2, 9, 8, 3), (3, 2, 3, 4), strides, pads, specs)
        assert lax.conv_general_shape_tuple(*args) == tuple(
            int(d) for d in jax.lax.conv_general_shape_tuple(*args))
        assert lax.conv_transpose_shape_tuple(*args) == tuple(
            int(d) for d in jax.lax.conv_transpose_shape_tuple(*args))
    assert lax.conv_general_permutations(specs) == jax.lax.conv_general_permutations(specs)
    with pytest.raises(ValueError, match="negative padding"):
        lax.conv_shape_tuple((1, 1, 3), (1, 1, 1), (1,), ((-2, -2),))


@needs_jax
@pytest.mark.parametrize("dn", [None, ("NHWC", "WHIO", "NCHW")])
def test_a_locally_connected_layer_matches_jax(dn):
    """conv_general_dilated_local: a kernel per output position; values and gradients."""
    x = _normal(2, 3, 7, 6) if dn is None else _normal(2, 7, 6, 3)
    filt, strides, padding = (3, 2), (2, 1), "SAME"
    patches = jax.lax.conv_general_dilated_patches(x, filt, strides, padding,
                                                   dimension_numbers=dn)
    odn = jax.lax.conv_dimension_numbers(x.shape, x.shape, dn)
    canonical = (5, patches.shape[odn.out_spec[1]], *(patches.shape[d]
                                                      for d in odn.out_spec[2:]))
    w = _normal(*(canonical[list(odn.rhs_spec).index(d)] for d in range(4)))
    args = (strides, padding, filt)
    np.testing.assert_allclose(
        lax.conv_general_dilated_local(x, w, *args, dimension_numbers=dn),
        jax.lax.conv_general_dilated_local(x, w, *args, dimension_numbers=dn),
        rtol=1e-5, atol=1e-5)
    ours = fnad.grad(lambda x, w: (lax.conv_general_dilated_local(
        x, w, *args, dimension_numbers=dn) ** 2).sum(), argnums=(0, 1))(x, w)
    theirs = jax.grad(lambda x, w: (jax.lax.conv_general_dilated_local(
        x, w, *args, dimension_numbers=dn) ** 2).sum(), argnums=(0, 1))(x, w)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def _cnn_loss(conv, relu, params, x):
    """Two convolutions (NHWC, a strided one and a depthwise one), relu, a mean."""
    dn = ("NHWC", "HWIO", "NHWC")
    h = relu(conv(x, params["w1"], (1, 1), "SAME", dimension_numbers=dn) + params["b1"])
    h = relu(conv(h, params["w2"], (2, 2), "SAME", dimension_numbers=dn))
    h = conv(h, params["w3"], (1, 1), "VALID", dimension_numbers=dn, feature_group_count=4)
    return (h * h).mean()


def _cnn_params():
    return {"w1": _normal(3, 3, 2, 4) * 0.5, "b1": _normal(4) * 0.1,
            "w2": _normal(3, 3, 4, 4) * 0.3, "w3": _normal(2, 2, 1, 8) * 0.5}


BACKENDS = ["numpy", "numba"] + (["xla"] if jax is not None else [])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_small_cnn_under_jit_matches_eager(backend):
    params, x = _cnn_params(), _normal(2, 9, 8, 2)
    loss = lambda p, x: _cnn_loss(lax.conv_general_dilated, fnad.nn.relu, p, x)  # noqa: E731
    want_v, want_g = fnad.value_and_grad(loss)(params, x)
    got_v, got_g = fnad.jit(fnad.value_and_grad(loss), backend=backend)(params, x)
    np.testing.assert_allclose(got_v, want_v, rtol=1e-5)
    for k in params:
        np.testing.assert_allclose(got_g[k], want_g[k], rtol=1e-4, atol=1e-6, err_msg=k)


@needs_jax
def test_a_small_cnn_gradient_matches_jax():
    params, x = _cnn_params(), _normal(2, 9, 8, 2)
    ours = fnad.grad(lambda p: _cnn_loss(lax.conv_general_dilated, fnad.nn.relu, p, x))(params)
    theirs = jax.grad(lambda p: _cnn_loss(jax.lax.conv_general_dilated, jax.nn.relu, p, x))(
        params)
    for k in params:
        np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-4, atol=1e-6, err_msg=k)


def test_per_example_gradients_through_vmap():
    params, xs = _cnn_params(), _normal(3, 1, 9, 8, 2)
    loss = lambda p, x: _cnn_loss(lax.conv_general_dilated, fnad.nn.relu, p, x)  # noqa: E731
    per = fnad.vmap(fnad.grad(loss), in_axes=(None, 0))(params, xs)
    for i in range(3):
        one = fnad.grad(loss)(params, xs[i])
        for k in params:
            np.testing.assert_allclose(per[k][i], one[k], rtol=1e-4, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("call, message", [
    (lambda x, w: lax.conv(x, w[:, :2], (1, 1), "VALID"),
     "divided by feature_group_count (1) must equal rhs's input feature dimension (size 2)"),
    (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID", feature_group_count=2),
     "feature_group_count 2 must divide lhs's feature dimension (size 3"),
    (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID", feature_group_count=3,
                                           batch_group_count=2),
     "at most one of feature_group_count"),
    (lambda x, w: lax.conv(x, w, (1,), "VALID"),
     "window_strides must have one entry per spatial dimension (2)"),
    (lambda x, w: lax.conv(x, w, (0, 1), "VALID"), "window_strides must be positive"),
    (lambda x, w: lax.conv(x, w, (1, 1), ((1, 1),)),
     "padding must have one (low, high) pair per spatial dimension"),
    (lambda x, w: lax.conv(x, w, (1, 1), "FULL"), "unknown padding 'FULL'"),
    (lambda x, w: lax.conv(x, w[0], (1, 1), "VALID"), "must have the same rank"),
    (lambda x, w: lax.conv(x, w.astype(np.float16), (1, 1), "VALID"),
     "requires lhs and rhs to have the same dtype, got float32 and float16"),
    (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", lhs_dilation=(2, 1)),
     "string padding 'SAME' is not defined for a transposed convolution"),
    (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID",
                                           dimension_numbers=("NHWC", "HWOI", "NHW")),
     "the out spec 'NHW' must contain 'N' and 'C' once each"),
    (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID",
                                           dimension_numbers=("NHWC", "HWIO", "NHDC")),
     "must name the same spatial dimensions"),
    (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID",
                                           dimension_numbers=("NCH", "OIH", "NCH")),
     "has 3 dimensions, the arrays have rank 4"),
])
def test_errors_say_what_is_wrong(call, message):
    x, w = _normal(2, 3, 6, 5), _normal(4, 3, 3, 2)
    with pytest.raises((TypeError, ValueError)) as info:
        call(x, w)
    assert message in str(info.value)


def test_the_numba_backends_unfolding_matches_the_reference():
    """backends/numba_cpu/conv.py writes the patches with its own kernel (reading the input
    unpadded, zeros for taps on a pad): the same results as the NumPy reference over 200
    random ranks, strides, pads (negative too), both dilations and groups."""
    pytest.importorskip("numba", reason="the numba backend needs numba")
    from fnad.backends.numba_cpu.conv import conv_general_dilated as numba_conv
    from fnad.backends.numpy_ref.convolution import conv_general_dilated as numpy_conv
    from fnad.primitives import convolution as cv
    rng = np.random.default_rng(3)
    for _ in range(200):
        nd = int(rng.integers(0, 4))
        G = int(rng.choice([1, 1, 2]))
        B = 1 if G > 1 else int(rng.choice([1, 1, 2]))
        I, Og = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        x = rng.standard_normal((B * int(rng.integers(1, 3)), G * I,
                                 *rng.integers(1, 7, nd))).astype(np.float32)
        w = rng.standard_normal((max(G, B) * Og, I, *rng.integers(1, 4, nd))).astype(np.float32)
        params = dict(
            window_strides=tuple(rng.integers(1, 4, nd)), padding=tuple(
                (int(lo), int(hi)) for lo, hi in rng.integers(-2, 4, (nd, 2))),
            lhs_dilation=tuple(rng.integers(1, 4, nd)),
            rhs_dilation=tuple(rng.integers(1, 3, nd)),
            dimension_numbers=cv.conv_dimension_numbers(x.shape, w.shape, None),
            feature_group_count=G, batch_group_count=B, precision=None,
            preferred_element_type=None)
        want = numpy_conv(x, w, **params)
        got = numba_conv(x, w, **params)
        assert got.shape == want.shape, params
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=str(params))


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16", "complex64", "complex128",
                                   "int32", "bool"])
def test_the_numba_backends_unfolding_moves_every_dtype_in_every_layout(dtype, monkeypatch):
    """The patch fillers move elements as unsigned integers of their width (one compiled
    kernel per width; complex128's 16 bytes by NumPy): every dtype gives the reference's
    results exactly, read in three memory orders of the same lhs: the canonical one,
    features outermost (images closer together than features: the transposed fill) and
    channels last (features strided by one). (With one block per product: the transposed
    patches' sums over lanes of taps are another order of the same sums, tested below.)"""
    import ml_dtypes

    from fnad.backends.numba_cpu import conv
    from fnad.backends.numpy_ref.convolution import conv_general_dilated as numpy_conv
    from fnad.primitives import convolution as cv
    for name, value in (("NUM_THREADS", 1), ("LANES_PER_THREAD", 1), ("TASK_BYTES", 1 << 30)):
        monkeypatch.setattr(conv, name, value)
    ran, kernel = [], conv._kernel
    monkeypatch.setattr(conv, "_kernel", lambda source: (ran.append(source), kernel(source))[1])
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 3, 6, 5)) * 3).astype(dt)
    w = (rng.standard_normal((4, 3, 3, 2)) * 3).astype(dt)
    if np.dtype(dt).kind == "c":
        x = x + 1j * rng.standard_normal(x.shape).astype(dt)
    params = dict(window_strides=(1, 2), padding=((1, 1), (0, 2)), lhs_dilation=(1, 2),
                  rhs_dilation=(2, 1),
                  dimension_numbers=cv.conv_dimension_numbers(x.shape, w.shape, None),
                  feature_group_count=1, batch_group_count=1, precision=None,
                  preferred_element_type=None)
    want = numpy_conv(x, w, **params)
    for order in [(0, 1, 2, 3), (1, 0, 2, 3), (0, 2, 3, 1)]:
        lhs = np.ascontiguousarray(x.transpose(order)).transpose(np.argsort(order))
        got = conv.conv_general_dilated(lhs, w, **params)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want, err_msg=str(order))
    assert len(set(ran)) == (0 if dtype == "complex128" else 2)   # both fillers ran


@pytest.mark.parametrize("channels", [7, 12])     # (a copy of a constant count, and not)
@pytest.mark.parametrize("task_bytes", [1, 5000, 1 << 20])
def test_the_numba_backends_threads_unfold_and_multiply_blocks_of_rows(task_bytes, channels,
                                                                       monkeypatch):
    """Where every output position is one phase's (no lhs dilation) in one group, each of
    the numba backend's threads unfolds a block of patch rows (about TASK_BYTES) into its
    own buffer and multiplies it straight into the output's rows: blocks of one chunk of
    conv.BLOCK outputs up to several images, an image's last chunk shorter than BLOCK,
    blocks across images, two memory layouts of the lhs, strides and uneven pads: the
    reference's results, through those blocks."""
    from fnad.backends.numba_cpu import conv
    from fnad.backends.numpy_ref.convolution import conv_general_dilated as numpy_conv
    from fnad.primitives import convolution as cv
    monkeypatch.setattr(conv, "TASK_BYTES", task_bytes)
    blocks, rows = [], conv._Unfold.rows
    monkeypatch.setattr(conv._Unfold, "rows", lambda self, patches, c0, c1, *rest: (
        blocks.append((c0, c1)), rows(self, patches, c0, c1, *rest))[1])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, channels, 10, 13)).astype(np.float32)  # NCHW: 130 outputs
    w = rng.standard_normal((6, channels, 3, 2)).astype(np.float32)
    for strides, padding in [((1, 1), ((1, 1), (0, 1))), ((2, 3), ((2, 0), (1, 1)))]:
        params = dict(window_strides=strides, padding=padding, lhs_dilation=(1, 1),
                      rhs_dilation=(1, 1),
                      dimension_numbers=cv.conv_dimension_numbers(x.shape, w.shape, None),
                      feature_group_count=1, batch_group_count=1, precision=None,
                      preferred_element_type=None)
        want = numpy_conv(x, w, **params)
        for lhs in (x, np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)):
            blocks.clear()
            got = conv.conv_general_dilated(lhs, w, **params)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
            chunks = sorted(blocks)                 # every chunk once, in blocks as sized
            assert [c for c0, c1 in chunks for c in range(c0, c1)] == list(range(
                chunks[-1][1]))
            assert len(chunks) > 1 and (task_bytes > 1 or all(
                c1 - c0 == 1 for c0, c1 in chunks))


@pytest.mark.parametrize("images", [5, 11])       # (a copy of a constant count, and not)
@pytest.mark.parametrize("task_bytes", [1, 3000, 1 << 20])
def test_the_numba_backends_weight_gradient_sums_lanes_of_taps_in_order(task_bytes, images,
                                                                        monkeypatch):
    """A convolution whose lhs has its images closer together than its features (a weight
    gradient: the forward pass's input with batch and features exchanged) is a sum over
    taps and the forward pass's batch: the numba backend's threads take lanes of taps,
    each summed a block of taps at a time (blocks of one tap to a whole lane), and the
    lanes are added in order: the reference's values to rounding, the same bits in every
    call (whichever thread takes which lane), every tap once; in phases too (lhs dilation
    with a window stride)."""
    from fnad.backends.numba_cpu import conv
    from fnad.backends.numpy_ref.convolution import conv_general_dilated as numpy_conv
    monkeypatch.setattr(conv, "TASK_BYTES", task_bytes)
    blocks, taps = [], conv._Unfold.taps

    def record(self, patches, t0, t1, n, phase):
        blocks.append((phase, self.sources(phase).shape[1], t0, t1))
        taps(self, patches, t0, t1, n, phase)
    monkeypatch.setattr(conv._Unfold, "taps", record)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 9, 11, images)).astype(np.float32)   # forward: NHWC -> 4
    dy = rng.standard_normal((6, 4, 5, 4)).astype(np.float32)
    dn = ((3, 0, 1, 2), (3, 0, 1, 2), (0, 3, 1, 2))    # batch <-> feature: [images, kh, kw, 4]
    for strides, lhs_dilation, padding in [((1, 1), (1, 1), ((0, 1), (1, 0))),
                                           ((2, 1), (3, 1), ((1, 1), (0, 2)))]:
        params = dict(window_strides=strides, padding=padding, lhs_dilation=lhs_dilation,
                      rhs_dilation=(2, 2), dimension_numbers=dn, feature_group_count=1,
                      batch_group_count=1, precision=None, preferred_element_type=None)
        want = numpy_conv(x, dy, **params)
        blocks.clear()
        got = conv.conv_general_dilated(x, dy, **params)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
        covered = {}
        for phase, K, t0, t1 in blocks:
            covered.setdefault((phase, K), []).extend(range(t0, t1))
        assert covered and all(sorted(ts) == list(range(K)) for (_, K), ts in covered.items())
        assert task_bytes > 1 or all(t1 - t0 == 1 for *_, t0, t1 in blocks)
        for _ in range(4):
            np.testing.assert_array_equal(conv.conv_general_dilated(x, dy, **params), got)


@pytest.mark.parametrize("task_bytes", [1, 300, 1 << 20])
def test_the_numba_backends_lhs_dilated_convolution_adds_each_inputs_products(task_bytes,
                                                                              monkeypatch):
    """An lhs-dilated convolution at window stride 1 (the input gradient of a strided one)
    on the numba backend: every input position times every tap (one product per block of
    whole images, a thread each, or per block of one image's positions where an image's
    products exceed TASK_BYTES), added to the output each lands on (conv._scattered):
    the reference's values to rounding over 60 random ranks 1-3, dilations of both sides,
    pads (negative too), layouts and dtypes; the same bits in every call; and the path ran
    (where it does not apply, a window stride or groups, the reference's phases)."""
    import ml_dtypes

    from fnad.backends.numba_cpu import conv
    from fnad.backends.numpy_ref.convolution import conv_general_dilated as numpy_conv
    from fnad.primitives import convolution as cv
    monkeypatch.setattr(conv, "TASK_BYTES", task_bytes)
    ran, kernel = [], conv._kernel
    monkeypatch.setattr(conv, "_kernel", lambda source: (ran.append(source), kernel(source))[1])
    rng = np.random.default_rng(7)
    for case in range(60):
        nd = 1 + case % 3
        dt = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16][case % 4]
        x = rng.standard_normal((int(rng.integers(1, 4)), int(rng.integers(1, 5)),
                                 *rng.integers(1, 6, nd))).astype(dt)
        w = rng.standard_normal((int(rng.integers(1, 4)), x.shape[1],
                                 *rng.integers(1, 4, nd))).astype(dt)
        if case % 5 == 0:                                    # channels last in memory
            x = np.ascontiguousarray(np.moveaxis(x, 1, -1)).transpose(0, nd + 1,
                                                                     *range(1, nd + 1))
        dilation = tuple(int(d) for d in rng.integers(1, 4, nd))
        dilation = (2, *dilation[1:]) if max(dilation) == 1 else dilation
        params = dict(window_strides=(1,) * nd, padding=tuple(
                          (int(lo), int(hi)) for lo, hi in rng.integers(-1, 4, (nd, 2))),
                      lhs_dilation=dilation, rhs_dilation=tuple(rng.integers(1, 3, nd)),
                      dimension_numbers=cv.conv_dimension_numbers(x.shape, w.shape, None),
                      feature_group_count=1, batch_group_count=1, precision=None,
                      preferred_element_type=None)
        want = numpy_conv(x, w, **params)
        ran.clear()
        got = conv.conv_general_dilated(x, w, **params)
        assert got.dtype == want.dtype and got.shape == want.shape, params
        tol = {2: 1e-2, 4: 1e-5, 8: 1e-12}[np.dtype(dt).itemsize]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                                   atol=tol, err_msg=str(params))
        assert ran == ([conv._SCATTER_ADD] if got.size else []), params
        np.testing.assert_array_equal(conv.conv_general_dilated(x, w, **params), got)
    x = rng.standard_normal((2, 4, 5, 5)).astype(np.float32)
    for strides, groups in (((2, 1), 1), ((1, 1), 2)):         # the reference's phases
        w = rng.standard_normal((4, 4 // groups, 3, 3)).astype(np.float32)
        params = dict(window_strides=strides, padding=((1, 1), (1, 1)), lhs_dilation=(2, 2),
                      rhs_dilation=(1, 1), dimension_numbers=cv.conv_dimension_numbers(
                          x.shape, w.shape, None), feature_group_count=groups,
                      batch_group_count=1, precision=None, preferred_element_type=None)
        ran.clear()
        np.testing.assert_allclose(conv.conv_general_dilated(x, w, **params),
                                   numpy_conv(x, w, **params), rtol=1e-5, atol=1e-5)
        assert conv._SCATTER_ADD not in ran
