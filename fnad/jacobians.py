"""fnad.jacobians: dense Jacobians and Hessians (jacfwd, jacrev, hessian).

For f: Rⁿ -> Rᵐ the Jacobian is the m×n matrix J[i, j] = ∂f_i/∂x_j. fnad.ad gives
its two products; vmap over the standard basis turns either into the whole matrix:

    jacfwd:  column j = J·e_j      (a JVP)   vmap(jvp) over the n input basis vectors
    jacrev:  row i    = e_iᵀ·J     (a VJP)   vmap(vjp_fn) over the m output basis vectors
    hessian = jacfwd(jacrev(f)):  H[i, j, k] = ∂²f_i/∂x_j∂x_k  (forward over reverse)

jacfwd costs ~n JVPs and suits tall Jacobians (n ≤ m); jacrev one linearization and ~m
transposes, and suits wide ones (m ≤ n). Inputs and outputs may be pytrees: rows and
columns are the raveled leaves concatenated, and the result has the output's structure
with each leaf replaced by the differentiated input's structure; the block for output
leaf o and input leaf a has shape o.shape + a.shape.

Above fnad.ad and fnad.batching in the import order; only fnad/__init__ imports it.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from fnad import dtypes, tree_util
from fnad.ad import _check_argnums, _name, jvp, vjp
from fnad.batching import vmap
from fnad.core import ShapedArray, get_aval
from fnad.primitives import shape_ops


# ---- shared helpers ------------------------------------------------------------------------
def _as_argnums(what: str, argnums):
    """argnums as an int or a tuple (a list means a tuple, as in JAX); checked later per call."""
    if isinstance(argnums, list):
        argnums = tuple(argnums)
    if isinstance(argnums, np.integer):
        argnums = int(argnums)
    if not (isinstance(argnums, int) and not isinstance(argnums, bool)) and not (
            isinstance(argnums, tuple) and argnums):
        raise TypeError(f"{what}(argnums={argnums!r}): argnums must be an int or a non-empty "
                        "tuple of ints")
    return argnums


def _dyn_fun(fun: Callable, argnums, args: tuple, kwargs: dict, what: str):
    """(f_dyn, dyn): `fun` as a function of the arguments at `argnums` only, and those."""
    nums = _check_argnums(_name(fun), argnums, len(args), what)
    dyn = tuple(args[i] for i in nums)

    def f_dyn(*dyn_args):
        full = list(args)
        for i, a in zip(nums, dyn_args):
            full[i] = a
        return fun(*full, **kwargs)
    f_dyn.__name__ = _name(fun)
    return f_dyn, dyn


def _std_basis(avals: Sequence[ShapedArray]) -> list[np.ndarray]:
    """The identity I_N (N = Σ sizes) split over the leaves: leaf k gets [N, *shape_k].

    Row r is the r-th basis vector e_r of the raveled, concatenated leaves. Each leaf's
    part has that leaf's tangent dtype, so jvp and vjp_fn accept it as is.
    """
    n = sum(a.size for a in avals)
    parts, off = [], 0
    for a in avals:
        part = np.zeros((n, a.size), a.to_tangent_aval().dtype)
        part[np.arange(off, off + a.size), np.arange(a.size)] = 1
        parts.append(part.reshape((n,) + a.shape))                       # [N, *shape_k]
        off += a.size
    return parts


def _split(x, axis: int, sizes: Sequence[int], shapes: Sequence[tuple]) -> list:
    """x cut along `axis` into pieces of `sizes`, piece k reshaped to shapes[k]."""
    if len(sizes) == 1:
        return [shape_ops.reshape(x, shapes[0])]
    pieces, off = [], 0
    for size, shape in zip(sizes, shapes):
        part = shape_ops.slice_in_dim(x, off, off + size, axis=axis)
        pieces.append(shape_ops.reshape(part, shape))
        off += size
    return pieces


def _cast_like(x, aval: ShapedArray):
    """x in `aval`'s dtype and weak type (the real part if aval is real), as JAX's blocks."""
    from fnad.primitives.elementwise import real
    from fnad.primitives.logic import convert_element_type
    xa = get_aval(x)
    if dtypes.is_complex(xa.dtype) and not dtypes.is_complex(aval.dtype):
        x = real(x)
        xa = get_aval(x)
    if xa.dtype != aval.dtype or xa.weak_type != aval.weak_type:
        x = convert_element_type(x, aval.dtype, aval.weak_type)
    return x


def _zeros(shape: tuple, aval: ShapedArray):
    """Zeros of `shape` in `aval`'s dtype, weakly typed where `aval` is (as JAX's blocks)."""
    return shape_ops.full_like(aval, 0, shape=shape)


def _assemble(out_tree, inner_tree, blocks: list[list]):
    """The output tree whose leaf j is the inner (input) tree of blocks[j][k]."""
    return tree_util.tree_unflatten(
        out_tree, [tree_util.tree_unflatten(inner_tree, row) for row in blocks])


def _inner_tree(argnums, dyn: tuple):
    """The input structure of each Jacobian leaf: the one argument, or the tuple of them."""
    return tree_util.tree_structure(dyn[0] if isinstance(argnums, int) else dyn)


# ---- jacfwd --------------------------------------------------------------------------------
def _check_jacfwd_input(aval: ShapedArray, holomorphic: bool):
    if holomorphic:
        if not dtypes.is_complex(aval.dtype):
            raise TypeError("jacfwd with holomorphic=True requires inputs with complex dtype, "
                            f"but got {aval.dtype.name}.")
    elif not dtypes.is_float(aval.dtype):
        raise TypeError(
            "jacfwd requires real-valued inputs (input dtype that is a sub-dtype of floating), "
            f"but got {aval.dtype.name}. For holomorphic differentiation, pass "
            "holomorphic=True. For differentiation of non-holomorphic functions involving "
            "complex inputs or integer inputs, use jvp directly.")


def jacfwd(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """The Jacobian of `fun` with respect to `argnums`, column by column (forward mode).

    J[i, j] = ∂out_i/∂in_j; column j is the JVP J·e_j, and vmap pushes all n basis
    vectors e_j forward at once. For an input leaf of shape [*A] and an output leaf of
    shape [*O] the block is [*O, *A]; the result has the output's tree structure with each
    leaf replaced by the input's (the argument's, or the tuple of them when argnums is a
    tuple). With has_aux, `fun` returns (out, aux) and jacfwd returns (jacobian, aux).
    Inputs must be real floating (complex with holomorphic=True).
    """
    if not callable(fun):
        raise TypeError(f"jacfwd: expected a callable value, got {fun!r}")
    argnums = _as_argnums("jacfwd", argnums)

    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        f_dyn, dyn = _dyn_fun(fun, argnums, args, kwargs, "jacfwd")
        in_leaves, in_tree = tree_util.tree_flatten(dyn)
        in_avals = [get_aval(x) for x in in_leaves]
        for a in in_avals:
            _check_jacfwd_input(a, holomorphic)

        def pushfwd(*basis):                       # one basis vector e_j, leaf by leaf
            res = jvp(f_dyn, dyn, tree_util.tree_unflatten(in_tree, basis), has_aux=has_aux)
            y, y_dot = res[0], res[1]
            dots = [t for yl, t in zip(tree_util.tree_leaves(y), tree_util.tree_leaves(y_dot))
                    if dtypes.is_inexact(get_aval(yl).dtype)]   # integer outputs: zeros below
            return (y, dots, res[2]) if has_aux else (y, dots)

        out_axes = (None, -1, None) if has_aux else (None, -1)
        res = vmap(pushfwd, out_axes=out_axes)(*_std_basis(in_avals))
        y, dots = res[0], iter(res[1])                          # dots: [*O, N] per output
        y_leaves, y_tree = tree_util.tree_flatten(y)
        sizes = [a.size for a in in_avals]
        blocks = []
        for yl in y_leaves:
            ya = get_aval(yl)
            if holomorphic and not dtypes.is_complex(ya.dtype):
                raise TypeError("jacfwd with holomorphic=True requires outputs with complex "
                                f"dtype, but got {ya.dtype.name}.")
            shapes = [ya.shape + a.shape for a in in_avals]    # [*O, *A_k]
            if dtypes.is_inexact(ya.dtype):
                row = [_cast_like(b, ya) for b in _split(next(dots), ya.ndim, sizes, shapes)]
            else:
                row = [_zeros(s, ya) for s in shapes]
            blocks.append(row)
        jac = _assemble(y_tree, _inner_tree(argnums, dyn), blocks)
        return (jac, res[2]) if has_aux else jac

    return jacfun


# ---- jacrev --------------------------------------------------------------------------------
def _check_jacrev_input(aval: ShapedArray, holomorphic: bool, allow_int: bool):
    dt = aval.dtype
    if holomorphic and not dtypes.is_complex(dt):
        raise TypeError("jacrev with holomorphic=True requires inputs with complex dtype, "
                        f"but got {dt.name}.")
    if not dtypes.is_inexact(dt) and not allow_int:
        raise TypeError(
            "jacrev requires real- or complex-valued inputs (input dtype that is a sub-dtype "
            f"of inexact), but got {dt.name}. If you want to use Boolean- or integer-valued "
            "inputs, use vjp or set allow_int to True.")


def _check_jacrev_output(aval: ShapedArray, holomorphic: bool):
    dt = aval.dtype
    if holomorphic:
        if not dtypes.is_complex(dt):
            raise TypeError("jacrev with holomorphic=True requires outputs with complex dtype, "
                            f"but got {dt.name}.")
    elif dtypes.is_complex(dt):
        raise TypeError(
            "jacrev requires real-valued outputs (output dtype that is a sub-dtype of "
            f"floating), but got {dt.name}. For holomorphic differentiation, pass "
            "holomorphic=True. For differentiation of non-holomorphic functions involving "
            "complex outputs, use vjp directly.")
    elif not dtypes.is_float(dt):
        raise TypeError(
            "jacrev requires real-valued outputs (output dtype that is a sub-dtype of "
            f"floating), but got {dt.name}. For differentiation of functions with integer "
            "outputs, use vjp directly.")


def jacrev(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, allow_int: bool = False) -> Callable:
    """The Jacobian of `fun` with respect to `argnums`, row by row (reverse mode).

    J[i, j] = ∂out_i/∂in_j; row i is the VJP e_iᵀ·J, and vmap pulls all m output basis
    vectors e_i back through one linearization. The result's structure and block shapes
    are jacfwd's: output tree of input trees, block [*O, *A] for output leaf [*O] and
    input leaf [*A]. With has_aux, `fun` returns (out, aux) and jacrev returns
    (jacobian, aux). Outputs must be real floating (complex with holomorphic=True); with
    allow_int, integer inputs are allowed and get zero blocks of their own dtype.
    """
    if not callable(fun):
        raise TypeError(f"jacrev: expected a callable value, got {fun!r}")
    argnums = _as_argnums("jacrev", argnums)

    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        f_dyn, dyn = _dyn_fun(fun, argnums, args, kwargs, "jacrev")
        in_avals = [get_aval(x) for x in tree_util.tree_leaves(dyn)]
        for a in in_avals:
            _check_jacrev_input(a, holomorphic, allow_int)
        res = vjp(f_dyn, *dyn, has_aux=has_aux)
        y, pullback = res[0], res[1]
        y_leaves, y_tree = tree_util.tree_flatten(y)
        y_avals = [get_aval(yl) for yl in y_leaves]
        for ya in y_avals:
            _check_jacrev_output(ya, holomorphic)
        diff = [dtypes.is_inexact(a.dtype) for a in in_avals]

        def pullback_flat(*basis):                 # one output basis vector e_i, leaf by leaf
            cts = tree_util.tree_leaves(pullback(tree_util.tree_unflatten(y_tree, basis)))
            return [c for c, d in zip(cts, diff) if d]           # integer inputs: zeros below

        rows = iter(vmap(pullback_flat)(*_std_basis(y_avals)))  # [M, *A_k] per input
        sizes = [ya.size for ya in y_avals]
        cols = []                                                # cols[k][j]: block (j, k)
        for a, d in zip(in_avals, diff):
            shapes = [ya.shape + a.shape for ya in y_avals]      # [*O_j, *A]
            cols.append([_cast_like(b, a) for b in _split(next(rows), 0, sizes, shapes)]
                        if d else [_zeros(s, a) for s in shapes])
        blocks = [[col[j] for col in cols] for j in range(len(y_avals))]
        jac = _assemble(y_tree, _inner_tree(argnums, dyn), blocks)
        return (jac, res[2]) if has_aux else jac

    return jacfun


# ---- hessian -------------------------------------------------------------------------------

jacobian = jacrev                       # jax.jacobian: the reverse-mode Jacobian

def hessian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable:
    """The dense Hessian of `fun`: jacfwd(jacrev(fun)) (forward over reverse).

    H[i, j, k] = ∂²out_i/∂in_j∂in_k. For an output leaf [*O] and input leaves [*A], [*B]
    the block is [*O, *A, *B]; the structure is the output tree of input trees of input
    trees. With has_aux, `fun` returns (out, aux) and hessian returns (hessian, aux).
    """
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic),
                  argnums, has_aux=has_aux, holomorphic=holomorphic)
