"""Specs of conv_general_dilated (and lax.conv_transpose built on it).

The reference is the definition, looped: every output element sums lhs · rhs over its
window, each lhs index found from the padded, dilated coordinate (so negative pads, lhs
and rhs dilation and strides need no array manipulation that could share a bug with the
backend's unfolding). Cases: 1-, 2- and 3-d; the default and channels-last layouts and a
scrambled one; SAME padding with strides; negative pads; both dilations; feature groups
(depthwise too) and batch groups; an output with no elements; complex64; int32, int8
with an int32 preferred_element_type, and bool (any(lhs and rhs) over the window).
"""
import itertools

import numpy as np

from fnad.primitives import convolution as cv
from specs import Arg, Spec

f32, c64, i32, i8 = np.float32, np.complex64, np.int32, np.int8


def _loop_conv(lhs, rhs, strides, padding, lhs_dil, rhs_dil, dn, G, B, out_dtype):
    lspec, rspec, ospec = dn
    x = np.transpose(lhs, lspec).astype(np.complex128 if lhs.dtype.kind == "c" else
                                        np.float64 if lhs.dtype.kind == "f" else np.int64)
    w = np.transpose(rhs, rspec).astype(x.dtype)
    N, C, S = x.shape[0], x.shape[1], x.shape[2:]
    O, I, K = w.shape[0], w.shape[1], w.shape[2:]
    groups = max(G, B)
    Y = cv.conv_out_spatial(S, K, window_strides=strides, padding=padding,
                            lhs_dilation=lhs_dil, rhs_dilation=rhs_dil)
    out = np.zeros((N // B, O) + Y, x.dtype)
    for n_out, o in itertools.product(range(N // B), range(O)):
        g = o // (O // groups)
        n = g * (N // B) + n_out if B > 1 else n_out
        chans = [(c, c) for c in range(C)] if B > 1 else [(g * I + i, i) for i in range(I)]
        for y in itertools.product(*map(range, Y)):
            total = 0
            for (c, i), k in itertools.product(chans, itertools.product(*map(range, K))):
                idx = []
                for yd, kd, s, (lo, _), ld, rd, n_sp in zip(y, k, strides, padding, lhs_dil,
                                                            rhs_dil, S):
                    q = yd * s + kd * rd - lo          # position in the dilated lhs
                    if q < 0 or q % ld or q // ld >= n_sp:
                        break                          # a pad or a dilation hole: zero
                    idx.append(q // ld)
                else:
                    total += x[(n, c, *idx)] * w[(o, i, *k)]
            out[(n_out, o, *y)] = total
    out = np.transpose(out, np.argsort(ospec))
    return out != 0 if out_dtype == np.bool_ else out.astype(out_dtype)


def conv(ls, rs, name, *, strides=None, padding="VALID", lhs_dilation=None,
         rhs_dilation=None, dimension_numbers=None, groups=1, batch_groups=1, dtype=f32,
         pet=None, diff=None, **kw):
    """A conv_general_dilated spec; the reference is `_loop_conv` on the same params."""
    n = len(ls) - 2
    strides = strides or (1,) * n
    dn = cv.conv_dimension_numbers(ls, rs, dimension_numbers)
    ld, rd = lhs_dilation or (1,) * n, rhs_dilation or (1,) * n
    if isinstance(padding, str):
        window = [cv._dilate(rs[d], r) for d, r in zip(dn.rhs_spec[2:], rd)]
        pads = cv.padtype_to_pads([ls[d] for d in dn.lhs_spec[2:]], window, strides, padding)
    else:
        pads = padding
    params = dict(lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
                  dimension_numbers=dimension_numbers, feature_group_count=groups,
                  batch_group_count=batch_groups, preferred_element_type=pet)

    def ref(lhs, rhs):
        out_dt = np.dtype(pet) if pet is not None else lhs.dtype
        return _loop_conv(lhs, rhs, strides, pads, ld, rd, dn, groups, batch_groups, out_dt)

    domain = (-3, 3) if np.dtype(dtype).kind in "iu" else (-2.0, 2.0)
    return Spec(cv.conv_general_dilated_p,
                lambda lhs, rhs: cv.conv_general_dilated(lhs, rhs, strides, padding, **params),
                ref, (Arg(ls, dtype, domain), Arg(rs, dtype, domain)),
                jax_fun=lambda jax, lhs, rhs: jax.lax.conv_general_dilated(
                    lhs, rhs, strides, padding, **params),
                linear=(0, 1) if diff is None else (), diff=diff, name=name, **kw)


def conv_transpose(ls, rs, name, strides, padding, **kw):
    """A lax.conv_transpose spec (channels-last defaults); the reference is the loop on
    the convolution it stands for, its lhs dilated by the strides."""
    n = len(ls) - 2
    dn = cv.conv_dimension_numbers(ls, rs, cv._TRANSPOSE_LAYOUTS[len(ls)])
    window = [rs[d] for d in dn.rhs_spec[2:]]
    pads = [cv._conv_transpose_pads(k, s, padding) for k, s in zip(window, strides)]

    def ref(lhs, rhs):
        return _loop_conv(lhs, rhs, (1,) * n, pads, strides, (1,) * n, dn, 1, 1, lhs.dtype)

    return Spec(cv.conv_general_dilated_p,
                lambda lhs, rhs: cv.conv_transpose(lhs, rhs, strides, padding),
                ref, (Arg(ls), Arg(rs)),
                jax_fun=lambda jax, lhs, rhs: jax.lax.conv_transpose(lhs, rhs, strides,
                                                                     padding),
                linear=(0, 1), name=name, **kw)


SPECS = [
    conv((2, 3, 6, 5), (4, 3, 3, 2), "2d-valid"),
    conv((2, 7, 6, 3), (3, 3, 3, 4), "2d-nhwc-same-stride2", strides=(2, 2), padding="SAME",
         dimension_numbers=("NHWC", "HWIO", "NHWC")),
    conv((2, 2, 7), (3, 2, 3), "1d-negative-pads-stride2", strides=(2,),
         padding=((2, -1),)),
    conv((1, 2, 4, 5), (2, 2, 2, 3), "2d-lhs-and-rhs-dilation", strides=(2, 1),
         padding=((1, 2), (0, 1)), lhs_dilation=(2, 1), rhs_dilation=(1, 2)),
    conv((2, 4, 6), (6, 2, 3), "1d-feature-groups", padding="SAME", groups=2),
    conv((1, 3, 5, 4), (3, 1, 2, 2), "2d-depthwise", padding=((1, 0), (0, 1)), groups=3),
    conv((4, 2, 6), (4, 2, 2), "1d-batch-groups", strides=(2,), batch_groups=2),
    conv((5, 3, 2), (2, 3, 4), "1d-scrambled-layout", padding=((1, 1),),
         dimension_numbers=("WCN", "WIO", "CWN")),
    conv((1, 2, 3, 4, 3), (2, 2, 2, 2, 2), "3d-same", padding="SAME", strides=(1, 2, 1)),
    conv((2, 2, 3), (3, 2, 4), "1d-window-too-big", rtol=0, atol=0),
    conv((2, 2, 5), (2, 2, 3), "complex64", padding="SAME", dtype=c64, rtol=1e-5, atol=1e-5),
    conv((2, 3, 5), (2, 3, 2), "int32", dtype=i32, strides=(2,), diff=()),
    conv((2, 3, 5), (2, 3, 2), "int8-to-int32", dtype=i8, pet=i32, diff=()),
    conv((2, 3, 6), (2, 3, 2), "bool", dtype=np.bool_, diff=()),
    conv_transpose((2, 4, 3), (3, 3, 2), "transpose-1d-same-stride2", (2,), "SAME"),
    conv_transpose((1, 3, 2, 2), (2, 2, 2, 3), "transpose-2d-valid", (2, 1), "VALID"),
]
