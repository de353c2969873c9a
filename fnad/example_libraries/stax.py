"""fnad.example_libraries.stax: jax.example_libraries.stax, a neural-network library of
(init_fun, apply_fun) pairs.

A layer is a pair of pure functions:

    init_fun(rng, input_shape) -> (output_shape, params)
    apply_fun(params, inputs, **kwargs) -> outputs         (kwargs: rng=key for Dropout)

Shapes are tuples of ints; a leading -1 (an unknown batch size) passes through. Layer
constructors are CamelCase (`Dense(10)`, `Conv(32, (3, 3))`); parameterless layers are
pairs already (`Relu`, `Flatten`). `serial` and `parallel` combine layers, `FanOut` /
`FanInSum` / `FanInConcat` split and merge branches, `shape_dependent` builds a layer once
the input shape is known. Parameters are tuples and lists of arrays, as jax's.

fnad's initializers draw jax's numbers from the same key (fnad.random is threefry, bit for
bit), so `init_fun(key, shape)` gives jax's parameters (normal samples to a few ulp).
Dropout keeps each input with probability `rate` (jax's meaning of the argument: the
keep rate, not the drop rate) and scales kept inputs by 1 / rate.
"""
from __future__ import annotations

import functools
import math

import numpy as np

import fnad.numpy as jnp
from fnad import lax, random
from fnad.nn import (elu, gelu, leaky_relu, log_softmax, relu, selu, sigmoid, softmax,
                     softplus, standardize)
from fnad.nn.initializers import glorot_normal, normal, ones, zeros

__all__ = ["AvgPool", "BatchNorm", "Conv", "Conv1DTranspose", "ConvTranspose", "Dense",
           "Dropout", "Elu", "Exp", "FanInConcat", "FanInSum", "FanOut", "Flatten", "Gelu",
           "GeneralConv", "GeneralConvTranspose", "Identity", "LeakyRelu", "LogSoftmax",
           "MaxPool", "Relu", "Selu", "Sigmoid", "Softmax", "Softplus", "SumPool", "Tanh",
           "elementwise", "glorot", "glorot_normal", "logsoftmax", "normal", "ones",
           "parallel", "randn", "serial", "shape_dependent", "zeros"]

glorot = glorot_normal            # jax's older names
randn = normal
logsoftmax = log_softmax


# ---- layers with parameters ------------------------------------------------------------------

def Dense(out_dim: int, W_init=None, b_init=None):
    """Fully connected: x @ W + b.  [..., I] -> [..., out_dim]; params (W [I, out_dim],
    b [out_dim]); W_init defaults to glorot_normal(), b_init to normal() (std 1e-2)."""
    W_init = W_init or glorot_normal()
    b_init = b_init or normal()

    def init_fun(rng, input_shape):
        k_w, k_b = random.split(rng)
        W = W_init(k_w, (input_shape[-1], out_dim))
        b = b_init(k_b, (out_dim,))
        return tuple(input_shape[:-1]) + (out_dim,), (W, b)

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return jnp.dot(inputs, W) + b                     # [..., I] @ [I, O] -> [..., O]
    return init_fun, apply_fun


def _kernel_shape(name: str, dimension_numbers, out_chan: int, filter_shape, input_shape):
    """The kernel's shape in rhs_spec's layout: O = out_chan, I = the input's C, the
    spatial letters from filter_shape in order."""
    lhs_spec, rhs_spec, _ = dimension_numbers
    if len(input_shape) != len(lhs_spec):
        raise ValueError(f"{name}: the input shape {tuple(input_shape)} has {len(input_shape)} "
                         f"dims but the layout {lhs_spec!r} has {len(lhs_spec)}")
    spatial = iter(filter_shape)
    return [out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I"
            else next(spatial) for c in rhs_spec]


def _conv_layer(name: str, dimension_numbers, out_chan: int, filter_shape, strides, padding,
                W_init, b_init, shape_fn, conv_fn):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    if len(filter_shape) != len(rhs_spec) - 2:
        raise ValueError(f"{name}: filter_shape {tuple(filter_shape)} must have one size per "
                         f"spatial dim of the kernel layout {rhs_spec!r}")
    strides = tuple(strides) if strides else (1,) * len(filter_shape)
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))
    b_init = b_init or normal(1e-6)

    def init_fun(rng, input_shape):
        kernel_shape = _kernel_shape(name, dimension_numbers, out_chan, filter_shape,
                                     input_shape)
        output_shape = shape_fn(tuple(input_shape), kernel_shape, strides, padding,
                                dimension_numbers)
        bias_shape = [out_chan if c == "C" else 1 for c in out_spec]   # broadcasts over out
        k_w, k_b = random.split(rng)
        return tuple(output_shape), (W_init(k_w, kernel_shape), b_init(k_b, bias_shape))

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return conv_fn(inputs, W, strides, padding) + b
    return init_fun, apply_fun


def GeneralConv(dimension_numbers, out_chan: int, filter_shape, strides=None,
                padding="VALID", W_init=None, b_init=None):
    """Convolution in the layouts `dimension_numbers` = (lhs_spec, rhs_spec, out_spec)
    (e.g. ('NHWC', 'HWIO', 'NHWC')), `out_chan` output channels, a kernel of spatial
    shape `filter_shape`; padding 'VALID', 'SAME' or (low, high) pairs. Params (W in
    rhs_spec's layout, b shaped to broadcast over the output's C). W_init defaults to
    glorot_normal over rhs_spec's I and O axes, b_init to normal(1e-6)."""
    one = (1,) * len(filter_shape)

    def conv(x, W, strides, padding):
        return lax.conv_general_dilated(x, W, strides, padding, one, one,
                                        dimension_numbers=dimension_numbers)
    return _conv_layer("GeneralConv", dimension_numbers, out_chan, filter_shape, strides,
                       padding, W_init, b_init, lax.conv_general_shape_tuple, conv)


def GeneralConvTranspose(dimension_numbers, out_chan: int, filter_shape, strides=None,
                         padding="VALID", W_init=None, b_init=None):
    """Transposed convolution (lax.conv_transpose: the gradient of a strided convolution,
    upsampling by `strides`); arguments as GeneralConv's."""
    def conv(x, W, strides, padding):
        return lax.conv_transpose(x, W, strides, padding, dimension_numbers=dimension_numbers)
    return _conv_layer("GeneralConvTranspose", dimension_numbers, out_chan, filter_shape,
                       strides, padding, W_init, b_init, lax.conv_transpose_shape_tuple, conv)


Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))
Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis=(0, 1, 2), epsilon=1e-5, center: bool = True, scale: bool = True,
              beta_init=zeros, gamma_init=ones):
    """Normalization over `axis` (the batch statistics of the inputs given; no running
    averages): γ · (x − mean) / √(var + epsilon) + β. Params (β, γ), each shaped as the
    input without `axis` (an empty tuple when center / scale is off)."""
    axis = (axis,) if np.ndim(axis) == 0 else tuple(axis)

    def init_fun(rng, input_shape):
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axis)
        k_beta, k_gamma = random.split(rng)
        beta = beta_init(k_beta, shape) if center else ()
        gamma = gamma_init(k_gamma, shape) if scale else ()
        return tuple(input_shape), (beta, gamma)

    def apply_fun(params, x, **kwargs):
        beta, gamma = params
        z = standardize(x, axis, epsilon=epsilon)
        kept = tuple(None if i in axis else slice(None) for i in range(jnp.ndim(x)))
        if scale:
            z = gamma[kept] * z
        if center:
            z = z + beta[kept]
        return z
    return init_fun, apply_fun


# ---- elementwise layers ----------------------------------------------------------------------

def elementwise(fun, **fun_kwargs):
    """A parameterless layer applying fun(inputs, **fun_kwargs); the shape is unchanged."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        return fun(inputs, **fun_kwargs)
    return init_fun, apply_fun


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


# ---- pooling ---------------------------------------------------------------------------------

def _pooling_layer(name: str, reducer, init_val, average: bool = False):
    def PoolingLayer(window_shape, strides=None, padding="VALID", spec=None):
        """Pooling over spatial windows of shape `window_shape` with `strides` (default 1)
        and padding 'VALID' or 'SAME'; `spec` (a layout such as 'NCHW'; default: batch
        first, channels last) says where N and C are."""
        window_shape = tuple(window_shape)
        window_strides = tuple(strides) if strides else (1,) * len(window_shape)
        if len(window_strides) != len(window_shape):
            raise ValueError(f"{name}: strides {window_strides} must have one entry per "
                             f"window dim {window_shape}")
        ndim = len(window_shape) + 2
        if spec is None:
            non_spatial = (0, ndim - 1)
        elif len(spec) != ndim or "N" not in spec or "C" not in spec:
            raise ValueError(f"{name}: spec {spec!r} must name N, C and one letter per "
                             f"window dim {window_shape}")
        else:
            non_spatial = (spec.index("N"), spec.index("C"))
        dims, steps, it = [], [], iter(zip(window_shape, window_strides))
        for a in range(ndim):                      # size-1 windows over N and C
            w, s = (1, 1) if a in non_spatial else next(it)
            dims.append(w)
            steps.append(s)
        dims, steps = tuple(dims), tuple(steps)
        if not isinstance(padding, str):
            raise TypeError(f"{name}: padding must be 'VALID', 'SAME' or 'SAME_LOWER', got "
                            f"{padding!r}")

        def init_fun(rng, input_shape):
            input_shape = tuple(input_shape)
            if len(input_shape) != ndim:
                raise ValueError(f"{name}: the input shape {input_shape} must have {ndim} "
                                 f"dims for the window {window_shape}")
            pads = lax.padtype_to_pads(input_shape, dims, steps, padding)
            out = lax.reduce_window_shape_tuple(input_shape, dims, steps, pads)
            # N and C pass through (a -1 batch size too)
            return tuple(input_shape[a] if a in non_spatial else out[a]
                         for a in range(ndim)), ()

        def apply_fun(params, inputs, **kwargs):
            out = lax.reduce_window(inputs, init_val, reducer, dims, steps, padding)
            if not average:
                return out
            # each window's count of real (unpadded) elements, over the spatial dims only
            spatial = tuple(d for a, d in enumerate(jnp.shape(inputs)) if a not in non_spatial)
            counts = lax.reduce_window(jnp.ones(spatial, dtype=out.dtype), 0.0, lax.add,
                                       window_shape, window_strides, padding)
            return out / jnp.expand_dims(counts, sorted(non_spatial))
        return init_fun, apply_fun
    PoolingLayer.__name__ = PoolingLayer.__qualname__ = name
    return PoolingLayer


MaxPool = _pooling_layer("MaxPool", lax.max, -jnp.inf)
SumPool = _pooling_layer("SumPool", lax.add, 0.0)
AvgPool = _pooling_layer("AvgPool", lax.add, 0.0, average=True)   # SumPool / window count


# ---- shape layers ----------------------------------------------------------------------------

def _flatten():
    def init_fun(rng, input_shape):
        return (input_shape[0], math.prod(input_shape[1:])), ()

    def apply_fun(params, inputs, **kwargs):
        return jnp.reshape(inputs, (jnp.shape(inputs)[0], -1))   # [B, ...] -> [B, prod(...)]
    return init_fun, apply_fun


Flatten = _flatten()   # all dims but the leading (batch) one into one


def _identity():
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        return inputs
    return init_fun, apply_fun


Identity = _identity()


def FanOut(num: int):
    """One input to a list of `num` copies (for `parallel`)."""
    def init_fun(rng, input_shape):
        return [input_shape] * num, ()

    def apply_fun(params, inputs, **kwargs):
        return [inputs] * num
    return init_fun, apply_fun


def _fan_in_sum():
    def init_fun(rng, input_shape):
        return input_shape[0], ()

    def apply_fun(params, inputs, **kwargs):
        return sum(inputs[1:], inputs[0])
    return init_fun, apply_fun


FanInSum = _fan_in_sum()   # a list of inputs of one shape to their sum


def FanInConcat(axis: int = -1):
    """A list of inputs to their concatenation along `axis`."""
    def init_fun(rng, input_shape):
        ax = axis % len(input_shape[0])
        size = sum(s[ax] for s in input_shape)
        return tuple(input_shape[0][:ax]) + (size,) + tuple(input_shape[0][ax + 1:]), ()

    def apply_fun(params, inputs, **kwargs):
        return jnp.concatenate(inputs, axis)
    return init_fun, apply_fun


def Dropout(rate, mode: str = "train"):
    """In mode 'train': each input kept with probability `rate` (jax's meaning: the keep
    rate) and scaled by 1 / rate, the rest zeroed; needs apply_fun(..., rng=key). In any
    other mode: the identity."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.get("rng")
        if rng is None:
            raise ValueError("Dropout: apply_fun needs a PRNG key: call "
                             "apply_fun(params, inputs, rng=key), not apply_fun(params, inputs)")
        if mode != "train":
            return inputs
        keep = random.bernoulli(rng, rate, jnp.shape(inputs))
        return jnp.where(keep, inputs / rate, 0)
    return init_fun, apply_fun


# ---- combinators -----------------------------------------------------------------------------

def serial(*layers):
    """The layers applied one after another. init_fun splits rng once per layer (in order)
    and returns a list of the layers' params; apply_fun splits its `rng` (when given) into
    one key per layer."""
    if not layers:
        raise ValueError("serial: needs at least one layer")
    init_funs, apply_funs = zip(*layers)

    def init_fun(rng, input_shape):
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, p = init(layer_rng, input_shape)
            params.append(p)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, len(layers)) if rng is not None else [None] * len(layers)
        for apply, p, r in zip(apply_funs, params, rngs):
            inputs = apply(p, inputs, rng=r, **kwargs)
        return inputs
    return init_fun, apply_fun


def parallel(*layers):
    """Layer n applied to input n of a sequence (usually after FanOut); output shapes and
    params are tuples, outputs a list."""
    if not layers:
        raise ValueError("parallel: needs at least one layer")
    init_funs, apply_funs = zip(*layers)

    def init_fun(rng, input_shape):
        if len(input_shape) != len(layers):
            raise ValueError(f"parallel: {len(layers)} layers but {len(input_shape)} input "
                             "shapes")
        rngs = random.split(rng, len(layers))
        shapes, params = zip(*[init(r, s) for init, r, s in zip(init_funs, rngs, input_shape)])
        return shapes, params

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, len(layers)) if rng is not None else [None] * len(layers)
        return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs)]
    return init_fun, apply_fun


def shape_dependent(make_layer):
    """The layer make_layer(input_shape) returns, built when the input shape is known
    (at init from input_shape, at apply from inputs.shape)."""
    def init_fun(rng, input_shape):
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params, inputs, **kwargs):
        return make_layer(jnp.shape(inputs))[1](params, inputs, **kwargs)
    return init_fun, apply_fun
