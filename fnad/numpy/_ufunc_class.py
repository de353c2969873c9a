"""fnad.numpy.ufunc and frompyfunc: NumPy's ufunc methods (reduce, accumulate, reduceat,
outer, at) on fnad functions, as jax.numpy.ufunc.

fnad.numpy's add, subtract, multiply, maximum, minimum, logaddexp(2), the bitwise and
logical and/or/xor and negative are ufunc objects: calling one is calling the function,
and each method uses the matching fnad.numpy routine where there is one (add.reduce is
sum, multiply.accumulate cumprod, add.at `.at[].add` ...). Any other binary function
(`frompyfunc(f, 2, 1)`, f applied elementwise by vectorize) gets the generic methods, which
fold with f in order, as NumPy and JAX define them:

    reduce      r = initial (or the first element); r = f(r, a_i) for each i along `axis`
                (entries where `where` is False skipped)
    accumulate  out_0 = a_0; out_i = f(out_{i-1}, a_i)                 (a scan)
    reduceat    out_j = the reduce of a[ind_j : ind_{j+1}] (just a[ind_j] when that slice
                is empty), one per index                               (a loop over `axis`)
    at          a[idx_k] = f(a[idx_k], b_k) for each k in turn, so repeated indices combine
                (returns the new array: inplace=False is required)     (a scan)
    outer       out[i..., j...] = f(A[i...], B[j...])                  (vmap of vmap)
"""
from __future__ import annotations

import math
import operator

import numpy as np

__all__ = ["frompyfunc", "ufunc"]


def _jnp():
    import fnad.numpy as jnp
    return jnp


class ufunc:
    """A function of `nin` arrays giving `nout`, with NumPy's ufunc methods."""

    def __init__(self, func, /, nin: int, nout: int, *, name: str | None = None,
                 nargs: int | None = None, identity=None, call=None, reduce=None,
                 accumulate=None, at=None, reduceat=None):
        self._func = func
        self.nin, self.nout = operator.index(nin), operator.index(nout)
        self.nargs = self.nin if nargs is None else operator.index(nargs)
        self.identity = identity
        self.__name__ = name or getattr(func, "__name__", repr(func))
        self.__doc__ = getattr(call or func, "__doc__", None)
        self._call = call
        self._fast = {"reduce": reduce, "accumulate": accumulate, "at": at,
                      "reduceat": reduceat}

    def __repr__(self) -> str:
        return f"<fnad.numpy.ufunc '{self.__name__}'>"

    def __hash__(self) -> int:
        return hash((self._func, self.__name__, self.nin, self.nout))

    def __eq__(self, other) -> bool:
        return isinstance(other, ufunc) and (self._func, self.__name__, self.nin, self.nout,
                                             self.identity) == (
            other._func, other.__name__, other.nin, other.nout, other.identity)

    def __call__(self, *args, out=None, where=None):
        if out is not None:
            raise NotImplementedError(f"{self.__name__}: the out argument is not supported "
                                      "(arrays are immutable)")
        if where is not None:
            raise NotImplementedError(f"{self.__name__}: the where argument is not supported")
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__} takes {self.nin} arguments, got {len(args)}")
        if self._call is not None:
            return self._call(*args)
        return _jnp().vectorize(self._func)(*args)

    def _binary(self, method: str) -> None:
        if self.nin != 2 or self.nout != 1:
            raise ValueError(f"{self.__name__}.{method} is only supported for binary ufuncs "
                             "with one output")

    def _dtype(self, a, dtype, *others):
        """`dtype`, or the dtype of f on scalars of a's (and the others') dtypes."""
        if dtype is not None:
            return np.dtype(dtype)
        import fnad
        jnp = _jnp()
        ones = [jnp.zeros((), jnp.asarray(v).dtype) for v in (a,) + others]
        if len(ones) < self.nin:
            ones = ones + [ones[0]] * (self.nin - len(ones))
        return fnad.eval_shape(self, *ones).dtype

    # ---- reduce ----------------------------------------------------------------------------
    def reduce(self, a, axis=0, dtype=None, out=None, keepdims: bool = False, initial=None,
               where=None):
        """a reduced with this function along `axis` (an int, or None for all axes)."""
        self._binary("reduce")
        if out is not None:
            raise NotImplementedError(f"{self.__name__}.reduce: the out argument is not "
                                      "supported")
        jnp = _jnp()
        if where is not None:
            if self.identity is None and initial is None:
                raise ValueError(f"reduction operation {self.__name__!r} does not have an "
                                 "identity, so to use a where mask one has to specify "
                                 "'initial'.")
            if jnp.asarray(where).dtype != np.bool_:
                raise ValueError(f"where argument must have dtype=bool; got dtype="
                                 f"{jnp.asarray(where).dtype}")
        fast = self._fast["reduce"]
        if fast is not None:
            return fast(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial,
                        where=where)
        return self._fold(a, axis, dtype, keepdims, initial, where)

    def _fold(self, a, axis, dtype, keepdims, initial, where):
        from fnad import lax
        jnp = _jnp()
        x = jnp.asarray(a)
        dtype = self._dtype(x, dtype)
        if initial is None:
            initial = self.identity
        if isinstance(axis, tuple):
            raise NotImplementedError(f"{self.__name__}.reduce over a tuple of axes")
        if where is not None:
            where = jnp.broadcast_to(where, x.shape)
        if axis is None:
            final = (1,) * x.ndim if keepdims else ()
            x, axis = jnp.ravel(x), 0
            where = None if where is None else jnp.ravel(where)
        else:
            axis = operator.index(axis) % max(x.ndim, 1)
            final = x.shape[:axis] + ((1,) if keepdims else ()) + x.shape[axis + 1:]
        x = jnp.moveaxis(x, axis, 0)
        where = None if where is None else jnp.moveaxis(where, axis, 0)
        if x.shape[0] == 0:
            if initial is None:
                raise ValueError(f"zero-size array to reduction operation {self.__name__} "
                                 "which has no identity")
            return jnp.full(final, initial, dtype)
        if initial is None:
            start, acc = 1, x[0].astype(dtype)
        else:
            start, acc = 0, jnp.full(x.shape[1:], initial, dtype)

        def step(i, r):
            new = self(r, x[i].astype(dtype))
            return new if where is None else jnp.where(where[i], new, r)
        acc = lax.fori_loop(start, x.shape[0], step, acc)
        return jnp.reshape(acc, final)

    # ---- accumulate ------------------------------------------------------------------------
    def accumulate(self, a, axis: int = 0, dtype=None, out=None):
        """The running results of reduce along `axis` (as many as a has there)."""
        self._binary("accumulate")
        if out is not None:
            raise NotImplementedError(f"{self.__name__}.accumulate: the out argument is not "
                                      "supported")
        if axis is None or isinstance(axis, tuple):
            raise ValueError("accumulate does not allow multiple axes")
        fast = self._fast["accumulate"]
        if fast is not None:
            return fast(a, axis=axis, dtype=dtype)
        from fnad import lax
        jnp = _jnp()
        x = jnp.asarray(a)
        dtype = self._dtype(x, dtype)
        axis = operator.index(axis) % max(x.ndim, 1)
        if x.size == 0:
            return jnp.zeros(x.shape, dtype)
        x = jnp.moveaxis(x, axis, 0).astype(dtype)

        def step(r, xi):
            r = self(r, xi)
            return r, r
        _, rest = lax.scan(step, x[0], x[1:])
        return jnp.moveaxis(jnp.concatenate([x[:1], rest]), 0, axis)

    # ---- at --------------------------------------------------------------------------------
    def at(self, a, indices, b=None, /, *, inplace: bool = True):
        """a with a[indices] = f(a[indices], b), each index in turn (so repeated indices
        combine); returns the new array (pass inplace=False)."""
        if inplace:
            raise NotImplementedError("fnad.numpy.ufunc.at cannot modify arrays in place, "
                                      "because fnad arrays are immutable. Pass "
                                      "inplace=False to get the updated array instead.")
        if (b is None) != (self.nin == 1):
            raise TypeError(f"{self.__name__}.at takes {'no' if self.nin == 1 else 'a'} "
                            f"value argument b for a ufunc of {self.nin} inputs")
        fast = self._fast["at"]
        if fast is not None:
            return fast(a, indices, *(() if b is None else (b,)))
        from fnad import lax
        jnp = _jnp()
        x = jnp.asarray(a)
        args = () if b is None else (b,)
        dtype = self._dtype(x, None, *args)
        x = x.astype(dtype)
        args = tuple(jnp.asarray(v).astype(dtype) for v in args)
        idx = indices if isinstance(indices, tuple) else (indices,)
        arrays = [i for i in idx if not isinstance(i, slice) and i is not Ellipsis]
        if not arrays:
            return x.at[idx].set(self(x[idx], *args))
        shape = np.broadcast_shapes(*[np.shape(i) for i in arrays])
        if not shape:
            return x.at[idx].set(self(x[idx], *args))
        n = math.prod(shape)
        flat = [i if isinstance(i, slice) or i is Ellipsis else
                jnp.ravel(jnp.broadcast_to(jnp.asarray(i), shape)) for i in idx]
        if args:
            v = args[0]
            v = jnp.broadcast_to(v, shape + v.shape[len(shape):]) if v.ndim >= len(shape) \
                else jnp.broadcast_to(v, shape)
            args = (jnp.reshape(v, (n,) + v.shape[len(shape):]),)

        def step(arr, k):
            where = tuple(i if isinstance(i, slice) or i is Ellipsis else i[k] for i in flat)
            return arr.at[where].set(self(arr[where], *(v[k] for v in args))), None
        out, _ = lax.scan(step, x, jnp.arange(n))
        return out

    # ---- reduceat --------------------------------------------------------------------------
    def reduceat(self, a, indices, axis: int = 0, dtype=None, out=None):
        """One reduce per index j of a[ind_j : ind_{j+1}] along `axis` (just a[ind_j] when
        that slice is empty; the last runs to the end)."""
        self._binary("reduceat")
        if out is not None:
            raise NotImplementedError(f"{self.__name__}.reduceat: the out argument is not "
                                      "supported")
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError("reduceat requires a single integer axis.")
        from fnad import lax
        jnp = _jnp()
        x = jnp.asarray(a)
        ind = jnp.asarray(indices)
        if x.ndim == 0:
            raise ValueError(f"reduceat: a must have 1 or more dimension, got a.shape="
                             f"{x.shape}")
        if ind.ndim != 1:
            raise ValueError(f"reduceat: indices must be one-dimensional, got indices.shape="
                             f"{ind.shape}")
        fast = self._fast["reduceat"]
        if fast is not None:
            return fast(x, ind, axis=axis, dtype=dtype)
        dtype = x.dtype if dtype is None else np.dtype(dtype)
        axis = operator.index(axis) % x.ndim
        res = jnp.take(x, ind, axis=axis).astype(dtype)
        bounds = jnp.concatenate([ind, jnp.asarray([x.shape[axis]], ind.dtype)])
        shape = [1] * x.ndim
        shape[axis] = ind.shape[0]
        lo, hi = jnp.reshape(bounds[:-1], shape), jnp.reshape(bounds[1:], shape)

        def step(i, r):
            xi = jnp.take(x, jnp.asarray([i]), axis=axis).astype(dtype)
            return jnp.where((i > lo) & (i < hi), self(r, xi), r)
        return lax.fori_loop(0, x.shape[axis], step, res)

    # ---- outer -----------------------------------------------------------------------------
    def outer(self, A, B, /):
        """out[i..., j...] = f(A[i...], B[j...])."""
        self._binary("outer")
        import fnad
        jnp = _jnp()
        a, b = jnp.asarray(A), jnp.asarray(B)
        res = fnad.vmap(fnad.vmap(self, (None, 0)), (0, None))(jnp.ravel(a), jnp.ravel(b))
        return jnp.reshape(res, a.shape + b.shape)


def frompyfunc(func, /, nin: int, nout: int, *, identity=None) -> ufunc:
    """A ufunc from a function of `nin` scalars (applied elementwise, by vectorize)."""
    return ufunc(func, nin, nout, identity=identity)


def _builtin_ufuncs(ns: dict) -> None:
    """Make fnad.numpy's binary arithmetic and logic functions ufunc objects in `ns` (the
    package's namespace), with the matching fnad.numpy routines as fast methods."""
    from fnad import lax
    jnp = _jnp()

    def reducer(fn, promote: bool = True):
        def reduce(a, axis=0, dtype=None, keepdims=False, initial=None, where=None):
            kw = dict(axis=axis, keepdims=keepdims, where=where)
            if promote:
                kw.update(dtype=dtype, initial=initial)
                return fn(a, **kw)
            if initial is not None:
                kw["initial"] = initial
            out = fn(a, **kw)
            return out if dtype is None else out.astype(dtype)
        return reduce

    def bool_reducer(fn):
        def reduce(a, axis=0, dtype=None, keepdims=False, initial=None, where=None):
            out = fn(jnp.asarray(a).astype(bool), axis=axis, keepdims=keepdims, where=where)
            if initial is not None:
                out = ns["logical_" + ("and" if fn is jnp.all else "or")](out, initial)
            return out if dtype is None else out.astype(dtype)
        return reduce

    def cumulative(fn):
        def accumulate(a, axis=0, dtype=None):
            x = jnp.asarray(a)
            out = fn(x if dtype is None else x.astype(dtype), axis=axis % max(x.ndim, 1))
            return out
        return accumulate

    table = {
        "add": dict(identity=0, reduce=reducer(jnp.sum), accumulate=cumulative(jnp.cumsum),
                    at=lambda a, i, b: jnp.asarray(a).at[i].add(b)),
        "multiply": dict(identity=1, reduce=reducer(jnp.prod),
                         accumulate=cumulative(jnp.cumprod),
                         at=lambda a, i, b: jnp.asarray(a).at[i].multiply(b)),
        "maximum": dict(identity=None, reduce=reducer(jnp.max, promote=False),
                        accumulate=cumulative(lambda x, axis: lax.cummax(x, axis)),
                        at=lambda a, i, b: jnp.asarray(a).at[i].max(b)),
        "minimum": dict(identity=None, reduce=reducer(jnp.min, promote=False),
                        accumulate=cumulative(lambda x, axis: lax.cummin(x, axis)),
                        at=lambda a, i, b: jnp.asarray(a).at[i].min(b)),
        "logical_and": dict(identity=True, reduce=bool_reducer(jnp.all)),
        "logical_or": dict(identity=False, reduce=bool_reducer(jnp.any)),
        "logical_xor": dict(identity=False),
        "bitwise_and": dict(identity=-1),
        "bitwise_or": dict(identity=0),
        "bitwise_xor": dict(identity=0),
        "subtract": dict(identity=None),
        "logaddexp": dict(identity=-np.inf),
        "logaddexp2": dict(identity=-np.inf),
    }
    for name, props in table.items():
        fn = ns[name]
        ns[name] = ufunc(fn, 2, 1, name=name, call=fn, **props)
    ns["negative"] = ufunc(ns["negative"], 1, 1, name="negative", call=ns["negative"])
