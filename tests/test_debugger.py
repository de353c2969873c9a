"""fnad.debug.breakpoint: the debugger sees the concrete values of the traced arrays in
scope, under jit, vmap (once per member) and grad (the primal values); its commands."""
import io
import sys

import numpy as np
import pytest

import fnad
import fnad.numpy as fnp


def _f(x):
    y = fnp.sin(x) * 2
    scale = 3
    fnad.debug.breakpoint()
    return y * scale


def _run(monkeypatch, capsys, commands: str, fn, *args):
    monkeypatch.setattr(sys, "stdin", io.StringIO(commands))
    out = fn(*args)
    return out, capsys.readouterr().out


def test_breakpoint_under_jit_shows_concrete_values(monkeypatch, capsys):
    x = np.array([0.0, 1.0], np.float32)
    out, text = _run(monkeypatch, capsys, "p y\npp {'s': scale}\ny.shape\nu\np x\nd\nl\n"
                     "nope + 1\nw\nc\n", fnad.jit(_f), x)
    np.testing.assert_allclose(out, np.sin(x) * 6, rtol=1e-6)
    assert "Array([0.      , 1.682942], dtype=float32)" in text     # y, concrete
    assert "{'s': 3}" in text and "(2,)" in text
    assert "NameError: name 'nope' is not defined" in text
    assert "-> fnad.debug.breakpoint()" in text and "def _f(x):" in text
    assert text.count("(fdb) ") == 10


def test_breakpoint_under_vmap_and_grad(monkeypatch, capsys):
    x = np.array([0.5, 1.0], np.float32)
    _, text = _run(monkeypatch, capsys, "p x\nc\np x\nc\n", fnad.vmap(_f), x)
    assert "Array(0.5, dtype=float32)" in text and "Array(1., dtype=float32)" in text
    g, text = _run(monkeypatch, capsys, "p y\nc\n",
                   fnad.grad(lambda v: fnp.sum(_f(v))), x)
    np.testing.assert_allclose(g, 6 * np.cos(x), rtol=1e-6)
    assert "Array([0.9588511, 1.682942 ], dtype=float32)" in text


def test_quit_and_errors(monkeypatch, capsys):
    with pytest.raises(SystemExit):
        _run(monkeypatch, capsys, "q\n", _f, np.float32(1.0))
    with pytest.raises(ValueError, match="unknown debugger backend"):
        fnad.debug.breakpoint(backend="web")
    tok = np.ones(2)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))        # end of input: continue
    assert fnad.debug.breakpoint(token=tok) is tok
