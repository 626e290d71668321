"""Inertial-parameter regressor against Pinocchio's computeJointTorqueRegressor and
toDynamicParameters, Y pi == rnea, base parameters, and least-squares identification
(noiseless recovery; error shrinking with more data under noise)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from conftest import close, rng_states

pin = pytest.importorskip("pinocchio")
from pinutil import align_rub_axes, to_pinocchio  # noqa: E402


def _check(m, pm, states):
    d = pm.createData()
    pi = np.asarray(jaxdyn.inertial_parameters(m))
    pi_p = np.concatenate([pm.inertias[i].toDynamicParameters() for i in range(1, pm.njoints)])
    close(pi, pi_p, 1e-12, "parameters vs toDynamicParameters")
    for q, v, a, _ in states:
        Y = np.asarray(jaxdyn.regressor(m, q, v, a))
        close(Y, pin.computeJointTorqueRegressor(pm, d, q, v, a), 1e-10, "regressor vs pinocchio")
        close(Y @ pi + np.asarray(m.armature) * a, jaxdyn.rnea(m, q, v, a), 1e-10, "Y pi == rnea")


@pytest.mark.parametrize("name", ["panda", "anymal_c"])
def test_regressor_matches_pinocchio(robot_pair, name):
    m, pm = robot_pair(name)
    _check(m, pm, rng_states(m, pm, 2, seed=1))


def test_regressor_random_tree_every_joint_type():
    m = align_rub_axes(jaxdyn.robots.random_tree(9, 0.5, 5, floating_base=True))
    r = np.random.default_rng(0)
    states = [(np.asarray(jaxdyn.random_configuration(m, jax.random.PRNGKey(s))), r.normal(size=m.nv),
               r.normal(size=m.nv), None) for s in range(2)]
    _check(m, to_pinocchio(m), states)


def test_with_inertial_parameters_round_trip():
    m = jaxdyn.robots.puma560()
    m2 = jaxdyn.with_inertial_parameters(m, jaxdyn.inertial_parameters(m))
    for f in ("mass", "com", "inertia"):
        close(getattr(m2, f), getattr(m, f), 1e-14, f)


def _data(m, n, seed, noise=0.0):
    rng = np.random.default_rng(seed)
    Q, V, A = (jnp.asarray(rng.uniform(-2, 2, (n, m.nv))) for _ in range(3))
    Y = jax.vmap(lambda q, v, a: jaxdyn.regressor(m, q, v, a))(Q, V, A)
    tau = jax.vmap(lambda q, v, a: jaxdyn.rnea(m, q, v, a))(Q, V, A)
    return np.asarray(Y), np.asarray(tau) + noise * rng.normal(size=tau.shape)


def test_base_parameters_and_noiseless_identification():
    """PUMA: base parameters from 60 random states; Y_base pi_base == rnea at new states; least
    squares on noiseless torques recovers pi_base to 1e-6 relative from any starting point."""
    m = jaxdyn.robots.puma560()
    Y, tau = _data(m, 60, 0)
    base = jaxdyn.base_parameters(Y.reshape(-1, Y.shape[-1]))
    assert 0 < base.rank < 60
    pi_b = base.reduce(jaxdyn.inertial_parameters(m))
    Y2, tau2 = _data(m, 10, 1)
    close(np.einsum("nij,j->ni", base.columns(Y2), pi_b), tau2, 1e-10, "Y_base pi_base == rnea")
    est = jaxdyn.identify_least_squares(Y, tau, base)
    assert np.abs(est - pi_b).max() <= 1e-6 * np.abs(pi_b).max()


def test_identification_error_shrinks_with_data():
    m = jaxdyn.robots.puma560()
    Yb, tb = _data(m, 400, 2, noise=0.5)
    base = jaxdyn.base_parameters(Yb.reshape(-1, Yb.shape[-1]))
    pi_b = base.reduce(jaxdyn.inertial_parameters(m))
    err = [np.linalg.norm(jaxdyn.identify_least_squares(Yb[:n], tb[:n], base) - pi_b) for n in (25, 100, 400)]
    assert err[2] < err[1] < err[0], err
