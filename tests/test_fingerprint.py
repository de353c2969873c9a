"""ir.fingerprint: a digest of a program that every process computes the same, so that a
compiled program stored on disk (the numba backend's saved programs) is found by it. Two
programs that differ in anything evaluation reads must differ in it; one that holds
something without a stable form (a user's primitive, a callback) has none."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fnad
import fnad.numpy as jnp
from fnad import core, lax
from fnad.ir import fingerprint
from fnad.primitives import Primitive, ShapedArray


def fp(f, *args):
    return fingerprint(fnad.make_jaxpr(f)(*args))


X = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
W = np.arange(6, dtype=np.float32).reshape(2, 3)


def test_the_same_program_traced_twice_has_one_fingerprint():
    f = lambda x, y: jnp.sum(jnp.sin(x) * 2.0 + y, axis=0)            # noqa: E731
    a, b = fp(f, X, X), fp(lambda x, y: jnp.sum(jnp.sin(x) * 2.0 + y, axis=0), X, X)
    assert a is not None and len(a) == 32
    assert a == b


def test_programs_that_compute_different_things_differ():
    base = lambda x, y: jnp.sum(jnp.sin(x) * 2.0 - y, axis=0)         # noqa: E731
    variants = {
        "base": fp(base, X, X),
        "literal": fp(lambda x, y: jnp.sum(jnp.sin(x) * 3.0 - y, axis=0), X, X),
        "-0.0 literal": fp(lambda x, y: jnp.sum(jnp.sin(x) * -0.0 - y, axis=0), X, X),
        "0.0 literal": fp(lambda x, y: jnp.sum(jnp.sin(x) * 0.0 - y, axis=0), X, X),
        "param": fp(lambda x, y: jnp.sum(jnp.sin(x) * 2.0 - y, axis=1), X, X),
        "primitive": fp(lambda x, y: jnp.sum(jnp.cos(x) * 2.0 - y, axis=0), X, X),
        "wiring": fp(lambda x, y: jnp.sum(jnp.sin(y) * 2.0 - x, axis=0), X, X),
        "operand order": fp(lambda x, y: jnp.sum(y - jnp.sin(x) * 2.0, axis=0), X, X),
        "shape": fp(base, X.reshape(3, 2), X.reshape(3, 2)),
        "dtype": fp(base, X.astype(np.float16), X.astype(np.float16)),
        "scalar": fp(base, X, np.float32(1.0)),
        "weak type": fp(base, X, 1.0),
        "constant": fp(lambda x, y: jnp.sum(jnp.sin(x) * 2.0 - y - W, axis=0), X, X),
        "constant value": fp(lambda x, y: jnp.sum(jnp.sin(x) * 2.0 - y - W[::-1], axis=0),
                             X, X),
        "output": fp(lambda x, y: (jnp.sum(jnp.sin(x) * 2.0 - y, axis=0), x), X, X),
    }
    assert None not in variants.values()
    seen = {}
    for name, digest in variants.items():
        assert digest not in seen, f"{name} has the fingerprint of {seen.get(digest)}"
        seen[digest] = name


def test_sub_jaxprs_and_structured_params():
    def f(x, i):
        g = lax.cond(i > 0, lambda v: jnp.tanh(v), lambda v: v * 2.0, x)
        return g[jnp.array([1, 0])] + lax.scan(lambda c, v: (c + v, c), 0.0, x[0])[1].sum()
    a = fp(f, X, 1)
    b = fp(lambda x, i: f(x, i) + 0.0, X, 1)
    assert a is not None and b is not None and a != b

    def g(x, i):                                    # another branch body: another program
        h = lax.cond(i > 0, lambda v: jnp.tanh(v), lambda v: v * 3.0, x)
        return h[jnp.array([1, 0])] + lax.scan(lambda c, v: (c + v, c), 0.0, x[0])[1].sum()
    assert fp(g, X, 1) not in (a, None)


_CHILD = textwrap.dedent("""
    import numpy as np
    import fnad, fnad.numpy as jnp
    from fnad import lax
    from fnad.ir import fingerprint
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    def f(x, i):
        g = lax.cond(i > 0, lambda v: jnp.tanh(v), lambda v: v * 2.0, x)
        s = fnad.nn.softmax(g, axis=-1)[jnp.array([1, 0])]
        return fnad.grad(lambda z: jnp.sum(fnad.nn.gelu(z) ** 2))(s), jnp.argsort(x, axis=1)
    print(fingerprint(fnad.make_jaxpr(f)(x, 1)).hex())
""")


def test_fingerprint_is_the_same_in_other_processes():
    """String hashes differ between processes (PYTHONHASHSEED): the fingerprint must not."""
    digests = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", _CHILD], env=env, check=True,
                             capture_output=True, text=True, timeout=120).stdout
        digests.add(out.strip())
    assert len(digests) == 1 and len(next(iter(digests))) == 64


def test_no_fingerprint_for_a_user_primitive_or_a_callback(scratch_primitives):
    p = Primitive("twice")
    p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype, x.weak_type))
    p.def_impl(lambda x: x * 2)
    assert fp(lambda x: p.bind(x) + 1.0, X) is None
    shadow = Primitive("sin")                       # a user's primitive with fnad's name
    shadow.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype, x.weak_type))
    assert fp(lambda x: shadow.bind(x) + 1.0, X) is None
    assert fp(lambda x: jnp.sin(x) + 1.0, X) is not None

    def with_print(x):
        fnad.debug.callback(lambda v: None, x)
        return x + 1.0
    assert fp(with_print, X) is None


def test_a_custom_jvp_rule_is_not_part_of_the_fingerprint():
    """Evaluating the program never calls the rule: two rules, one forward program."""
    def make(scale):
        @fnad.custom_jvp
        def f(x):
            return jnp.exp(x)

        @f.defjvp
        def f_jvp(primals, tangents):
            return f(primals[0]), tangents[0] * scale
        return f
    a = fp(lambda x: make(1.0)(x) * 2.0, X)
    b = fp(lambda x: make(5.0)(x) * 2.0, X)
    c = fp(lambda x: make(1.0)(x) * 3.0, X)
    assert a is not None and a == b and c != a


def test_fnads_primitives_pickle_by_name_and_users_do_not(scratch_primitives):
    from fnad.primitives.elementwise import sin_p
    assert pickle.loads(pickle.dumps(sin_p)) is sin_p
    assert core.builtin_primitive("sin") is sin_p
    assert core.builtin_primitive("no such primitive") is None
    mine = Primitive("mine")
    assert core.builtin_primitive("mine") is None
    with pytest.raises(pickle.PicklingError, match="'mine' is not one of fnad's"):
        pickle.dumps(mine)


def test_avals_pickle_without_their_cached_hash():
    a = core.ShapedArray((2, 3), np.float32, weak_type=True)
    hash(a)
    b = pickle.loads(pickle.dumps(a))
    assert b == a and b._hash is None and hash(b) == hash(a)


def test_anything_but_a_closed_jaxpr_is_a_type_error():
    closed = fnad.make_jaxpr(jnp.sin)(X)
    with pytest.raises(TypeError, match="takes a ClosedJaxpr .* got Jaxpr"):
        fingerprint(closed.jaxpr)
    with pytest.raises(TypeError, match="got function"):
        fingerprint(jnp.sin)


def test_the_digest_depends_on_the_program_not_on_shared_objects(monkeypatch):
    """The form is serialized without marshal's references, whose use depends on reference
    counts: whether a part of it is also held elsewhere (the dtype forms' cache) must not
    change the digest."""
    from fnad import ir

    class Forgetful(dict):                    # a cache that keeps nothing
        def __setitem__(self, key, value):
            pass
    closed = fnad.make_jaxpr(lambda x, i: (jnp.sin(x) * 2, i + 1))(X, np.int32(3))
    cached = fingerprint(closed)
    assert ir._DTYPE_FORMS                    # the forms held by the cache too
    monkeypatch.setattr(ir, "_DTYPE_FORMS", Forgetful())
    assert fingerprint(closed) == cached
