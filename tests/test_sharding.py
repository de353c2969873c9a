"""fnad.sharding (jax.sharding's names on one device) against jax on its one CPU device:
shard_map with collectives over size-1 mesh axes (values, and under jit, grad and vmap),
with_sharding_constraint under jit and grad, device_put with a NamedSharding, the
attributes of Mesh / NamedSharding / PartitionSpec, set_mesh, and the errors (a mesh
bigger than the device count, a spec longer than the value's rank, an unknown axis name,
specs that do not match the arguments)."""
from __future__ import annotations

import numpy as np
import pytest
from checks import assert_trees_close, raises_with, traced

import fnad
import fnad.numpy as fnp
from fnad import P, lax
from fnad.sharding import Mesh, NamedSharding, SingleDeviceSharding

try:
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover - exercised only without the dev extra
    jax = jnp = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed (the oracle)")
RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((3, 4)).astype(np.float32)


def fnad_mesh():
    return fnad.make_mesh((1, 1), ("x", "y"))


def jax_mesh():
    auto = jax.sharding.AxisType.Auto        # jax's default Explicit axes check arg shardings
    return jax.make_mesh((1, 1), ("x", "y"), axis_types=(auto, auto))


# name: (f(lax, a, b) for one shard, in_specs, out_specs) — the same code for fnad and jax
CASES = {
    "psum, replicated out": (lambda L, a, b: L.psum(a, "x") * b, (P("x"), P()), P()),
    "pmean over two axes": (lambda L, a, b: L.pmean(a * b, ("x", "y")), (P("x", "y"), None),
                            P("x", "y")),
    "axis_index, axis_size": (lambda L, a, b: a * (L.axis_index("y") + 1) + b *
                              L.axis_size("x"), (P(("x", "y")), P()), P(("x", "y"))),
    "all_gather": (lambda L, a, b: L.all_gather(a, "x") + b, (P("x"), P()), P("x")),
    "all_gather tiled, pytree out": (lambda L, a, b: {"g": L.all_gather(a, "y", tiled=True),
                                                      "s": (L.psum(b, "y"),)},
                                     (P(None, "y"), P()), {"g": P(None, "y"), "s": P()}),
    "ppermute, psum_scatter": (lambda L, a, b: L.ppermute(a, "x", [(0, 0)]) +
                               L.psum_scatter(b, "y", tiled=True), P(), P("x", "y")),
}


def _pair(case):
    f, in_specs, out_specs = CASES[case]
    mine = fnad.shard_map(lambda a, b: f(lax, a, b), mesh=fnad_mesh(), in_specs=in_specs,
                          out_specs=out_specs)
    jax_specs = jax.tree_util.tree_map(lambda s: None if s is None else jax.P(*s),
                                       (in_specs, out_specs), is_leaf=lambda s: isinstance(
                                           s, P) or s is None)
    theirs = jax.shard_map(lambda a, b: f(jax.lax, a, b), mesh=jax_mesh(),
                           in_specs=jax_specs[0], out_specs=jax_specs[1])
    return mine, theirs


def _total(out):
    return sum((leaf ** 2).sum() for leaf in fnad.tree_util.tree_leaves(out))


def _jtotal(out):
    return sum((leaf ** 2).sum() for leaf in jax.tree_util.tree_leaves(out))


@needs_jax
@pytest.mark.parametrize("case", list(CASES))
def test_shard_map_matches_jax(case):
    """Values, jit, grad and vmap of a shard_map'd function: each shard is the whole
    array and each mesh axis a one-member named axis, as on jax's one device."""
    mine, theirs = _pair(case)
    assert_trees_close(mine(A, B), theirs(A, B), 1e-6, 1e-6, f"{case}: value")
    assert_trees_close(traced(mine)(A, B), jax.jit(theirs)(A, B), 1e-6, 1e-6, f"{case}: jit")
    g = fnad.grad(lambda a, b: _total(mine(a, b)), argnums=(0, 1))(A, B)
    jg = jax.grad(lambda a, b: _jtotal(theirs(a, b)), argnums=(0, 1))(A, B)
    assert_trees_close(g, jg, 1e-5, 1e-5, f"{case}: grad")
    AB = np.stack([A, 2 * A])
    assert_trees_close(fnad.vmap(mine, in_axes=(0, None))(AB, B),
                       jax.vmap(theirs, in_axes=(0, None))(AB, B), 1e-6, 1e-6, f"{case}: vmap")


@needs_jax
def test_shard_map_decorator_set_mesh_and_experimental():
    """Decorator form with the mesh from set_mesh; the mesh is restored after `with`;
    the old fnad.experimental.shard_map signature gives the same."""
    from fnad.experimental.shard_map import shard_map as old_shard_map
    m = fnad_mesh()
    with fnad.set_mesh(m) as current:
        assert current == m and fnad.sharding.get_mesh() == m

        @fnad.shard_map(in_specs=P("x"), out_specs=P("x"))
        def f(a):
            return lax.psum(a, "x") + lax.axis_index("x")
        got = f(A)
    assert fnad.sharding.get_mesh().empty
    with jax.sharding.set_mesh(jax_mesh()):
        want = jax.shard_map(lambda a: jax.lax.psum(a, "x") + jax.lax.axis_index("x"),
                             in_specs=jax.P("x"), out_specs=jax.P("x"))(A)
    np.testing.assert_allclose(got, want)
    old = old_shard_map(lambda a: lax.psum(a, ("x", "y")), m, P("x"), P("x"), check_rep=False)
    np.testing.assert_allclose(old(A), want)
    # axis_names binds only those mesh axes; the others are unbound in f
    only_x = fnad.shard_map(lambda a: lax.psum(a, "y"), mesh=m, in_specs=P("x"),
                            out_specs=P("x"), axis_names={"x"})
    raises_with(lambda: only_x(A), "unbound axis name", "'y'", exc=NameError)


@needs_jax
def test_with_sharding_constraint_under_jit_and_grad():
    m, jm = fnad_mesh(), jax_mesh()
    mine = (lax, NamedSharding(m, P("x", None)), NamedSharding(m, P()))
    theirs = (jax.lax, jax.NamedSharding(jm, jax.P("x", None)), jax.NamedSharding(jm, jax.P()))

    def f(L, sharding, replicated, a):
        h = L.with_sharding_constraint(a * a, sharding)
        return L.with_sharding_constraint({"h": h, "c": (h.sum(),)}, {"h": sharding,
                                                                     "c": replicated})

    def loss(L, sharding, replicated, a):
        out = f(L, sharding, replicated, a)
        return (out["h"] * 3).sum() + out["c"][0]
    assert_trees_close(traced(lambda a: f(*mine, a))(A), jax.jit(lambda a: f(*theirs, a))(A),
                       1e-6, 1e-6, "jit")
    assert_trees_close(fnad.jit(fnad.grad(lambda a: loss(*mine, a)))(A),
                       jax.jit(jax.grad(lambda a: loss(*theirs, a)))(A), 1e-6, 1e-6, "grad")
    s = mine[1]
    # under vmap the spec constrains one member's rank (2 here)
    out = fnad.vmap(lambda a: lax.with_sharding_constraint(a, s))(np.stack([A, A]))
    np.testing.assert_array_equal(out, np.stack([A, A]))
    with fnad.set_mesh(fnad_mesh()):                            # a bare spec: the set mesh
        np.testing.assert_array_equal(lax.with_sharding_constraint(A, P("y")), A)
    single = SingleDeviceSharding(fnad.devices(fnad.default_backend())[0])
    np.testing.assert_array_equal(lax.with_sharding_constraint(A, single), A)


@needs_jax
def test_mesh_sharding_and_partition_spec_attributes():
    m, jm = fnad_mesh(), jax.make_mesh((1, 1), ("x", "y"))
    for attr in ("axis_names", "size", "axis_sizes", "shape_tuple"):
        assert getattr(m, attr) == getattr(jm, attr), attr
    assert dict(m.shape) == dict(jm.shape) and m.devices.shape == jm.devices.shape
    assert m.devices.flat[0] == fnad.devices(fnad.default_backend())[0]
    assert [t.name for t in m.axis_types] == [t.name for t in jm.axis_types]
    assert repr(m) == repr(jm) and str(m) == str(jm)
    with m:                                                      # jax's (old) context manager
        assert fnad.sharding.get_mesh() is m
    assert Mesh(np.array(fnad.devices(fnad.default_backend())[:1]), "x").axis_names == ("x",)
    spec = P("x", None, ("x", "y"))
    assert isinstance(spec, tuple) and len(spec) == 3 and spec[2] == ("x", "y")
    assert repr(spec) == repr(jax.P("x", None, ("x", "y"))) and fnad.P is P
    s, js = NamedSharding(m, P("x")), jax.NamedSharding(jm, jax.P("x"))
    assert s.is_fully_replicated == js.is_fully_replicated
    assert s.shard_shape((3, 4)) == js.shard_shape((3, 4))
    assert len(s.device_set) == len(s.addressable_devices) == len(js.device_set) == 1
    assert s == NamedSharding(fnad_mesh(), P("x")) and s != NamedSharding(m, P("y"))
    assert s.mesh is m and s.spec == P("x") and s.memory_kind == js.memory_kind
    assert repr(s) == repr(js) and repr(P("x")) == repr(jax.P("x")) and repr(P()) == "P()"
    x = fnad.device_put(A, s)
    y = jax.device_put(A, js)
    assert isinstance(x, fnad.Array) and x.device in s.device_set
    np.testing.assert_array_equal(x, y)
    tree = fnad.device_put({"a": A, "b": fnp.ones(3)}, NamedSharding(m, P()))
    assert tree["a"].shape == (3, 4)
    sds = SingleDeviceSharding(x.device)
    assert sds.device_set == {x.device} and sds.shard_shape((2,)) == (2,)
    assert fnad.device_put(A, sds).device == x.device


def test_errors():
    m = fnad_mesh()
    raises_with(lambda: fnad.make_mesh((2,), ("x",)), "(2,)", "one device", "1",
                exc=ValueError)
    raises_with(lambda: fnad.make_mesh((1, 1), ("x",)), "axis_names", exc=ValueError)
    dev = fnad.devices(fnad.default_backend())[0]
    raises_with(lambda: Mesh(np.array([dev, dev]), ("x",)), "2 devices", "one device",
                exc=ValueError)
    raises_with(lambda: Mesh(np.array([dev]), ("x", "y")), "axis names", exc=ValueError)
    raises_with(lambda: NamedSharding(m, P("z")), "'z'", "('x', 'y')", exc=ValueError)
    raises_with(lambda: NamedSharding(m, P("x", "x")), "'x' twice", exc=ValueError)
    raises_with(lambda: NamedSharding(m, ("x",)), "PartitionSpec", exc=TypeError)
    raises_with(lambda: P(3), "PartitionSpec entries", exc=TypeError)
    bad = NamedSharding(m, P("x", None))
    raises_with(lambda: lax.with_sharding_constraint(fnp.ones(3), bad), "2 entries",
                "rank 1", exc=ValueError)
    raises_with(lambda: fnad.jit(lambda a: lax.with_sharding_constraint(a, bad))(fnp.ones(3)),
                "2 entries", "rank 1", exc=ValueError)
    raises_with(lambda: fnad.device_put(fnp.ones(3), bad), "device_put", "rank 1",
                exc=ValueError)
    raises_with(lambda: lax.with_sharding_constraint(A, P("x")), "current mesh",
                exc=RuntimeError)

    def sm(in_specs, out_specs, **kw):
        return fnad.shard_map(lambda a, b: a + b, mesh=m, in_specs=in_specs,
                              out_specs=out_specs, **kw)
    raises_with(lambda: sm(P("z"), P())(A, B), "in_specs", "'z'", exc=ValueError)
    raises_with(lambda: sm(P(), P("w"))(A, B), "out_specs", "'w'", exc=ValueError)
    raises_with(lambda: sm(P(), P(), axis_names={"q"})(A, B), "axis_names", "'q'",
                exc=ValueError)
    raises_with(lambda: sm((P(), P(), P()), P())(A, B), "in_specs", "prefix",
                exc=ValueError)
    raises_with(lambda: sm(P(None, None, "x"), P())(A, B), "in_specs", "3 entries",
                "rank 2", exc=ValueError)
    raises_with(lambda: sm(P(), P(None, None, None))(A, B), "out_specs", "rank 2",
                exc=ValueError)
    raises_with(lambda: sm(P(), (P(), P()))(A, B), "out_specs", "prefix", exc=ValueError)
    raises_with(lambda: sm(("x", None), P())(A, B), "PartitionSpec", exc=TypeError)
    raises_with(lambda: sm(P(), P())(A, b=B), "keyword", exc=TypeError)
    raises_with(lambda: fnad.shard_map(lambda a: a, in_specs=P(), out_specs=P())(A), "mesh",
                exc=ValueError)


def test_array_sharding_is_its_single_device():
    x = fnad.device_put(np.ones((2, 3), np.float32))
    s = x.sharding
    assert isinstance(s, fnad.sharding.SingleDeviceSharding)
    assert s.device_set == {x.device} and s.is_fully_replicated
    assert s.shard_shape(x.shape) == (2, 3)


def test_jit_shardings_pjit_mesh_utils_and_multihost_utils():
    """jit's in/out_shardings and pjit accept jax's shardings (checked; one device);
    mesh_utils builds the size-1 meshes; multihost_utils as with one process (jax on one
    CPU device gives the same)."""
    from fnad.experimental import mesh_utils, multihost_utils, pjit
    mesh = fnad.sharding.Mesh(mesh_utils.create_device_mesh((1, 1)), ("a", "b"))
    s = fnad.NamedSharding(mesh, fnad.P("a"))
    x = np.arange(4.0, dtype=np.float32)
    f = fnad.jit(lambda u, v: u * v, in_shardings=(s, None), out_shardings=s)
    np.testing.assert_array_equal(f(x, 2.0), x * 2)
    g = pjit.pjit(lambda u: u + 1, in_shardings=fnad.P(), out_shardings=None)
    np.testing.assert_array_equal(g(x), x + 1)
    with pytest.raises(TypeError, match="in_shardings must hold"):
        fnad.jit(lambda u: u, in_shardings=[3])
    with pytest.raises(ValueError, match="needs 2 devices"):
        mesh_utils.create_device_mesh((2, 1))
    assert mesh_utils.create_hybrid_device_mesh((1,), (1,)).shape == (1,)
    gathered = multihost_utils.process_allgather({"w": x})
    assert gathered["w"].shape == (1, 4)
    np.testing.assert_array_equal(multihost_utils.process_allgather(x, tiled=True), x)
    np.testing.assert_array_equal(multihost_utils.broadcast_one_to_all(x), x)
    multihost_utils.sync_global_devices("step")
    pytest.importorskip("jax", reason="jax is the oracle for the gathered shapes")
    from jax.experimental import multihost_utils as jmh
    assert jmh.process_allgather({"w": x})["w"].shape == gathered["w"].shape
