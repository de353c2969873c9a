"""`fnad-train`: the main job.

Until the Transformer and its optimizers land (a later issue replaces this
module), the main job trains a small MLP classifier on a synthetic two-spirals
task with `fnad.value_and_grad` and plain SGD, eagerly on the NumPy backend,
and reports the loss and the held-out accuracy.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import fnad
from fnad import lax


def make_spirals(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved spirals in the plane: points [n, 2] and labels [n]."""
    t = rng.uniform(0.25, 1.0, n) * 3 * np.pi
    label = rng.integers(0, 2, n)
    angle = t + np.pi * label
    pts = np.stack([t * np.cos(angle), t * np.sin(angle)], 1) / (3 * np.pi)
    pts += rng.normal(0, 0.02, pts.shape)
    return pts.astype(np.float32), label.astype(np.int32)


def init_params(rng: np.random.Generator, sizes: list[int]) -> list[dict]:
    return [{"w": (rng.normal(0, 1, (m, n)) / np.sqrt(m)).astype(np.float32),
             "b": np.zeros(n, np.float32)} for m, n in zip(sizes[:-1], sizes[1:])]


def _matmul(x, w):                                     # [B, M] @ [M, N] -> [B, N]
    return lax.dot_general(x, w, (((1,), (0,)), ((), ())))


def forward(params: list[dict], x):
    """Logits [B, 2] of an MLP with tanh hidden layers."""
    for layer in params[:-1]:
        x = lax.tanh(lax.add(_matmul(x, layer["w"]),
                             lax.broadcast_in_dim(layer["b"], (x.shape[0], layer["b"].shape[0]),
                                                  (1,))))
    last = params[-1]
    return lax.add(_matmul(x, last["w"]),
                   lax.broadcast_in_dim(last["b"], (x.shape[0], last["b"].shape[0]), (1,)))


def loss_fn(params, x, y):
    """Mean softmax cross-entropy: mean(logsumexp(z) - z[y])."""
    z = forward(params, x)                             # [B, 2]
    m = lax.stop_gradient(lax.reduce_max(z, axes=(1,)))
    zs = lax.sub(z, lax.broadcast_in_dim(m, z.shape, (0,)))
    lse = lax.log(lax.reduce_sum(lax.exp(zs), axes=(1,)))                  # [B]
    onehot = lax.convert_element_type(
        lax.eq(lax.broadcast_in_dim(y, z.shape, (0,)),
               lax.broadcasted_iota(np.int32, z.shape, 1)), np.float32)     # [B, 2]
    picked = lax.reduce_sum(lax.mul(zs, onehot), axes=(1,))               # [B]
    return lax.div(lax.reduce_sum(lax.sub(lse, picked), axes=(0,)), float(z.shape[0]))


def accuracy(params, x, y) -> float:
    pred = np.argmax(np.asarray(forward(params, x)), axis=1)
    return float(np.mean(pred == y))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    x_train, y_train = make_spirals(2048, rng)
    x_test, y_test = make_spirals(512, rng)
    params = init_params(rng, [2, args.hidden, args.hidden, 2])
    step = fnad.value_and_grad(loss_fn)
    print(f"fnad {fnad.__version__}: MLP 2-{args.hidden}-{args.hidden}-2 on two spirals, "
          f"{args.steps} SGD steps (placeholder main job until the Transformer lands)")
    start = time.perf_counter()
    for i in range(args.steps + 1):
        idx = rng.integers(0, len(x_train), args.batch)
        loss, grads = step(params, x_train[idx], y_train[idx])
        params = fnad.tree_util.tree_map(lambda p, g: p - args.lr * np.asarray(g), params, grads)
        if i % 250 == 0:
            print(f"step {i:5d}  loss {float(loss):.4f}  "
                  f"test accuracy {accuracy(params, x_test, y_test):.3f}")
    print(f"done in {time.perf_counter() - start:.1f} s; "
          f"test accuracy {accuracy(params, x_test, y_test):.3f}")


if __name__ == "__main__":
    main()
