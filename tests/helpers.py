"""Shared test helpers (imported by test modules; conftest.py holds only config and fixtures)."""
import os

import numpy as np
import pytest

import jaxdyn
from jaxdyn.io.named import example_robot_data_dir

ROBOTS_DIR = example_robot_data_dir()

URDFS = {
    "panda": ("panda_description/urdf/panda.urdf", False),
    "ur5": ("ur_description/urdf/ur5_robot.urdf", False),
    "anymal_c": ("anymal_c_simple_description/urdf/anymal.urdf", True),
    "talos_reduced": ("talos_data/robots/talos_reduced.urdf", True),
    "g1": ("g1_description/urdf/g1_29dof_rev_1_0.urdf", True),
}


def urdf_path(name):
    if ROBOTS_DIR is None:
        pytest.skip("example-robot-data not installed")
    return os.path.join(ROBOTS_DIR, URDFS[name][0])


def close(a, b, rtol=1e-10, err=""):
    """|a - b| <= rtol * max(1, max|b|) elementwise (relative to the reference's scale)."""
    b = np.asarray(b)
    scale = max(1.0, float(np.abs(b).max()))
    np.testing.assert_allclose(np.asarray(a), b, atol=rtol * scale, rtol=0, err_msg=err)


def rng_states(model, pm, n, seed=0):
    """n random (q, v, a, tau) with q from Pinocchio's randomConfiguration (finite limits)."""
    pin = pytest.importorskip("pinocchio")
    rng = np.random.default_rng(seed)
    out = []
    lo, hi = pm.lowerPositionLimit.copy(), pm.upperPositionLimit.copy()
    lo[~np.isfinite(lo)] = -1.0
    hi[~np.isfinite(hi)] = 1.0
    lo = np.maximum(lo, -3.0); hi = np.minimum(hi, 3.0)
    for _ in range(n):
        q = pin.randomConfiguration(pm, lo, hi)
        v = rng.normal(size=pm.nv)
        a = rng.normal(size=pm.nv)
        tau = rng.normal(size=pm.nv) * 5
        out.append((q, v, a, tau))
    return out


def rand_state(m, s):
    """(q, qd, tau) of seed s: q = jaxdyn.random_configuration, qd ~ N(0, 1), tau ~ N(0, 9)."""
    import jax
    import jax.numpy as jnp
    q = jaxdyn.random_configuration(m, jax.random.PRNGKey(s))
    r = np.random.default_rng(s)
    return q, jnp.asarray(r.normal(size=m.nv)), jnp.asarray(r.normal(size=m.nv) * 3)


SMALL_MODELS = {
    "puma560": lambda: jaxdyn.robots.puma560(),
    "stanford": lambda: jaxdyn.robots.stanford_arm(),
    "planar3": lambda: jaxdyn.robots.planar3(),
    "tree_float": lambda: jaxdyn.robots.random_tree(10, 0.5, 384, floating_base=True),    # all seven joint types
    "tree_sph": lambda: jaxdyn.robots.random_tree(9, 0.3, 383, joint_types=("spherical", "prismatic", "revolute")),
}
"""Builders of the seeds' arms and two random trees, by name: PUMA 560, Stanford arm, planar 3R,
a floating tree with all seven joint types, a fixed branched tree of spherical, prismatic and
revolute joints."""


def small_models():
    """Every model of :data:`SMALL_MODELS`, built: {name: Model}."""
    return {k: f() for k, f in SMALL_MODELS.items()}


def batch_states(m, n, seed):
    """n random (q, qd, tau, f_ext), stacked: q = jaxdyn.random_configuration, qd ~ N(0, 1),
    tau ~ N(0, 9), f_ext (n, nb, 6) ~ N(0, 1)."""
    import jax
    import jax.numpy as jnp
    keys = jax.random.split(jax.random.PRNGKey(seed), n)
    q = jax.vmap(lambda k: jaxdyn.random_configuration(m, k))(keys)
    r = np.random.default_rng(seed)
    return q, jnp.asarray(r.normal(size=(n, m.nv))), jnp.asarray(r.normal(size=(n, m.nv)) * 3), \
        jnp.asarray(r.normal(size=(n, m.nb, 6)))


def singular_forest(damping=None):
    """A fixed-base forest (nv = 8) of two trees, bodies 0-2 and 3-5, of revolute, spherical,
    prismatic and helical joints, whose first tree ends in a massless leaf on a prismatic joint
    (body 2: its block of M is singular) and whose second tree is regular.  Returns (model,
    dofs of the first tree, dofs of the second)."""
    import jax.numpy as jnp
    r = np.random.default_rng(0)
    nb = 6
    mass, inertia = r.uniform(0.5, 2, nb), np.tile(np.eye(3) * 0.1, (nb, 1, 1))
    mass[2], inertia[2] = 0.0, 0.0
    m = jaxdyn.build_model(parent=[-1, 0, 1, -1, 3, 3],
                           jtype=["revolute", "spherical", "prismatic", "revolute", "revolute", "helical"],
                           Xtree_E=np.stack([np.asarray(jaxdyn.spatial.exp3(jnp.asarray(r.normal(size=3))))
                                             for _ in range(nb)]),
                           Xtree_r=r.normal(size=(nb, 3)), axis=np.tile([0, 0, 1.0], (nb, 1)),
                           pitch=np.full(nb, 0.1), mass=mass, com=r.normal(size=(nb, 3)) * 0.1, inertia=inertia,
                           **({} if damping is None else {"damping": np.full(8, damping)}))
    vidx = np.asarray(m.vidx)
    A = np.unique(vidx[:3][vidx[:3] < m.nv])
    return m, A, np.setdiff1d(np.arange(m.nv), A)
