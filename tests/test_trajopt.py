"""Trajectory optimization: gradients of the shooting objectives against central finite
differences, the PUMA minimum-effort problem reaches its target with less effort than the
cycloidal trajectory (Saha 2003 eq. 18) executed by computed torque, multi-start = separate
runs, robust cost = mean over variants, and named errors for bad input."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from jaxdyn.apps import trajopt as to
from jaxdyn.errors import ArgumentError, ShapeError


def _fd_check(f, x, n_dirs=3, eps=1e-6, rtol=1e-6, seed=0):
    """Directional central differences of f at x against jax.grad (reverse mode); one
    compiled value_and_grad serves both (one compile per check)."""
    vg = jax.jit(jax.value_and_grad(f))
    g = vg(x)[1]
    fj = lambda y: vg(y)[0]  # noqa: E731
    rng = np.random.default_rng(seed)
    for _ in range(n_dirs):
        d = jax.tree_util.tree_map(lambda a: jnp.asarray(rng.normal(size=a.shape)), x)
        xp = jax.tree_util.tree_map(lambda a, b: a + eps * b, x, d)
        xm = jax.tree_util.tree_map(lambda a, b: a - eps * b, x, d)
        fd = (fj(xp) - fj(xm)) / (2 * eps)
        ad = sum(jnp.vdot(a, b) for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(d)))
        assert abs(fd - ad) <= rtol * max(1.0, abs(fd)), (fd, ad)


def _pendulum_problem(parametrization="torque", **kw):
    m = jaxdyn.robots.double_pendulum()
    qT = jnp.array([0.3, -0.2])
    return to.problem(m, jnp.array([-1.2, 0.4]), jnp.array([0.1, -0.3]), 0.02, 20,
                      lambda t, q, qd, u: jnp.sum(u ** 2) + 0.1 * jnp.sum(qd ** 2),
                      lambda q, qd: 10 * jnp.sum((q - qT) ** 2) + jnp.sum(qd ** 2),
                      parametrization=parametrization, **kw)


@pytest.mark.parametrize("parametrization", ["torque", "acceleration"])
def test_single_shooting_gradient_matches_finite_differences(parametrization):
    p = _pendulum_problem(parametrization, tau_limit=[15.0, 8.0], scale="inertia", stepper="rk4")
    Z = jnp.asarray(np.random.default_rng(1).normal(size=(20, 2)))
    _fd_check(lambda Z: to.single_shooting_cost(p, Z), Z)


def test_infinite_torque_limit_leaves_its_dof_free():
    """tau_limit = [15, inf]: dof 0 is 15 tanh(z / 15), dof 1 passes z through unchanged (not
    NaN, also in the gradient: finite differences), and decision_from_torques inverts both."""
    p = _pendulum_problem(tau_limit=[15.0, np.inf], stepper="rk4")
    Z = jnp.asarray(np.random.default_rng(2).normal(size=(20, 2)) * 20)
    U = to.controls(p, Z)
    np.testing.assert_allclose(U[:, 0], 15 * np.tanh(np.asarray(Z[:, 0]) / 15), rtol=1e-14)
    np.testing.assert_array_equal(U[:, 1], Z[:, 1])
    np.testing.assert_allclose(to.decision_from_torques(p, U), Z, rtol=1e-9)
    _fd_check(lambda Z: to.single_shooting_cost(p, Z), Z, rtol=1e-5)


def test_acceleration_plan_is_a_torque_plan():
    """The acceleration parametrization computes tau_k = rnea(q_k, qd_k, Z_k) at each sample's
    start and holds it: ABA there gives back Z_k (feedback linearization), the plan's torques
    replayed open-loop on the same stepper are the optimizer's trajectory, and on RK4 at
    dt / 10 they stay within RK4's error of it."""
    p = _pendulum_problem("acceleration", stepper="rk4")
    Z = jnp.asarray(np.random.default_rng(4).normal(size=(20, 2)))
    tr = to.simulate(p, Z)
    U = tr.tau[:-1]
    qdd = jax.vmap(lambda q, qd, u: jaxdyn.aba(p.model, q, qd, u))(tr.q[:-1], tr.qd[:-1], U)
    np.testing.assert_allclose(qdd, Z, atol=1e-10)
    same = to.replay(p, U, substeps=1)
    np.testing.assert_allclose(same.q, tr.q, atol=1e-12)
    fine = to.replay(p, U)
    assert fine.q.shape == (201, 2)
    np.testing.assert_allclose(fine.q[::10], tr.q, atol=1e-6)


def _effort(t, q, qd, u):
    return jnp.sum(u ** 2)


def _reach(qT, q, qd):
    return jnp.concatenate([q - qT, qd])


def test_new_target_and_start_reuse_the_compiled_solver():
    """Targets (a Partial's data), initial states and torque limits are traced: a second solve
    with all three new compiles nothing, and each solve reaches its own target (checked by
    an open-loop replay of its torques on RK4 at dt / 10)."""
    m = jaxdyn.robots.double_pendulum()
    P = jax.tree_util.Partial

    def solve(q0, qT, lim):
        p = to.problem(m, jnp.asarray(q0), jnp.zeros(2), 0.05, 20, _effort, terminal_constraint=P(_reach, jnp.asarray(qT)),
                       tau_limit=lim, stepper="rk4", parametrization="acceleration")
        res = to.optimize(p, iterations=25, rounds=4, rho=1e4)
        fin = to.replay(p, res.U).q[-1]
        return res, float(jnp.abs(fin - jnp.asarray(qT)).max())

    _, err = solve([0.0, 0.0], [0.4, -0.3], [40.0, 20.0])
    assert err < 1e-2
    compiles = []

    def listen(event, duration, **kw):
        if event.endswith("backend_compile_duration"):
            compiles.append(event)
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        res, err = solve([0.1, -0.2], [-0.3, 0.5], [35.0, 25.0])
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert compiles == [], len(compiles)
    assert err < 1e-2
    np.testing.assert_allclose(res.trajectory.q[0], [0.1, -0.2])


@pytest.mark.parametrize("robot", ["double_pendulum", "floating_tree"])
def test_kinematic_transcription_closed_form_inverse_dynamics_and_limit(robot):
    """kinematic_rollout: on vector-space joints its end state is the double integrator's
    closed form q_N = q0 + N dt qd0 + sum_k dt^2 (N - k - 1/2) Z_k, qd_N = qd0 + dt sum_k Z_k;
    ABA at each sample's torque gives back Z_k; and the held-torque RK4 rollout of the same
    accelerations converges to it at first order in dt (the terminal gap halves when dt
    halves), also with a free-flyer base (configurations compared on the tangent space)."""
    if robot == "double_pendulum":
        m, amplitude = jaxdyn.robots.double_pendulum(), 3.0
        q0, qd0 = jnp.array([-0.4, 0.3]), jnp.array([0.2, -0.1])
    else:
        m, amplitude = jaxdyn.robots.random_tree(2, branching=0.5, seed=1, floating_base=True), 1.0
        q0 = jaxdyn.random_configuration(m, jax.random.PRNGKey(0))
        qd0 = 0.3 * jnp.asarray(np.random.default_rng(0).normal(size=m.nv))
    phase = jnp.arange(m.nv, dtype=float)[None]

    @jax.jit
    def both(p, Z):
        k, s = to.kinematic_rollout(p, Z), to.simulate(p, Z)
        Zk = jax.vmap(lambda q, v, u: jaxdyn.aba(m, q, v, u))(k.q[:-1], k.qd[:-1], k.tau[:-1])
        return k, s, Zk, jaxdyn.difference(m, s.q[-1], k.q[-1])

    def gap(N):
        p = to.problem(m, q0, qd0, 1.0 / N, N, _effort, parametrization="acceleration", stepper="rk4")
        t = jnp.arange(N, dtype=float)[:, None] / N
        Z = amplitude * jnp.sin(3 * t + phase)           # a smooth profile, sampled
        k, s, Zk, dq = both(p, Z)
        dt, n = 1.0 / N, jnp.arange(N, dtype=float)[:, None]
        if m.nq == m.nv:
            np.testing.assert_allclose(k.q[-1], q0 + N * dt * qd0 + jnp.sum(dt ** 2 * (N - n - 0.5) * Z, 0),
                                       atol=1e-12)
        np.testing.assert_allclose(k.qd[-1], qd0 + dt * jnp.sum(Z, 0), atol=1e-12)
        np.testing.assert_allclose(Zk, Z, atol=1e-9)
        np.testing.assert_array_equal(s.q[0], k.q[0])
        return float(jnp.abs(jnp.concatenate([dq, k.qd[-1] - s.qd[-1]])).max())

    g = [gap(N) for N in (40, 80, 160)]
    assert g[0] > 1e-3, g                          # the two differ (not the same computation)
    np.testing.assert_allclose([g[0] / g[1], g[1] / g[2]], [2.0, 2.0], rtol=0.1)


def test_kinematic_shooting_reaches_the_target_near_single_shootings_effort():
    """shooting="kinematic" on a double-pendulum reach (100 samples of 10 ms): the plan replayed
    open loop on RK4 at dt / 10 reaches the target (the restoration works on the rollout, not on the kinematic
    transcription), its effort is within 2 % of single shooting's on the same problem (the
    two transcriptions differ by O(dt)), and Result.cost is the rollout's effort of Result.U.
    Without the acceleration parametrization, with an actuation mask or a closed model it is
    refused by name."""
    m = jaxdyn.robots.double_pendulum()
    qT = jnp.array([0.4, -0.3])
    p = to.problem(m, jnp.zeros(2), jnp.zeros(2), 0.01, 100, _effort,
                   terminal_constraint=jax.tree_util.Partial(_reach, qT), stepper="rk4", parametrization="acceleration")
    kw = dict(rounds=3, rho=1e4, precondition=True)
    rk = to.optimize(p, shooting="kinematic", iterations=100, **kw)
    rs = to.optimize(p, shooting="single", iterations=50, **kw)
    fin = to.replay(p, rk.U)
    assert float(jnp.abs(jnp.concatenate([fin.q[-1] - qT, fin.qd[-1]])).max()) < 1e-4
    assert float(rk.defect) < 1e-6
    np.testing.assert_allclose(rk.cost, to.effort(rk.U, 0.01), rtol=1e-12)
    np.testing.assert_allclose(rk.cost, rs.cost, rtol=0.02)
    with pytest.raises(ArgumentError, match="acceleration parametrization"):
        to.optimize(dataclasses.replace(p, parametrization="torque"), shooting="kinematic")
    with pytest.raises(ArgumentError, match="actuation mask"):
        to.optimize(dataclasses.replace(p, actuation=jnp.array([1.0, 0.0])), shooting="kinematic")
    cm, q0c = jaxdyn.mechanisms.five_bar()
    pc = to.problem(cm, jnp.asarray(q0c), jnp.zeros(4), 0.01, 10, _effort, parametrization="acceleration")
    with pytest.raises(ArgumentError, match="closed model"):
        to.optimize(pc, shooting="kinematic")


def test_multiple_shooting_gradient_and_zero_defects_at_init():
    p = _pendulum_problem(tau_limit=[15.0, 8.0])
    Z = jnp.asarray(np.random.default_rng(2).normal(size=(20, 2)))
    params = to.multiple_shooting_init(p, Z, 4)
    J, d = to.multiple_shooting_terms(p, params, 4)
    # starts taken from the single-shooting rollout: no defects, same cost as single shooting
    assert float(jnp.abs(d).max()) < 1e-12
    np.testing.assert_allclose(J, to.single_shooting_cost(p, Z), rtol=1e-12)
    w = jnp.asarray(np.random.default_rng(3).normal(size=d.size))
    params = jax.tree_util.tree_map(lambda a: a + 0.05, params)
    _fd_check(lambda P: to.multiple_shooting_terms(p, P, 4)[0] + jnp.dot(w, to.multiple_shooting_terms(p, P, 4)[1].ravel()),
              params)


def test_multistart_equals_separate_runs_and_robust_mean():
    p = _pendulum_problem(tau_limit=[15.0, 8.0])
    Z0 = jnp.asarray(np.random.default_rng(4).normal(size=(2, 20, 2)))
    kw = dict(iterations=5, optimizer="adam", learning_rate=0.05)
    rb = to.optimize(p, Z0, **kw)
    assert rb.U.shape == (2, 20, 2) and rb.history.shape == (2, 5)
    assert float(rb.history[0, -1]) < float(rb.history[0, 0])
    for k in range(2):
        r1 = to.optimize(p, Z0[k], **kw)
        np.testing.assert_allclose(rb.U[k], r1.U, rtol=1e-10, atol=1e-12)
    # robust: the objective is the mean over payload variants
    masses = [0.0, 0.5, 1.0]
    variants = to.payload_variants(p.model, "link2", masses)
    import dataclasses
    pr = dataclasses.replace(p, model=variants)
    rr = to.optimize(pr, Z0[0], robust=True, iterations=1, optimizer="adam", learning_rate=0.0)
    manual = np.mean([float(to.single_shooting_cost(p, Z0[0], p.model.replace(
        mass=p.model.mass.at[1].add(dm)))) for dm in masses])
    np.testing.assert_allclose(rr.cost, manual, rtol=1e-12)


def test_bad_input_is_named():
    m = jaxdyn.robots.double_pendulum()
    f = lambda t, q, qd, u: jnp.sum(u ** 2)  # noqa: E731
    with pytest.raises(ShapeError, match="q0"):
        to.problem(m, jnp.zeros(3), jnp.zeros(2), 0.01, 10, f)
    with pytest.raises(ArgumentError, match="stepper"):
        to.problem(m, jnp.zeros(2), jnp.zeros(2), 0.01, 10, f, stepper="rkf45")
    with pytest.raises(ArgumentError, match="tau_limit"):
        to.problem(m, jnp.zeros(2), jnp.zeros(2), 0.01, 10, f, tau_limit=[1.0, -1.0])
    with pytest.raises(ArgumentError, match="dt"):
        to.problem(m, jnp.zeros(2), jnp.zeros(2), -0.01, 10, f)
    p = to.problem(m, jnp.zeros(2), jnp.zeros(2), 0.01, 10, f)
    with pytest.raises(ArgumentError, match="divide"):
        to.optimize(p, shooting="multiple", segments=3)
    with pytest.raises(ArgumentError, match="optimizer"):
        to.optimize(p, optimizer="sgd")
    with pytest.raises(ShapeError, match="Z0"):
        to.optimize(p, jnp.zeros((9, 2)))
    with pytest.raises(ArgumentError, match="nosuchbody"):
        to.payload_variants(m, "nosuchbody", [1.0])


def test_closed_chain_problem_gradient_and_passive_joints():
    """A five-bar (ClosedModel) with passive distal joints: the constrained rollout's cost
    gradient matches central differences, and passive dofs get no torque."""
    cm, q0 = jaxdyn.mechanisms.five_bar()
    p = to.problem(cm, jnp.asarray(q0), jnp.zeros(4), 0.01, 10, lambda t, q, qd, u: jnp.sum(u ** 2),
                   lambda q, qd: 10 * (q[0] - 2.0) ** 2, actuation=[1, 0, 1, 0], stabilization=(10.0, 25.0))
    Z = jnp.asarray(np.random.default_rng(5).normal(size=(10, 4)))
    _fd_check(lambda Z: to.single_shooting_cost(p, Z), Z, n_dirs=2, rtol=1e-6)
    tr = to.simulate(p, Z)
    assert float(jnp.abs(tr.tau[:, jnp.array([1, 3])]).max()) == 0.0
    assert float(jnp.abs(jax.vmap(lambda q: jaxdyn.constraint_residual(cm, q))(tr.q)).max()) < 1e-6
    with pytest.raises(ArgumentError, match="stabilization"):
        to.problem(cm.model, jnp.asarray(q0), jnp.zeros(4), 0.01, 10, lambda t, q, qd, u: 0.0,
                   stabilization=(1.0, 1.0))


@pytest.mark.parametrize("parametrization", ["torque", "acceleration"])
def test_preconditioner_is_the_constraint_jacobian_of_a_double_integrator(parametrization):
    """The preconditioner's C (double integrator, K = d qdd / d Z at the start) is the terminal
    constraint's Jacobian where the arm is one: at rest without gravity, Z = 0, the linearized
    dynamics are qdd = M(q0)^-1 tau (torques) or qdd = Z (accelerations), which RK4 integrates
    exactly; checked against jax.jacrev through the rollout of the double pendulum.  And
    P^T (I + rho C^T C) P = I."""
    m = jaxdyn.robots.double_pendulum().replace(gravity=jnp.zeros(3))
    qT = jnp.array([0.3, -0.2])
    p = to.problem(m, jnp.array([-1.2, 0.4]), jnp.zeros(2), 0.01, 10, lambda t, q, qd, u: jnp.sum(u ** 2),
                   terminal_constraint=jax.tree_util.Partial(_reach, qT), parametrization=parametrization,
                   stepper="rk4")
    rho = 1e4
    pre = to.preconditioner(p, rho)
    C = pre.U @ jnp.diag(pre.s) @ pre.V.T
    exact = jax.jacrev(lambda z: (lambda tr: _reach(qT, tr.q[-1], tr.qd[-1]))(to.simulate(p, z.reshape(10, 2))))(
        jnp.zeros(20))
    np.testing.assert_allclose(C, exact, rtol=0, atol=1e-6 * float(jnp.abs(exact).max()))
    P = jax.vmap(lambda e: pre.apply(e.reshape(10, 2)).ravel())(jnp.eye(20)).T
    np.testing.assert_allclose(P.T @ (jnp.eye(20) + rho * C.T @ C) @ P, jnp.eye(20), atol=1e-10)
