"""`fnad-train` (also `python -m fnad.train`): train the decoder-only LM of `fnad.models`.

By default it learns 3-digit addition (`fnad.tasks.AdditionTask`: `317+045=` -> `2630`, the
sum's digits least significant first) and reports the exact-match accuracy on held-out
problems; `--data FILE` trains a character-level LM on a text file instead. The train step
(loss, gradient, global-norm clipping, AdamW with warmup + cosine decay) is one `fnad.jit`
program on the backend chosen by `--backend`. It shows a tqdm bar with the loss and tokens/s,
evaluates every `--eval-every` steps, writes `loss.png` and an atomic `.npz` checkpoint to
`--out`, resumes from `--resume` (the batch of step s depends only on the seed and s, so a
resumed run continues exactly), and samples with the KV-cache decoder at the end.

Everything here uses fnad's public API, as a user's training script would.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import pathlib
import sys
import time

import numpy as np

import fnad
from fnad import decode, optim, tasks
from fnad.checkpoint_io import CheckpointError, load_checkpoint, save_checkpoint
from fnad.models import transformer

__all__ = ["TrainState", "batch_for_step", "evaluate", "main", "make_optimizer",
           "make_train_step", "train"]


def make_optimizer(args) -> optim.GradientTransformation:
    """Clip the global norm, then AdamW with linear warmup and cosine decay to 10% (seed 001);
    no weight decay on norm scales and biases (1-D leaves)."""
    schedule = optim.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=args.lr, warmup_steps=args.warmup,
        decay_steps=max(args.steps, args.warmup + 1), end_value=args.lr * 0.1)
    decay_mask = lambda params: fnad.tree_util.tree_map(lambda p: p.ndim >= 2, params)  # noqa: E731
    return optim.chain(optim.clip_by_global_norm(args.clip),
                       optim.adamw(schedule, b1=0.9, b2=0.95, weight_decay=args.weight_decay,
                                   mask=decay_mask))


def make_train_step(cfg: transformer.LMConfig, tx: optim.GradientTransformation, *,
                    backend: str | None = None, jit: bool = True):
    """step(params, opt_state, inputs, targets, mask, key) -> (params, opt_state, loss, ce)."""
    def loss_fn(params, inputs, targets, mask, key):
        return transformer.loss(params, inputs, targets, cfg, mask=mask, key=key,
                                train=cfg.dropout > 0)

    def step(params, opt_state, inputs, targets, mask, key):
        (loss, parts), grads = fnad.value_and_grad(loss_fn, has_aux=True)(
            params, inputs, targets, mask, key)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state, loss, parts["ce"]
    return fnad.jit(step, backend=backend) if jit else step


def make_eval_step(cfg: transformer.LMConfig, *, backend: str | None = None):
    """evaluate(params, inputs, targets, mask) -> (ce, per-example exact match [B] bool)."""
    def evaluate(params, inputs, targets, mask):
        logits, _ = transformer.forward(params, inputs, cfg)                # [B, T, V]
        ce = fnad.models.cross_entropy(logits, targets, mask=mask)
        hit = (fnad.numpy.argmax(logits, axis=-1) == targets) | ~mask       # [B, T]
        return ce, fnad.numpy.all(hit, axis=-1)
    return fnad.jit(evaluate, backend=backend)


def batch_for_step(task, seed: int, step: int, batch: int):
    """The training batch of `step`: a function of (seed, step) only, so resuming from a
    checkpoint replays the same data."""
    return task.batch(np.random.default_rng([seed, step]), batch, "train")


@dataclasses.dataclass
class TrainState:
    params: dict
    opt_state: object
    step: int
    history: list          # [(step, train loss)]
    evals: list            # [(step, held-out loss, exact match or None)]


def evaluate(eval_step, params, task, seed: int, n: int, batch: int) -> tuple[float, float | None]:
    """Held-out loss and (for checkable tasks) exact-match accuracy over n examples."""
    rng = np.random.default_rng([seed, 2**31])
    ces, hits = [], []
    for _ in range(max(1, n // batch)):
        inputs, targets, mask = task.batch(rng, batch, "test")
        ce, hit = eval_step(params, inputs, targets, mask)
        ces.append(float(ce))
        hits.append(np.asarray(hit))
    acc = float(np.mean(np.concatenate(hits))) if task.checkable else None
    return float(np.mean(ces)), acc


def _plot(state: TrainState, path: pathlib.Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    steps, losses = zip(*state.history) if state.history else ((), ())
    ax.plot(steps, losses, lw=0.8, alpha=0.6, label="train loss")
    if state.evals:
        ax.plot([e[0] for e in state.evals], [e[1] for e in state.evals], "o-",
                label="held-out loss")
        if state.evals[0][2] is not None:
            acc_ax = ax.twinx()
            acc_ax.plot([e[0] for e in state.evals], [e[2] for e in state.evals], "s--",
                        color="tab:green", label="exact match")
            acc_ax.set_ylabel("held-out exact match")
            acc_ax.set_ylim(0, 1.02)
            acc_ax.legend(loc="center right")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats)")
    ax.set_title(title)
    ax.legend(loc="upper right")
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)


def _save(path: pathlib.Path, state: TrainState, args, cfg) -> None:
    meta = {"step": state.step, "config": dataclasses.asdict(cfg), "args": vars(args),
            "history": state.history, "evals": state.evals}
    save_checkpoint(path, {"params": state.params, "opt_state": state.opt_state}, meta)


def _resume(path: str, state: TrainState, cfg) -> TrainState:
    tree, meta = load_checkpoint(path, like={"params": state.params,
                                             "opt_state": state.opt_state})
    if meta.get("config") != dataclasses.asdict(cfg):
        diff = {k: (v, meta.get("config", {}).get(k)) for k, v in dataclasses.asdict(cfg).items()
                if meta.get("config", {}).get(k) != v}
        raise CheckpointError(f"checkpoint {path!r} was written for another model "
                              f"configuration: {{name: (now, checkpoint)}} = {diff}")
    to_arrays = lambda t: fnad.tree_util.tree_map(fnad.numpy.asarray, t)  # noqa: E731
    return TrainState(to_arrays(tree["params"]), to_arrays(tree["opt_state"]), meta["step"],
                      [tuple(h) for h in meta["history"]], [tuple(e) for e in meta["evals"]])


def _samples(params, cfg, task, args, n: int = 4) -> list[str]:
    """Greedy answers to held-out prompts (synthetic tasks) or a sampled continuation (text),
    generated with the KV-cache decoder."""
    lines = []
    if task.checkable:
        pairs = task.examples(np.random.default_rng([args.seed, 2**32]), n, "test")
        prompts = np.stack([task.encode(p) for p, _ in pairs])
        out = decode.generate(params, prompts, cfg, max_new_tokens=len(pairs[0][1]),
                              method="greedy", backend=args.backend)
        for (p, a), toks in zip(pairs, np.asarray(out)):
            got = task.decode(toks)
            lines.append(f"{p}{got}   {'ok' if got == a else 'expected ' + a}")
    else:
        rng = np.random.default_rng([args.seed, 2**32])
        prompt, _, _ = task.batch(rng, 1, "test")
        prompt = prompt[:, : min(16, task.seq_len)]
        out = decode.generate(params, prompt, cfg, max_new_tokens=min(200, cfg.max_len - 16),
                              method="top_p", top_p=0.9, temperature=0.8,
                              key=fnad.random.PRNGKey(args.seed), backend=args.backend)
        lines.append(task.decode(prompt[0]) + "|" + task.decode(np.asarray(out)[0]))
    return lines


def train(args) -> TrainState:
    """Run training as configured by the parsed command-line `args`; returns the final state."""
    from tqdm import tqdm

    try:                              # bad flags are a one-line error, not a traceback
        task = tasks.make_task(args.task, data=args.data, seq_len=args.seq_len, size=args.size)
        cfg = transformer.LMConfig(
            vocab=task.vocab_size, d_model=args.d_model, n_layers=args.layers,
            n_heads=args.heads, n_kv_heads=args.kv_heads, d_ff=args.d_ff,
            max_len=max(task.seq_len + 1, args.max_len), norm=args.norm, pos=args.pos,
            ffn=args.ffn, n_experts=args.experts, top_k=args.top_k, dropout=args.dropout)
    except (ValueError, FileNotFoundError) as e:
        raise SystemExit(f"fnad-train: error: {e}") from None
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tx = make_optimizer(args)
    params = transformer.init_params(fnad.random.PRNGKey(args.seed), cfg)
    state = TrainState(params, tx.init(params), 0, [], [])
    if args.resume:
        state = _resume(args.resume, state, cfg)
    step_fn = make_train_step(cfg, tx, backend=args.backend, jit=not args.eager)
    eval_fn = make_eval_step(cfg, backend=args.backend)
    base_key = fnad.random.PRNGKey(args.seed + 1)
    n_params = sum(int(np.size(p)) for p in fnad.tree_util.tree_leaves(state.params))
    what = f"task {task.name}" + (f" ({args.data})" if args.data else "")
    print(f"fnad {fnad.__version__}: decoder LM, {cfg.n_layers} layers, d_model {cfg.d_model}, "
          f"{n_params / 1e6:.2f}M params; {what}, batch {args.batch} x {task.seq_len} tokens; "
          f"backend {args.backend or fnad.config.jax_jit_backend}"
          f"{' (eager)' if args.eager else ''}; out {out}/", flush=True)

    start = t_last = time.perf_counter()
    dt = None                                           # smoothed seconds per step
    bar = tqdm(range(state.step, args.steps), initial=state.step, total=args.steps,
               desc="train", unit="step", dynamic_ncols=True, disable=args.quiet,
               file=sys.stdout, mininterval=0.5)
    for step in bar:
        inputs, targets, mask = batch_for_step(task, args.seed, step, args.batch)
        key = fnad.random.fold_in(base_key, step)
        state.params, state.opt_state, loss, _ = step_fn(state.params, state.opt_state,
                                                         inputs, targets, mask, key)
        state.step = step + 1
        loss = float(loss)
        if not math.isfinite(loss):
            raise FloatingPointError(f"step {step}: the loss is {loss}; lower --lr or raise "
                                     f"--warmup")
        state.history.append((step, loss))
        now = time.perf_counter()
        dt = now - t_last if dt is None else 0.9 * dt + 0.1 * (now - t_last)  # smoothed
        bar.set_postfix(loss=f"{loss:.4g}", tok_s=f"{inputs.size / max(dt, 1e-9):,.0f}",
                        refresh=False)
        t_last = now
        last = state.step == args.steps
        if state.step % args.eval_every == 0 or last:
            ce, acc = evaluate(eval_fn, state.params, task, args.seed, args.eval_examples,
                               args.batch)
            state.evals.append((state.step, ce, acc))
            bar.write(f"step {state.step:5d}  train loss {loss:.4g}  held-out loss {ce:.4g}"
                      + (f"  exact match {acc:.3f}" if acc is not None else ""))
        if state.step % args.ckpt_every == 0 or last:
            _save(out / "checkpoint.npz", state, args, cfg)
    bar.close()
    elapsed = time.perf_counter() - start
    _plot(state, out / "loss.png", f"fnad-train: {what}")
    _save(out / "checkpoint.npz", state, args, cfg)
    print(f"done: {state.step} steps in {elapsed:.1f} s; wrote {out / 'loss.png'} and "
          f"{out / 'checkpoint.npz'}")
    if state.evals:
        s, ce, acc = state.evals[-1]
        print(f"final held-out loss {ce:.4g}" + (f", exact match {acc:.3f}" if acc is not None
                                                 else ""))
    if args.samples:
        print("samples (KV-cache decoding):")
        for line in _samples(state.params, cfg, task, args):
            print("  " + line)
    return state


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="fnad-train", description=__doc__.splitlines()[0])
    a = ap.add_argument
    a("--task", default="add", help="built-in task: add (3-digit addition) or sort")
    a("--size", type=int, default=None, help="digits (add) or sequence length (sort)")
    a("--data", default=None, help="train a character-level LM on this UTF-8 text file")
    a("--seq-len", type=int, default=128, help="window length for --data")
    a("--steps", type=int, default=1500)
    a("--batch", type=int, default=128)
    a("--lr", type=float, default=1e-3)
    a("--warmup", type=int, default=100)
    a("--weight-decay", type=float, default=0.01)
    a("--clip", type=float, default=1.0, help="global gradient-norm clip")
    a("--d-model", type=int, default=128)
    a("--layers", type=int, default=2)
    a("--heads", type=int, default=4)
    a("--kv-heads", type=int, default=None, help="grouped-query attention: kv heads")
    a("--d-ff", type=int, default=None)
    a("--max-len", type=int, default=0, help="longest sequence (default: the task's)")
    a("--norm", default="rms", choices=["rms", "layer"])
    a("--pos", default="rope", choices=["rope", "sinusoidal"])
    a("--ffn", default="swiglu", choices=["swiglu", "gelu", "gelu_tanh"])
    a("--experts", type=int, default=0, help="MoE experts per layer (0: dense FFN)")
    a("--top-k", type=int, default=2, help="MoE experts per token")
    a("--dropout", type=float, default=0.0)
    a("--backend", default=None, help="jit backend: numba (default), numpy, xla, cuda")
    a("--eager", action="store_true", help="run the train step without jit")
    a("--eval-every", type=int, default=250)
    a("--eval-examples", type=int, default=1024)
    a("--ckpt-every", type=int, default=500)
    a("--out", default="runs/fnad-train", help="directory for loss.png and checkpoint.npz")
    a("--resume", default=None, help="continue from this checkpoint")
    a("--seed", type=int, default=0)
    a("--samples", type=int, default=1, help="print samples at the end (0: no)")
    a("--quiet", action="store_true", help="no progress bar")
    return ap


def main(argv=None) -> None:
    args = parser().parse_args(argv)
    try:
        train(args)
    except CheckpointError as e:
        raise SystemExit(f"fnad-train: error: {e}") from None


if __name__ == "__main__":
    main()
