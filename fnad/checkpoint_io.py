"""Checkpoints: pytrees of arrays saved as `.npz` without pickle, written atomically.

Format: one `.npz` archive whose members are the tree's leaves, named by their key paths
(`params/layers/0/attn/wq`), plus `__meta__`, a UTF-8 JSON document stored as a uint8
array (format version, the key paths in order, each leaf's shape and dtype, and the caller's
metadata: step, config, ...). Nothing is unpickled on load (`allow_pickle=False`), so a
checkpoint from an untrusted source cannot run code.

Atomic: the archive is written to a temporary file in the target directory, flushed to disk,
then renamed over the target (`os.replace`), so a crash mid-write leaves the previous
checkpoint intact, never a half-written one.

Loading checks everything against a template tree (`like=`): the same key paths, shapes and
dtypes, else a CheckpointError that names the first mismatch. A truncated or corrupt file is a
CheckpointError too, not a zipfile traceback.
"""
from __future__ import annotations

import json
import os
import pathlib
import tempfile
import zipfile
from typing import Any

import numpy as np

from fnad import tree_util

__all__ = ["CheckpointError", "load_checkpoint", "save_checkpoint"]

FORMAT = "fnad-checkpoint-1"


class CheckpointError(ValueError):
    """A checkpoint that cannot be read, or does not match what the caller expects."""


def _names(tree: Any) -> tuple[list[str], list[Any], Any]:
    path_leaves, treedef = tree_util.tree_flatten_with_path(tree)
    names = [tree_util.keystr(path, simple=True, separator="/") for path, _ in path_leaves]
    if len(set(names)) != len(names):
        raise CheckpointError("checkpoint: two leaves have the same key path; use dicts with "
                              "distinct string keys or lists")
    return names, [leaf for _, leaf in path_leaves], treedef


def save_checkpoint(path: str | os.PathLike, tree: Any, meta: dict | None = None) -> None:
    """Write the arrays of `tree` and the JSON-serializable `meta` to `path` atomically."""
    path = pathlib.Path(path)
    names, leaves, _ = _names(tree)
    arrays = {n: np.asarray(x) for n, x in zip(names, leaves)}
    for n, a in arrays.items():
        if a.dtype == object:
            raise CheckpointError(f"checkpoint: leaf {n!r} is not an array of numbers")
    header = {"format": FORMAT, "names": names,
              "shapes": [list(a.shape) for a in arrays.values()],
              "dtypes": [a.dtype.str if a.dtype.kind != "V" else a.dtype.name
                         for a in arrays.values()],
              "meta": meta or {}}
    try:
        blob = json.dumps(header).encode()
    except TypeError as e:
        raise CheckpointError(f"checkpoint: meta is not JSON-serializable ({e})") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            # bfloat16 (ml_dtypes) has no npy descriptor: its bits go as uint16, the header
            # keeps the dtype name
            np.savez(f, __meta__=np.frombuffer(blob, np.uint8),
                     **{f"leaf{i}": (a.view(np.uint16) if a.dtype.kind == "V" else a)
                        for i, a in enumerate(arrays.values())})
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise


def _read(path: pathlib.Path) -> tuple[dict, list[np.ndarray]]:
    if not path.exists():
        raise CheckpointError(f"checkpoint: no such file {str(path)!r}")
    try:
        with np.load(path, allow_pickle=False) as z:
            header = json.loads(bytes(z["__meta__"]).decode())
            if header.get("format") != FORMAT:
                raise CheckpointError(f"checkpoint {str(path)!r}: format "
                                      f"{header.get('format')!r}, expected {FORMAT!r}")
            arrays = [z[f"leaf{i}"] for i in range(len(header["names"]))]
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, OSError, KeyError, ValueError, EOFError) as e:
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupt or not an fnad checkpoint "
                              f"({type(e).__name__}: {e})") from None
    for i, (a, dt) in enumerate(zip(arrays, header["dtypes"])):
        if a.dtype.str != dt:                                  # bfloat16 stored as uint16
            import ml_dtypes
            arrays[i] = a.view(np.dtype(getattr(ml_dtypes, dt)))
    return header, arrays


def load_checkpoint(path: str | os.PathLike, like: Any = None) -> tuple[Any, dict]:
    """(tree, meta) from `path`. With `like` (a tree of the expected structure, e.g. freshly
    initialized params), the result has like's structure, and every key path, shape and
    dtype must match; without it the tree is a flat dict {key path: array}."""
    path = pathlib.Path(path)
    header, arrays = _read(path)
    names = header["names"]
    if like is None:
        return dict(zip(names, arrays)), header["meta"]
    want_names, want_leaves, treedef = _names(like)
    if want_names != names:
        missing = [n for n in want_names if n not in names]
        extra = [n for n in names if n not in want_names]
        raise CheckpointError(
            f"checkpoint {str(path)!r} does not match the model: "
            f"missing {missing[:5]}{' ...' if len(missing) > 5 else ''}, "
            f"unexpected {extra[:5]}{' ...' if len(extra) > 5 else ''} "
            f"(was it written with another configuration?)")
    for n, want, got in zip(names, want_leaves, arrays):
        want_shape, want_dtype = np.shape(want), np.asarray(want).dtype
        if tuple(got.shape) != tuple(want_shape) or got.dtype != want_dtype:
            raise CheckpointError(
                f"checkpoint {str(path)!r}: {n!r} is {got.dtype}{list(got.shape)}, the model "
                f"expects {want_dtype}{list(want_shape)} (another configuration?)")
    return tree_util.tree_unflatten(treedef, arrays), header["meta"]
