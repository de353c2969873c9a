"""Helpers shared by several test modules (importable: pytest puts tests/ on the path)."""
from __future__ import annotations

import contextlib

import pytest

import fnad
from fnad.config import config
from fnad.core import ShapeError
from fnad.ir import eval_jaxpr


def raises_with(fn, *words, exc=ShapeError) -> str:
    """`fn()` raises `exc` whose message has every word of `words`; returns the message."""
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    return msg


def traced(f):
    """f run through a jaxpr (jit when fnad has it): its arguments become tracers."""
    if hasattr(fnad, "jit"):
        return fnad.jit(f)

    def run(*args):
        closed, shapes = fnad.make_jaxpr(f, return_shape=True)(*args)
        outs = eval_jaxpr(closed.jaxpr, closed.consts, *fnad.tree_util.tree_leaves(args))
        return fnad.tree_util.tree_unflatten(fnad.tree_util.tree_structure(shapes), outs)
    return run


@contextlib.contextmanager
def x64_everywhere():
    """jax_enable_x64 on in fnad and (when installed) jax for a block; both restored after."""
    try:
        import jax
    except ImportError:
        jax = None
    with config.override(jax_enable_x64=True):
        if jax is None:
            yield
            return
        old = jax.config.jax_enable_x64
        jax.config.update("jax_enable_x64", True)
        try:
            yield
        finally:
            jax.config.update("jax_enable_x64", old)
