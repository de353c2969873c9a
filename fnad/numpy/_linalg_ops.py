"""fnad.numpy's products and contractions: dot, matmul, vdot, inner, outer, tensordot, einsum,
trace, matrix_transpose, and the Array API's matvec, vecmat, vecdot.

All contractions lower to the one `dot_general` primitive (plus transpose/squeeze/reduce_sum
around it), whose output order is: batch dims, lhs free dims, rhs free dims. einsum
contracts pairwise, left to right, after summing out each operand's private indices and
taking diagonals of repeated ones.
"""
from __future__ import annotations

import operator
import string

import numpy as np

from fnad import dtypes
from fnad.core import Array
from fnad.numpy._core import (
    ArrayLike,
    canonicalize_axis,
    check_arraylike,
    ensure_array,
    promote_dtypes,
)
from fnad.numpy._creation import diagonal
from fnad.numpy._reductions import sum as _sum
from fnad.numpy._shape import moveaxis, ravel, reshape, swapaxes, transpose
from fnad.numpy._ufuncs import conjugate, multiply
from fnad.primitives import linalg
from fnad.primitives import reductions as red
from fnad.primitives import shape_ops as so

__all__ = ["dot", "einsum", "inner", "matmul", "matrix_transpose", "matvec", "outer",
           "tensordot", "trace", "vdot", "vecdot", "vecmat"]


def _promote(name: str, a, b, preferred_element_type):
    check_arraylike(name, a, b)
    if preferred_element_type is None:
        a, b = promote_dtypes(a, b)
    return ensure_array(a), ensure_array(b)


def _dot_general(a, b, dims, precision, preferred_element_type):
    return linalg.dot_general(a, b, dims, precision=precision,
                              preferred_element_type=preferred_element_type)


def dot(a: ArrayLike, b: ArrayLike, *, precision=None, preferred_element_type=None) -> Array:
    """NumPy's dot: a scalar product if either is 0-d; else contract a's last axis with b's
    last (b 1-D) or second-to-last axis: [..., K] · [..., K, N] -> [..., ..., N]."""
    a, b = _promote("dot", a, b, preferred_element_type)
    if a.ndim == 0 or b.ndim == 0:
        return multiply(a, b)
    contract = ((a.ndim - 1,), (0 if b.ndim == 1 else b.ndim - 2,))
    return _dot_general(a, b, (contract, ((), ())), precision, preferred_element_type)


def matmul(a: ArrayLike, b: ArrayLike, *, precision=None, preferred_element_type=None) -> Array:
    """a @ b: [..., M, K] @ [..., K, N] -> [..., M, N] with NumPy's batch broadcasting;
    a 1-D operand is a vector (its axis is dropped from the result)."""
    a, b = _promote("matmul", a, b, preferred_element_type)
    for i, x in enumerate((a, b)):
        if x.ndim < 1:
            raise ValueError(f"matmul operand {i} must have ndim at least 1, but it has ndim 0")
    a_is_mat, b_is_mat = a.ndim > 1, b.ndim > 1
    a_batch_dims = a.shape[:-2] if a_is_mat else ()
    b_batch_dims = b.shape[:-2] if b_is_mat else ()
    num_batch = max(len(a_batch_dims), len(b_batch_dims))
    a_batch_dims = (None,) * (num_batch - len(a_batch_dims)) + a_batch_dims
    b_batch_dims = (None,) * (num_batch - len(b_batch_dims)) + b_batch_dims
    # Size-1 batch dims of one side are squeezed and become the other side's free dims;
    # idx_* record where each kind of dot_general output dim must go in the result.
    a_squeeze, b_squeeze, a_batch, b_batch = [], [], [], []
    idx_batch, idx_a_other, idx_b_other = [], [], []
    for i, (ba, bb) in enumerate(zip(a_batch_dims, b_batch_dims, strict=True)):
        if ba is None:
            idx_b_other.append(i)
        elif bb is None:
            idx_a_other.append(i)
        elif ba == 1:
            idx_b_other.append(i)
            a_squeeze.append(len(idx_batch) + len(idx_a_other) + len(a_squeeze))
        elif bb == 1:
            idx_a_other.append(i)
            b_squeeze.append(len(idx_batch) + len(idx_b_other) + len(b_squeeze))
        elif ba == bb:
            a_batch.append(len(idx_batch) + len(idx_a_other))
            b_batch.append(len(idx_batch) + len(idx_b_other))
            idx_batch.append(i)
        else:
            raise ValueError(f"Incompatible shapes for matmul arguments: {a.shape} and "
                             f"{b.shape}")
    if a_is_mat:
        idx_a_other.append(num_batch)
    if b_is_mat:
        idx_b_other.append(num_batch + a_is_mat)
    perm = tuple(int(p) for p in np.argsort(np.array(idx_batch + idx_a_other + idx_b_other,
                                                     dtype=np.int64)))
    if a_squeeze:
        a = so.squeeze(a, tuple(a_squeeze))
    if b_squeeze:
        b = so.squeeze(b, tuple(b_squeeze))
    out = _dot_general(a, b, (((a.ndim - 1,), (b.ndim - 1 - b_is_mat,)),
                              (tuple(a_batch), tuple(b_batch))),
                       precision, preferred_element_type)
    return transpose(out, perm)


def vdot(a: ArrayLike, b: ArrayLike, *, precision=None, preferred_element_type=None) -> Array:
    """Σ conj(a)·b over the flattened inputs."""
    check_arraylike("vdot", a, b)
    a = ensure_array(a)
    if dtypes.is_complex(a.dtype):
        a = conjugate(a)
    return dot(ravel(a), ravel(b), precision=precision,
               preferred_element_type=preferred_element_type)


def inner(a: ArrayLike, b: ArrayLike, *, precision=None, preferred_element_type=None) -> Array:
    """Contract the last axes of a and b (a scalar product if either is 0-d)."""
    a, b = _promote("inner", a, b, preferred_element_type)
    if a.ndim == 0 or b.ndim == 0:
        return multiply(a, b)
    return tensordot(a, b, (-1, -1), precision=precision,
                     preferred_element_type=preferred_element_type)


def outer(a: ArrayLike, b: ArrayLike, out: None = None) -> Array:
    """out[i, j] = a.ravel()[i] · b.ravel()[j]."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to fnad.numpy.outer is not supported.")
    a, b = _promote("outer", a, b, None)
    return multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)))     # [M, 1] * [1, N] -> [M, N]


def tensordot(a: ArrayLike, b: ArrayLike, axes=2, *, precision=None,
              preferred_element_type=None) -> Array:
    """Contract a's last `axes` axes with b's first (an int), or the axis lists axes[0]
    of a with axes[1] of b; the result's axes are a's free axes then b's."""
    a, b = _promote("tensordot", a, b, preferred_element_type)
    if a.ndim < 1 or b.ndim < 1:
        raise TypeError(f"tensordot requires a.ndim and b.ndim to be at least 1, got {a.ndim} "
                        f"and {b.ndim}.")
    if isinstance(axes, (int, np.integer)):
        axes = operator.index(axes)
        if axes > min(a.ndim, b.ndim):
            raise TypeError(f"Number of tensordot axes (axes {axes}) exceeds input ranks "
                            f"({a.ndim} and {b.ndim})")
        contract = tuple(range(a.ndim - axes, a.ndim)), tuple(range(axes))
    elif isinstance(axes, (tuple, list)) and len(axes) == 2:
        ax1, ax2 = axes
        if isinstance(ax1, (int, np.integer)) and isinstance(ax2, (int, np.integer)):
            contract = (canonicalize_axis(ax1, a.ndim),), (canonicalize_axis(ax2, b.ndim),)
        elif isinstance(ax1, (tuple, list)) and isinstance(ax2, (tuple, list)):
            if len(ax1) != len(ax2):
                raise TypeError(f"tensordot requires axes lists to have equal length, got "
                                f"{ax1} and {ax2}.")
            contract = (tuple(canonicalize_axis(i, a.ndim) for i in ax1),
                        tuple(canonicalize_axis(i, b.ndim) for i in ax2))
        else:
            raise TypeError("tensordot requires both axes lists to be either ints, tuples or "
                            f"lists, got {ax1} and {ax2}")
    else:
        raise TypeError("tensordot axes argument must be an int, a pair of ints, or a pair of "
                        "lists/tuples of ints.")
    return _dot_general(a, b, (contract, ((), ())), precision, preferred_element_type)


def trace(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None,
          out: None = None) -> Array:
    """Sum of the diagonal `offset` of the (axis1, axis2) planes."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to fnad.numpy.trace is not supported.")
    return _sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def matrix_transpose(x: ArrayLike, /) -> Array:
    """x with its last two axes swapped."""
    check_arraylike("matrix_transpose", x)
    x = ensure_array(x)
    if x.ndim < 2:
        raise ValueError(f"x must be at least two-dimensional for matrix_transpose; got "
                         f"ndim={x.ndim}")
    return swapaxes(x, -1, -2)


def _check_core_rank(name: str, x, rank: int, dims: str) -> None:
    if x.ndim < rank:
        raise ValueError(f"{name}: input with shape {x.shape} does not have enough dimensions "
                         f"for the core dimensions {dims}")


def matvec(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Batched matrix-vector products: [..., N, M] x [..., M] -> [..., N] (batch dims
    broadcast)."""
    check_arraylike("matvec", x1, x2)
    x1, x2 = ensure_array(x1), ensure_array(x2)
    _check_core_rank("matvec", x1, 2, "(n,m)")
    _check_core_rank("matvec", x2, 1, "(m)")
    out = matmul(x1, so.expand_dims(x2, (x2.ndim,)))                   # [..., N, 1]
    return so.squeeze(out, (out.ndim - 1,))                             # [..., N]


def vecmat(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Batched conj(vector)-matrix products: [..., N] x [..., N, M] -> [..., M]."""
    check_arraylike("vecmat", x1, x2)
    x1, x2 = ensure_array(x1), ensure_array(x2)
    _check_core_rank("vecmat", x1, 1, "(n)")
    _check_core_rank("vecmat", x2, 2, "(n,m)")
    out = matmul(so.expand_dims(conjugate(x1), (x1.ndim - 1,)), x2)     # [..., 1, M]
    return so.squeeze(out, (out.ndim - 2,))                             # [..., M]


def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1, precision=None,
           preferred_element_type=None) -> Array:
    """Σ conj(x1)·x2 along `axis` (the other dims broadcast): [..., N] x [..., N] -> [...]."""
    check_arraylike("vecdot", x1, x2)
    x1, x2 = ensure_array(x1), ensure_array(x2)
    ax1, ax2 = canonicalize_axis(axis, x1.ndim), canonicalize_axis(axis, x2.ndim)
    if x1.shape[ax1] != x2.shape[ax2]:
        raise ValueError(f"axes must match; got shapes {x1.shape} and {x2.shape} with "
                         f"axis={axis}")
    x1 = so.expand_dims(conjugate(moveaxis(x1, ax1, -1)),
                        (x1.ndim - 1,))                                 # [..., 1, N]
    x2 = so.expand_dims(moveaxis(x2, ax2, -1),
                        (x2.ndim,))                                     # [..., N, 1]
    out = matmul(x1, x2, precision=precision, preferred_element_type=preferred_element_type)
    return so.squeeze(out, (out.ndim - 2, out.ndim - 1))                # [...]


# ---- einsum ---------------------------------------------------------------------------------
_LETTERS = frozenset(string.ascii_letters)


def _parse_einsum(subscripts: str, shapes) -> tuple[list[str], str]:
    """Per-operand label strings and the output's, with '...' expanded to private labels."""
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        inputs, output = subscripts.split("->")
        explicit = True
    else:
        inputs, output, explicit = subscripts, "", False
    in_specs = inputs.split(",")
    if len(in_specs) != len(shapes):
        raise ValueError(f"einsum: {len(in_specs)} operand subscripts given for "
                         f"{len(shapes)} operands in {subscripts!r}")
    used = set(subscripts) & _LETTERS
    spare = [c for c in string.ascii_letters if c not in used]
    n_ell = 0
    for spec, shape in zip(in_specs, shapes, strict=True):
        if "..." in spec:
            n_ell = max(n_ell, len(shape) - (len(spec) - 3))
    if len(spare) < n_ell:
        raise ValueError("einsum: too many dimensions under '...'")
    ell = "".join(spare[:n_ell])
    labels = []
    for spec, shape in zip(in_specs, shapes, strict=True):
        if "..." in spec:
            k = len(shape) - (len(spec) - 3)
            if k < 0:
                raise ValueError(f"einsum: operand subscripts {spec!r} have more labels than "
                                 f"the operand has dimensions {shape}")
            spec = spec.replace("...", ell[n_ell - k:] if k else "")
        bad = set(spec) - _LETTERS
        if bad:
            raise ValueError(f"einsum: invalid subscript characters {sorted(bad)} in "
                             f"{subscripts!r}")
        if len(spec) != len(shape):
            raise ValueError(f"einsum: operand subscripts {spec!r} do not match its shape "
                             f"{shape} (rank {len(shape)})")
        labels.append(spec)
    if explicit:
        output = output.replace("...", ell)
    else:
        counts = {}
        for spec in labels:
            for c in spec:
                counts[c] = counts.get(c, 0) + 1
        output = ell + "".join(sorted(c for c in counts if counts[c] == 1 and c not in ell))
    if len(set(output)) != len(output):
        raise ValueError(f"einsum: output subscript {output!r} contains a repeated label")
    missing = set(output) - set("".join(labels))
    if missing:
        raise ValueError(f"einsum: output subscript labels {sorted(missing)} do not appear in "
                         "any input")
    return labels, output


def _take_diagonals(x, spec: str):
    """Repeated labels within one operand ('ii', 'iji') become one axis (the diagonal)."""
    while len(set(spec)) != len(spec):
        c = next(c for c in spec if spec.count(c) > 1)
        p = spec.index(c)
        q = spec.index(c, p + 1)
        if x.shape[p] != x.shape[q]:
            raise ValueError(f"einsum: label {c!r} has sizes {x.shape[p]} and {x.shape[q]} in "
                             "one operand")
        x = diagonal(x, 0, p, q)                               # diagonal moves to the end
        spec = spec[:p] + spec[p + 1:q] + spec[q + 1:] + c
    return x, spec


def _sum_labels(x, spec: str, drop: set[str]):
    axes = tuple(i for i, c in enumerate(spec) if c in drop)
    if not axes:
        return x, spec
    return red.reduce_sum(x, axes), "".join(c for c in spec if c not in drop)


def _sublist_subscripts(*args) -> tuple[str, list]:
    """NumPy's interleaved form einsum(x, [0, 1], y, [1, 2], [0, 2]) as ('ab,bc->ac', [x, y])
    (integer labels 0..51 are letters; Ellipsis is '...')."""
    def letters(sublist):
        try:
            return "".join("..." if e is Ellipsis else string.ascii_letters[operator.index(e)]
                           for e in sublist)
        except (TypeError, IndexError):
            raise TypeError(f"einsum: a sublist holds integers in [0, 52) and Ellipsis, got "
                            f"{sublist!r}") from None
    if len(args) < 2:
        raise TypeError("einsum takes a subscripts string or operands each followed by its "
                        "sublist")
    pairs, out = (args, None) if len(args) % 2 == 0 else (args[:-1], args[-1])
    spec = ",".join(letters(t) for t in pairs[1::2])
    return (spec if out is None else f"{spec}->{letters(out)}"), list(pairs[0::2])


def einsum(subscripts: str, *operands: ArrayLike, out: None = None, optimize="auto",
           precision=None, preferred_element_type=None, _dot_general=None) -> Array:
    """Einstein summation: 'ij,jk->ik' is a matmul; '...' broadcasts leading dims; without
    '->' the output holds the labels seen once, in alphabetical order. `optimize` is
    accepted; operands are contracted pairwise from left to right."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to fnad.numpy.einsum is not supported.")
    if not isinstance(subscripts, str):
        subscripts, operands = _sublist_subscripts(subscripts, *operands)
    check_arraylike("einsum", *operands)
    ops = [ensure_array(x) for x in operands]
    if preferred_element_type is None and len(ops) > 1:
        ops = [ensure_array(x) for x in promote_dtypes(*ops)]
    labels, output = _parse_einsum(subscripts, [x.shape for x in ops])
    sizes: dict[str, int] = {}
    for x, spec in zip(ops, labels, strict=True):
        for c, d in zip(spec, x.shape, strict=True):
            if d != 1 and sizes.get(c, 1) not in (1, d):
                raise ValueError(f"einsum: label {c!r} has incompatible sizes {sizes[c]} and {d}")
            if d != 1 or c not in sizes:
                sizes[c] = d
    # Diagonals, then each operand's private labels (in no other operand, not in the output).
    terms = []
    for i, (x, spec) in enumerate(zip(ops, labels, strict=True)):
        x, spec = _take_diagonals(x, spec)
        others = set(output).union(*(labels[j] for j in range(len(ops)) if j != i))
        x, spec = _sum_labels(x, spec, set(spec) - others)
        terms.append((x, spec))
    x, spec = terms[0]
    for k in range(1, len(terms)):
        y, yspec = terms[k]
        later = set(output).union(*(s for _, s in terms[k + 1:]))
        # A broadcast (size-1) dim meeting a real one: sum it away on its side.
        x, spec = _sum_labels(x, spec, {c for c in spec if c in yspec
                                        and x.shape[spec.index(c)] == 1
                                        and y.shape[yspec.index(c)] != 1})
        y, yspec = _sum_labels(y, yspec, {c for c in yspec if c in spec
                                          and y.shape[yspec.index(c)] == 1
                                          and x.shape[spec.index(c)] != 1})
        shared = [c for c in spec if c in yspec]
        batch = [c for c in shared if c in later]
        contract = [c for c in shared if c not in later]
        dims = ((tuple(spec.index(c) for c in contract), tuple(yspec.index(c) for c in contract)),
                (tuple(spec.index(c) for c in batch), tuple(yspec.index(c) for c in batch)))
        out_spec = ("".join(batch) + "".join(c for c in spec if c not in shared)
                    + "".join(c for c in yspec if c not in shared))
        x = linalg.dot_general(x, y, dims, precision=precision,
                               preferred_element_type=preferred_element_type)
        spec = out_spec
        x, spec = _sum_labels(x, spec, set(spec) - later)
    x, spec = _sum_labels(x, spec, set(spec) - set(output))
    if preferred_element_type is not None and len(terms) == 1:
        from fnad.primitives.logic import convert_element_type
        x = convert_element_type(x, preferred_element_type)
    # Output labels a size-1 broadcast dropped come back as broadcasts.
    missing = [c for c in output if c not in spec]
    if missing:
        shape = [sizes[c] for c in spec] + [sizes[c] for c in missing]
        x = so.broadcast_in_dim(x, shape, tuple(range(len(spec))))
        spec += "".join(missing)
    return transpose(x, tuple(spec.index(c) for c in output))
