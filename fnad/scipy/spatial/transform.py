"""fnad.scipy.spatial.transform: jax.scipy.spatial.transform's `Rotation` and `Slerp`.

A Rotation holds unit quaternions `quat` [..., 4] in scalar-last order (x, y, z, w), one
rotation ([4], `single`) or a batch ([N, 4]). It is a NamedTuple, so a pytree: it passes
through jit, vmap and grad, and every method is a composition of fnad.numpy operations
over the last axis (batch dims broadcast; no jnp.vectorize).

Math (q = (x, y, z, w) = (v, w), ‖q‖ = 1, θ the rotation angle, n its axis):
  q            = (sin(θ/2) n, cos(θ/2));  q and −q are the same rotation
  p * q        = (p_w q_v + q_w p_v + p_v × q_v,  p_w q_w − p_v·q_v)   (q applied first)
  inv          = (−v, w)
  as_matrix    R = (w² − v·v) I + 2 v vᵀ + 2 w [v]×
  from_matrix  Shepperd's method: of R00, R11, R22, tr R the largest picks which of
               4x², 4y², 4z², 4w² to take from the diagonal; the other components come from
               sums/differences of off-diagonal pairs; then normalized
  rotvec       θ n:  from: q = (sin(θ/2)/θ · r, cos(θ/2)) (Taylor series 1/2 − θ²/48 +
               θ⁴/3840 for θ <= 1e-3);  as: with w >= 0, θ = 2 atan2(|v|, w),
               r = θ / sin(θ/2) · v (2 + θ²/12 + 7θ⁴/2880 for small θ)
  mrp          p = v / (1 + w) with w >= 0;  from: q = (2p, 1 − p·p) / (1 + p·p)
  euler        from: the product of elementary rotations about the axes of `seq`
               (lowercase: extrinsic, fixed axes, later axes multiply on the left;
               uppercase: intrinsic, rotating axes, on the right);
               as: Bernardini & Bevilacqua (2022), the quaternion method SciPy uses,
               angles wrapped to [−π, π); the middle angle in [0, π] (symmetric sequences
               like 'zxz') or [−π/2, π/2]; at a gimbal lock the third angle is set to 0
  magnitude    θ = 2 atan2(|v|, |w|) in [0, π]
  mean         the eigenvector of the largest eigenvalue of Σ_i w_i q_i q_iᵀ (Markley 2007)
  Slerp        between key rotations R_k at t_k <= t <= t_{k+1}:
               R_k * exp(α log(R_k⁻¹ R_{k+1})), α = (t − t_k) / (t_{k+1} − t_k)

Differences from jax: `degrees` and apply's `inverse` are Python bools (jax also takes
traced ones); `random` draws uniform rotations (jax raises NotImplementedError);
`identity(num)` takes a count (jax: only num=None); `concatenate` also takes single
rotations (as SciPy; jax concatenates their quaternions into a bad shape); the gradients
of from_rotvec, as_rotvec and magnitude at the identity are finite (jax's are NaN); shapes
are checked (last axis 4 for quaternions, 3 for vectors, 3 x 3 for matrices, len(seq)
for Euler angles) with errors that name the shape.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

import fnad.numpy as jnp
from fnad import random as _random

__all__ = ["Rotation", "Slerp"]

Array = Any


# ---- quaternion helpers (all over the last axis; batch dims broadcast) -----------------------

def _check_last(name: str, x, size: int, what: str):
    x = jnp.asarray(x)
    if x.ndim == 0 or x.shape[-1] != size:
        raise ValueError(f"Rotation.{name}: expected {what} with a last axis of size {size}, "
                         f"got shape {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float))
    return x


def _norm(v):
    return jnp.sqrt(jnp.sum(v * v, axis=-1))                 # [..., n] -> [...]


def _safe_norm(v):
    """|v| [...] with gradient 0 (not NaN) at v = 0, so that rotation vectors and angles
    differentiate at the identity (their small-angle series carry the derivative)."""
    sq = jnp.sum(v * v, axis=-1)
    zero = sq == 0
    return jnp.where(zero, 0.0, jnp.sqrt(jnp.where(zero, 1.0, sq)))


def _normalize(q):
    return q / _norm(q)[..., None]


def _compose(p, q):
    """The Hamilton product p q: q applied first, then p."""
    pv, pw, qv, qw = p[..., :3], p[..., 3:], q[..., :3], q[..., 3:]
    v = pw * qv + qw * pv + jnp.cross(pv, qv)                 # [..., 3]
    w = pw * qw - jnp.sum(pv * qv, axis=-1, keepdims=True)    # [..., 1]
    return jnp.concatenate([v, w], axis=-1)                   # [..., 4]


def _as_matrix(q):
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    x2, y2, z2, w2 = x * x, y * y, z * z, w * w
    xy, zw, xz, yw, yz, xw = x * y, z * w, x * z, y * w, y * z, x * w
    rows = [[x2 - y2 - z2 + w2, 2 * (xy - zw), 2 * (xz + yw)],
            [2 * (xy + zw), -x2 + y2 - z2 + w2, 2 * (yz - xw)],
            [2 * (xz - yw), 2 * (yz + xw), -x2 - y2 + z2 + w2]]
    return jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)   # [..., 3, 3]


def _from_matrix(m):
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    tr = m00 + m11 + m22
    choice = jnp.argmax(jnp.stack([m00, m11, m22, tr], axis=-1), axis=-1)[..., None]

    def e(i, j):
        return m[..., i, j]
    # the candidate quaternion (times 4 · its largest component) for each choice
    big_x = jnp.stack([1 - tr + 2 * m00, e(1, 0) + e(0, 1), e(2, 0) + e(0, 2),
                       e(2, 1) - e(1, 2)], axis=-1)
    big_y = jnp.stack([e(0, 1) + e(1, 0), 1 - tr + 2 * m11, e(2, 1) + e(1, 2),
                       e(0, 2) - e(2, 0)], axis=-1)
    big_z = jnp.stack([e(0, 2) + e(2, 0), e(1, 2) + e(2, 1), 1 - tr + 2 * m22,
                       e(1, 0) - e(0, 1)], axis=-1)
    big_w = jnp.stack([e(2, 1) - e(1, 2), e(0, 2) - e(2, 0), e(1, 0) - e(0, 1), 1 + tr],
                      axis=-1)
    q = jnp.where(choice == 0, big_x, jnp.where(choice == 1, big_y,
                                                jnp.where(choice == 2, big_z, big_w)))
    return _normalize(q)


def _from_rotvec(r):
    angle = _safe_norm(r)[..., None]                          # [..., 1]
    small = angle <= 1e-3
    safe = jnp.where(small, 1.0, angle)                       # no 0/0 on the unused side
    a2 = angle * angle
    scale = jnp.where(small, 0.5 - a2 / 48 + a2 * a2 / 3840, jnp.sin(safe / 2) / safe)
    return jnp.concatenate([scale * r, jnp.cos(angle / 2)], axis=-1)


def _positive_w(q):
    return jnp.where(q[..., 3:] < 0, -q, q)


def _as_rotvec(q):
    q = _positive_w(q)                                        # so that 0 <= θ <= π
    angle = 2 * jnp.arctan2(_safe_norm(q[..., :3]), q[..., 3])[..., None]
    small = angle <= 1e-3
    safe = jnp.where(small, 1.0, angle)
    a2 = angle * angle
    scale = jnp.where(small, 2 + a2 / 12 + 7 * a2 * a2 / 2880, safe / jnp.sin(safe / 2))
    return scale * q[..., :3]


def _elementary(axis: int, angle):
    """The quaternion of a rotation by `angle` [...] about basis axis 0, 1 or 2."""
    half = angle / 2
    zero = jnp.zeros_like(half)
    parts = [zero, zero, zero, jnp.cos(half)]
    parts[axis] = jnp.sin(half)
    return jnp.stack(parts, axis=-1)                          # [..., 4]


def _parse_seq(name: str, seq: str, allowed_lengths: Sequence[int]) -> tuple[list[int], bool]:
    """(axis indices, extrinsic) of an Euler sequence such as 'xyz' or 'ZXZ'."""
    if not isinstance(seq, str) or len(seq) not in allowed_lengths:
        want = " or ".join(str(n) for n in allowed_lengths)
        raise ValueError(f"Rotation.{name}: expected an axis sequence of {want} characters, "
                         f"got {seq!r}")
    extrinsic = re.fullmatch(r"[xyz]+", seq) is not None
    if not (extrinsic or re.fullmatch(r"[XYZ]+", seq)):
        raise ValueError(f"Rotation.{name}: expected axes from 'xyz' (extrinsic) or 'XYZ' "
                         f"(intrinsic), not mixed, got {seq!r}")
    if any(a == b for a, b in zip(seq, seq[1:])):
        raise ValueError(f"Rotation.{name}: consecutive axes must differ, got {seq!r}")
    return ["xyz".index(c) for c in seq.lower()], extrinsic


def _as_euler(q, axes: list[int], extrinsic: bool):
    if not extrinsic:
        axes = axes[::-1]
    i, j, k = axes
    symmetric = i == k
    if symmetric:
        k = 3 - i - j
    sign = (i - j) * (j - k) * (k - i) // 2                   # +1 for an even permutation
    qi, qj, qk, qw = q[..., i], q[..., j], q[..., k], q[..., 3]
    if symmetric:
        a, b, c, d = qw, qi, qj, qk * sign
    else:
        a, b, c, d = qw - qj, qi + qk * sign, qj + qw, qk * sign - qi
    middle = 2 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
    eps = 1e-7
    lock_zero = jnp.abs(middle) <= eps                        # gimbal lock at 0
    lock_pi = jnp.abs(middle - np.pi) <= eps                  # gimbal lock at π
    half_sum, half_diff = jnp.arctan2(b, a), jnp.arctan2(d, c)
    regular = ~(lock_zero | lock_pi)
    # at a lock the third angle is 0 and the first takes the whole rotation
    locked_first = jnp.where(lock_zero, 2 * half_sum, 2 * half_diff * (-1 if extrinsic else 1))
    first = jnp.where(regular, half_sum - half_diff, locked_first if extrinsic else 0)
    third = jnp.where(regular, half_sum + half_diff, 0 if extrinsic else locked_first)
    if not extrinsic:            # the angles of the reversed sequence, in seq's order
        first, third = third, first
    if not symmetric:            # the angle of the last axis in (extrinsic) order
        if extrinsic:
            third = third * sign
        else:
            first = first * sign
        middle = middle - np.pi / 2
    angles = jnp.stack([first, middle, third], axis=-1)
    return jnp.remainder(angles + np.pi, 2 * np.pi) - np.pi


def _make_canonical(q):
    """q or −q, whichever has w > 0 (ties broken by the first nonzero of x, y, z)."""
    neg, zero = q < 0, q == 0
    flip = (neg[..., 3] | (zero[..., 3] & neg[..., 0])
            | (zero[..., 3] & zero[..., 0] & neg[..., 1])
            | (zero[..., 3] & zero[..., 0] & zero[..., 1] & neg[..., 2]))
    return jnp.where(flip[..., None], -q, q)


# ---- Rotation --------------------------------------------------------------------------------

class Rotation(NamedTuple):
    """Rotations in 3 dimensions (scipy.spatial.transform.Rotation; jax's functional
    subset). `quat` [4] or [N, 4]: unit quaternions (x, y, z, w). Construct with the
    `from_*` class methods; `r * s` composes (s first), `r[idx]` and `len(r)` index a
    batch. See the module docstring for the math."""
    quat: Array

    # -- construction
    @classmethod
    def from_quat(cls, quat) -> Rotation:
        """From quaternions [..., 4] (x, y, z, w), normalized."""
        return cls(_normalize(_check_last("from_quat", quat, 4, "quaternions")))

    @classmethod
    def from_matrix(cls, matrix) -> Rotation:
        """From rotation matrices [..., 3, 3] (orthonormalized by the normalization)."""
        m = jnp.asarray(matrix)
        if m.ndim < 2 or m.shape[-2:] != (3, 3):
            raise ValueError(f"Rotation.from_matrix: expected matrices of shape [..., 3, 3], "
                             f"got shape {m.shape}")
        if not jnp.issubdtype(m.dtype, jnp.inexact):
            m = m.astype(jnp.result_type(float))
        return cls(_from_matrix(m))

    @classmethod
    def from_rotvec(cls, rotvec, degrees: bool = False) -> Rotation:
        """From rotation vectors [..., 3] (axis times angle, in radians or degrees)."""
        r = _check_last("from_rotvec", rotvec, 3, "rotation vectors")
        return cls(_from_rotvec(jnp.deg2rad(r) if degrees else r))

    @classmethod
    def from_mrp(cls, mrp) -> Rotation:
        """From modified Rodrigues parameters [..., 3] (axis times tan(θ/4))."""
        p = _check_last("from_mrp", mrp, 3, "MRPs")
        p2 = jnp.sum(p * p, axis=-1, keepdims=True)
        return cls(jnp.concatenate([2 * p, 1 - p2], axis=-1) / (1 + p2))

    @classmethod
    def from_euler(cls, seq: str, angles, degrees: bool = False) -> Rotation:
        """From Euler angles [..., len(seq)] (a scalar for one axis) about the axes of
        `seq`: 1 to 3 of 'xyz' (extrinsic) or of 'XYZ' (intrinsic)."""
        axes, extrinsic = _parse_seq("from_euler", seq, (1, 2, 3))
        angles = jnp.atleast_1d(jnp.asarray(angles))
        if angles.shape[-1] != len(axes):
            raise ValueError(f"Rotation.from_euler: expected angles with a last axis of size "
                             f"{len(axes)} for seq {seq!r}, got shape {angles.shape}")
        if not jnp.issubdtype(angles.dtype, jnp.inexact):
            angles = angles.astype(jnp.result_type(float))
        if degrees:
            angles = jnp.deg2rad(angles)
        q = _elementary(axes[0], angles[..., 0])
        for n in range(1, len(axes)):
            e = _elementary(axes[n], angles[..., n])
            q = _compose(e, q) if extrinsic else _compose(q, e)
        return cls(q)

    @classmethod
    def identity(cls, num: int | None = None, dtype=float) -> Rotation:
        """The identity rotation ([4]), or `num` of them ([num, 4])."""
        q = jnp.array([0.0, 0.0, 0.0, 1.0], dtype=dtype)
        return cls(q if num is None else jnp.tile(q, (num, 1)))

    @classmethod
    def random(cls, random_key, num: int | None = None) -> Rotation:
        """Uniformly distributed rotations (Haar measure on SO(3)): normalized standard
        normal 4-vectors. One rotation ([4]) or `num` ([num, 4]). jax raises here."""
        shape = (4,) if num is None else (num, 4)
        return cls(_normalize(_random.normal(random_key, shape)))

    @classmethod
    def concatenate(cls, rotations: Sequence[Rotation]) -> Rotation:
        """The rotations of each (single or batch) one after another, as one batch."""
        return cls(jnp.concatenate([jnp.atleast_2d(r.quat) for r in rotations], axis=0))

    # -- conversion
    def as_quat(self, canonical: bool = False, scalar_first: bool = False) -> Array:
        """Quaternions [..., 4]: (x, y, z, w), or (w, x, y, z) when scalar_first;
        `canonical` picks the sign with w > 0 (q and −q are the same rotation)."""
        q = _make_canonical(self.quat) if canonical else self.quat
        return jnp.roll(q, 1, axis=-1) if scalar_first else q

    def as_matrix(self) -> Array:
        """Rotation matrices [..., 3, 3]."""
        return _as_matrix(self.quat)

    def as_rotvec(self, degrees: bool = False) -> Array:
        """Rotation vectors [..., 3] with angles in [0, π] (or degrees)."""
        r = _as_rotvec(self.quat)
        return jnp.rad2deg(r) if degrees else r

    def as_mrp(self) -> Array:
        """Modified Rodrigues parameters [..., 3], of norm <= 1 (the shorter of the two)."""
        q = _positive_w(self.quat)
        return q[..., :3] / (1 + q[..., 3:])

    def as_euler(self, seq: str, degrees: bool = False) -> Array:
        """Euler angles [..., 3] about the axes of `seq` (3 of 'xyz' extrinsic or 'XYZ'
        intrinsic), each in [−π, π) (or degrees)."""
        axes, extrinsic = _parse_seq("as_euler", seq, (3,))
        angles = _as_euler(self.quat, axes, extrinsic)
        return jnp.rad2deg(angles) if degrees else angles

    # -- operations
    def apply(self, vectors, inverse: bool = False) -> Array:
        """R v (or Rᵀ v with inverse) for vectors [..., 3]; rotations and vectors broadcast
        (one rotation and N vectors, N rotations and one vector, or N and N)."""
        v = _check_last("apply", vectors, 3, "vectors")
        m = self.as_matrix()
        if inverse:
            m = jnp.swapaxes(m, -1, -2)
        return jnp.matmul(m, v[..., None])[..., 0]           # [..., 3, 3] @ [..., 3, 1]

    def inv(self) -> Rotation:
        """The inverse rotations (conjugate quaternions)."""
        return Rotation(self.quat * jnp.array([-1, -1, -1, 1], dtype=self.quat.dtype))

    def magnitude(self) -> Array:
        """The rotation angles [...] in radians, in [0, π]."""
        return 2 * jnp.arctan2(_safe_norm(self.quat[..., :3]), jnp.abs(self.quat[..., 3]))

    def mean(self, weights=None) -> Rotation:
        """The (weighted) mean of a batch of rotations: a single rotation."""
        n = len(self)
        w = (jnp.ones(n, dtype=self.quat.dtype) if weights is None
             else jnp.asarray(weights, dtype=self.quat.dtype))
        if w.ndim != 1 or w.shape[0] != n:
            raise ValueError(f"Rotation.mean: expected weights of shape ({n},) for {n} "
                             f"rotations, got shape {w.shape}")
        k = jnp.matmul(self.quat.T * w, self.quat)           # [4, N] @ [N, 4] -> [4, 4]
        _, vecs = jnp.linalg.eigh(k)
        return Rotation(vecs[:, -1])

    def __mul__(self, other: Rotation) -> Rotation:
        """self ∘ other: `other` applied first (batches broadcast)."""
        if not isinstance(other, Rotation):
            raise TypeError(f"Rotation * x: x must be a Rotation, got {type(other).__name__}")
        return Rotation.from_quat(_compose(self.quat, other.quat))

    def __getitem__(self, indexer) -> Rotation:
        """The rotation(s) at `indexer` of a batch."""
        if self.single:
            raise TypeError("Single rotation is not subscriptable.")
        return Rotation(self.quat[indexer])

    def __len__(self) -> int:
        """The number of rotations in a batch."""
        if self.single:
            raise TypeError("Single rotation has no len().")
        return self.quat.shape[0]

    @property
    def single(self) -> bool:
        """Whether this is one rotation (quat [4]) rather than a batch."""
        return jnp.ndim(self.quat) == 1


# ---- Slerp -----------------------------------------------------------------------------------

class Slerp(NamedTuple):
    """Spherical linear interpolation between key rotations at increasing key times
    (scipy.spatial.transform.Slerp). Build with `Slerp.init(times, rotations)`; call with
    times [] or [M] for a single rotation or a batch. Times outside the key times
    extrapolate (SciPy raises); the key times are not checked to increase (they may be
    traced)."""
    times: Array          # [K]
    timedelta: Array      # [K - 1]
    rotations: Rotation   # the K - 1 interval starts
    rotvecs: Array        # [K - 1, 3]: log(R_k⁻¹ R_{k+1})

    @classmethod
    def init(cls, times, rotations: Rotation) -> Slerp:
        """From key times [K] and K >= 2 key rotations."""
        if not isinstance(rotations, Rotation):
            raise TypeError("Slerp.init: rotations must be a Rotation, got "
                            f"{type(rotations).__name__}")
        if rotations.single or len(rotations) < 2:
            raise ValueError("Slerp.init: rotations must be a batch of at least 2 rotations")
        times = jnp.asarray(times, dtype=rotations.quat.dtype)
        if times.ndim != 1 or times.shape[0] != len(rotations):
            raise ValueError(f"Slerp.init: expected times of shape ({len(rotations)},), one "
                             f"per rotation, got shape {times.shape}")
        starts = Rotation(rotations.quat[:-1])
        steps = starts.inv() * Rotation(rotations.quat[1:])
        return cls(times, jnp.diff(times), starts, steps.as_rotvec())

    def __call__(self, times) -> Rotation:
        """The interpolated rotations at `times` ([] -> single, [M] -> batch of M)."""
        t = jnp.asarray(times, dtype=self.times.dtype)
        if t.ndim > 1:
            raise ValueError(f"Slerp: times must be a scalar or 1-d, got shape {t.shape}")
        t1 = jnp.atleast_1d(t)                                               # [M]
        k = jnp.maximum(jnp.searchsorted(self.times, t1) - 1, 0)             # [M]
        alpha = (t1 - self.times[k]) / self.timedelta[k]                     # [M]
        out = self.rotations[k] * Rotation.from_rotvec(self.rotvecs[k] * alpha[:, None])
        return out[0] if t.ndim == 0 else out
