"""RNEA (Featherstone 2008, Table 5.1) and the terms built on it, the bias forces h(q, v) and the
gravity torques g(q): against Pinocchio (<= 1e-10 relative, f64) on example-robot-data robots and
random trees with every joint type, with external forces in body and world coordinates, and
gradients against central differences (check_grads)."""
import jax
import numpy as np
import pytest
from jax.test_util import check_grads

pin = pytest.importorskip("pinocchio")

import jaxdyn
from helpers import close, rand_state, rng_states
from pinutil import REFERENCE_CASES, pin_forces, reference_case, world_and_local_forces


@pytest.mark.parametrize("name", REFERENCE_CASES)
def test_rnea_bias_and_gravity_match_pinocchio(robot_pair, name):
    m, pm, states = reference_case(robot_pair, name)
    pd = pm.createData()
    rng = np.random.default_rng(7)
    for q, v, a, _ in states:
        close(jaxdyn.rnea(m, q, v, a), pin.rnea(pm, pd, q, v, a), err="rnea")
        close(jaxdyn.bias_forces(m, q, v), pin.nonLinearEffects(pm, pd, q, v), err="h")
        close(jaxdyn.gravity_torques(m, q), pin.computeGeneralizedGravity(pm, pd, q), err="g")
        fx = rng.normal(size=(m.nb, 6))
        close(jaxdyn.rnea(m, q, v, a, f_ext=fx), pin.rnea(pm, pd, q, v, a, pin_forces(fx)), err="rnea f_ext")


def test_world_frame_f_ext_equals_local(robot_pair):
    """f_ext given in world coordinates equals the same wrenches given per body (Pinocchio's local)."""
    m, pm = robot_pair("panda")
    q, v, a, _ = rng_states(m, pm, 1, seed=9)[0]
    fx_w, fx_l = world_and_local_forces(pm, q)
    close(jaxdyn.rnea(m, q, v, a, f_ext=fx_w, f_ext_frame="world"), jaxdyn.rnea(m, q, v, a, f_ext=fx_l))


def test_rnea_gradients_check_grads():
    """d rnea / d(q, qd) to second order in both modes, d rnea / d mass to second order."""
    m = jaxdyn.robots.puma560()
    q, qd, tau = rand_state(m, 0)
    check_grads(jax.jit(lambda q, qd: jaxdyn.rnea(m, q, qd, tau)), (q, qd), order=2, modes=["fwd", "rev"])
    check_grads(jax.jit(lambda mass: jaxdyn.rnea(m.replace(mass=mass), q, qd, tau)), (m.mass,), order=2,
                modes=["rev"])
