"""fnad.example_libraries.optimizers: jax.example_libraries.optimizers.

An optimizer is a triple of pure functions (an `Optimizer`):

    init_fn(params) -> opt_state
    update_fn(step, grads, opt_state) -> opt_state     (grads shaped like params)
    params_fn(opt_state) -> params                     (params_fn(init_fn(p)) == p)

Each optimizer below is written for one array (its per-leaf state is a small pytree of
arrays: `(x, m, v)` for Adam) and the `optimizer` decorator lifts it to pytrees of
parameters. The lifted state, an `OptimizerState`, keeps the per-leaf states flattened
(`packed_state`, one list of arrays per parameter leaf) with the parameter tree's treedef
and each leaf state's treedef as static data, so it is itself a pytree that jit, vmap and
grad pass through. `step` may be a Python int or a traced integer; a step size is a
scalar or a schedule (a function of the step).

Differences from jax: `sm3`'s per-leaf state is `(x, m, vs)` (jax also stores the shape of
x as Python ints, which become traced leaves under jit and break its reshape), and
`make_schedule` and `pack_optimizer_state` raise errors that say what was wrong.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import fnad.numpy as jnp
from fnad import tree_util

__all__ = ["JoinPoint", "Optimizer", "OptimizerState", "adagrad", "adam", "adamax",
           "clip_grads", "constant", "exponential_decay", "inverse_time_decay", "l2_norm",
           "make_schedule", "momentum", "nesterov", "optimizer", "pack_optimizer_state",
           "piecewise_constant", "polynomial_decay", "rmsprop", "rmsprop_momentum", "sgd",
           "sm3", "unpack_optimizer_state"]

Params = Any          # a pytree of arrays
Step = Any            # a Python int or an integer scalar array
Schedule = Callable[[Step], Any]


class OptimizerState(NamedTuple):
    """The state of a lifted optimizer: `packed_state[n]` lists the leaves of parameter
    leaf n's state; `tree_def` is the parameters' treedef and `subtree_defs[n]` the
    treedef of leaf n's state. Only `packed_state` is pytree children (the treedefs are
    static), so the state passes through jit."""
    packed_state: tuple
    tree_def: Any
    subtree_defs: tuple


tree_util.register_pytree_node(
    OptimizerState,
    lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
    lambda aux, children: OptimizerState(children[0], aux[0], aux[1]))


class Optimizer(NamedTuple):
    """(init_fn, update_fn, params_fn), as jax's; unpacks as a triple."""
    init_fn: Callable[[Params], OptimizerState]
    update_fn: Callable[[Step, Params, OptimizerState], OptimizerState]
    params_fn: Callable[[OptimizerState], Params]


def optimizer(opt_maker: Callable[..., tuple]) -> Callable[..., Optimizer]:
    """Decorator: `opt_maker(*args)` returns `(init, update, get_params)` over one array
    (its state any pytree of arrays); the decorated maker returns an `Optimizer` whose
    functions apply those to every leaf of a parameter pytree, keeping the state as an
    `OptimizerState`. update_fn raises TypeError when the gradient tree's structure is not
    the parameters', or when `update` changes the structure of a leaf's state."""

    @functools.wraps(opt_maker)
    def make(*args, **kwargs) -> Optimizer:
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def init_fn(params):
            leaves, tree_def = tree_util.tree_flatten(params)
            flat = [tree_util.tree_flatten(init(x)) for x in leaves]
            return OptimizerState(tuple(f[0] for f in flat), tree_def, tuple(f[1] for f in flat))

        @functools.wraps(update)
        def update_fn(i, grads, opt_state):
            packed, tree_def, subtree_defs = opt_state
            grad_leaves, grad_def = tree_util.tree_flatten(grads)
            if grad_def != tree_def:
                raise TypeError("optimizer update_fn: the gradient tree's structure is not "
                                f"the parameters' the optimizer was initialized with: "
                                f"parameters {tree_def}, gradients {grad_def}")
            new_packed = []
            for n, (g, leaves, sub_def) in enumerate(zip(grad_leaves, packed, subtree_defs)):
                state = tree_util.tree_unflatten(sub_def, leaves)
                new_leaves, new_def = tree_util.tree_flatten(update(i, g, state))
                if new_def != sub_def:
                    raise TypeError(f"optimizer update_fn: the update of parameter leaf {n} "
                                    f"returned a state of structure {new_def}, not its "
                                    f"input's {sub_def}")
                new_packed.append(new_leaves)
            return OptimizerState(tuple(new_packed), tree_def, subtree_defs)

        @functools.wraps(get_params)
        def params_fn(opt_state):
            packed, tree_def, subtree_defs = opt_state
            params = [get_params(tree_util.tree_unflatten(d, leaves))
                      for d, leaves in zip(subtree_defs, packed)]
            return tree_util.tree_unflatten(tree_def, params)

        return Optimizer(init_fn, update_fn, params_fn)

    return make


# ---- optimizers ----------------------------------------------------------------------------
# Each update below reads: g the gradient, x the parameter, i the step (from 0), η = step_size(i).

@optimizer
def sgd(step_size):
    """Stochastic gradient descent:  x ← x − η g.  State: x."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0

    def update(i, g, x):
        return x - step_size(i) * g

    def get_params(x):
        return x

    return init, update, get_params


@optimizer
def momentum(step_size, mass: float):
    """Heavy-ball momentum:  v ← mass·v + g;  x ← x − η v.  State: (x, v), v₀ = 0."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, v = state
        v = mass * v + g
        return x - step_size(i) * v, v

    return init, update, _first


@optimizer
def nesterov(step_size, mass: float):
    """Nesterov momentum:  v ← mass·v + g;  x ← x − η (mass·v + g).  State: (x, v)."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, v = state
        v = mass * v + g
        return x - step_size(i) * (mass * v + g), v

    return init, update, _first


@optimizer
def adagrad(step_size, momentum=0.9):
    """Adagrad (Duchi et al. 2011) with momentum β = `momentum`:

        G ← G + g²;   m ← (1 − β) g / √G + β m   (g / √G read as 0 where G = 0);
        x ← x − η m.                                          State: (x, G, m).
    """
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        inv_root = jnp.where(g_sq > 0, 1.0 / jnp.sqrt(g_sq), 0.0)
        m = (1.0 - momentum) * (g * inv_root) + momentum * m
        return x - step_size(i) * m, g_sq, m

    return init, update, _first


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
    """RMSProp:  a ← γ a + (1 − γ) g²;  x ← x − η g / √(a + eps).  State: (x, a)."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq = state
        avg_sq = avg_sq * gamma + jnp.square(g) * (1.0 - gamma)
        return x - step_size(i) * g / jnp.sqrt(avg_sq + eps), avg_sq

    return init, update, _first


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
    """RMSProp with momentum β = `momentum`:

        a ← γ a + (1 − γ) g²;   m ← β m + η g / √(a + eps);   x ← x − m.
                                                              State: (x, a, m).
    """
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq, mom = state
        avg_sq = avg_sq * gamma + jnp.square(g) * (1.0 - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg_sq + eps)
        return x - mom, avg_sq, mom

    return init, update, _first


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adam (Kingma & Ba 2015):

        m ← (1 − b1) g + b1 m;        v ← (1 − b2) g² + b2 v;
        m̂ = m / (1 − b1^(i+1));       v̂ = v / (1 − b2^(i+1));
        x ← x − η m̂ / (√v̂ + eps).                            State: (x, m, v).
    """
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        m_hat = m / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))   # bias corrections
        v_hat = v / (1 - jnp.asarray(b2, m.dtype) ** (i + 1))
        return x - step_size(i) * m_hat / (jnp.sqrt(v_hat) + eps), m, v

    return init, update, _first


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """AdaMax, Adam with an infinity norm:

        m ← (1 − b1) g + b1 m;        u ← max(b2 u, |g|);
        x ← x − η / (1 − b1^(i+1)) · m / (u + eps).           State: (x, m, u).
    """
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        rate = step_size(i) / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))
        return x - rate * m / (u + eps), m, u

    return init, update, _first


@optimizer
def sm3(step_size, momentum=0.9):
    """SM3 (Anil et al. 2019), memory-efficient Adagrad: one accumulator vector per axis
    of x (a scalar x counts as shape (1,)) instead of one per element.

        A = min over axes d of vs[d] (broadcast along d) + g²;
        m ← (1 − β) g / √A + β m  (g / √A read as 0 where A = 0);   x ← x − η m;
        vs[d] ← max of A over every axis but d.               State: (x, m, vs).
    """
    step_size = make_schedule(step_size)

    def init(x0):
        x0 = jnp.asarray(x0)
        shape = jnp.atleast_1d(x0).shape
        return x0, jnp.zeros_like(x0), [jnp.zeros(n, dtype=x0.dtype) for n in shape]

    def update(i, g, state):
        x, m, vs = state
        g1 = jnp.atleast_1d(g)                                         # [d0, d1, ...]
        nd = g1.ndim
        along = [jnp.expand_dims(v, [a for a in range(nd) if a != d]) for d, v in enumerate(vs)]
        accum = functools.reduce(jnp.minimum, along) + jnp.square(g1)  # [d0, d1, ...]
        inv_root = jnp.where(accum > 0, 1.0 / jnp.sqrt(accum), 0.0)
        m = (1.0 - momentum) * (g * inv_root.reshape(jnp.shape(g))) + momentum * m
        vs = [jnp.max(accum, axis=tuple(a for a in range(nd) if a != d)) for d in range(nd)]
        return x - step_size(i) * m, m, vs

    return init, update, _first


def _first(state):
    return state[0]


# ---- step-size schedules ---------------------------------------------------------------------
# A schedule maps the step i (from 0; a Python int or a traced integer) to a step size.

def constant(step_size) -> Schedule:
    """i ↦ step_size."""
    def schedule(i):
        return step_size
    return schedule


def exponential_decay(step_size, decay_steps, decay_rate) -> Schedule:
    """i ↦ step_size · decay_rate^(i / decay_steps)."""
    def schedule(i):
        return step_size * decay_rate ** (i / decay_steps)
    return schedule


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase: bool = False) -> Schedule:
    """i ↦ step_size / (1 + decay_rate · i / decay_steps), with i / decay_steps floored
    when `staircase`."""
    def schedule(i):
        t = jnp.floor(i / decay_steps) if staircase else i / decay_steps
        return step_size / (1 + decay_rate * t)
    return schedule


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0) -> Schedule:
    """i ↦ (step_size − final) · (1 − min(i, decay_steps) / decay_steps)^power + final."""
    def schedule(i):
        frac = 1 - jnp.minimum(i, decay_steps) / decay_steps
        return frac ** power * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries, values) -> Schedule:
    """i ↦ values[k] where k is the number of boundaries below i (values[0] for
    i <= boundaries[0], values[-1] past the last). Needs len(values) == len(boundaries) + 1."""
    boundaries, values = jnp.array(boundaries), jnp.array(values)
    if boundaries.ndim != 1 or values.ndim != 1:
        raise ValueError("piecewise_constant: boundaries and values must be 1-d sequences, "
                         f"got shapes {boundaries.shape} and {values.shape}")
    if values.shape[0] != boundaries.shape[0] + 1:
        raise ValueError("piecewise_constant: values must have one more entry than boundaries, "
                         f"got {values.shape[0]} values and {boundaries.shape[0]} boundaries")

    def schedule(i):
        return values[jnp.sum(i > boundaries)]
    return schedule


def make_schedule(scalar_or_schedule) -> Schedule:
    """A schedule (returned as is) or a scalar step size (made `constant`)."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError("a step size must be a scalar or a schedule (a function of the step), "
                    f"got {type(scalar_or_schedule).__name__} of shape "
                    f"{jnp.shape(scalar_or_schedule)}")


# ---- utilities -------------------------------------------------------------------------------

def l2_norm(tree):
    """√(Σ over leaves of Σ |x|²): the l2 norm of a pytree of arrays (e.g. for weight decay)."""
    leaves = tree_util.tree_leaves(tree)
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in leaves))


def clip_grads(grad_tree, max_norm):
    """The gradient tree scaled by max_norm / l2_norm(grad_tree) where that norm is at
    least max_norm (unchanged below it)."""
    norm = l2_norm(grad_tree)
    return tree_util.tree_map(lambda g: jnp.where(norm < max_norm, g, g * (max_norm / norm)),
                              grad_tree)


# ---- serialization ---------------------------------------------------------------------------

class JoinPoint:
    """A leaf of the parameter tree in an unpacked optimizer state: `subtree` is that
    parameter's optimizer state (a pytree of arrays)."""

    def __init__(self, subtree):
        self.subtree = subtree

    def __iter__(self):   # look like a container of arrays, as jax's does
        yield self.subtree

    def __repr__(self):
        return f"JoinPoint({self.subtree!r})"


def unpack_optimizer_state(opt_state: OptimizerState):
    """The parameter tree with each leaf replaced by a JoinPoint holding that leaf's
    optimizer state: plain Python containers, for serialization."""
    packed, tree_def, subtree_defs = opt_state
    return tree_util.tree_unflatten(
        tree_def, [JoinPoint(tree_util.tree_unflatten(d, leaves))
                   for d, leaves in zip(subtree_defs, packed)])


def pack_optimizer_state(marked_pytree) -> OptimizerState:
    """The inverse of unpack_optimizer_state: an OptimizerState from a tree of JoinPoints."""
    points, tree_def = tree_util.tree_flatten(marked_pytree)
    for n, p in enumerate(points):
        if not isinstance(p, JoinPoint):
            raise TypeError("pack_optimizer_state: every leaf must be a JoinPoint (as "
                            f"unpack_optimizer_state makes), leaf {n} is "
                            f"{type(p).__name__}")
    flat = [tree_util.tree_flatten(p.subtree) for p in points]
    return OptimizerState(tuple(f[0] for f in flat), tree_def, tuple(f[1] for f in flat))
