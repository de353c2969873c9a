"""Specs of dot_general (and the lax wrappers dot and batch_matmul built on it).

References are np.einsum with explicit subscripts; output dims are batch, lhs free,
rhs free. bfloat16/float16 cases accumulate in float32 (the reference does too).
"""
import ml_dtypes
import numpy as np

from fnad.primitives import linalg as la
from specs import Arg, Spec

f32, f16, c64, i32, i8 = np.float32, np.float16, np.complex64, np.int32, np.int8
bf16 = ml_dtypes.bfloat16


def dg(ls, rs, dn, subscripts, ldt=f32, rdt=None, pet=None, name="", diff=None, **kw):
    """A dot_general spec: shapes, dimension numbers and the equivalent einsum."""
    rdt = ldt if rdt is None else rdt
    lin = (0, 1) if diff is None else ()

    def ref(l, r):
        out_dt = np.result_type(l, r) if pet is None else np.dtype(pet)
        acc = f32 if out_dt in (np.dtype(f16), np.dtype(bf16)) else out_dt
        return np.einsum(subscripts, l.astype(acc), r.astype(acc)).astype(out_dt)

    return Spec(la.dot_general_p,
                lambda l, r: la.dot_general(l, r, dn, preferred_element_type=pet), ref,
                (Arg(ls, ldt, (-2, 2) if np.dtype(ldt).kind in "iu" else (-2.0, 2.0)),
                 Arg(rs, rdt, (-2, 2) if np.dtype(rdt).kind in "iu" else (-2.0, 2.0))),
                jax_fun=lambda jax, l, r: jax.lax.dot_general(l, r, dn,
                                                              preferred_element_type=pet),
                linear=lin, diff=diff, name=name, **kw)


NO_BATCH = ((), ())
SPECS = [
    dg((3, 4), (4, 5), (((1,), (0,)), NO_BATCH), "ij,jk->ik", name="matmul"),
    dg((3, 4), (4,), (((1,), (0,)), NO_BATCH), "ij,j->i", name="matvec"),
    dg((4,), (4,), (((0,), (0,)), NO_BATCH), "i,i->", name="vecvec-rank0"),
    dg((3,), (2,), (((), ()), NO_BATCH), "i,j->ij", name="outer"),
    dg((), (3,), (((), ()), NO_BATCH), ",j->j", name="scalar"),
    dg((3, 5), (4, 5), (((1,), (1,)), NO_BATCH), "ij,kj->ik", name="x-at-w-T"),
    dg((2, 3, 4), (4, 6), (((2,), (0,)), NO_BATCH), "btc,cf->btf", name="BTC-at-CF"),
    dg((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,))), "bij,bjk->bik", name="bmm"),
    dg((3, 2, 4), (4, 5, 2), (((2,), (0,)), ((1,), (2,))), "ibj,jkb->bik",
       name="batch-not-leading"),
    dg((2, 3, 4, 5), (4, 2, 5, 6), (((2, 3), (0, 2)), ((0,), (1,))), "bijk,jbkl->bil",
       name="two-contractions"),
    dg((3, 4, 5), (5, 4), (((2, 1), (0, 1)), NO_BATCH), "ijk,kj->i", name="unsorted-contract"),
    dg((2, 2, 3), (2, 3, 2), (((2,), (1,)), ((0, 1), (0, 2))), "abj,ajb->ab",
       name="two-batch-dims"),
    dg((3, 0), (0, 4), (((1,), (0,)), NO_BATCH), "ij,jk->ik", name="empty-contraction"),
    dg((0, 3), (3, 4), (((1,), (0,)), NO_BATCH), "ij,jk->ik", name="empty-free"),
    dg((3, 4), (4, 2), (((1,), (0,)), NO_BATCH), "ij,jk->ik", ldt=c64, name="complex64",
       rtol=1e-5, atol=1e-5),
    dg((2, 3, 4), (2, 4, 2), (((2,), (1,)), ((0,), (0,))), "bij,bjk->bik", ldt=c64,
       name="complex64-bmm", rtol=1e-5, atol=1e-5),
    dg((3, 4), (4, 5), (((1,), (0,)), NO_BATCH), "ij,jk->ik", ldt=i32, name="int32", diff=()),
    dg((3, 4), (4,), (((1,), (0,)), NO_BATCH), "ij,j->i", ldt=i8, pet=i32,
       name="int8-to-int32", diff=()),
    dg((3, 4), (4, 2), (((1,), (0,)), NO_BATCH), "ij,jk->ik", ldt=i8, pet=f32,
       name="int8-to-f32", diff=()),
    dg((4, 8), (8, 3), (((1,), (0,)), NO_BATCH), "ij,jk->ik", ldt=bf16, pet=f32,
       name="bf16-f32-accumulate", diff=()),
    dg((4, 8), (8, 3), (((1,), (0,)), NO_BATCH), "ij,jk->ik", ldt=bf16, name="bf16",
       diff=(), rtol=1e-2, atol=1e-2),
    dg((4, 8), (8, 3), (((1,), (0,)), NO_BATCH), "ij,jk->ik", ldt=f16, name="f16",
       diff=(), rtol=1e-2, atol=1e-2),
    dg((3, 4), (4, 2), (((1,), (0,)), NO_BATCH), "ij,jk->ik", ldt=f32, rdt=bf16,
       name="mixed-f32-bf16", diff=()),
    Spec(la.dot_general_p, lambda l, r: la.dot(l, r), lambda l, r: l @ r,
         (Arg((3, 4)), Arg((4, 2))), jax_fun=lambda jax, l, r: jax.lax.dot(l, r),
         linear=(0, 1), name="lax.dot"),
    Spec(la.dot_general_p, lambda l, r: la.dot(l, r, precision="highest"), lambda l, r: l @ r,
         (Arg((4,)), Arg((4, 2))),
         jax_fun=lambda jax, l, r: jax.lax.dot(l, r, precision="highest"),
         linear=(0, 1), name="lax.dot-vector-highest"),
    Spec(la.dot_general_p, lambda l, r: la.batch_matmul(l, r), lambda l, r: l @ r,
         (Arg((2, 3, 3, 4)), Arg((2, 3, 4, 2))),
         jax_fun=lambda jax, l, r: jax.lax.batch_matmul(l, r),
         linear=(0, 1), name="lax.batch_matmul"),
]
