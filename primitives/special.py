"""Special-function primitives beyond the gamma family: betainc, zeta, bessel_i0e/i1e.

Floats only, as jax.lax. Re-exported by primitives/elementwise.py (so lax, the cost table
and the backends' elementwise modules see them with the rest of the family). Each block:
declaration, wrapper, shape rule, JVP, batching; implementations live in backends/.
"""
from __future__ import annotations

import numpy as np

from fnad.core import Primitive, abstract_eval_rules, batch_rules, jvp_rules, nonzero
from fnad.core import get_aval as _get_aval
from fnad.primitives._batching import broadcasting_batch_rule, vectorized_batch_rule
from fnad.primitives._util import FLOAT, naryop_abstract_eval, promote_scalars, \
    unop_abstract_eval
from fnad.primitives.elementwise import (
    _out_shaped,
    abs,
    add,
    div,
    exp,
    lgamma,
    log,
    log1p,
    mul,
    neg,
    sign,
    sub,
)

__all__ = ["betainc", "zeta", "bessel_i0e", "bessel_i1e"]


# ---- betainc: the regularized incomplete beta function (jax: regularized_incomplete_beta) --
#   I_x(a, b) = B(x; a, b)/B(a, b) = 1/B(a, b)·∫₀ˣ t^(a-1)·(1-t)^(b-1) dt
#   ∂I/∂x = x^(a-1)·(1-x)^(b-1)/B(a, b)
#         = exp((a - 1)·log x + (b - 1)·log1p(-x) - (lgamma a + lgamma b - lgamma(a + b)))
#   ∂I/∂a, ∂I/∂b: none (jax raises "Betainc gradient with respect to a and b not supported.")
regularized_incomplete_beta_p = Primitive("regularized_incomplete_beta")
def betainc(a, b, x): return regularized_incomplete_beta_p.bind(*promote_scalars(a, b, x))

abstract_eval_rules[regularized_incomplete_beta_p] = naryop_abstract_eval(
    "regularized_incomplete_beta", (FLOAT,))
def betainc_jvp(primals, tangents):                    # dI = ∂I/∂x·dx (a, b: an error)
    (a, b, x), (a_dot, b_dot, x_dot) = primals, tangents
    if nonzero(a_dot) or nonzero(b_dot):
        raise ValueError("Betainc gradient with respect to a and b not supported.")
    out = betainc(a, b, x)
    if not nonzero(x_dot):
        return out, None
    lbeta = sub(add(lgamma(a), lgamma(b)), lgamma(add(a, b)))
    partial_x = exp(sub(add(mul(sub(b, 1.0), log1p(neg(x))), mul(sub(a, 1.0), log(x))), lbeta))
    return out, _out_shaped(mul(x_dot, partial_x), out)
jvp_rules[regularized_incomplete_beta_p] = betainc_jvp
batch_rules[regularized_incomplete_beta_p] = broadcasting_batch_rule(
    regularized_incomplete_beta_p)

# ---- zeta: the Hurwitz zeta function ---------------------------------------------------------
#   ζ(x, q) = Σ_{k>=0} (k + q)^(-x)      (x > 1; NaN for x < 1, inf at x = 1, as XLA's)
#   ∂ζ/∂q = -x·ζ(x + 1, q)               (termwise: d/dq (k + q)^(-x) = -x·(k + q)^(-x-1))
#   ∂ζ/∂x = -Σ log(k + q)·(k + q)^(-x): no primitive computes it, so none (an error, as
#   jax.lax.zeta has no derivative at all; jax.scipy.special.zeta differentiates a series)
zeta_p = Primitive("zeta")
def zeta(x, q): return zeta_p.bind(*promote_scalars(x, q))

abstract_eval_rules[zeta_p] = naryop_abstract_eval("zeta", (FLOAT,))
def zeta_jvp(primals, tangents):                       # dζ = -x·ζ(x + 1, q)·dq
    (x, q), (x_dot, q_dot) = primals, tangents
    if nonzero(x_dot):
        raise ValueError("zeta gradient with respect to x (the exponent) is not supported "
                         "(as in jax.lax); it is in q")
    out = zeta(x, q)
    if not nonzero(q_dot):
        return out, None
    return out, _out_shaped(mul(q_dot, neg(mul(x, zeta(add(x, 1.0), q)))), out)
jvp_rules[zeta_p] = zeta_jvp
batch_rules[zeta_p] = broadcasting_batch_rule(zeta_p)

# ---- exponentially scaled modified Bessel functions of the first kind, orders 0 and 1 --------
#   i0e(x) = e^(-|x|)·I₀(x),  i1e(x) = e^(-|x|)·I₁(x);  I₀' = I₁,  I₁' = I₀ - I₁/x
#   d i0e = (i1e(x) - sign(x)·i0e(x)) dx
#   d i1e = (i0e(x) - i1e(x)·(sign(x) + 1/x)) dx, 1/2 at |x| <= eps (the limit; jax's rule)
bessel_i0e_p = Primitive("bessel_i0e")
def bessel_i0e(x): return bessel_i0e_p.bind(x)

abstract_eval_rules[bessel_i0e_p] = unop_abstract_eval("bessel_i0e", (FLOAT,))
def bessel_i0e_jvp(primals, tangents):                 # d i0e = (i1e - sign·i0e) dx
    (x,), (x_dot,) = primals, tangents
    y = bessel_i0e(x)
    return y, mul(x_dot, sub(bessel_i1e(x), mul(sign(x), y)))
jvp_rules[bessel_i0e_p] = bessel_i0e_jvp
batch_rules[bessel_i0e_p] = vectorized_batch_rule(bessel_i0e_p)

bessel_i1e_p = Primitive("bessel_i1e")
def bessel_i1e(x): return bessel_i1e_p.bind(x)

abstract_eval_rules[bessel_i1e_p] = unop_abstract_eval("bessel_i1e", (FLOAT,))
def bessel_i1e_jvp(primals, tangents):                 # d i1e = (i0e - i1e·(sign + 1/x)) dx
    from fnad.primitives.logic import gt, select_n
    (x,), (x_dot,) = primals, tangents
    y = bessel_i1e(x)
    eps = float(np.finfo(_get_aval(x).dtype).eps)
    not_tiny = gt(abs(x), eps)
    safe_x = select_n(not_tiny, eps, x)
    slope = sub(bessel_i0e(safe_x), mul(y, add(sign(safe_x), div(1.0, safe_x))))
    return y, mul(x_dot, select_n(not_tiny, 0.5, slope))
jvp_rules[bessel_i1e_p] = bessel_i1e_jvp
batch_rules[bessel_i1e_p] = vectorized_batch_rule(bessel_i1e_p)
