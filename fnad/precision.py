"""fnad.precision: mixed-precision dtype policies and loss scaling (after DeepMind's jmp).

Mixed precision keeps master params in float32, runs the forward and backward pass in a
16-bit float, and returns outputs (the loss) in float32 (seed 001 §4.2):

    policy = precision.policy("params=float32,compute=bfloat16,output=float32")
    def loss_fn(params, x, y):
        params, x = policy.cast_to_compute((params, x))        # f32 -> bf16, floats only
        logits = model(params, x)                              # computed in bf16
        return loss(policy.cast_to_output(logits), y)          # f32 loss
    grads = fnad.grad(loss_fn)(params, x, y)                   # f32: the cast's transpose

float16 has a narrow exponent (min normal 6e-5), so small backward-pass cotangents flush
to zero; loss scaling multiplies the loss by S before differentiating and divides the
gradients by S afterwards. `DynamicLossScale` adapts S (all with jnp.where, so one jitted
train step serves every step):

    grads finite:     counter += 1; when counter reaches `period`: S ← S·factor, counter ← 0
    grads non-finite: skip the update (keep params and optimizer state), S ← max(S/factor,
                      min_loss_scale), counter ← 0

    ls = precision.dynamic_loss_scale(2.0 ** 15)
    def train_step(params, opt_state, ls, batch):
        grads = fnad.grad(lambda p: ls.scale(loss_fn(p, *batch)))(params)
        grads = ls.unscale(grads)
        finite = precision.all_finite(grads)
        updates, new_opt = tx.update(grads, opt_state, params)
        params = precision.select_tree(finite, optim.apply_updates(params, updates), params)
        opt_state = precision.select_tree(finite, new_opt, opt_state)
        return params, opt_state, ls.adjust(finite)

bfloat16 has float32's exponent range and needs no loss scaling (`NoOpLossScale`).

Backends (measured by tests/test_precision.py, and timed on a loss+grad of a 512-1024-512
MLP, batch 256, on a shared 2-core CPU): every backend computes bfloat16/float16 programs,
with the same semantics — each op computes in float32 and rounds its result to the 16-bit
type, matmuls and reductions accumulating in float32 — so there is no f32 fallback and no
error anywhere. Elementwise results agree bitwise between numpy and numba, and with xla
for bfloat16; for float16 XLA's CPU compiler may keep an intermediate in f32 inside a
fusion (results 1 ulp apart).

- xla: native 16-bit kernels; the backend mixed precision is for. On CPU it runs about
  as fast as float32; the gains of 16-bit compute (memory, tensor cores) are a GPU/TPU
  matter, not measured here.
- numpy (eager and jit): 16-bit floats emulated through float32 casts: correct, but
  ~1.5-3x slower than float32 for bfloat16 and ~10x for float16.
- numba: no fused kernels for 16-bit floats (the generated driver lists none); such
  programs run op by op through float32-computing kernels: correct, ~2-3x slower than
  its float32 kernels for bfloat16, ~15x for float16.

So a policy works on every backend, but on numpy and numba it saves nothing: keep those
in float32 (`policy("float32")`, the identity policy) unless checking 16-bit numerics.
Written with fnad's public API only (fnad.numpy, fnad.tree_util).
"""
from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

import fnad.numpy as jnp
from fnad import dtypes, tree_util

__all__ = ["DynamicLossScale", "NoOpLossScale", "Policy", "StaticLossScale", "all_finite",
           "cast_floating", "dynamic_loss_scale", "get_policy", "policy", "select_tree",
           "static_loss_scale"]


# ---- dtype policies ---------------------------------------------------------------------
_DTYPE_NAMES = {
    "float32": dtypes.float32, "f32": dtypes.float32, "full": dtypes.float32,
    "single": dtypes.float32,
    "bfloat16": dtypes.bfloat16, "bf16": dtypes.bfloat16,
    "float16": dtypes.float16, "f16": dtypes.float16, "half": dtypes.float16,
    "float64": dtypes.float64, "f64": dtypes.float64, "double": dtypes.float64,
}
_FIELDS = {"params": "param_dtype", "p": "param_dtype", "param": "param_dtype",
           "compute": "compute_dtype", "c": "compute_dtype",
           "output": "output_dtype", "o": "output_dtype", "out": "output_dtype"}


def _is_floating_leaf(x: Any) -> bool:
    dt = getattr(x, "dtype", None)
    return dt is not None and dtypes.issubdtype(dt, dtypes.floating)


def cast_floating(tree: Any, dtype: Any) -> Any:
    """Every floating-point array leaf of `tree` cast to `dtype`; other leaves unchanged
    (int tokens, bool masks, PRNG keys, Python scalars). Differentiable: the cast's
    transpose casts the cotangent back, so grads come out in the original dtype."""
    dtype = np.dtype(dtype)

    def cast(x):
        if _is_floating_leaf(x) and np.dtype(x.dtype) != dtype:
            return jnp.asarray(x).astype(dtype)
        return x
    return tree_util.tree_map(cast, tree)


class Policy(NamedTuple):
    """Which dtype params are stored in, computed in, and returned in."""
    param_dtype: Any
    compute_dtype: Any
    output_dtype: Any

    def cast_to_param(self, tree: Any) -> Any:
        """Floating leaves cast to param_dtype (e.g. for storing updated master weights)."""
        return cast_floating(tree, self.param_dtype)

    def cast_to_compute(self, tree: Any) -> Any:
        """Floating leaves cast to compute_dtype (params and inputs, at the top of a loss)."""
        return cast_floating(tree, self.compute_dtype)

    def cast_to_output(self, tree: Any) -> Any:
        """Floating leaves cast to output_dtype (logits/loss, before the f32 loss math)."""
        return cast_floating(tree, self.output_dtype)

    def __str__(self) -> str:
        n = [np.dtype(d).name for d in self]
        return f"params={n[0]},compute={n[1]},output={n[2]}"


def _parse_dtype(name: str, spec: str) -> Any:
    key = name.strip().lower()
    if key not in _DTYPE_NAMES:
        raise ValueError(f"precision.policy: unknown dtype {name.strip()!r} in {spec!r}; "
                         f"use one of {sorted(_DTYPE_NAMES)}")
    return np.dtype(_DTYPE_NAMES[key])


def policy(spec: str) -> Policy:
    """Parse a policy: "params=float32,compute=bfloat16,output=float32" (jmp's short forms
    "p=f32,c=bf16,o=f32" and the names full/half/bf16 work too). A missing params or output
    is float32, a missing compute is the params dtype; a bare dtype ("bf16") sets all three.
    """
    if not isinstance(spec, str):
        raise TypeError(f"precision.policy: expected a string such as "
                        f"'params=float32,compute=bfloat16,output=float32', got {spec!r}")
    if "=" not in spec:
        d = _parse_dtype(spec, spec)
        return Policy(d, d, d)
    got: dict[str, Any] = {}
    for part in spec.split(","):
        if "=" not in part:
            raise ValueError(f"precision.policy: expected key=dtype pairs separated by commas, "
                             f"got {part.strip()!r} in {spec!r}")
        k, v = part.split("=", 1)
        field = _FIELDS.get(k.strip().lower())
        if field is None:
            raise ValueError(f"precision.policy: unknown key {k.strip()!r} in {spec!r}; use "
                             f"params, compute and output (or p, c, o)")
        if field in got:
            raise ValueError(f"precision.policy: {k.strip()!r} given twice in {spec!r}")
        got[field] = _parse_dtype(v, spec)
    param = got.get("param_dtype", np.dtype(np.float32))
    return Policy(param, got.get("compute_dtype", param),
                  got.get("output_dtype", np.dtype(np.float32)))


get_policy = policy                                     # jmp's name


# ---- tree predicates and selection --------------------------------------------------------
def all_finite(tree: Any):
    """A bool scalar: every floating leaf of `tree` is free of inf and NaN."""
    ok = jnp.asarray(True)
    for x in tree_util.tree_leaves(tree):
        if _is_floating_leaf(x):
            ok = jnp.logical_and(ok, jnp.all(jnp.isfinite(x)))
    return ok


def select_tree(pred: Any, on_true: Any, on_false: Any) -> Any:
    """Leafwise jnp.where(pred, a, b) for a scalar bool pred: keep-or-skip an update
    without a Python branch on a traced value."""
    return tree_util.tree_map(
        lambda a, b: jnp.where(pred, a, b).astype(jnp.asarray(b).dtype), on_true, on_false)


# ---- loss scales ------------------------------------------------------------------------
def _scale_leaf(x, s):
    return (x * s.astype(x.dtype)) if _is_floating_leaf(x) else x


def _unscale_leaf(x, s):
    # Divide in at least f32: 1/S is exact (S a power of two) but S may not fit in f16.
    if not _is_floating_leaf(x):
        return x
    wide = np.promote_types(np.dtype(x.dtype), np.float32)
    return (x.astype(wide) / s.astype(wide)).astype(x.dtype)


def _map_scaled(leaf_fn, tree: Any, loss_scale) -> Any:
    s = jnp.asarray(loss_scale, dtype=jnp.float32)
    return tree_util.tree_map(lambda x: leaf_fn(x, s), tree)


@dataclasses.dataclass(frozen=True)
class NoOpLossScale:
    """No loss scaling (float32 or bfloat16 compute): scale/unscale are the identity."""

    @property
    def loss_scale(self):
        return jnp.ones([], jnp.float32)

    def scale(self, tree: Any) -> Any:
        return tree

    def unscale(self, tree: Any) -> Any:
        return tree

    def adjust(self, grads_finite: Any) -> NoOpLossScale:
        return self


@dataclasses.dataclass(frozen=True)
class StaticLossScale:
    """A fixed loss scale S: scale(loss) = S·loss, unscale(grads) = grads / S."""
    loss_scale: Any                                      # f32 scalar

    def scale(self, tree: Any) -> Any:
        return _map_scaled(_scale_leaf, tree, self.loss_scale)

    def unscale(self, tree: Any) -> Any:
        return _map_scaled(_unscale_leaf, tree, self.loss_scale)

    def adjust(self, grads_finite: Any) -> StaticLossScale:
        return self


@dataclasses.dataclass(frozen=True)
class DynamicLossScale:
    """An adaptive loss scale S (Micikevicius et al. 2018), a pytree (S and the counter are
    its leaves; period, factor and min_loss_scale are static), so it can be jit's argument:

        finite and counter == period-1:  S' = S·factor (kept at S if that overflows), c' = 0
        finite otherwise:                S' = S,                      c' = c + 1
        non-finite:                      S' = max(S / factor, min),   c' = 0
    """
    loss_scale: Any                                      # f32 scalar
    counter: Any = dataclasses.field(default_factory=lambda: jnp.zeros([], jnp.int32))
    period: int = dataclasses.field(default=2000, metadata=dict(static=True))
    factor: int = dataclasses.field(default=2, metadata=dict(static=True))
    min_loss_scale: float = dataclasses.field(default=1.0, metadata=dict(static=True))

    def scale(self, tree: Any) -> Any:
        return _map_scaled(_scale_leaf, tree, self.loss_scale)

    def unscale(self, tree: Any) -> Any:
        return _map_scaled(_unscale_leaf, tree, self.loss_scale)

    def adjust(self, grads_finite: Any) -> DynamicLossScale:
        """The next state after a step whose unscaled grads were (not) all finite."""
        finite = jnp.asarray(grads_finite)
        if finite.shape != () or finite.dtype != np.bool_:
            raise TypeError(f"DynamicLossScale.adjust: grads_finite must be a bool scalar "
                            f"(precision.all_finite(grads)), got {finite.dtype} "
                            f"{finite.shape}")
        s = jnp.asarray(self.loss_scale, dtype=jnp.float32)
        c = jnp.asarray(self.counter, dtype=jnp.int32)
        grow = jnp.logical_and(finite, c == self.period - 1)
        grown = s * self.factor
        grown = jnp.where(jnp.isfinite(grown), grown, s)
        new_s = jnp.where(finite, jnp.where(grow, grown, s),
                          jnp.maximum(s / self.factor, float(self.min_loss_scale)))
        new_c = jnp.where(jnp.logical_and(finite, jnp.logical_not(grow)), c + 1, 0)
        return DynamicLossScale(new_s.astype(jnp.float32), new_c.astype(jnp.int32),
                                self.period, self.factor, self.min_loss_scale)


tree_util.register_dataclass(NoOpLossScale)
tree_util.register_dataclass(StaticLossScale)
tree_util.register_dataclass(DynamicLossScale)


def static_loss_scale(loss_scale: float) -> StaticLossScale:
    """A StaticLossScale holding S as a float32 scalar array (S > 0)."""
    if not float(loss_scale) > 0:
        raise ValueError(f"static_loss_scale: the loss scale must be > 0, got {loss_scale!r}")
    return StaticLossScale(jnp.asarray(loss_scale, dtype=jnp.float32))


def dynamic_loss_scale(initial: float = 2.0 ** 15, *, period: int = 2000, factor: int = 2,
                       min_loss_scale: float = 1.0) -> DynamicLossScale:
    """A DynamicLossScale starting at S = initial with counter 0 (jmp's defaults)."""
    if not float(initial) > 0 or not float(min_loss_scale) > 0:
        raise ValueError(f"dynamic_loss_scale: initial ({initial!r}) and min_loss_scale "
                         f"({min_loss_scale!r}) must be > 0")
    if isinstance(period, bool) or not isinstance(period, int) or period < 1:
        raise ValueError(f"dynamic_loss_scale: period must be an int >= 1, got {period!r}")
    if not factor > 1:
        raise ValueError(f"dynamic_loss_scale: factor must be > 1, got {factor!r}")
    return DynamicLossScale(jnp.asarray(initial, dtype=jnp.float32),
                            jnp.zeros([], jnp.int32), period, factor, float(min_loss_scale))
