"""A top-level call passes its model as one buffer per dtype (jaxdyn.packing): the round trip
is exact, the packed copy lives as long as the model, models that could change or live on a
chosen device are passed as they are, and models of one structure share one compiled program."""
import gc

import jax
import jax.numpy as jnp
import numpy as np

import jaxdyn
from helpers import close
from jaxdyn import packing
from jaxdyn.compiled import cpu_jit


def _model():
    return jaxdyn.robots.puma560()


def test_packed_model_round_trips_exactly_and_lives_with_the_model():
    m = _model()
    p = packing.packed(m)
    assert p is not None and packing.packed(m) is p                      # made once per model
    leaves = jax.tree_util.tree_leaves(m)
    assert len(p.buffers) == len({x.dtype for x in leaves}) < len(leaves)
    back = p.unpack()
    assert jax.tree_util.tree_structure(back) == jax.tree_util.tree_structure(m)
    for a, b in zip(jax.tree_util.tree_leaves(back), leaves):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    other = m.replace(mass=m.mass * 2.0)
    assert packing.packed(other).layout is p.layout                      # interned: one program
    key = id(m)
    del m, p, back
    gc.collect()
    assert key not in packing._CACHE


def test_models_that_could_change_are_passed_as_they_are():
    """numpy leaves can be written in place, so they are never packed (a cached copy would go
    stale): after an in-place change, the call gives the changed model's torques."""
    m = _model()
    as_np = jax.tree_util.tree_map(np.array, m)
    assert packing.packed(as_np) is None
    assert packing.packed(jax.device_put(m, jax.devices()[0])) is None   # committed to a device
    q = jnp.asarray(np.linspace(-1.0, 1.0, m.nq))
    z = jnp.zeros(m.nv)
    before = jaxdyn.rnea(as_np, q, z, z)
    as_np.mass[3] *= 3.0
    changed = m.replace(mass=m.mass.at[3].multiply(3.0))
    after = jaxdyn.rnea(as_np, q, z, z)
    assert not np.allclose(after, before)
    close(after, jaxdyn.rnea(changed, q, z, z), 1e-12)


def test_large_models_are_passed_as_they_are():
    """A model of more than MAX_PACKED numbers (a stack with a model per lane) is not packed:
    unpacking it would copy it inside every call."""
    m = _model()
    n = sum(x.size for x in jax.tree_util.tree_leaves(m))
    lanes = packing.MAX_PACKED // n + 1
    big = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (lanes,) + a.shape) + 0, m)   # one model per lane
    assert packing.packed(m) is not None and packing.packed(big) is None


def test_top_level_calls_of_one_structure_share_a_trace():
    """Two models of one structure (different inertias) trace one program; the traced
    function sees a Model; the numbers equal those of the unpacked model inside a caller's
    jit, and a model given by keyword (not packed) gives them too."""
    traces = []

    def gravity_torques(model, q):
        traces.append(type(model))
        return jaxdyn.rnea(model, q, jnp.zeros(model.nv), jnp.zeros(model.nv))
    f = cpu_jit(gravity_torques)
    m = _model()
    heavy = m.replace(mass=m.mass * 2.0)
    q = jnp.asarray(np.linspace(-0.5, 0.5, m.nq))
    a, b = f(m, q), f(heavy, q)
    assert traces == [jaxdyn.Model]
    close(a, jax.jit(gravity_torques)(m, q), 1e-12)
    close(b, jax.jit(gravity_torques)(heavy, q), 1e-12)
    close(b, 2.0 * np.asarray(a), 1e-12)                                   # linear in the masses
    close(f(model=heavy, q=q), b, 1e-12)
