"""Strict test config: float64 on, rank promotion raises (as DESIGN.md asks)."""
import os

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")

import numpy as np  # noqa: E402
import pytest  # noqa: E402


from jaxdyn.io.named import example_robot_data_dir  # noqa: E402

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


@pytest.fixture(scope="session")
def robot_pair():
    """(jaxdyn model, pinocchio model) by name, cached."""
    import pinocchio as pin
    import jaxdyn
    cache = {}

    def get(name):
        if name not in cache:
            path = urdf_path(name)
            fb = URDFS[name][1]
            m = jaxdyn.load_urdf(path, floating_base=fb)
            pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if fb else pin.buildModelFromUrdf(path)
            cache[name] = (m, pm)
        return cache[name]

    return get


def close(a, b, rtol=1e-10, err=""):
    """|a - b| <= rtol * max(1, max|b|) elementwise (relative to the reference's scale)."""
    b = np.asarray(b)
    scale = max(1.0, float(np.abs(b).max()))
    np.testing.assert_allclose(np.asarray(a), b, atol=rtol * scale, rtol=0, err_msg=err)


def rng_states(model, pm, n, seed=0):
    """n random (q, v, a, tau) with q from Pinocchio's randomConfiguration (finite limits)."""
    import pinocchio as pin
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


try:  # Pinocchio's numpy views alias C++ memory; copies keep JAX away from freed buffers
    import eigenpy
    eigenpy.sharedMemory(False)
except Exception:  # pragma: no cover
    pass


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_programs():
    """Drop compiled executables after each module: thousands of live XLA:CPU programs in one
    process crashed jaxlib 0.10 here (segfault after ~1000 compilations)."""
    yield
    jax.clear_caches()
