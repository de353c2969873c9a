"""Specs of the elementwise arithmetic and transcendental primitives."""
import numpy as np
from scipy import special

from fnad import lax
from fnad.primitives import elementwise as ew
from specs import Arg, Spec

f32, c64, i32 = np.float32, np.complex64, np.int32
SHAPES = [(3, 4), ()]


def unary(prim, ref, domain=(-2.0, 2.0), complex_too=False, linear=False, diff=None,
          jax_name=None, **kw):
    op = getattr(lax, prim.name)
    jname = jax_name or prim.name
    out = [Spec(prim, lambda x: op(x), ref, (Arg(s, f32, domain),),
                jax_fun=lambda jax, x: getattr(jax.lax, jname)(x),
                linear=(0,) if linear else (), diff=diff, name=f"f32{list(s)}", **kw)
           for s in SHAPES]
    if complex_too:
        out.append(Spec(prim, lambda x: op(x), ref, (Arg((3,), c64, domain),),
                        jax_fun=lambda jax, x: getattr(jax.lax, jname)(x),
                        linear=(0,) if linear else (), diff=diff, name="c64", **kw))
    return out


def binary(prim, ref, dx=(-2.0, 2.0), dy=(-2.0, 2.0), complex_too=False, linear=(),
           diff=None, ints=False, op=None, jax_name=None, **kw):
    op = op or getattr(lax, prim.name)
    jname = jax_name or prim.name
    jfun = lambda jax, x, y: getattr(jax.lax, jname)(x, y)  # noqa: E731
    out = [Spec(prim, lambda x, y: op(x, y), ref, (Arg((3, 4), f32, dx), Arg((3, 4), f32, dy)),
                jax_fun=jfun, linear=linear, diff=diff, name="f32", **kw),
           Spec(prim, lambda x, y: op(x, y), ref, (Arg((2, 3), f32, dx), Arg((), f32, dy)),
                jax_fun=jfun, linear=linear, diff=diff, name="scalar-y", **kw),
           Spec(prim, lambda x, y: op(x, y), ref, (Arg((), f32, dx), Arg((), f32, dy)),
                jax_fun=jfun, linear=linear, diff=diff, name="rank0", **kw)]
    if complex_too:
        out.append(Spec(prim, lambda x, y: op(x, y), ref, (Arg((4,), c64, dx), Arg((4,), c64, dy)),
                        jax_fun=jfun, linear=linear, diff=diff, name="c64", **kw))
    if ints:
        out.append(Spec(prim, lambda x, y: op(x, y), ref,
                        (Arg((3, 4), i32, (-20, 20)), Arg((3, 4), i32, (1, 7))),
                        jax_fun=jfun, diff=(), name="i32"))
    return out


def _trunc_div(x, y):
    if np.result_type(x).kind == "i":
        q = np.abs(x) // np.abs(y)
        return (np.sign(x) * np.sign(y) * q).astype(np.result_type(x))
    return x / y


def _round_away(x):
    return (np.sign(x) * np.floor(np.abs(x).astype(np.float64) + 0.5)).astype(x.dtype)


# ---- gamma family ------------------------------------------------------------------------
def _off_poles(lo: int, hi: int, shape=(3, 4)):
    """Negative non-integers in (lo, hi): a whole number plus a fraction in [0.2, 0.8]."""
    return lambda rng: (rng.integers(lo, hi, shape) + rng.uniform(0.2, 0.8, shape)).astype(f32)


# Poles (±0, -1, -2), ±inf and NaN ride along as constants after the drawn x, with jax's
# values there (scipy's differ at some). Their tangents are 0 · (inf or NaN) = NaN, as the
# finite differences inf - inf and NaN - NaN are; the derivatives at x are checked as usual.
_SPECIAL = np.array([0.0, -0.0, -1.0, -2.0, np.inf, -np.inf, np.nan], f32)
_AT_SPECIAL = {  # jax 0.10's values at _SPECIAL
    "lgamma": [np.inf] * 6 + [np.nan],
    "digamma": [np.nan] * 4 + [np.inf, np.nan, np.nan],
    "polygamma1": [np.inf] * 4 + [np.nan, np.inf, np.nan],
    "polygamma2": [np.nan] * 7,
}


def _special_points(prim, op, ref, jax_op, expected, name):
    def fun(x):
        return op(lax.concatenate([x, lax.convert_element_type(_SPECIAL, x.dtype)], 0))

    def jax_fun(jax, x):
        return jax_op(jax, jax.numpy.concatenate([x, _SPECIAL.astype(x.dtype)]))

    return Spec(prim, fun, lambda x: np.concatenate([ref(x), np.array(expected, x.dtype)]),
                (Arg((5,), f32, (0.5, 3.0)),), jax_fun=jax_fun, name=name)


def _poly(m):
    return lambda x: lax.polygamma(m, x)


def _jax_poly(m):
    return lambda jax, x: jax.lax.polygamma(float(m), x)


def _ref_poly(m):
    return lambda x: special.polygamma(m, x)


def _whole(rng):
    return rng.integers(0, 4, (3, 4)).astype(f32)


def _gamma_family():
    # The JVP and jax checks run every spec in float64 (inputs widened, x64 on); "f64"
    # draws float64 inputs (float32 in the value check unless x64 is on). polygamma is not
    # differentiable in m (an error, as in jax): stop_gradient keeps the spec tests' zero
    # tangents of m from reaching its rule.
    return [
        *unary(ew.lgamma_p, special.gammaln, domain=(0.5, 4.0), rtol=2e-6),
        Spec(ew.lgamma_p, lambda x: lax.lgamma(x), special.gammaln, (Arg((3, 4), f32,
             _off_poles(-6, 0)),), jax_fun=lambda jax, x: jax.lax.lgamma(x), name="negative"),
        Spec(ew.lgamma_p, lambda x: lax.lgamma(x), special.gammaln,
             (Arg((6,), f32, (1e2, 1e6)),), jax_fun=lambda jax, x: jax.lax.lgamma(x),
             fd_eps=1e-2, name="large"),
        Spec(ew.lgamma_p, lambda x: lax.lgamma(x), special.gammaln,
             (Arg((4,), np.float64, (0.1, 9.0)),), jax_fun=lambda jax, x: jax.lax.lgamma(x),
             name="f64"),
        _special_points(ew.lgamma_p, lax.lgamma, special.gammaln,
                        lambda jax, x: jax.lax.lgamma(x), _AT_SPECIAL["lgamma"], "special"),
        *unary(ew.digamma_p, special.psi, domain=(0.5, 4.0), rtol=2e-6),
        Spec(ew.digamma_p, lambda x: lax.digamma(x), special.psi, (Arg((3, 4), f32,
             _off_poles(-6, 0)),), jax_fun=lambda jax, x: jax.lax.digamma(x), name="negative"),
        Spec(ew.digamma_p, lambda x: lax.digamma(x), special.psi,
             (Arg((6,), f32, (1e2, 1e6)),), jax_fun=lambda jax, x: jax.lax.digamma(x),
             fd_eps=1e-2, name="large"),
        _special_points(ew.digamma_p, lax.digamma, special.psi,
                        lambda jax, x: jax.lax.digamma(x), _AT_SPECIAL["digamma"], "special"),
        Spec(ew.polygamma_p, lambda m, x: lax.polygamma(lax.stop_gradient(m), x),
             lambda m, x: special.polygamma(m.astype(int), x), (Arg((3, 4), f32, _whole),
             Arg((3, 4), f32, (0.5, 4.0))), diff=(1,), rtol=2e-6,
             jax_fun=lambda jax, m, x: jax.lax.polygamma(jax.lax.stop_gradient(m), x)),
        *[Spec(ew.polygamma_p, _poly(m), _ref_poly(m), (Arg((3, 4), f32, _off_poles(-7, 0)),),
               jax_fun=_jax_poly(m), name=f"m{m}-negative") for m in (1, 2)],
        Spec(ew.polygamma_p, _poly(1), _ref_poly(1), (Arg((6,), f32, (1e2, 1e6)),),
             jax_fun=_jax_poly(1), fd_eps=1e-2, name="m1-large"),
        Spec(ew.polygamma_p, _poly(3), _ref_poly(3), (Arg((), f32, (0.5, 4.0)),),
             jax_fun=_jax_poly(3), name="m3-rank0"),
        *[_special_points(ew.polygamma_p, _poly(m), _ref_poly(m), _jax_poly(m),
                          _AT_SPECIAL[f"polygamma{m}"], f"m{m}-special") for m in (1, 2)],
    ]


# ---- incomplete gamma ----------------------------------------------------------------------
# igamma/igammac against scipy (a and x differentiable: FD checks igamma_grad_a through the
# JVP); igamma_grad_a and random_gamma_grad against central differences of scipy's gammainc
# in a (float64, step 1e-5·a: ~1e-10 relative), -(∂P/∂a)/(∂P/∂x) for the latter. jax's
# float32 algorithm loses up to ~1e-4 of these two to cancellation (fnad's numpy reference
# computes in float64): their float32 checks against the xla backend use rtol 5e-4.
def _dp_da(a, x):
    a64, x64 = np.asarray(a, np.float64), np.asarray(x, np.float64)
    h = 1e-5 * a64
    return (special.gammainc(a64 + h, x64) - special.gammainc(a64 - h, x64)) / (2 * h)


def _ref_grad_a(a, x):
    return _dp_da(a, x).astype(np.result_type(a, x))


def _ref_sample_grad(a, x):
    a64, x64 = np.asarray(a, np.float64), np.asarray(x, np.float64)
    dp_dx = np.exp((a64 - 1) * np.log(x64) - x64 - special.gammaln(a64))
    return (-_dp_da(a, x) / dp_dx).astype(np.result_type(a, x))


_IG_SPECIAL = np.array([0.0, -1.0, 0.5, 2.0, np.inf, np.nan], f32)
_IG_A, _IG_X = (v.ravel() for v in np.meshgrid(_IG_SPECIAL, _IG_SPECIAL, indexing="ij"))
_AT_SPECIAL_IG = {  # jax 0.10's values on the grid _IG_A x _IG_X (NaN where not listed)
    "igamma": {(0.0, 2.0): 1.0, (0.0, np.inf): 1.0, (0.5, 0.0): 0.0, (0.5, 0.5): 0.6826895,
               (0.5, 2.0): 0.9544997, (0.5, np.inf): 1.0, (2.0, 0.0): 0.0,
               (2.0, 0.5): 0.09020401, (2.0, 2.0): 0.5939942, (2.0, np.inf): 1.0,
               (np.inf, 0.0): 0.0, (np.inf, 0.5): 0.0, (np.inf, np.inf): 1.0},
    "igammac": {(0.0, 0.5): 0.0, (0.0, 2.0): 0.0, (0.0, np.inf): 0.0, (0.5, 0.0): 1.0,
                (0.5, 0.5): 0.3173105, (0.5, 2.0): 0.04550026, (0.5, np.inf): 0.0,
                (2.0, 0.0): 1.0, (2.0, 0.5): 0.909796, (2.0, 2.0): 0.4060058,
                (2.0, np.inf): 0.0, (np.inf, 0.0): 1.0, (np.inf, 0.5): 1.0,
                (np.inf, np.inf): 0.0},
    "igamma_grad_a": {(0.5, 0.0): 0.0, (0.5, 0.5): -0.64720035, (0.5, 2.0): -0.13561934,
                      (2.0, 0.0): 0.0, (2.0, 0.5): -0.15103424, (2.0, 2.0): -0.2940047,
                      (np.inf, 0.0): 0.0},
    "random_gamma_grad": {(0.5, 0.0): 0.0, (0.5, 0.5): 1.3373526, (0.5, 2.0): 2.5118894,
                          (2.0, 0.0): 0.0, (2.0, 0.5): 0.4980267, (2.0, 2.0): 1.0862086,
                          (np.inf, 0.0): 0.0},
}


def _ig_special(prim, name):
    """prim on the grid of special points (0, -1, inf, NaN among them), values only."""
    op = getattr(lax, name)
    expected = np.array([_AT_SPECIAL_IG[name].get((a, x), np.nan)
                         for a, x in zip(_IG_A.tolist(), _IG_X.tolist())], f32)
    return Spec(prim, lambda a, x: op(lax.stop_gradient(a), lax.stop_gradient(x)),
                lambda a, x: expected, (Arg((36,), f32, lambda rng: _IG_A),
                                        Arg((36,), f32, lambda rng: _IG_X)),
                jax_fun=lambda jax, a, x: getattr(jax.lax, name)(a, x), diff=(),
                rtol=1e-6, name="special")


_A_LARGE = np.array([20.0, 45.0, 80.0, 130.0, 200.0])
# large a with x within ±25% of it, where P moves (the series then runs ~sqrt(a) terms)
_LARGE_A = (Arg((5,), np.float64, lambda rng: _A_LARGE),
            Arg((5,), np.float64, lambda rng: _A_LARGE * rng.uniform(0.8, 1.25, 5)))


def _incomplete_gamma():
    a, x = Arg((3, 4), f32, (0.5, 4.0)), Arg((3, 4), f32, (0.1, 6.0))
    specs = []
    for prim, ref, jname in ((ew.igamma_p, special.gammainc, "igamma"),
                             (ew.igammac_p, special.gammaincc, "igammac")):
        op = getattr(lax, jname)

        def jfun(jax, a, x, jname=jname):
            return getattr(jax.lax, jname)(a, x)

        def x_only(a, x, op=op):                   # a held: second order in x too
            return op(lax.stop_gradient(a), x)

        def jax_x_only(jax, a, x, jname=jname):
            return getattr(jax.lax, jname)(jax.lax.stop_gradient(a), x)
        specs += [
            # igamma_grad_a has no derivative (as in jax): no second order through a
            Spec(prim, lambda a, x, op=op: op(a, x), ref, (a, x), jax_fun=jfun,
                 second_order=False, rtol=2e-6, name="f32"),
            Spec(prim, x_only, ref, (a, x), jax_fun=jax_x_only, diff=(1,), rtol=2e-6,
                 name="x"),
            Spec(prim, lambda a, x, op=op: op(a, x), ref, (Arg((2, 3), f32, (0.5, 4.0)),
                 Arg((), f32, (0.1, 6.0))), jax_fun=jfun, second_order=False, rtol=2e-6,
                 name="scalar-x"),
            Spec(prim, lambda a, x, op=op: op(a, x), ref, _LARGE_A, jax_fun=jfun,
                 second_order=False, name="f64-large"),
            _ig_special(prim, jname),
        ]
    for prim, ref, jname in ((ew.igamma_grad_a_p, _ref_grad_a, "igamma_grad_a"),
                             (ew.random_gamma_grad_p, _ref_sample_grad, "random_gamma_grad")):
        op = getattr(lax, jname)

        def held(a, x, op=op):                     # not differentiable (as in jax)
            return op(lax.stop_gradient(a), lax.stop_gradient(x))

        def jfun(jax, a, x, jname=jname):
            return getattr(jax.lax, jname)(a, x)
        specs += [
            Spec(prim, held, ref, (a, x), jax_fun=jfun, diff=(), rtol=5e-4, name="f32"),
            Spec(prim, held, ref, (Arg((2, 3), f32, (0.05, 0.5)), Arg((), f32, (0.01, 0.3))),
                 jax_fun=jfun, diff=(), rtol=5e-4, name="small-a"),
            Spec(prim, held, ref, _LARGE_A, jax_fun=jfun, diff=(), rtol=1e-5,
                 name="f64-large"),
            _ig_special(prim, jname),
        ]
    return specs


SPECS = [
    *binary(ew.add_p, np.add, complex_too=True, linear=(0, 1), ints=True),
    *binary(ew.add_any_p, np.add, linear=(0, 1), op=ew.add_any, jax_name="add"),
    *binary(ew.sub_p, np.subtract, complex_too=True, linear=(0, 1), ints=True),
    *binary(ew.mul_p, np.multiply, complex_too=True, linear=(0, 1), ints=True),
    *binary(ew.div_p, _trunc_div, dy=(0.5, 2.0), complex_too=True, linear=(0,), ints=True),
    *binary(ew.rem_p, np.fmod, dx=(0.2, 3.0), dy=(3.5, 5.0), ints=True),
    *binary(ew.pow_p, np.power, dx=(0.5, 2.0), dy=(-1.5, 1.5)),
    Spec(ew.pow_p, lambda x, y: lax.pow(x, y), np.power, (Arg((4,), c64, (0.5, 1.5)),
         Arg((4,), c64, (-1.0, 1.0))), jax_fun=lambda jax, x, y: jax.lax.pow(x, y), name="c64"),
    *binary(ew.max_p, np.maximum, ints=True),
    *binary(ew.min_p, np.minimum, ints=True),
    *binary(ew.atan2_p, np.arctan2, dy=(0.5, 2.0)),
    *binary(ew.complex_p, lambda x, y: x + 1j * y, linear=(0, 1)),
    *unary(ew.neg_p, np.negative, complex_too=True, linear=True),
    Spec(ew.neg_p, lambda x: lax.neg(x), np.negative, (Arg((5,), i32, (-9, 9)),),
         jax_fun=lambda jax, x: jax.lax.neg(x), diff=(), name="i32"),
    *unary(ew.exp_p, np.exp, complex_too=True),
    *unary(ew.exp2_p, np.exp2),
    *unary(ew.log_p, np.log, domain=(0.1, 3.0), complex_too=True),
    *unary(ew.log1p_p, np.log1p, domain=(-0.5, 2.0), complex_too=True),
    *unary(ew.expm1_p, np.expm1, complex_too=True),
    *unary(ew.tanh_p, np.tanh, complex_too=True),
    *unary(ew.logistic_p, special.expit, complex_too=False),
    *unary(ew.sin_p, np.sin, complex_too=True),
    *unary(ew.cos_p, np.cos, complex_too=True),
    *unary(ew.tan_p, np.tan, domain=(-1.2, 1.2)),
    *unary(ew.asin_p, np.arcsin, domain=(-0.9, 0.9)),
    *unary(ew.acos_p, np.arccos, domain=(-0.9, 0.9)),
    *unary(ew.atan_p, np.arctan),
    *unary(ew.sinh_p, np.sinh),
    *unary(ew.cosh_p, np.cosh),
    *unary(ew.asinh_p, np.arcsinh),
    *unary(ew.acosh_p, np.arccosh, domain=(1.1, 3.0)),
    *unary(ew.atanh_p, np.arctanh, domain=(-0.9, 0.9)),
    *unary(ew.sqrt_p, np.sqrt, domain=(0.1, 3.0), complex_too=True),
    *unary(ew.rsqrt_p, lambda x: 1 / np.sqrt(x), domain=(0.1, 3.0)),
    *unary(ew.cbrt_p, np.cbrt, domain=(0.2, 3.0)),
    *unary(ew.erf_p, special.erf),
    *unary(ew.erfc_p, special.erfc),
    *unary(ew.erf_inv_p, special.erfinv, domain=(-0.9, 0.9), rtol=1e-4),
    *_gamma_family(),
    *_incomplete_gamma(),
    *unary(ew.square_p, np.square, complex_too=True),
    *unary(ew.abs_p, np.abs, domain=(0.2, 2.0)),
    Spec(ew.abs_p, lambda x: lax.abs(x), np.abs, (Arg((5,), f32, (-2.0, -0.2)),),
         jax_fun=lambda jax, x: jax.lax.abs(x), name="negative"),
    Spec(ew.abs_p, lambda x: lax.abs(x), np.abs, (Arg((4,), c64, (0.3, 2.0)),),
         jax_fun=lambda jax, x: jax.lax.abs(x), name="c64"),
    Spec(ew.abs_p, lambda x: lax.abs(x), np.abs, (Arg((5,), i32, (-9, 9)),),
         jax_fun=lambda jax, x: jax.lax.abs(x), diff=(), name="i32"),
    *unary(ew.sign_p, np.sign, diff=()),
    *unary(ew.floor_p, np.floor, diff=()),
    *unary(ew.ceil_p, np.ceil, diff=()),
    Spec(ew.round_p, lambda x: lax.round(x), _round_away,
         (Arg((9,), f32, lambda rng: np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997,
                                                 -0.7, 3.2], f32)),),
         jax_fun=lambda jax, x: jax.lax.round(x), diff=(), name="away"),
    Spec(ew.round_p, lambda x: lax.round(x, lax.TO_NEAREST_EVEN), np.rint,
         (Arg((6,), f32, lambda rng: np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], f32)),),
         jax_fun=lambda jax, x: jax.lax.round(x, jax.lax.RoundingMethod.TO_NEAREST_EVEN),
         diff=(), name="even"),
    *[Spec(ew.integer_pow_p, lambda x, y=y: lax.integer_pow(x, y), lambda x, y=y: x ** y,
           (Arg((3, 4), f32, (0.5, 2.0)),), jax_fun=lambda jax, x, y=y: jax.lax.integer_pow(x, y),
           name=f"y{y}", rtol=1e-5) for y in (0, 1, 2, 3, -2)],
    Spec(ew.integer_pow_p, lambda x: lax.integer_pow(x, 3), lambda x: x ** 3,
         (Arg((5,), i32, (-5, 5)),), jax_fun=lambda jax, x: jax.lax.integer_pow(x, 3), diff=(),
         name="i32"),
    Spec(ew.real_p, lambda x: lax.real(x), np.real, (Arg((3, 2), c64),),
         jax_fun=lambda jax, x: jax.lax.real(x), linear=(0,)),
    Spec(ew.imag_p, lambda x: lax.imag(x), np.imag, (Arg((3, 2), c64),),
         jax_fun=lambda jax, x: jax.lax.imag(x), linear=(0,)),
    Spec(ew.conj_p, lambda x: lax.conj(x), np.conj, (Arg((3, 2), c64),),
         jax_fun=lambda jax, x: jax.lax.conj(x), linear=(0,)),
]
