"""Specs of betainc, zeta, bessel_i0e/i1e (primitives/special.py) and of nextafter, clz,
mulhi, bitcast_convert_type, reduce_precision (primitives/bits.py)."""
import numpy as np
from scipy import special

from fnad import lax
from fnad.primitives import bits as bt
from fnad.primitives import special as sp
from specs import Arg, Spec

f32, f64, i32 = np.float32, np.float64, np.int32


def _in_f64(fn):
    """scipy in float64 (its float32 loops are less accurate), rounded to the operands'."""
    def ref(*xs):
        return np.asarray(fn(*[np.asarray(x, f64) for x in xs]), np.result_type(*xs))
    return ref


_betainc_ref = _in_f64(special.betainc)


# ---- betainc: differentiable in x only (a and b held: jax raises for them) ---------------
def _betainc(a, b, x):
    return lax.betainc(lax.stop_gradient(a), lax.stop_gradient(b), x)


def _jax_betainc(jax, a, b, x):
    sg = jax.lax.stop_gradient
    return jax.lax.betainc(sg(a), sg(b), x)


_B_SPECIAL = np.array([0.0, -1.0, 0.5, 2.0, np.inf, np.nan], f32)
_BX_SPECIAL = np.array([0.0, -0.5, 0.3, 1.0, 1.5, np.inf, np.nan], f32)
_BA, _BB, _BX = (v.ravel() for v in np.meshgrid(_B_SPECIAL, _B_SPECIAL, _BX_SPECIAL,
                                                indexing="ij"))


def _betainc_specs():
    a, b, x = Arg((3, 4), f32, (0.5, 5.0)), Arg((3, 4), f32, (0.5, 5.0)), \
        Arg((3, 4), f32, (0.05, 0.95))
    n = _BA.size
    return [
        Spec(sp.regularized_incomplete_beta_p, _betainc, _betainc_ref, (a, b, x),
             jax_fun=_jax_betainc, diff=(2,), rtol=2e-6, fd_rtol=1e-4, name="f32"),
        Spec(sp.regularized_incomplete_beta_p, _betainc, _betainc_ref,
             (Arg((2, 3), f32, (0.5, 5.0)), Arg((), f32, (0.5, 5.0)),
              Arg((2, 3), f32, (0.05, 0.95))),
             jax_fun=_jax_betainc, diff=(2,), rtol=2e-6, fd_rtol=1e-4, name="scalar-b"),
        Spec(sp.regularized_incomplete_beta_p, _betainc, _betainc_ref,
             (Arg((4,), f64, (10.0, 80.0)), Arg((4,), f64, (10.0, 80.0)),
              Arg((4,), f64, (0.3, 0.7))),
             jax_fun=_jax_betainc, diff=(2,), fd_rtol=1e-4, name="f64-large"),
        Spec(sp.regularized_incomplete_beta_p,         # scipy's values are jax's here
             lambda a, b, x: _betainc(a, b, lax.stop_gradient(x)), _betainc_ref,
             (Arg((n,), f32, lambda rng: _BA), Arg((n,), f32, lambda rng: _BB),
              Arg((n,), f32, lambda rng: _BX)),
             jax_fun=lambda jax, a, b, x: jax.lax.betainc(a, b, x), diff=(), rtol=1e-5,
             name="special"),                          # (XLA's float32 loses ~5e-6)
    ]


# ---- zeta: differentiable in q only (x held) ------------------------------------------------
def _zeta_q(x, q):
    return lax.zeta(lax.stop_gradient(x), q)


def _jax_zeta_q(jax, x, q):                            # jax.lax.zeta has no derivative:
    return jax.scipy.special.zeta(jax.lax.stop_gradient(x), q)   # scipy's series one


_Z_X = np.array([0.0, -1.0, -2.0, 0.5, 1.0, 1.5, 2.0, 3.5, np.inf, -np.inf, np.nan], f32)
_Z_Q = np.array([0.0, -1.0, -2.0, -1.5, 0.5, 1.0, 2.0, np.inf, -np.inf, np.nan], f32)
_ZX, _ZQ = (v.ravel() for v in np.meshgrid(_Z_X, _Z_Q, indexing="ij"))


def _zeta_jax_values(x, q):
    """scipy's zeta with jax 0.10's (XLA's) values where they differ (see numpy_ref)."""
    x, q = (np.asarray(v, f64) for v in (x, q))
    out = special.zeta(x, q)
    pole = (q <= 0) & (np.floor(q) == q)
    even = np.isfinite(x) & (np.floor(x / 2) == x / 2)
    out = np.where(pole & (x != 1), np.where(even, np.inf, np.nan), out)
    out = np.where((q == np.inf) & (x != 1), np.nan, out)
    return np.where((x == np.inf) & (q <= 1), np.nan, out).astype(f32)


def _zeta_specs():
    n = _ZX.size
    return [
        Spec(sp.zeta_p, _zeta_q, _in_f64(special.zeta), (Arg((3, 4), f32, (1.5, 6.0)),
             Arg((3, 4), f32, (0.5, 4.0))), jax_fun=_jax_zeta_q, diff=(1,), rtol=2e-6,
             fd_rtol=1e-4, name="f32"),
        Spec(sp.zeta_p, _zeta_q, _in_f64(special.zeta), (Arg((), f32, (1.5, 6.0)),
             Arg((2, 3), f32, (0.5, 4.0))), jax_fun=_jax_zeta_q, diff=(1,), rtol=2e-6,
             fd_rtol=1e-4, name="scalar-x"),
        Spec(sp.zeta_p, _zeta_q, _in_f64(special.zeta), (Arg((4,), f32, (1.5, 6.0)),
             Arg((4,), f32, lambda rng: rng.uniform(0.2, 0.8, 4).astype(f32) - 3)),
             jax_fun=_jax_zeta_q, diff=(1,), rtol=1e-5, fd_rtol=1e-4, name="negative-q"),
        Spec(sp.zeta_p, lambda x, q: lax.zeta(lax.stop_gradient(x), lax.stop_gradient(q)),
             lambda x, q: _zeta_jax_values(x, q),
             (Arg((n,), f32, lambda rng: _ZX), Arg((n,), f32, lambda rng: _ZQ)),
             jax_fun=lambda jax, x, q: jax.lax.zeta(x, q), diff=(), rtol=1e-6, name="special"),
    ]


# ---- bessel_i0e, bessel_i1e --------------------------------------------------------------------
_I_SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], f32)


def _bessel_specs():
    specs = []
    for prim, ref, jname in ((sp.bessel_i0e_p, special.i0e, "bessel_i0e"),
                             (sp.bessel_i1e_p, special.i1e, "bessel_i1e")):
        op = getattr(lax, jname)

        def jfun(jax, x, jname=jname):
            return getattr(jax.lax, jname)(x)

        def with_special(x, op=op):
            special_x = lax.convert_element_type(_I_SPECIAL, x.dtype)
            return op(lax.concatenate([lax.stop_gradient(x), special_x], 0))

        def jax_with_special(jax, x, jname=jname):
            return getattr(jax.lax, jname)(jax.numpy.concatenate([x, _I_SPECIAL.astype(
                x.dtype)]))
        specs += [
            Spec(prim, lambda x, op=op: op(x), ref, (Arg((3, 4), f32, (-6.0, 6.0)),),
                 jax_fun=jfun, rtol=2e-6, name="f32"),
            Spec(prim, lambda x, op=op: op(x), ref, (Arg((), f32, (0.1, 3.0)),),
                 jax_fun=jfun, rtol=2e-6, name="rank0"),
            Spec(prim, lambda x, op=op: op(x), ref, (Arg((5,), f64, (-300.0, 300.0)),),
                 jax_fun=jfun, fd_eps=1e-4, name="f64-large"),
            *([Spec(prim, lambda x, op=op: op(x), ref,          # near 0 the slope is 1/2;
                    (Arg((4,), f64, lambda rng: np.array([0.0, 1e-17, -1e-12, 1e-8])),),
                    jax_fun=jfun, fd_eps=1e-9, second_order=False,  # (y/x)' cancels there
                    name="tiny")] if jname == "bessel_i1e" else []),
            Spec(prim, with_special, lambda x, ref=ref: ref(np.concatenate([x, _I_SPECIAL])),
                 (Arg((3,), f32, (-3.0, 3.0)),), jax_fun=jax_with_special, diff=(),
                 name="special"),
        ]
    return specs


# ---- bits ------------------------------------------------------------------------------------
def _ints(dt, n=12):
    info = np.iinfo(dt)
    edge = np.array([0, 1, -1 if info.min else 2, info.max, info.min, info.max - 1], dt)

    def draw(rng):
        return np.concatenate([edge, rng.integers(info.min, info.max, n - 6, dt, True)])
    return draw


def _clz_ref(x):
    nbits = 8 * x.dtype.itemsize
    u = x.view(f"u{x.dtype.itemsize}")
    return np.array([nbits - int(v).bit_length() for v in u.ravel()], x.dtype).reshape(x.shape)


def _mulhi_ref(x, y):
    x, y = np.broadcast_arrays(x, y)
    nbits = 8 * x.dtype.itemsize
    mask = (1 << nbits) - 1
    out = [((int(a) * int(b)) >> nbits) & mask for a, b in zip(x.ravel(), y.ravel())]
    return np.array(out, f"u{x.dtype.itemsize}").view(x.dtype).reshape(x.shape)


_NEXT_X = np.array([0.0, -0.0, 1.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1.0, 3.4028235e38,
                    1.1754944e-38, 1e-45], f32)
_NEXT_Y = np.array([1.0, -1.0, 2.0, 1.0, -np.inf, 0.0, 0.0, 1.0, np.nan, np.inf, 0.0, 0.0],
                   f32)


def _rp_ref(e, m):                                     # via a float16 / bfloat16-like round
    def ref(x):
        if (e, m) == (5, 10):
            y = x.astype(np.float16).astype(f32)      # NumPy rounds to nearest even too;
            return np.where(np.abs(y) < 2.0 ** -14, np.copysign(0.0, x), y).astype(f32)
        raise AssertionError
    return ref


_RP_X = np.array([1.0, 1.00048828125, 1.00146484375, -1.0009765625, 65504.0, 65519.99,
                  65520.0, 6.1e-5, 6.0e-5, -3e-8, 0.0, -0.0, np.inf, -np.inf, np.nan, 0.1], f32)


def _bits_specs():
    def bitcast(dt):
        return lambda x: lax.bitcast_convert_type(x, dt)

    def jbitcast(dt):
        return lambda jax, x: jax.lax.bitcast_convert_type(x, dt)

    def npbitcast(dt):
        def ref(x):
            x = np.array(x)                            # C-contiguous, rank 0 kept
            if np.dtype(dt).itemsize < x.dtype.itemsize:
                return x.reshape(*x.shape, 1).view(dt)
            if np.dtype(dt).itemsize > x.dtype.itemsize:
                return x.view(dt).reshape(x.shape[:-1])
            return x.view(dt)
        return ref
    held = lax.stop_gradient
    return [
        Spec(bt.nextafter_p, lambda x, y: lax.nextafter(held(x), held(y)), np.nextafter,
             (Arg((12,), f32, lambda rng: _NEXT_X), Arg((12,), f32, lambda rng: _NEXT_Y)),
             jax_fun=lambda jax, x, y: jax.lax.nextafter(x, y), diff=(), rtol=0, atol=0),
        Spec(bt.nextafter_p, lambda x, y: lax.nextafter(held(x), held(y)), np.nextafter,
             (Arg((3, 4), f32), Arg((), f32)),
             jax_fun=lambda jax, x, y: jax.lax.nextafter(x, y), diff=(), rtol=0, atol=0,
             name="scalar-y"),
        *[Spec(bt.clz_p, lambda x: lax.clz(x), _clz_ref, (Arg((12,), dt, _ints(dt)),),
               jax_fun=lambda jax, x: jax.lax.clz(x), diff=(), name=np.dtype(dt).name)
          for dt in (i32, np.uint8, np.int16, np.uint32)],
        *[Spec(bt.mulhi_p, lambda x, y: lax.mulhi(x, y), _mulhi_ref,
               (Arg((12,), dt, _ints(dt)), Arg((12,), dt, _ints(dt))),
               jax_fun=lambda jax, x, y: jax.lax.mulhi(x, y), diff=(), name=np.dtype(dt).name)
          for dt in (i32, np.uint32, np.int8, np.uint16)],
        Spec(bt.mulhi_p, lambda x, y: lax.mulhi(x, y), _mulhi_ref,
             (Arg((3, 4), i32, (-2**31, 2**31 - 1)), Arg((), i32, (-2**31, 2**31 - 1))),
             jax_fun=lambda jax, x, y: jax.lax.mulhi(x, y), diff=(), name="scalar-y"),
        *[Spec(bt.bitcast_convert_type_p, bitcast(dt), npbitcast(dt), (Arg((3, 4), f32),),
               jax_fun=jbitcast(dt), diff=(), name=np.dtype(dt).name)
          for dt in (i32, np.uint32, np.int16, np.uint8, np.float16)],
        Spec(bt.bitcast_convert_type_p, bitcast(f32), npbitcast(f32),
             (Arg((3, 4), np.uint8, (0, 256)),), jax_fun=jbitcast(f32), diff=(), name="u8-f32"),
        Spec(bt.bitcast_convert_type_p, bitcast(np.float16), npbitcast(np.float16),
             (Arg((2,), np.int8, (-128, 128)),), jax_fun=jbitcast(np.float16), diff=(),
             name="i8-f16-rank1"),
        Spec(bt.bitcast_convert_type_p, bitcast(i32), npbitcast(i32),
             (Arg((), f32),), jax_fun=jbitcast(i32), diff=(), name="rank0"),
        Spec(bt.reduce_precision_p, lambda x: lax.reduce_precision(x, 5, 10), _rp_ref(5, 10),
             (Arg((16,), f32, lambda rng: _RP_X),), diff=(), rtol=0, atol=0,
             jax_fun=lambda jax, x: jax.lax.reduce_precision(x, 5, 10), name="f16"),
        Spec(bt.reduce_precision_p, lambda x: lax.reduce_precision(x, 5, 10), _rp_ref(5, 10),
             (Arg((3, 4), f32, (-70000.0, 70000.0)),), diff=(), rtol=0, atol=0,
             jax_fun=lambda jax, x: jax.lax.reduce_precision(x, 5, 10), name="f16-drawn"),
    ]


SPECS = [*_betainc_specs(), *_zeta_specs(), *_bessel_specs(), *_bits_specs()]
