"""fnad.checkpoint_io (atomic .npz without pickle, checked against a template) and fnad.tasks
(the synthetic training tasks and the character-level text task)."""
import os

import ml_dtypes
import numpy as np
import pytest
from checks import raises_with

from fnad import tasks
from fnad.checkpoint_io import CheckpointError, load_checkpoint, save_checkpoint


def err(exc, words, fn):
    return raises_with(fn, *words, exc=exc)


def _tree():
    rng = np.random.default_rng(0)
    return {"params": {"layers": [{"w": rng.normal(size=(3, 4)).astype(np.float32),
                                   "b": np.zeros(4, np.float32)} for _ in range(2)],
                       "scale": np.ones(4, ml_dtypes.bfloat16)},
            "opt_state": ({"count": np.int32(7)}, {"mu": rng.normal(size=5)})}


def test_checkpoint_round_trip_keeps_structure_values_dtypes_and_meta(tmp_path):
    tree = _tree()
    save_checkpoint(tmp_path / "c.npz", tree, {"step": 7, "config": {"d": 4}})
    got, meta = load_checkpoint(tmp_path / "c.npz", like=tree)
    assert meta == {"step": 7, "config": {"d": 4}}
    flat_want = _flat(tree)
    flat_got = _flat(got)
    assert flat_got.keys() == flat_want.keys()
    for k in flat_want:
        assert flat_got[k].dtype == np.asarray(flat_want[k]).dtype, k
        np.testing.assert_array_equal(flat_got[k], flat_want[k])
    flat, _ = load_checkpoint(tmp_path / "c.npz")                 # without a template
    assert "params/layers/1/w" in flat and "opt_state/0/count" in flat


def _flat(tree):
    from fnad import tree_util
    return {tree_util.keystr(p): x for p, x in tree_util.tree_flatten_with_path(tree)[0]}


def test_checkpoint_is_loaded_without_pickle(tmp_path):
    save_checkpoint(tmp_path / "c.npz", _tree())
    with np.load(tmp_path / "c.npz", allow_pickle=False) as z:     # readable with pickle off
        assert all(z[name].dtype != object for name in z.files)


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    save_checkpoint(tmp_path / "c.npz", _tree(), {"step": 1})
    before = (tmp_path / "c.npz").read_bytes()

    def crash(*a, **k):
        raise KeyboardInterrupt("killed mid-write")
    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path / "c.npz", _tree(), {"step": 2})
    assert (tmp_path / "c.npz").read_bytes() == before            # old checkpoint intact
    assert os.listdir(tmp_path) == ["c.npz"]                      # no temporary left behind


def test_checkpoint_mismatch_and_corruption_are_clear_errors(tmp_path):
    tree = _tree()
    save_checkpoint(tmp_path / "c.npz", tree)
    other = _tree()
    other["params"]["layers"][0]["w"] = np.zeros((3, 5), np.float32)
    err(CheckpointError, ["params/layers/0/w", "float32[3, 4]", "float32[3, 5]"],
        lambda: load_checkpoint(tmp_path / "c.npz", like=other))
    fewer = _tree()
    del fewer["params"]["scale"]
    err(CheckpointError, ["does not match", "params/scale"],
        lambda: load_checkpoint(tmp_path / "c.npz", like=fewer))
    data = (tmp_path / "c.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    err(CheckpointError, ["corrupt"], lambda: load_checkpoint(tmp_path / "cut.npz", like=tree))
    flipped = bytearray(data)
    flipped[len(data) // 3] ^= 0xFF                               # a bit flip inside a member
    (tmp_path / "flip.npz").write_bytes(bytes(flipped))
    err(CheckpointError, ["corrupt"], lambda: load_checkpoint(tmp_path / "flip.npz", like=tree))
    err(CheckpointError, ["no such file"], lambda: load_checkpoint(tmp_path / "none.npz"))
    np.savez(tmp_path / "plain.npz", a=np.ones(3))
    err(CheckpointError, ["not an fnad checkpoint"],
        lambda: load_checkpoint(tmp_path / "plain.npz"))


@pytest.mark.parametrize("task", [tasks.AdditionTask(3), tasks.SortTask(6)])
def test_synthetic_task_layout_answers_and_held_out_split(task):
    rng = np.random.default_rng(1)
    inputs, targets, mask = task.batch(rng, 64)
    assert inputs.shape == targets.shape == mask.shape == (64, task.seq_len)
    np.testing.assert_array_equal(inputs[:, 1:], targets[:, :-1])           # shifted by one
    for row_in, row_t, row_m in zip(inputs, targets, mask):
        text = task.decode(np.concatenate([row_in, row_t[-1:]]))
        prompt_len = len(text) - int(row_m.sum())
        prompt, answer = text[:prompt_len], text[prompt_len:]
        if isinstance(task, tasks.AdditionTask):
            a, b = prompt[:-1].split("+")
            assert prompt.endswith("=") and answer == f"{int(a) + int(b):04d}"[::-1]
        else:
            assert prompt.endswith("|") and answer == "".join(sorted(prompt[:-1]))
    train = {p for p, _ in task.examples(np.random.default_rng(2), 2000, "train")}
    test = {p for p, _ in task.examples(np.random.default_rng(3), 300, "test")}
    assert train and test and not train & test                              # disjoint splits


def test_text_task_windows_and_errors(tmp_path):
    text = "the quick brown fox jumps over the lazy dog. " * 20
    (tmp_path / "t.txt").write_text(text)
    task = tasks.make_task("add", data=str(tmp_path / "t.txt"), seq_len=16)
    assert task.vocab_size == len(set(text)) and not task.checkable
    inputs, targets, mask = task.batch(np.random.default_rng(0), 8)
    assert inputs.shape == (8, 16) and mask.all()
    np.testing.assert_array_equal(inputs[:, 1:], targets[:, :-1])
    for row in np.concatenate([inputs, targets[:, -1:]], 1):
        assert task.decode(row) in text
    err(FileNotFoundError, ["no such file"],
        lambda: tasks.make_task("add", data=str(tmp_path / "missing.txt")))
    (tmp_path / "short.txt").write_text("abc")
    err(ValueError, ["3 characters", "--seq-len"],
        lambda: tasks.make_task("add", data=str(tmp_path / "short.txt"), seq_len=16))
    err(ValueError, ["unknown task", "add", "sort"], lambda: tasks.make_task("multiply"))
    err(ValueError, ["digits must be in 1..9"], lambda: tasks.AdditionTask(12))


def test_importing_the_training_modules_shadows_no_fnad_name():
    import fnad
    before = dict(vars(fnad))
    import fnad.checkpoint_io  # noqa: F401
    import fnad.decode  # noqa: F401
    import fnad.optim  # noqa: F401
    import fnad.train  # noqa: F401
    assert [k for k in before if vars(fnad)[k] is not before[k]] == []
    assert callable(fnad.checkpoint)                     # jax.checkpoint (remat), not a module
