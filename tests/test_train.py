"""fnad-train (fnad/train.py): eager and jit steps agree, resume continues exactly, the
command writes its plot and checkpoint, and bad checkpoints are clear errors."""
import numpy as np
import pytest

from fnad import train

TINY = ["--d-model", "32", "--layers", "1", "--heads", "2", "--batch", "8",
        "--eval-examples", "16", "--samples", "0", "--quiet", "--warmup", "2"]


def _args(tmp_path, *extra):
    return train.parser().parse_args(TINY + ["--out", str(tmp_path)] + list(extra))


def test_eager_and_jit_train_steps_give_the_same_losses(tmp_path):
    args = _args(tmp_path, "--steps", "5")
    eager = train.train(_args(tmp_path / "eager", "--steps", "5", "--eager"))
    jitted = train.train(args)
    le = [loss for _, loss in eager.history]
    lj = [loss for _, loss in jitted.history]
    assert len(le) == len(lj) == 5
    np.testing.assert_allclose(lj, le, rtol=2e-5, atol=2e-6)
    assert le[-1] < le[0]                                        # it learns


def test_resume_from_a_checkpoint_gives_the_same_next_losses(tmp_path):
    full = train.train(_args(tmp_path / "full", "--steps", "6"))
    train.train(_args(tmp_path / "part", "--steps", "3"))
    resumed = train.train(_args(tmp_path / "part", "--steps", "6", "--resume",
                                str(tmp_path / "part" / "checkpoint.npz")))
    assert [s for s, _ in resumed.history] == list(range(6))
    np.testing.assert_allclose([loss for _, loss in resumed.history],
                               [loss for _, loss in full.history], rtol=1e-6, atol=1e-7)


def test_command_writes_plot_and_checkpoint_and_prints_progress(tmp_path, capsys):
    train.main(TINY + ["--out", str(tmp_path), "--steps", "4", "--eval-every", "2",
                       "--samples", "1"])
    out = capsys.readouterr().out
    assert "exact match" in out and "samples (KV-cache decoding)" in out
    png = (tmp_path / "loss.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert (tmp_path / "checkpoint.npz").stat().st_size > 0


def test_text_file_task_trains_and_samples(tmp_path, capsys):
    (tmp_path / "t.txt").write_text("to be or not to be, that is the question. " * 30)
    train.main(TINY + ["--out", str(tmp_path), "--steps", "3", "--data",
                       str(tmp_path / "t.txt"), "--seq-len", "32", "--samples", "1"])
    out = capsys.readouterr().out
    assert "held-out loss" in out and "samples" in out


def test_mismatched_and_corrupt_checkpoints_are_clear_errors(tmp_path):
    train.train(_args(tmp_path, "--steps", "2"))
    ckpt = str(tmp_path / "checkpoint.npz")
    with pytest.raises(SystemExit, match="does not match the model|another configuration"):
        train.main(TINY[:1] + ["48"] + TINY[2:] + ["--out", str(tmp_path / "b"), "--steps", "3",
                                                  "--resume", ckpt])
    data = open(ckpt, "rb").read()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(SystemExit, match="corrupt"):
        train.main(TINY + ["--out", str(tmp_path / "c"), "--steps", "3", "--resume",
                           str(tmp_path / "cut.npz")])
    with pytest.raises(SystemExit, match="unknown task"):
        train.main(TINY + ["--task", "multiply", "--out", str(tmp_path / "d")])
