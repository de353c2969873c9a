"""fnad.ops' segment reductions against jax.ops: values (identities of empty segments,
dropped and clamped out-of-range ids, trailing dims, integer dtypes, bucket_size),
gradients with ties (jax.grad), vmap against jax.vmap, jit, and the errors."""
from __future__ import annotations

import numpy as np
import pytest
from checks import raises_with, traced

import fnad
from fnad import ops

jax = pytest.importorskip("jax", reason="jax not installed: the oracle of these tests")

NAMES = ["segment_sum", "segment_prod", "segment_max", "segment_min"]
# Segment 0 holds a tie (2.0 twice), 1 is empty, -1 and 5 are out of range for 4 segments.
IDS = np.array([0, 2, 0, 3, -1, 2, 5, 0], np.int32)
DATA = np.array([2.0, -1.5, 2.0, 0.5, 3.0, 1.25, -4.0, 0.75], np.float32)


@pytest.mark.parametrize("name", NAMES)
def test_segment_values_match_jax(name):
    f, g = getattr(ops, name), getattr(jax.ops, name)
    rows = np.stack([DATA, DATA[::-1], DATA * 2], axis=1)                 # [8, 3] trailing dim
    cases = [(DATA, IDS, 4, {}), (rows, IDS, 4, {"mode": "clip"}),
             (rows, IDS, 4, {"bucket_size": 3}),
             (DATA, IDS, 6, {"bucket_size": 3, "mode": jax.lax.GatherScatterMode.CLIP}),
             (DATA, np.sort(IDS), 7, {"indices_are_sorted": True}),
             (DATA, np.abs(IDS), None, {}),                                # num_segments = 6
             (np.arange(8, dtype=np.int8) - 3, IDS, 5, {}),                # int identities
             (DATA[:0], IDS[:0], 3, {})]
    for data, ids, n, kw in cases:
        want = np.asarray(g(data, ids, n, **kw))
        got = np.asarray(f(data, ids, n, **kw))
        assert got.dtype == want.dtype and got.shape == want.shape, (kw, got, want)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{name} {n} {kw}")
    got = traced(lambda d, i: f(d, i, 4))(DATA, IDS)                    # static num_segments
    np.testing.assert_allclose(got, g(DATA, IDS, 4), rtol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_segment_gradients_and_vmap_match_jax(name):
    f, g = getattr(ops, name), getattr(jax.ops, name)
    ids, kw, n = (IDS, {}, 4)
    if name == "segment_prod":                       # as JAX, its derivatives need unique ids
        ids, kw, n = np.array([3, 0, 5, 1, 2, 4, 7, 6]), {"unique_indices": True}, 8
    w = np.arange(1.0, n + 1.0, dtype=np.float32)

    got = fnad.grad(lambda d: fnad.numpy.sum(f(d, ids, n, **kw) * w))(DATA)
    want = jax.grad(lambda d: jax.numpy.sum(g(d, ids, n, **kw) * w))(DATA)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)         # ties share the max
    for bucket in (None, 3):
        batch = np.stack([DATA, DATA[::-1] * 3, DATA - 1])                  # [3, 8]
        got = fnad.vmap(lambda d: f(d, ids, n, bucket_size=bucket, **kw))(batch)
        want = jax.vmap(lambda d: g(d, ids, n, bucket_size=bucket, **kw))(batch)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    id_batch = np.stack([ids, ids[::-1]])                                 # batched ids [2, 8]
    got = fnad.vmap(lambda i: f(DATA, i, n, **kw))(id_batch)
    np.testing.assert_allclose(got, jax.vmap(lambda i: g(DATA, i, n, **kw))(id_batch),
                               rtol=1e-6)


def test_segment_errors():
    raises_with(lambda: fnad.jit(lambda d, i: ops.segment_sum(d, i))(DATA, IDS),
                "segment_sum", "num_segments", "concrete", exc=fnad.ConcretizationTypeError)
    raises_with(lambda: fnad.jit(lambda d, n: ops.segment_max(d, IDS, n))(DATA, 4),
                "segment_max", "num_segments", "static", exc=fnad.ConcretizationTypeError)
    raises_with(lambda: ops.segment_sum(DATA, IDS.astype(np.float32), 4),
                "segment_ids", "integer", exc=TypeError)
    raises_with(lambda: ops.segment_min(DATA, IDS, -1), "non-negative", exc=ValueError)
    raises_with(lambda: ops.segment_prod(DATA[:0], IDS[:0]), "empty", "num_segments",
                exc=ValueError)
    raises_with(lambda: ops.segment_sum(DATA, IDS, 4, bucket_size=0), "bucket_size",
                exc=ValueError)
    raises_with(lambda: ops.segment_max(DATA, IDS[None], 4), "segment_ids", "1-D",
                "(1, 8)", exc=ValueError)
    raises_with(lambda: ops.segment_max(DATA[:5], IDS, 4), "leading axis", "(5,)",
                exc=ValueError)
