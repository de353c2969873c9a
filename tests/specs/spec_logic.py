"""Specs of comparison, bitwise, selection and conversion primitives."""
import numpy as np

from fnad import lax
from fnad.primitives import logic as lg
from specs import Arg, Spec

f32, i32, u8, b = np.float32, np.int32, np.uint8, np.bool_


def compare(prim, ref):
    op = getattr(lax, prim.name)
    jfun = lambda jax, x, y: getattr(jax.lax, prim.name)(x, y)  # noqa: E731
    return [Spec(prim, lambda x, y: op(x, y), ref, (Arg((3, 4), f32), Arg((3, 4), f32)),
                 jax_fun=jfun, diff=(), name="f32"),
            Spec(prim, lambda x, y: op(x, y), ref, (Arg((6,), i32, (0, 3)), Arg((6,), i32, (0, 3))),
                 jax_fun=jfun, diff=(), name="i32"),
            Spec(prim, lambda x, y: op(x, y), ref, (Arg((4,), f32), Arg((), f32)),
                 jax_fun=jfun, diff=(), name="scalar")]


def bitwise(prim, ref, jax_name):
    op = getattr(lax, {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor"}[prim.name])
    jfun = lambda jax, x, y: getattr(jax.lax, jax_name)(x, y)  # noqa: E731
    return [Spec(prim, lambda x, y: op(x, y), ref, (Arg((5,), b), Arg((5,), b)),
                 jax_fun=jfun, diff=(), name="bool"),
            Spec(prim, lambda x, y: op(x, y), ref, (Arg((5,), i32, (-99, 99)),
                 Arg((5,), i32, (-99, 99))), jax_fun=jfun, diff=(), name="i32")]


def shift(prim, ref_fn, jax_name, dtype):
    op = getattr(lax, prim.name)
    return Spec(prim, lambda x, y: op(x, y), ref_fn,
                (Arg((8,), dtype, (0, 100)),
                 Arg((8,), dtype, lambda rng: np.array([0, 1, 3, 7, 8, 31, 32, 40], dtype))),
                jax_fun=lambda jax, x, y: getattr(jax.lax, jax_name)(x, y), diff=(),
                name=np.dtype(dtype).name)


def _shl(x, y):
    bits = x.dtype.itemsize * 8
    return np.where(y >= bits, 0, np.left_shift(x, np.minimum(y, bits - 1))).astype(x.dtype)


def _sra(x, y):
    bits = x.dtype.itemsize * 8
    return np.right_shift(x, np.minimum(y, bits - 1)).astype(x.dtype)


def _srl(x, y):
    bits = x.dtype.itemsize * 8
    u = x.view(f"u{x.dtype.itemsize}")
    r = np.where(y >= bits, 0, np.right_shift(u, np.minimum(y, bits - 1).astype(u.dtype)))
    return r.astype(u.dtype).view(x.dtype)


_special = np.array([0.5, np.inf, -np.inf, np.nan, -1.0], f32)

SPECS = [
    *compare(lg.eq_p, np.equal),
    *compare(lg.ne_p, np.not_equal),
    *compare(lg.lt_p, np.less),
    *compare(lg.le_p, np.less_equal),
    *compare(lg.gt_p, np.greater),
    *compare(lg.ge_p, np.greater_equal),
    Spec(lg.is_finite_p, lambda x: lax.is_finite(x), np.isfinite,
         (Arg((5,), f32, lambda rng: _special),), jax_fun=lambda jax, x: jax.lax.is_finite(x),
         diff=()),
    *bitwise(lg.and_p, np.bitwise_and, "bitwise_and"),
    *bitwise(lg.or_p, np.bitwise_or, "bitwise_or"),
    *bitwise(lg.xor_p, np.bitwise_xor, "bitwise_xor"),
    Spec(lg.not_p, lambda x: lax.bitwise_not(x), np.invert, (Arg((5,), b),),
         jax_fun=lambda jax, x: jax.lax.bitwise_not(x), diff=(), name="bool"),
    Spec(lg.not_p, lambda x: lax.bitwise_not(x), np.invert, (Arg((5,), i32, (-9, 9)),),
         jax_fun=lambda jax, x: jax.lax.bitwise_not(x), diff=(), name="i32"),
    shift(lg.shift_left_p, _shl, "shift_left", i32),
    shift(lg.shift_left_p, _shl, "shift_left", u8),
    shift(lg.shift_right_arithmetic_p, _sra, "shift_right_arithmetic", i32),
    Spec(lg.shift_right_arithmetic_p, lambda x, y: lax.shift_right_arithmetic(x, y), _sra,
         (Arg((4,), i32, lambda rng: np.array([-100, -1, 7, -8], i32)),
          Arg((4,), i32, lambda rng: np.array([2, 40, 1, 31], i32))),
         jax_fun=lambda jax, x, y: jax.lax.shift_right_arithmetic(x, y), diff=(), name="neg"),
    shift(lg.shift_right_logical_p, _srl, "shift_right_logical", i32),
    Spec(lg.shift_right_logical_p, lambda x, y: lax.shift_right_logical(x, y), _srl,
         (Arg((4,), i32, lambda rng: np.array([-100, -1, 7, -8], i32)),
          Arg((4,), i32, lambda rng: np.array([2, 40, 1, 31], i32))),
         jax_fun=lambda jax, x, y: jax.lax.shift_right_logical(x, y), diff=(), name="neg"),
    Spec(lg.population_count_p, lambda x: lax.population_count(x),
         lambda x: np.array([bin(v & 0xFFFFFFFF).count("1") for v in x.tolist()], i32),
         (Arg((6,), i32, (-999, 999)),),
         jax_fun=lambda jax, x: jax.lax.population_count(x), diff=()),
    Spec(lg.select_n_p, lambda p, x, y: lax.select_n(p, x, y), lambda p, x, y: np.where(p, y, x),
         (Arg((3, 4), b), Arg((3, 4), f32), Arg((3, 4), f32)),
         jax_fun=lambda jax, p, x, y: jax.lax.select_n(p, x, y), linear=(1, 2), name="bool"),
    Spec(lg.select_n_p, lambda p, x, y, z: lax.select_n(p, x, y, z),
         lambda p, x, y, z: np.choose(p, [x, y, z]),
         (Arg((5,), i32, (0, 3)), Arg((5,), f32), Arg((5,), f32), Arg((5,), f32)),
         jax_fun=lambda jax, p, x, y, z: jax.lax.select_n(p, x, y, z), linear=(1, 2, 3),
         name="int3"),
    Spec(lg.select_n_p, lambda p, x, y: lax.select_n(p, x, y), lambda p, x, y: np.where(p, y, x),
         (Arg((), b), Arg((4,), f32), Arg((4,), f32)), linear=(1, 2), name="scalar-pred"),
    Spec(lg.select_n_p, lambda p, x, y: lax.select_n(p, x, y), lambda p, x, y: np.where(p, y, x),
         (Arg((6,), b), Arg((6,), i32, (0, 9)), Arg((6,), i32, (0, 9))),
         jax_fun=lambda jax, p, x, y: jax.lax.select_n(p, x, y), diff=(), name="i32"),
    Spec(lg.clamp_p, lambda lo, x, hi: lax.clamp(lo, x, hi), lambda lo, x, hi: np.clip(x, lo, hi),
         (Arg((), f32, (-1.0, -0.5)), Arg((3, 4), f32), Arg((), f32, (0.5, 1.0))),
         jax_fun=lambda jax, lo, x, hi: jax.lax.clamp(lo, x, hi), diff=(1,),
         name="scalar-bounds"),  # jax's own clamp JVP rejects scalar bounds: differentiate x
    Spec(lg.clamp_p, lambda lo, x, hi: lax.clamp(lo, x, hi), lambda lo, x, hi: np.clip(x, lo, hi),
         (Arg((), f32, (-1.0, -0.5)), Arg((3, 4), f32), Arg((), f32, (0.5, 1.0))),
         name="scalar-bounds-all-args"),
    Spec(lg.clamp_p, lambda lo, x, hi: lax.clamp(lo, x, hi), lambda lo, x, hi: np.clip(x, lo, hi),
         (Arg((6,), f32, (-1.0, 0.0)), Arg((6,), f32), Arg((6,), f32, (0.0, 1.0))),
         jax_fun=lambda jax, lo, x, hi: jax.lax.clamp(lo, x, hi), name="array-bounds"),
    Spec(lg.convert_element_type_p, lambda x: lax.convert_element_type(x, np.float64),
         lambda x: x.astype(np.float32), (Arg((3, 4), f32),),
         jax_fun=lambda jax, x: jax.lax.convert_element_type(x, np.float64), linear=(0,),
         name="f64"),
    Spec(lg.convert_element_type_p, lambda x: lax.convert_element_type(x, np.int32),
         lambda x: np.trunc(x).astype(np.int32), (Arg((3, 4), f32, (-50.0, 50.0)),),
         jax_fun=lambda jax, x: jax.lax.convert_element_type(x, np.int32), diff=(), name="to-i32"),
    Spec(lg.convert_element_type_p, lambda x: lax.convert_element_type(x, np.float32),
         lambda x: x.astype(np.float32), (Arg((5,), i32, (-9, 9)),),
         jax_fun=lambda jax, x: jax.lax.convert_element_type(x, np.float32), diff=(),
         name="from-i32"),
    Spec(lg.convert_element_type_p, lambda x: lax.convert_element_type(x, np.bool_),
         lambda x: x != 0, (Arg((5,), f32, lambda rng: np.array([0, 1, -0.0, 2, np.nan], f32)),),
         jax_fun=lambda jax, x: jax.lax.convert_element_type(x, np.bool_), diff=(), name="to-bool"),
    Spec(lg.convert_element_type_p, lambda x: lax.convert_element_type(x, np.complex128),
         lambda x: x.astype(np.complex64), (Arg((4,), f32),),
         jax_fun=lambda jax, x: jax.lax.convert_element_type(x, np.complex128), linear=(0,),
         fd_eps=1e-3, fd_rtol=1e-4, fd_atol=1e-5, name="to-c64"),
    Spec(lg.stop_gradient_p, lambda x: lax.stop_gradient(x), lambda x: x, (Arg((3,), f32),),
         jax_fun=lambda jax, x: jax.lax.stop_gradient(x), diff=()),
]
