"""Spectral windows for fnad.scipy.signal's stft/istft/csd/welch: the names and tuples that
scipy.signal.get_window takes (periodic, "fftbins" windows), built in NumPy float64.

A window is a constant of the program (its name and length are static), so it is made
once on the host and enters traced code as a literal; only the data it multiplies is
differentiated. jax.scipy.signal computes "hann" itself and asks SciPy for the others;
fnad needs no SciPy: an unknown name is a ValueError listing the known ones.

The periodic window of length M is the symmetric one of length M + 1 without its last
sample (SciPy's fftbins=True); a window of length 1 is [1].
"""
from __future__ import annotations

import numpy as np

# name -> coefficients a_k of the general cosine window Σ_k a_k cos(k t),
# t = linspace(-π, π, M)
_COSINE_SUMS = {
    "hann": (0.5, 0.5),
    "hamming": (0.54, 0.46),
    "blackman": (0.42, 0.50, 0.08),
    "nuttall": (0.3635819, 0.4891775, 0.1365995, 0.0106411),
    "blackmanharris": (0.35875, 0.48829, 0.14128, 0.01168),
    "flattop": (0.21557895, 0.41663158, 0.277263158, 0.083578947, 0.006947368),
}

_ALIASES = {
    "boxcar": "boxcar", "box": "boxcar", "ones": "boxcar", "rect": "boxcar",
    "rectangular": "boxcar",
    "triang": "triang", "triangle": "triang", "tri": "triang",
    "bartlett": "bartlett", "bart": "bartlett", "brt": "bartlett",
    "hann": "hann", "han": "hann",
    "hamming": "hamming", "hamm": "hamming", "ham": "hamming",
    "blackman": "blackman", "black": "blackman", "blk": "blackman",
    "nuttall": "nuttall", "nutl": "nuttall", "nut": "nuttall",
    "blackmanharris": "blackmanharris", "blackharr": "blackmanharris",
    "bkh": "blackmanharris",
    "flattop": "flattop", "flat": "flattop", "flt": "flattop",
    "cosine": "cosine", "halfcosine": "cosine",
    "tukey": "tukey", "tuk": "tukey",
    "kaiser": "kaiser", "ksr": "kaiser",
    "gaussian": "gaussian", "gauss": "gaussian", "gss": "gaussian",
    "general_hamming": "general_hamming",
}
# windows that need a parameter: (name, parameter) tuples; tukey's defaults to 0.5
_PARAMETRIC = {"tukey": 0.5, "kaiser": None, "gaussian": None, "general_hamming": None}


def _symmetric(name: str, M: int, param) -> np.ndarray:
    """The symmetric window `name` of length M >= 2."""
    n = np.arange(M, dtype=np.float64)
    if name == "boxcar":
        return np.ones(M)
    if name in _COSINE_SUMS or name == "general_hamming":
        coefs = (param, 1.0 - param) if name == "general_hamming" else _COSINE_SUMS[name]
        t = np.linspace(-np.pi, np.pi, M)
        return sum(a * np.cos(k * t) for k, a in enumerate(coefs))
    if name == "triang":                       # never reaches 0 (unlike bartlett)
        half = np.arange(1, (M + 1) // 2 + 1, dtype=np.float64)
        if M % 2 == 0:
            w = (2 * half - 1) / M
            return np.concatenate([w, w[::-1]])
        w = 2 * half / (M + 1)
        return np.concatenate([w, w[-2::-1]])
    if name == "bartlett":
        return np.where(n <= (M - 1) / 2, 2 * n / (M - 1), 2 - 2 * n / (M - 1))
    if name == "cosine":
        return np.sin(np.pi / M * (n + 0.5))
    if name == "kaiser":
        centre = (M - 1) / 2
        return np.i0(param * np.sqrt(1 - ((n - centre) / centre) ** 2)) / np.i0(param)
    if name == "gaussian":
        return np.exp(-((n - (M - 1) / 2) ** 2) / (2 * param ** 2))
    if name == "tukey":                        # flat top, cosine tapers of width α(M-1)/2
        if param <= 0:
            return np.ones(M)
        if param >= 1:
            return _symmetric("hann", M, None)
        width = int(np.floor(param * (M - 1) / 2))
        w = np.ones(M)
        lo, hi = n[:width + 1], n[M - width - 1:]
        w[:width + 1] = 0.5 * (1 + np.cos(np.pi * (-1 + 2 * lo / param / (M - 1))))
        w[M - width - 1:] = 0.5 * (1 + np.cos(np.pi * (-2 / param + 1 +
                                                       2 * hi / param / (M - 1))))
        return w
    raise AssertionError(name)


def get_window(window, nx: int) -> np.ndarray:
    """The periodic window `window` (a name, or a (name, parameter) tuple) of length nx,
    as scipy.signal.get_window(window, nx) (float64)."""
    if isinstance(window, tuple):
        if not window:
            raise ValueError("window: an empty tuple names no window")
        name, args = window[0], window[1:]
    else:
        name, args = window, ()
    key = _ALIASES.get(name.lower() if isinstance(name, str) else name)
    if key is None:
        raise ValueError(f"window {window!r} is not supported; known names: "
                         f"{sorted(set(_ALIASES.values()))} (tukey, kaiser, gaussian and "
                         "general_hamming as (name, parameter) tuples)")
    if key in _PARAMETRIC:
        if len(args) > 1 or (not args and _PARAMETRIC[key] is None):
            raise ValueError(f"window {window!r}: the {key!r} window takes one parameter, "
                             f"as a tuple ({key!r}, value)")
        param = float(args[0]) if args else _PARAMETRIC[key]
    elif args:
        raise ValueError(f"window {window!r}: the {key!r} window takes no parameter")
    else:
        param = None
    if nx < 1:
        raise ValueError(f"window length must be at least 1, got {nx}")
    if nx == 1:
        return np.ones(1)
    return _symmetric(key, nx + 1, param)[:-1]
