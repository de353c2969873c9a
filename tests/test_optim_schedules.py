"""fnad.optim's schedules against optax's, eager (a Python int step) and under jit (a
traced int32 step), at every step from 0 past the end of each schedule; bad arguments
against clear errors. Skips when optax (the oracle) is not installed."""
from __future__ import annotations

import numpy as np
import pytest
from checks import raises_with, traced

import fnad.numpy as jnp
from fnad import optim

ox = pytest.importorskip("optax", reason="optax not installed: it is the oracle here")
jax = pytest.importorskip("jax")

STEPS = list(range(0, 64)) + [100, 1000]

# name -> a function of the module (optim or optax) building the schedule
SCHEDULES = {
    "exponential_decay": lambda m: m.exponential_decay(0.5, 5, 0.8),
    "exponential_decay_staircase_begin": lambda m: m.exponential_decay(
        0.5, 4, 0.5, transition_begin=6, staircase=True),
    "exponential_decay_end_value": lambda m: m.exponential_decay(0.5, 3, 0.7, end_value=0.1),
    "exponential_growth_end_value": lambda m: m.exponential_decay(0.01, 3, 1.5,
                                                                  end_value=0.2),
    "exponential_decay_zero_steps": lambda m: m.exponential_decay(0.3, 0, 0.5),
    "piecewise_constant": lambda m: m.piecewise_constant_schedule(
        0.1, {10: 0.5, 30: 0.1, 20: 2.0}),
    "piecewise_constant_none": lambda m: m.piecewise_constant_schedule(0.1),
    "polynomial": lambda m: m.polynomial_schedule(1.0, 0.1, 2.0, 20, transition_begin=5),
    # (a fractional power is NaN at the last step under jit, in optax too: XLA computes
    # 1 - t/T as 1 - t·(1/T), slightly negative at t = T)
    "polynomial_cubic": lambda m: m.polynomial_schedule(0.0, 1.0, 3.0, 30),
    "piecewise_interpolate_linear": lambda m: m.piecewise_interpolate_schedule(
        "linear", 0.2, {5: 2.0, 15: 0.5, 40: 0.1}),
    "piecewise_interpolate_cosine": lambda m: m.piecewise_interpolate_schedule(
        "cosine", 0.2, {5: 2.0, 15: 0.5, 40: 0.1}),
    "piecewise_interpolate_empty": lambda m: m.piecewise_interpolate_schedule("linear", 0.3),
    "cosine_onecycle": lambda m: m.cosine_onecycle_schedule(50, 0.1),
    "cosine_onecycle_args": lambda m: m.cosine_onecycle_schedule(
        40, 2.0, pct_start=0.2, div_factor=10.0, final_div_factor=100.0),
    "linear_onecycle": lambda m: m.linear_onecycle_schedule(50, 0.1),
    "linear_onecycle_args": lambda m: m.linear_onecycle_schedule(
        40, 2.0, pct_start=0.2, pct_final=0.7, div_factor=10.0, final_div_factor=100.0),
    "sgdr": lambda m: m.sgdr_schedule([
        dict(init_value=0.0, peak_value=0.1, warmup_steps=3, decay_steps=15, end_value=0.01),
        dict(init_value=0.01, peak_value=0.05, warmup_steps=2, decay_steps=20),
        dict(init_value=0.0, peak_value=0.02, warmup_steps=0, decay_steps=10,
             exponent=2.0)]),
    "warmup_exponential_decay": lambda m: m.warmup_exponential_decay_schedule(
        0.0, 0.3, 5, 4, 0.7, transition_begin=3, staircase=True, end_value=0.05),
    "warmup_exponential_decay_plain": lambda m: m.warmup_exponential_decay_schedule(
        0.01, 0.3, 10, 6, 0.9),
    "warmup_constant": lambda m: m.warmup_constant_schedule(0.0, 0.3, 7),
    "linear": lambda m: m.linear_schedule(0.3, 0.0, 12, transition_begin=4),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_schedule_matches_optax(name):
    ours, theirs = SCHEDULES[name](optim), SCHEDULES[name](ox)
    jitted = traced(ours)
    for t in STEPS:
        want = np.asarray(theirs(jax.numpy.asarray(t, jax.numpy.int32)))
        got_eager = np.asarray(ours(t))
        got_jit = np.asarray(jitted(jnp.asarray(t, jnp.int32)))
        for got, how in [(got_eager, "eager"), (got_jit, "jit")]:
            # atol: XLA (fnad's xla backend, jax.jit) divides by a constant as a multiply
            # by its reciprocal, a few ulp of 1 off where the exact value is 0
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7,
                                       err_msg=f"{name} {how} at step {t}")
        assert got_jit.dtype == want.dtype or want.dtype == np.float64, (name, t)


def test_schedule_as_learning_rate_is_evaluated_per_step():
    """sgd with exponential_decay(staircase): update t uses η(t), t counting from 0."""
    tx = optim.sgd(optim.exponential_decay(1.0, 2, 0.5, staircase=True))
    p = {"w": jnp.zeros(())}
    s = tx.init(p)
    lrs = []
    step = traced(tx.update)
    for _ in range(6):
        u, s = step({"w": jnp.ones(())}, s, p)
        lrs.append(-float(u["w"]))
    assert lrs == pytest.approx([1.0, 1.0, 0.5, 0.5, 0.25, 0.25])


def test_schedule_errors():
    raises_with(lambda: optim.piecewise_constant_schedule(0.1, {5: -1.0}), "non-negative",
                exc=ValueError)
    raises_with(lambda: optim.piecewise_interpolate_schedule("quadratic", 0.1), "'cosine'",
                "'linear'", exc=ValueError)
    raises_with(lambda: optim.piecewise_interpolate_schedule("linear", 0.1, {2.5: 1.0}),
                "boundary", "int", exc=TypeError)
    raises_with(lambda: optim.exponential_decay(0.1, 10, -0.5), "decay_rate", exc=ValueError)
    raises_with(lambda: optim.exponential_decay(0.1, 2.5, 0.5), "transition_steps", "int",
                exc=TypeError)
    raises_with(lambda: optim.cosine_onecycle_schedule(0, 0.1), "transition_steps",
                exc=ValueError)
    raises_with(lambda: optim.linear_onecycle_schedule(-3, 0.1), "transition_steps",
                exc=ValueError)
    raises_with(lambda: optim.sgdr_schedule([]), "sgdr_schedule", exc=ValueError)
    raises_with(lambda: optim.polynomial_schedule(1.0, 0.0, 2.0, 10, transition_begin=-1),
                "transition_begin", exc=ValueError)
