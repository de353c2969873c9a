"""fnad.scipy.spatial.transform (Rotation, Slerp) against jax.scipy.spatial.transform:
every conversion, composition, apply, inv, magnitude, mean and Slerp on batches of random
rotations; Euler angles for extrinsic/intrinsic, symmetric/asymmetric sequences, in
degrees, and at gimbal lock; gradients through from_rotvec/apply/as_matrix (as_euler's by
finite differences); Rotation as a pytree under jit, vmap and grad; what jax lacks
(random) by its properties; errors.

jax runs the oracles under one jit each (op by op it compiles every small op anew), except
the Euler angles (see there).
"""
import numpy as np
import pytest
from checks import assert_trees_close, traced

import fnad
from fnad.scipy.spatial.transform import Rotation, Slerp


@pytest.fixture(scope="module")
def jx():
    """(jax, jax's Rotation, jax's Slerp); the test skips without jax."""
    jax = pytest.importorskip("jax", reason="jax is the oracle")
    from jax.scipy.spatial.transform import Rotation as JRotation
    from jax.scipy.spatial.transform import Slerp as JSlerp
    return jax, JRotation, JSlerp


RNG = np.random.default_rng(0)
QUAT = RNG.normal(size=(5, 4)).astype(np.float32)
VEC = RNG.normal(size=(5, 3)).astype(np.float32)
ROTVEC = (RNG.normal(size=(5, 3)) * [[1], [1], [1], [1e-4], [0]]).astype(np.float32)  # tiny, 0
WEIGHTS = RNG.uniform(0.1, 1, size=5).astype(np.float32)
TIMES = np.array([0.0, 1.0, 2.5, 3.0, 4.0], np.float32)
AT = np.array([0.0, 0.3, 1.0, 1.7, 2.5, 3.9, 4.0], np.float32)


def _conversions(R, S, quat, vec, rotvec, weights):
    """Conversions, operations and Slerp, for R = fnad's or jax's Rotation (S: Slerp)."""
    r = R.from_quat(quat)
    m = r.as_matrix()
    return {
        "from_quat": r.quat, "as_matrix": m, "from_matrix": R.from_matrix(m).quat,
        "as_rotvec": r.as_rotvec(), "from_rotvec": R.from_rotvec(rotvec).quat,
        "as_mrp": r.as_mrp(), "from_mrp": R.from_mrp(0.3 * vec).quat,
        "as_quat_canonical_scalar_first": r.as_quat(canonical=True, scalar_first=True),
        "apply": r.apply(vec), "apply_inverse": r.apply(vec, inverse=True),
        "inv": r.inv().quat, "magnitude": r.magnitude(),
        "compose": (r * R.from_rotvec(rotvec)).quat,
        "mean_weighted": r.mean(weights).as_quat(canonical=True),
        "slerp": S.init(TIMES, r)(AT).as_matrix(),
    }


def test_conversions_and_operations_match_jax(jx):
    jax, JR, JS = jx
    args = (QUAT, VEC, ROTVEC, WEIGHTS)
    got = _conversions(Rotation, Slerp, *args)
    want = jax.jit(lambda *a: _conversions(JR, JS, *a))(*args)
    assert sorted(got) == sorted(want)
    for name in got:
        assert_trees_close(got[name], want[name], 2e-6, 2e-6, name)


def test_variants_agree_with_the_forms_checked_against_jax():
    """Degrees, broadcasting in apply and compose, indexing, unweighted mean, one Slerp
    time, identity and concatenate: by the forms compared with jax above."""
    r = Rotation.from_quat(QUAT)
    np.testing.assert_allclose(r.as_rotvec(degrees=True), np.rad2deg(r.as_rotvec()),
                               rtol=1e-6)
    np.testing.assert_allclose(Rotation.from_rotvec(50 * ROTVEC, degrees=True).quat,
                               Rotation.from_rotvec(np.deg2rad(50 * ROTVEC)).quat, atol=1e-7)
    np.testing.assert_allclose(r.apply(VEC[0]), r.apply(np.tile(VEC[0], (5, 1))), atol=1e-6)
    np.testing.assert_allclose(r[1].apply(VEC), np.stack([r[1].as_matrix() @ v for v in VEC]),
                               atol=1e-6)
    np.testing.assert_allclose((r * r[2]).quat, (r * Rotation(np.tile(r[2].quat, (5, 1)))).quat,
                               atol=1e-7)
    np.testing.assert_array_equal(r[1:4].quat, r.quat[1:4])
    np.testing.assert_array_equal(r[np.array([4, 0])].quat, np.asarray(r.quat)[[4, 0]])
    np.testing.assert_allclose(r.mean().quat, r.mean(np.ones(5)).quat, atol=1e-7)
    slerp = Slerp.init(TIMES, r)
    one = slerp(1.2)
    assert one.single
    np.testing.assert_allclose(one.quat, slerp(np.array([1.2]))[0].quat, atol=1e-7)
    np.testing.assert_allclose(slerp(TIMES).as_matrix(), r.as_matrix(), atol=1e-6)
    assert Rotation.identity().quat.tolist() == [0, 0, 0, 1]
    np.testing.assert_array_equal(Rotation.identity(3).quat, np.tile([0, 0, 0, 1], (3, 1)))
    both = Rotation.concatenate([r[0], r[1:3]])
    np.testing.assert_array_equal(both.quat, r.quat[:3])


SEQS = ["xyz", "zxz", "XYZ", "ZYZ", "yxz", "XZY", "xzx", "YXY"]
ANGLES = RNG.uniform(-3, 3, size=(5, 3)).astype(np.float32)
# gimbal locks: the middle angle at the end of its range (±π/2 for xyz-like sequences;
# 0 for symmetric ones: at π float rounding decides between ±π, so not tested there)
LOCKS = np.array([[0.3, 0.0, 0.5], [0.3, np.pi / 2, 0.5], [0.2, -np.pi / 2, 0.1],
                  [1.0, 0.0, -1.0], [-0.5, np.pi / 2, 2.0]], np.float32)


def _euler(R, quat, angles, locks):
    r = R.from_quat(quat)
    out = {}
    for seq in SEQS:
        out[f"as_euler {seq}"] = r.as_euler(seq)
        out[f"from_euler {seq}"] = R.from_euler(seq, angles).quat
        out[f"gimbal lock {seq}"] = R.from_euler(seq, locks).as_euler(seq)
    out["as_euler degrees"] = r.as_euler("zyx", degrees=True)
    out["from_euler degrees"] = R.from_euler("YZX", 57.3 * angles, degrees=True).quat
    out["from_euler z"] = R.from_euler("z", 90.0, degrees=True).quat
    out["from_euler XY"] = R.from_euler("XY", angles[:, :2]).quat
    return out


def test_euler_angles_match_jax(jx):
    """jax eagerly here: its Euler code takes the axes as data, so each sequence reuses
    the ops compiled for the first (under jit each one compiles anew)."""
    _, JR, _ = jx
    got = _euler(Rotation, QUAT, ANGLES, LOCKS)
    want = _euler(JR, QUAT, ANGLES, LOCKS)
    for name in got:
        atol = 2e-4 if "degrees" in name else 2e-6
        assert_trees_close(got[name], want[name], 2e-6, atol, name)


def test_euler_round_trips():
    """from_euler(as_euler(r)) is r (as a matrix) for every sequence."""
    r = Rotation.from_quat(QUAT)
    for seq in SEQS:
        back = Rotation.from_euler(seq, r.as_euler(seq))
        np.testing.assert_allclose(back.as_matrix(), r.as_matrix(), atol=2e-6, err_msg=seq)


def _loss(R, quat, rotvec, vec):
    r = R.from_quat(quat) * R.from_rotvec(rotvec)
    return (r.apply(vec) ** 2 * vec).sum() + r.inv().as_matrix()[:, 0, 1].sum()


def test_gradients_match_jax(jx):
    jax, JR, _ = jx
    args = (QUAT, 0.5 * VEC, VEC)          # jax's from_rotvec has NaN gradients at 0
    got = fnad.grad(lambda *a: _loss(Rotation, *a), argnums=(0, 1, 2))(*args)
    want = jax.jit(jax.grad(lambda *a: _loss(JR, *a), argnums=(0, 1, 2)))(*args)
    assert_trees_close(got, want, 1e-5, 1e-5, "d loss / (quat, rotvec, vec)")
    # as_euler's gradient by central differences (float64)
    q = QUAT[0].astype(np.float64)
    with fnad.config.override(jax_enable_x64=True):
        g = fnad.grad(lambda q: Rotation.from_quat(q).as_euler("zyx") @ np.array([1, 2, 3.]))(q)
        fd = [(Rotation.from_quat(q + h).as_euler("zyx") - Rotation.from_quat(q - h).as_euler(
            "zyx")) @ np.array([1, 2, 3.]) / 2e-6 for h in 1e-6 * np.eye(4)]
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)


def test_rotation_is_a_pytree_under_jit_vmap_grad():
    r = Rotation.from_quat(QUAT)
    out = traced(lambda r, v: r.inv() * r, )(r, VEC)
    assert isinstance(out, Rotation)
    np.testing.assert_allclose(np.abs(out.quat[:, 3]), 1, atol=1e-6)
    mats = fnad.vmap(lambda r: r.as_matrix())(r)
    np.testing.assert_allclose(mats, r.as_matrix(), atol=1e-7)
    g = fnad.grad(lambda r: r.apply(VEC).sum())(r)
    assert isinstance(g, Rotation) and g.quat.shape == (5, 4)
    slerp = Slerp.init(TIMES, r)
    interp = traced(lambda s, t: s(t))(slerp, AT)
    np.testing.assert_allclose(interp.as_matrix(), slerp(AT).as_matrix(), atol=1e-6)
    # the identity: rotation vectors and angles differentiate there (jax's are NaN)
    jac = fnad.jacfwd(lambda v: Rotation.from_rotvec(v).quat)(np.zeros(3, np.float32))
    np.testing.assert_allclose(jac, np.vstack([0.5 * np.eye(3), np.zeros(3)]), atol=0)
    jac = fnad.jacfwd(lambda q: Rotation.from_quat(q).as_rotvec())(
        np.array([0, 0, 0, 1], np.float32))
    np.testing.assert_allclose(jac, np.hstack([2 * np.eye(3), np.zeros((3, 1))]), atol=0)


def test_random_rotations():
    """jax has no Rotation.random: uniform on SO(3) by its properties."""
    key = fnad.random.PRNGKey(0)
    r = Rotation.random(key, 2000)
    assert r.quat.shape == (2000, 4) and len(r) == 2000 and not r.single
    np.testing.assert_allclose(np.linalg.norm(r.quat, axis=-1), 1, atol=1e-6)
    np.testing.assert_array_equal(Rotation.random(key, 2000).quat, r.quat)   # deterministic
    # Haar measure: the mean rotation matrix is 0 and cos θ has mean -1/2... E[tr R] = 0
    np.testing.assert_allclose(np.mean(r.as_matrix(), axis=0), 0, atol=0.05)
    one = Rotation.random(key)
    assert one.single and one.quat.shape == (4,) and r[7].single


def test_errors():
    one = Rotation.identity()
    with pytest.raises(TypeError, match="Single rotation is not subscriptable"):
        one[0]
    with pytest.raises(TypeError, match="Single rotation has no len"):
        len(one)
    cases = [
        (lambda: Rotation.from_quat(np.ones(3)), r"last axis of size 4, got shape \(3,\)"),
        (lambda: Rotation.from_matrix(np.eye(4)), r"\[..., 3, 3\], got shape \(4, 4\)"),
        (lambda: Rotation.from_rotvec(np.ones((2, 4))), "rotation vectors with a last axis"),
        (lambda: Rotation.from_euler("xyzx", [1, 2, 3, 4]), "1 or 2 or 3 characters"),
        (lambda: Rotation.from_euler("xYz", [1, 2, 3]), "not mixed, got 'xYz'"),
        (lambda: Rotation.from_euler("xxz", [1, 2, 3]), "consecutive axes must differ"),
        (lambda: Rotation.from_euler("xy", [1, 2, 3]), "last axis of size 2 for seq 'xy'"),
        (lambda: one.as_euler("xy"), "3 characters"),
        (lambda: Rotation.from_quat(QUAT).mean(np.ones(4)), r"weights of shape \(5,\)"),
        (lambda: one.apply(np.ones(2)), "vectors with a last axis of size 3"),
    ]
    for fn, words in cases:
        with pytest.raises(ValueError, match=words):
            fn()
    with pytest.raises(TypeError, match="x must be a Rotation, got int"):
        one * 2
    with pytest.raises(TypeError, match="must be a Rotation"):
        Slerp.init(TIMES, QUAT)
    with pytest.raises(ValueError, match="at least 2 rotations"):
        Slerp.init([0.0], Rotation.from_quat(QUAT[:1]))
    with pytest.raises(ValueError, match=r"times of shape \(5,\)"):
        Slerp.init(TIMES[:3], Rotation.from_quat(QUAT))
    with pytest.raises(ValueError, match="scalar or 1-d"):
        Slerp.init(TIMES, Rotation.from_quat(QUAT))(np.ones((2, 2)))
