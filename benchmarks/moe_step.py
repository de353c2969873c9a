"""The mixture-of-experts layer of fnad's models (fnad/models/moe.py: a softmax router, top-2
of 8 SwiGLU experts, a sparse dispatch through lax.ragged_dot) under value_and_grad, run by
fnad.jit and, from the same source with its imports pointed at jax, by jax.jit; and the
dense formulation it replaced (every expert on every token, einsums over E), on fnad.

    python benchmarks/moe_step.py [--rounds N]

Prints the time per call (medians of rounds, each round one call of each implementation)
and the ratios fnad/jax.
"""
from __future__ import annotations

import argparse
import inspect
import sys
import types

import numpy as np

from _common import header, optional, ratio, rounds, table

B, T, C, F, E, K = 8, 128, 256, 512, 8, 2


def moe_module(lib_name: str):
    """fnad.models.moe's source with its imports pointed at `lib_name` (fnad or jax)."""
    import fnad.models.moe  # noqa: F401  (fnad.models.moe is the function; the module:)
    src = inspect.getsource(sys.modules["fnad.models.moe"])
    if lib_name == "jax":
        src = src.replace("import fnad.numpy as jnp", "import jax.numpy as jnp").replace(
            "from fnad import lax, nn, random", "from jax import lax, nn, random")
    mod = types.ModuleType(f"moe_{lib_name}")
    exec(compile(src, f"<moe for {lib_name}>", "exec"), mod.__dict__)
    return mod


def dense_moe(jnp, nn, lax, params, x, top_k):
    """The formulation moe.py had before the sparse dispatch: every expert on every token."""
    b, t, c = x.shape
    e = params["router"].shape[1]
    xf = x.reshape(b * t, c)
    probs = nn.softmax(xf @ params["router"], axis=-1)
    top_p, top_i = lax.top_k(probs, top_k)
    weights = top_p / jnp.sum(top_p, axis=-1, keepdims=True)
    combine = jnp.sum(nn.one_hot(top_i, e, dtype=x.dtype) * weights[:, :, None], axis=1)
    gate = jnp.einsum("nc,ecf->enf", xf, params["w_gate"])
    up = jnp.einsum("nc,ecf->enf", xf, params["w_up"])
    out = jnp.einsum("enf,efc->enc", nn.silu(gate) * up, params["w_down"])
    return jnp.einsum("ne,enc->nc", combine, out).reshape(b, t, c)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds")
    args = parser.parse_args(argv)
    import fnad
    import fnad.numpy as fnp
    rng = np.random.default_rng(0)
    fm = moe_module("fnad")
    params = {k: np.asarray(v) for k, v in fm.moe_init(fnad.random.PRNGKey(0), C, F, E).items()}
    x = rng.standard_normal((B, T, C)).astype(np.float32)

    def loss(mod, jnp):
        def f(p, x):
            y, aux = mod.moe(p, x, top_k=K)
            return jnp.sum(y * y) + aux
        return f
    calls, losses = {}, {}
    fnad_step = fnad.jit(fnad.value_and_grad(loss(fm, fnp)))
    calls["fnad.jit"] = lambda: fnad.block_until_ready(fnad_step(params, x))
    dense_step = fnad.jit(fnad.value_and_grad(
        lambda p, x: fnp.sum(dense_moe(fnp, fnad.nn, fnad.lax, p, x, K) ** 2)))
    calls["fnad.jit, dense"] = lambda: fnad.block_until_ready(dense_step(params, x))
    losses["fnad.jit"] = float(fnad_step(params, x)[0])
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jjnp
        jax_step = jax.jit(jax.value_and_grad(loss(moe_module("jax"), jjnp)))
        calls["jax.jit"] = lambda: jax.block_until_ready(jax_step(params, x))
        losses["jax.jit"] = float(jax_step(params, x)[0])
    times = rounds(calls, args.rounds, 1, 2)
    rows = []
    for name, ts in times.items():
        r = ratio(times, name, "jax.jit") if "jax.jit" in times and name != "jax.jit" else None
        rows.append(("MoE layer, value_and_grad", name, float(np.median(ts)), r))
    print(header())
    print(table(rows, f"MoE layer: B={B} T={T} C={C} F={F}, top-{K} of {E} experts",
                ratios=("fnad/jax",)))
    print("loss: " + ", ".join(f"{k} {v:.6f}" for k, v in losses.items()))
    if "jax.jit" in losses and abs(losses["jax.jit"] - losses["fnad.jit"]) > 1e-3 * abs(
            losses["jax.jit"]):
        raise SystemExit("fnad's and jax's losses differ")


if __name__ == "__main__":
    main()
