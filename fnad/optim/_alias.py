"""fnad.optim._alias: the optimizers, each a chain of transformations as in optax.alias.

η(t) is the learning rate, a number or a schedule of the step count t before the update;
every optimizer's docstring gives its full update. Imports only fnad.optim's own modules.
"""
from __future__ import annotations

from typing import Any

from ._base import (
    GradientTransformation, ScalarOrSchedule, _check_hyper, _check_lr, chain, identity, scale,
    scale_by_learning_rate,
)
from ._constraints import add_decayed_weights, add_noise, clip_by_block_rms
from ._layerwise import (
    scale_by_factored_rms, scale_by_novograd, scale_by_param_block_rms, scale_by_polyak,
    scale_by_sign, scale_by_sm3, scale_by_trust_ratio,
)
from ._transforms import (
    ema, scale_by_adadelta, scale_by_adam, scale_by_adamax, scale_by_amsgrad, scale_by_belief,
    scale_by_lion, scale_by_radam, scale_by_rms, scale_by_rss, scale_by_stddev, scale_by_yogi,
    trace,
)
from ._wrappers import masked


def _check_wd(where: str, weight_decay: Any) -> None:
    if not callable(weight_decay):
        _check_hyper(where, "weight_decay", weight_decay, low=0.0)


__all__ = [
    "adabelief", "adadelta", "adafactor", "adagrad", "adam", "adamax", "adamaxw", "adamw",
    "amsgrad", "fromage", "lamb", "lars", "lion", "nadam", "nadamw", "noisy_sgd", "novograd",
    "polyak_sgd", "radam", "rmsprop", "sgd", "sign_sgd", "signum", "sm3", "yogi",
]


def sgd(learning_rate: ScalarOrSchedule, momentum: float | None = None,
        nesterov: bool = False, accumulator_dtype: Any = None) -> GradientTransformation:
    """Stochastic gradient descent, with optional (Nesterov) momentum β:

        momentum None:  u = -η(t) · g
        momentum:       m' = g + β · m;            u = -η(t) · m'
        nesterov:       m' = g + β · m;            u = -η(t) · (g + β · m')

    As optax, momentum=None (the default) keeps no state; a number (even 0) keeps a
    TraceState.
    """
    _check_lr("sgd", learning_rate)
    if momentum is not None:
        _check_hyper("sgd", "momentum", momentum, low=0.0)
    inner = (trace(momentum, nesterov, accumulator_dtype) if momentum is not None
             else identity())
    return chain(inner, scale_by_learning_rate(learning_rate))


def adam(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8, eps_root: float = 0.0, mu_dtype: Any = None, *,
         nesterov: bool = False) -> GradientTransformation:
    """Adam (Kingma & Ba 2015):

        t' = t + 1
        m' = β1 · m + (1 - β1) · g,      v' = β2 · v + (1 - β2) · g²
        m̂  = m' / (1 - β1^t'),           v̂  = v' / (1 - β2^t')
        u  = -η(t) · m̂ / (√(v̂ + ε_root) + ε)

    With nesterov (= nadam), m̂ = β1 · m' / (1 - β1^(t'+1)) + (1 - β1) · g / (1 - β1^t').
    """
    _check_lr("adam", learning_rate)
    return chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def nadam(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
          eps: float = 1e-8, eps_root: float = 0.0, mu_dtype: Any = None, *,
          nesterov: bool = True) -> GradientTransformation:
    """NAdam (Dozat 2016): adam(..., nesterov=True)."""
    _check_lr("nadam", learning_rate)
    return adam(learning_rate, b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov)


def adamw(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
          eps: float = 1e-8, eps_root: float = 0.0, mu_dtype: Any = None,
          weight_decay: ScalarOrSchedule = 1e-4, mask: Any = None, *,
          nesterov: bool = False) -> GradientTransformation:
    """AdamW: Adam with decoupled weight decay (Loshchilov & Hutter 2019), as optax.adamw:

        t' = t + 1
        m' = β1 · m + (1 - β1) · g,      v' = β2 · v + (1 - β2) · g²
        m̂  = m' / (1 - β1^t'),           v̂  = v' / (1 - β2^t')
        u  = -η(t) · ( m̂ / (√(v̂ + ε_root) + ε) + λ · p )

    The decay λ · p is scaled by the learning rate but not by the Adam preconditioner
    (seed 001: p ← p − lr · (m̂ / (√v̂ + ε) + wd · p)). `mask` (pytree of bools, or a callable
    params -> pytree of bools) selects the leaves that decay; λ · p is dropped elsewhere
    (norm scales, biases). `update` needs `params`. Argument order as optax 0.2.8
    (eps_root and mu_dtype before weight_decay: pass weight_decay and mask by keyword).
    """
    _check_lr("adamw", learning_rate)
    _check_wd("adamw", weight_decay)
    return chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


def nadamw(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
           eps: float = 1e-8, eps_root: float = 0.0, mu_dtype: Any = None,
           weight_decay: ScalarOrSchedule = 1e-4, mask: Any = None, *,
           nesterov: bool = True) -> GradientTransformation:
    """NAdamW: adamw(..., nesterov=True)."""
    _check_lr("nadamw", learning_rate)
    return adamw(learning_rate, b1, b2, eps, eps_root, mu_dtype, weight_decay, mask,
                 nesterov=nesterov)


def adagrad(learning_rate: ScalarOrSchedule, initial_accumulator_value: float = 0.1,
            eps: float = 1e-7) -> GradientTransformation:
    """AdaGrad (Duchi et al. 2011):  G' = G + g²  (G_0 = initial value),
    u = -η(t) · g / √(G' + ε)."""
    _check_lr("adagrad", learning_rate)
    return chain(scale_by_rss(initial_accumulator_value, eps),
                 scale_by_learning_rate(learning_rate))


def adamax(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
           eps: float = 1e-8) -> GradientTransformation:
    """AdaMax:  m' = β1 m + (1 - β1) g,  v' = max(|g| + ε, β2 v),
    u = -η(t) · (m' / (1 - β1^t')) / v'."""
    _check_lr("adamax", learning_rate)
    return chain(scale_by_adamax(b1, b2, eps), scale_by_learning_rate(learning_rate))


def adamaxw(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
            eps: float = 1e-8, weight_decay: ScalarOrSchedule = 1e-4,
            mask: Any = None) -> GradientTransformation:
    """AdaMax with decoupled weight decay: u = -η(t) · (adamax step + λ · p)."""
    _check_lr("adamaxw", learning_rate)
    _check_wd("adamaxw", weight_decay)
    return chain(scale_by_adamax(b1, b2, eps), add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


def amsgrad(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
            eps: float = 1e-8, eps_root: float = 0.0, mu_dtype: Any = None,
            bias_correction_mu: bool = True,
            bias_correction_nu: bool = True) -> GradientTransformation:
    """AMSGrad (Reddi et al. 2018): u = -η(t) · m̂ / (√(max_{s<=t} v̂_s + ε_root) + ε)."""
    _check_lr("amsgrad", learning_rate)
    return chain(scale_by_amsgrad(b1, b2, eps, eps_root, mu_dtype, bias_correction_mu,
                                  bias_correction_nu),
                 scale_by_learning_rate(learning_rate))


def adabelief(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
              eps: float = 1e-16, eps_root: float = 1e-16, *,
              nesterov: bool = False) -> GradientTransformation:
    """AdaBelief (Zhuang et al. 2020): Adam with s' = β2 s + (1 - β2)(g - m')² + ε_root in
    place of v'; u = -η(t) · m̂ / (√ŝ + ε)."""
    _check_lr("adabelief", learning_rate)
    return chain(scale_by_belief(b1, b2, eps, eps_root, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def adadelta(learning_rate: ScalarOrSchedule | None = None, rho: float = 0.9,
             eps: float = 1e-6, weight_decay: ScalarOrSchedule = 0.0,
             weight_decay_mask: Any = None) -> GradientTransformation:
    """AdaDelta (Zeiler 2012), with optional weight decay added to g first:

        g̃ = g + λ · p,   E[g²]' = ρ E[g²] + (1 - ρ) g̃²
        Δ = √(E[Δ²] + ε) / √(E[g²]' + ε) · g̃,   E[Δ²]' = ρ E[Δ²] + (1 - ρ) Δ²
        u = -η(t) · Δ            (learning_rate None: u = Δ, as optax)
    """
    if learning_rate is not None:
        _check_lr("adadelta", learning_rate)
    return chain(add_decayed_weights(weight_decay, mask=weight_decay_mask),
                 scale_by_adadelta(rho, eps), scale_by_learning_rate(learning_rate))


def adafactor(learning_rate: ScalarOrSchedule | None = None,
              min_dim_size_to_factor: int = 128, decay_rate: float = 0.8,
              decay_offset: int = 0, multiply_by_parameter_scale: bool = True,
              clipping_threshold: float | None = 1.0, momentum: float | None = None,
              dtype_momentum: Any = "float32",
              weight_decay_rate: ScalarOrSchedule | None = None, eps: float = 1e-30,
              factored: bool = True, weight_decay_mask: Any = None) -> GradientTransformation:
    """Adafactor (Shazeer & Stern 2018), as optax.adafactor:

        ũ = scale_by_factored_rms(g)                       (factored second moments)
        ũ ← ũ / max(1, rms(ũ) / clipping_threshold)        (per leaf, if threshold given)
        ũ ← η(t) · ũ                                       (if a learning rate is given)
        ũ ← ũ · max(rms(p), 1e-3)                          (multiply_by_parameter_scale)
        ũ ← EMA_momentum(ũ)  (no debiasing)                (if momentum given)
        ũ ← ũ + λ · p                                      (if weight_decay_rate given)
        u = -ũ
    """
    if learning_rate is not None:
        _check_lr("adafactor", learning_rate)
    txs = [scale_by_factored_rms(factored, decay_rate, decay_offset, min_dim_size_to_factor,
                                 eps)]
    if clipping_threshold is not None:
        txs.append(clip_by_block_rms(clipping_threshold))
    if learning_rate is not None:
        txs.append(scale_by_learning_rate(learning_rate, flip_sign=False))
    if multiply_by_parameter_scale:
        txs.append(scale_by_param_block_rms())
    if momentum is not None:
        txs.append(ema(momentum, debias=False, accumulator_dtype=dtype_momentum))
    if weight_decay_rate is not None:
        txs.append(add_decayed_weights(weight_decay_rate, mask=weight_decay_mask))
    txs.append(scale(-1))
    return chain(*txs)


def lion(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.99,
         mu_dtype: Any = None, weight_decay: ScalarOrSchedule = 1e-3,
         mask: Any = None) -> GradientTransformation:
    """Lion (Chen et al. 2023):

        u  = -η(t) · ( sign((1 - β1) · g + β1 · m) + λ · p )
        m' = (1 - β2) · g + β2 · m
    """
    _check_lr("lion", learning_rate)
    _check_wd("lion", weight_decay)
    return chain(scale_by_lion(b1, b2, mu_dtype), add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


def lamb(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-6, eps_root: float = 0.0, weight_decay: ScalarOrSchedule = 0.0,
         mask: Any = None) -> GradientTransformation:
    """LAMB (You et al. 2020): the Adam step plus decay, rescaled per leaf by a trust ratio:

        a = m̂ / (√(v̂ + ε_root) + ε) + λ · p
        u = -η(t) · a · ‖p‖ / ‖a‖      (ratio 1 where a norm is 0)
    """
    _check_lr("lamb", learning_rate)
    _check_wd("lamb", weight_decay)
    return chain(scale_by_adam(b1, b2, eps, eps_root),
                 add_decayed_weights(weight_decay, mask), scale_by_trust_ratio(),
                 scale_by_learning_rate(learning_rate))


def lars(learning_rate: ScalarOrSchedule, weight_decay: ScalarOrSchedule = 0.0,
         weight_decay_mask: Any = True, trust_coefficient: float = 0.001, eps: float = 0.0,
         trust_ratio_mask: Any = True, momentum: float = 0.9,
         nesterov: bool = False) -> GradientTransformation:
    """LARS (You et al. 2017):

        a  = g + λ · p                         (on weight_decay_mask leaves)
        a ← a · c · ‖p‖ / (‖a‖ + ε)            (per leaf, on trust_ratio_mask leaves)
        m' = -η(t) · a + β · m;   u = m'       (u = -η(t) · a + β · m' with nesterov)
    """
    _check_lr("lars", learning_rate)
    _check_wd("lars", weight_decay)
    return chain(add_decayed_weights(weight_decay, mask=weight_decay_mask),
                 masked(scale_by_trust_ratio(trust_coefficient=trust_coefficient, eps=eps),
                        trust_ratio_mask),
                 scale_by_learning_rate(learning_rate),
                 trace(decay=momentum, nesterov=nesterov))


def fromage(learning_rate: ScalarOrSchedule, min_norm: float = 1e-6) -> GradientTransformation:
    """Fromage (Bernstein et al. 2020), per leaf:

        u = -η(t)/√(1 + η²) · g · ‖p‖ / ‖g‖  +  (1/√(1 + η²) - 1) · p
    """
    _check_lr("fromage", learning_rate)
    if not callable(learning_rate):
        mult = 1 / (1 + learning_rate ** 2) ** 0.5
        return chain(scale_by_trust_ratio(min_norm),
                     scale_by_learning_rate(learning_rate * mult),
                     add_decayed_weights(mult - 1))

    def mult_lr(count):
        return 1 / (1 + learning_rate(count) ** 2) ** 0.5

    return chain(scale_by_trust_ratio(min_norm),
                 scale_by_learning_rate(lambda c: mult_lr(c) * learning_rate(c)),
                 add_decayed_weights(lambda c: mult_lr(c) - 1))


def novograd(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.25,
             eps: float = 1e-6, eps_root: float = 0.0,
             weight_decay: float = 0.0) -> GradientTransformation:
    """NovoGrad (Ginsburg et al. 2019): layer-wise second moments (see scale_by_novograd);
    u = -η(t) · m'."""
    _check_lr("novograd", learning_rate)
    return chain(scale_by_novograd(b1, b2, eps, eps_root, weight_decay),
                 scale_by_learning_rate(learning_rate))


def noisy_sgd(learning_rate: ScalarOrSchedule, eta: float = 0.01, gamma: float = 0.55,
              key: Any = None, *, seed: int | None = None) -> GradientTransformation:
    """SGD with annealed Gaussian noise: u = -η(t) · (g + √(eta / t'^γ) · N(0, 1))."""
    _check_lr("noisy_sgd", learning_rate)
    return chain(add_noise(eta, gamma, key, seed=seed), scale_by_learning_rate(learning_rate))


def radam(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
          eps: float = 1e-8, eps_root: float = 0.0, threshold: float = 5.0, *,
          nesterov: bool = False) -> GradientTransformation:
    """Rectified Adam (Liu et al. 2020): see scale_by_radam; u = -η(t) · that."""
    _check_lr("radam", learning_rate)
    return chain(scale_by_radam(b1, b2, eps, eps_root, threshold, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def rmsprop(learning_rate: ScalarOrSchedule, decay: float = 0.9, eps: float = 1e-8,
            initial_scale: float = 0.0, eps_in_sqrt: bool = True, centered: bool = False,
            momentum: float | None = None, nesterov: bool = False,
            bias_correction: bool = False) -> GradientTransformation:
    """RMSProp (Hinton 2012; centered: Graves 2013):

        v' = ρ v + (1 - ρ) g²                   (centered: also m' = ρ m + (1 - ρ) g)
        a  = g / √(v' + ε)                      (centered: g / √(v' - m'² + ε))
        u  = -η(t) · a                          (momentum β: m' = -η(t) a + β m, u = m')
    (ε outside the root with eps_in_sqrt=False; v̂ bias-corrected with bias_correction.)
    """
    _check_lr("rmsprop", learning_rate)
    pre = (scale_by_stddev if centered else scale_by_rms)(
        decay=decay, eps=eps, initial_scale=initial_scale, eps_in_sqrt=eps_in_sqrt,
        bias_correction=bias_correction)
    return chain(pre, scale_by_learning_rate(learning_rate),
                 trace(decay=momentum, nesterov=nesterov) if momentum is not None
                 else identity())


def sm3(learning_rate: float, momentum: float = 0.9) -> GradientTransformation:
    """SM3 (Anil et al. 2019): see scale_by_sm3; u = -η · that (η a number, as optax)."""
    _check_hyper("sm3", "learning_rate", learning_rate, low=0.0)
    return chain(scale_by_sm3(momentum), scale(-learning_rate))


def yogi(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-3) -> GradientTransformation:
    """Yogi (Zaheer et al. 2018): see scale_by_yogi; u = -η(t) · that."""
    _check_lr("yogi", learning_rate)
    return chain(scale_by_yogi(b1=b1, b2=b2, eps=eps), scale_by_learning_rate(learning_rate))


def sign_sgd(learning_rate: ScalarOrSchedule) -> GradientTransformation:
    """signSGD (Bernstein et al. 2018): u = -η(t) · sign(g)."""
    _check_lr("sign_sgd", learning_rate)
    return chain(scale_by_sign(), scale_by_learning_rate(learning_rate))


def signum(learning_rate: ScalarOrSchedule, beta: float = 0.9,
           accumulator_dtype: Any = None) -> GradientTransformation:
    """Signum: m' = β m + (1 - β) g,  u = -η(t) · sign(m')."""
    _check_lr("signum", learning_rate)
    return chain(ema(beta, debias=False, accumulator_dtype=accumulator_dtype),
                 scale_by_sign(), scale_by_learning_rate(learning_rate))


def polyak_sgd(max_learning_rate: float = 1.0, scaling: ScalarOrSchedule = 1.0,
               f_min: float = 0.0, eps: float = 0.0,
               variant: str = "sps") -> GradientTransformation:
    """SGD with the Polyak step size (Loizou et al. 2021); update needs `value=loss`:

        u = -s(t) · min((f(x) - f*) / (‖g‖² + ε), max_learning_rate) · g
    """
    return chain(sgd(learning_rate=scaling),
                 scale_by_polyak(max_learning_rate=max_learning_rate, f_min=f_min, eps=eps,
                                 variant=variant))
