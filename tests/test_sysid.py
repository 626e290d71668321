"""Inertial-parameter regressor against Pinocchio's computeJointTorqueRegressor and
toDynamicParameters, Y pi == rnea, base parameters, and least-squares identification
(noiseless recovery; error shrinking with more data under noise)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from helpers import close, rng_states

pin = pytest.importorskip("pinocchio")
from pinutil import align_rub_axes, to_pinocchio  # noqa: E402


def _check(m, pm, states):
    d = pm.createData()
    pi = np.asarray(jaxdyn.sysid.inertial_parameters(m))
    pi_p = np.concatenate([pm.inertias[i].toDynamicParameters() for i in range(1, pm.njoints)])
    close(pi, pi_p, 1e-12, "parameters vs toDynamicParameters")
    for q, v, a, _ in states:
        Y = np.asarray(jaxdyn.sysid.regressor(m, q, v, a))
        close(Y, pin.computeJointTorqueRegressor(pm, d, q, v, a), 1e-10, "regressor vs pinocchio")
        close(Y @ pi + np.asarray(m.armature) * a, jaxdyn.rnea(m, q, v, a), 1e-10, "Y pi == rnea")


@pytest.mark.parametrize("name", ["panda", "anymal_c"])
def test_regressor_matches_pinocchio(robot_pair, name):
    m, pm = robot_pair(name)
    _check(m, pm, rng_states(m, pm, 2, seed=1))


def test_regressor_random_tree_every_joint_type():
    m = align_rub_axes(jaxdyn.robots.random_tree(9, 0.5, 243, floating_base=True))
    assert len(set(m.types)) == 7
    r = np.random.default_rng(0)
    states = [(np.asarray(jaxdyn.random_configuration(m, jax.random.PRNGKey(s))), r.normal(size=m.nv),
               r.normal(size=m.nv), None) for s in range(2)]
    _check(m, to_pinocchio(m), states)


def test_with_inertial_parameters_round_trip():
    m = jaxdyn.robots.puma560()
    m2 = jaxdyn.sysid.with_inertial_parameters(m, jaxdyn.sysid.inertial_parameters(m))
    for f in ("mass", "com", "inertia"):
        close(getattr(m2, f), getattr(m, f), 1e-14, f)


def _data(m, n, seed, noise=0.0):
    rng = np.random.default_rng(seed)
    Q, V, A = (jnp.asarray(rng.uniform(-2, 2, (n, m.nv))) for _ in range(3))
    Y = jax.vmap(lambda q, v, a: jaxdyn.sysid.regressor(m, q, v, a))(Q, V, A)
    tau = jax.vmap(lambda q, v, a: jaxdyn.rnea(m, q, v, a))(Q, V, A)
    return np.asarray(Y), np.asarray(tau) + noise * rng.normal(size=tau.shape)


def test_base_parameters_and_noiseless_identification():
    """PUMA: base parameters from 60 random states; Y_base pi_base == rnea at new states; least
    squares on noiseless torques recovers pi_base to 1e-6 relative from any starting point."""
    m = jaxdyn.robots.puma560()
    Y, tau = _data(m, 60, 0)
    base = jaxdyn.sysid.base_parameters(Y.reshape(-1, Y.shape[-1]))
    assert 0 < base.rank < 60
    pi_b = base.reduce(jaxdyn.sysid.inertial_parameters(m))
    Y2, tau2 = _data(m, 10, 1)
    close(np.einsum("nij,j->ni", base.columns(Y2), pi_b), tau2, 1e-10, "Y_base pi_base == rnea")
    est = jaxdyn.sysid.identify_least_squares(Y, tau, base)
    assert np.abs(est - pi_b).max() <= 1e-6 * np.abs(pi_b).max()
    # project: the full-length representative gives rnea's torques at new states, and is idempotent
    pi_p = base.project(jaxdyn.sysid.inertial_parameters(m))
    close(np.einsum("nij,j->ni", Y2, pi_p), tau2, 1e-10, "Y project(pi) == rnea")
    close(base.project(pi_p), pi_p, 1e-14, "project is idempotent")
    assert np.count_nonzero(pi_p) <= base.rank


def test_identification_error_shrinks_with_data():
    m = jaxdyn.robots.puma560()
    Yb, tb = _data(m, 400, 2, noise=0.5)
    base = jaxdyn.sysid.base_parameters(Yb.reshape(-1, Yb.shape[-1]))
    pi_b = base.reduce(jaxdyn.sysid.inertial_parameters(m))
    err = [np.linalg.norm(jaxdyn.sysid.identify_least_squares(Yb[:n], tb[:n], base) - pi_b) for n in (25, 100, 400)]
    assert err[2] < err[1] < err[0], err


def test_consistent_refinement_recovers_noiseless_base_parameters_physically():
    """From a +-50 % perturbed start, L-BFGS on log-Cholesky parameters fits noiseless torques:
    base parameters to 1e-6 relative, and every iterate's bodies are physical."""
    from jaxdyn.apps.identify_cli import perturb
    m = jaxdyn.robots.puma560()
    Y, tau = _data(m, 60, 0)
    base = jaxdyn.sysid.base_parameters(Y.reshape(-1, Y.shape[-1]))
    start = perturb(m, jax.random.PRNGKey(2), 0.5)
    theta0 = np.asarray(jaxdyn.log_cholesky_parameters(start))
    fit = jaxdyn.apps.sysid.identify_consistent(Y, tau, theta0, steps=4000)
    pi0 = np.asarray(jaxdyn.sysid.inertial_parameters(start))
    close(fit.history[0], np.mean((np.einsum("nip,p->ni", Y, pi0) - tau) ** 2), 1e-12, "loss = mean squared residual")
    pi_b = base.reduce(jaxdyn.sysid.inertial_parameters(m))
    rel = np.linalg.norm(base.reduce(fit.pi) - pi_b) / np.linalg.norm(pi_b)
    rel0 = np.linalg.norm(base.reduce(jaxdyn.sysid.inertial_parameters(start)) - pi_b) / np.linalg.norm(pi_b)
    assert rel <= 1e-6, (rel, rel0)
    rep = jaxdyn.apps.sysid.consistency_report(m, fit.pi)
    assert np.all(rep[:, 0] > 0) and np.all(rep[:, 1] > 0) and np.all(rep[:, 2] >= 0), rep
    assert fit.history[-1] < 1e-12 * fit.history[0]


def test_fourier_excitation_derivatives_bounds_and_conditioning():
    from jaxdyn.apps import sysid as si
    m = jaxdyn.robots.puma560()
    f = si.fourier_excitation(m, jax.random.PRNGKey(0), harmonics=4, period=8.0, amplitude=0.7)
    t0 = 1.234
    q, qd, qdd = si.fourier_eval(f, t0)
    close(qd, jax.jacfwd(lambda t: si.fourier_eval(f, t)[0])(t0), 1e-12, "qd = dq/dt")
    close(qdd, jax.jacfwd(lambda t: si.fourier_eval(f, t)[1])(t0), 1e-12, "qdd = dqd/dt")
    t = jnp.linspace(0, 8.0, 801)
    Q = si.sample_fourier(f, t)[0]
    assert float(jnp.max(jnp.abs(Q - f.q0[None]))) <= 0.7 + 1e-12
    close(Q[0], Q[-1], 1e-12, "periodic")
    W = si.stacked_regressor(m, *si.sample_fourier(f, t[::8]))
    base = jaxdyn.sysid.base_parameters(np.asarray(W))
    f2, hist = si.optimize_excitation(m, f, t[::8], base, steps=15)
    assert float(hist[-1]) < 0.8 * float(hist[0]), hist
    Q2 = si.sample_fourier(f2, t)[0]
    assert float(jnp.max(jnp.abs(Q2 - f.q0[None]))) <= 0.7 + 1e-9      # the range bound still holds


def test_simulation_error_gradient_matches_finite_differences():
    from jaxdyn.apps import sysid as si
    m = jaxdyn.robots.puma560()
    theta = jaxdyn.log_cholesky_parameters(m)
    assert bool(jnp.all(jnp.isfinite(theta)))
    U = jnp.asarray(np.random.default_rng(0).normal(size=(15, 6)))
    q0, qd0 = jnp.array([-1.0, 0.3, 0.2, 0.1, 0.5, 0.0]), jnp.zeros(6)
    Qm = jaxdyn.rollout(m, q0, qd0, U, 0.02, 15).q + 0.01
    f = jax.jit(lambda th: si.simulation_error(m, th, q0, qd0, U, 0.02, Qm))
    g = jax.jit(jax.grad(lambda th: si.simulation_error(m, th, q0, qd0, U, 0.02, Qm)))(theta)
    d = jnp.asarray(np.random.default_rng(1).normal(size=theta.shape))
    eps = 1e-6
    fd = (f(theta + eps * d) - f(theta - eps * d)) / (2 * eps)
    assert abs(float(fd - jnp.vdot(g, d))) <= 1e-6 * max(1e-3, abs(float(fd))), (fd, jnp.vdot(g, d))


def test_simulation_error_estimator_fits_a_trajectory():
    """Output error: a PUMA whose wrist bodies are 30 % off reproduces the measured trajectory
    after L-BFGS through the rollout (loss down 1e3x), and stays physical."""
    from jaxdyn.apps import sysid as si
    m = jaxdyn.robots.puma560()
    theta = jaxdyn.log_cholesky_parameters(m)
    U = jnp.asarray(np.random.default_rng(0).normal(size=(20, 6)))
    q0, qd0 = jnp.array([-1.0, 0.3, 0.2, 0.1, 0.5, 0.0]), jnp.zeros(6)
    Qm = jaxdyn.rollout(m, q0, qd0, U, 0.02, 20, stepper="euler").q
    free = np.array([False, False, False, True, True, True])
    theta0 = theta.at[3:, 0].add(np.log(1.3) / 2)          # masses and inertias x 1.3
    fit = si.identify_simulation_error(m, theta0, q0, qd0, U, 0.02, Qm, steps=80, free=free, stepper="euler")
    assert float(fit.history[-1]) < 1e-3 * float(fit.history[0]), (fit.history[0], fit.history[-1])
    np.testing.assert_array_equal(np.asarray(fit.theta[:3]), np.asarray(theta0[:3]))
    rep = si.consistency_report(m, fit.pi)
    assert np.all(rep[:, 0] > 0) and np.all(rep[:, 2] >= 0)


def test_consistent_refinement_keeps_massless_bodies_fixed():
    """A massless body has no log-Cholesky parameters: it is held at pi_fixed (not turned into
    a unit-mass body), and the others are still recovered from noiseless data."""
    m = jaxdyn.robots.puma560()
    m = m.replace(mass=m.mass.at[4].set(0.0), inertia=m.inertia.at[4].set(0.0))
    Y, tau = _data(m, 60, 0)
    base = jaxdyn.sysid.base_parameters(Y.reshape(-1, Y.shape[-1]))
    pi = np.asarray(jaxdyn.sysid.inertial_parameters(m))
    theta = np.asarray(jaxdyn.log_cholesky_parameters(m))
    fixed = ~np.isfinite(theta).all(1)
    assert fixed.tolist() == [False, False, False, False, True, False]
    from jaxdyn.apps.identify_cli import perturb
    theta0 = np.asarray(jaxdyn.log_cholesky_parameters(perturb(m, jax.random.PRNGKey(2), 0.5)))
    with pytest.raises(jaxdyn.errors.ArgumentError, match=r"rows \[4\]"):
        jaxdyn.sysid.identify_consistent(Y, tau, theta0, steps=1)
    fit = jaxdyn.sysid.identify_consistent(Y, tau, theta0, steps=12000, fixed=fixed, pi_fixed=pi)
    np.testing.assert_array_equal(np.asarray(fit.pi[40:50]), pi[40:50])
    rel = np.linalg.norm(base.reduce(fit.pi) - base.reduce(pi)) / np.linalg.norm(base.reduce(pi))
    assert rel <= 1e-6, rel


def test_friction_and_armature_columns_recover_the_coefficients():
    """xArm7 (example-robot-data URDF with <dynamics damping friction>; armature added): the
    regressor with armature, viscous and Coulomb columns times the model's parameters equals
    Pinocchio's rnea + armature qdd + damping qd + friction sign(qd) (Pinocchio's own reading
    of the URDF); least squares on those torques recovers every viscous and Coulomb coefficient
    and the armatures the base parameters separate (all but the first joint's, folded into its
    link's Izz) to 1e-6 noise-free; with torque and measurement noise the friction coefficients
    within 5 % (an armature is nearly collinear with its link's inertia about the joint axis:
    noise moves it far, so it is not asserted there)."""
    import os
    from jaxdyn.apps import joint_terms as jt
    from jaxdyn.io.named import ERD_URDFS, example_robot_data_dir
    si = jaxdyn.sysid
    path = os.path.join(example_robot_data_dir(), ERD_URDFS["xarm7"])
    arm = np.linspace(0.05, 0.35, 7)
    m = jaxdyn.load_urdf(path).replace(armature=jnp.asarray(arm))
    pm = pin.buildModelFromUrdf(path)
    assert np.count_nonzero(pm.damping) == 7 and np.count_nonzero(pm.friction) == 7
    terms = jt.JOINT_TERMS
    f = si.fourier_excitation(m, jax.random.PRNGKey(0), 5, 10.0, 1.0)
    Q, QD, QDD = (np.asarray(x) for x in si.sample_fourier(f, jnp.arange(2000.0) * 0.02))
    d = pm.createData()
    tau = np.stack([pin.rnea(pm, d, q, v, a) + arm * a + pm.damping * v + pm.friction * np.sign(v)
                    for q, v, a in zip(Q, QD, QDD)])
    Y = np.asarray(si.regressors(m, Q, QD, QDD, terms))
    x = np.asarray(si.parameters(m, terms))
    close(np.einsum("nip,p->ni", Y, x), tau, 1e-9, "Y x == motor torque")
    lay = jt.layout(m, terms)
    assert lay.names[10:13] == (("joint1", "armature"), ("joint1", "viscous"), ("joint1", "coulomb"))
    base = si.base_parameters(Y.reshape(-1, lay.p))
    J = lay.joint.reshape(7, 3)
    truth = {"armature": arm, "viscous": pm.damping, "coulomb": pm.friction}
    rng = np.random.default_rng(1)
    noisy = np.asarray(si.regressors(m, Q + 1e-4 * rng.normal(size=Q.shape), QD + 1e-3 * rng.normal(size=Q.shape),
                                     QDD + 1e-2 * rng.normal(size=Q.shape), terms))
    for Yk, tk, tol in ((Y, tau, 1e-6), (noisy, tau + 0.2 * rng.normal(size=tau.shape), 0.05)):
        got = base.alone(si.identify_least_squares(Yk, tk, base))
        for k, term in enumerate(terms if tol < 1e-3 else terms[1:]):
            k = terms.index(term)
            want = truth[term][1:] if term == "armature" else truth[term]
            est = got[J[1:, k]] if term == "armature" else got[J[:, k]]
            rel = np.abs(est - want) / want
            assert np.all(rel <= tol), (term, tol, rel)
        assert np.isnan(got[J[0, 0]])          # joint1's armature: only with link1's Izz
    # the consistent fit: friction solved for at every step (variable projection), so it needs
    # no start; noise-free torques less the known armature terms, inertias from the truth
    fr = ("viscous", "coulomb")
    lay2 = jt.layout(m, fr)
    fit = si.identify_consistent(np.asarray(si.regressors(m, Q, QD, QDD, fr)), tau - arm * QDD,
                                 jaxdyn.log_cholesky_parameters(m), steps=50, layout=lay2)
    got = np.asarray(fit.pi)[lay2.joint].reshape(7, 2)
    for k, term in enumerate(fr):
        np.testing.assert_allclose(got[:, k], truth[term], rtol=1e-6, err_msg=term)
    # a parameter vector round-trips through the model
    m2 = si.with_parameters(m, x, terms)
    for fld in ("mass", "armature", "damping", "friction"):
        close(getattr(m2, fld), getattr(m, fld), 1e-12, fld)
