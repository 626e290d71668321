"""Rollouts a trajectory optimizer can trust: true zero-order hold for every stepper, checked
inputs, traced dt, non-finite states reported (never a silent freeze), optimizer-ready
parameters.  References: closed-form motion of a Cartesian gantry (constant diagonal M),
central differences, and the algebra of the parametrizations."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxdyn
from jaxdyn.errors import ArgumentError, ModelError, ShapeError

STEPPERS = ("euler", "rk4", "rkf45", "abm")


def gantry():
    """x, y, z prismatic chain: M = diag(6, 5, 3) constant, gravity bias (0, 0, 3 g)."""
    return jaxdyn.build_model(parent=[-1, 0, 1], jtype=["prismatic"] * 3, Xtree_E=np.tile(np.eye(3), (3, 1, 1)),
                              Xtree_r=np.zeros((3, 3)), axis=np.eye(3), mass=[1.0, 2.0, 3.0],
                              com=np.zeros((3, 3)), inertia=np.tile(np.eye(3) * 0.1, (3, 1, 1)))


def gantry_exact(U, dt, stepper):
    """Closed-form samples under a zero-order hold (the scheme's own map for Euler)."""
    a = (U - np.array([0, 0, 3 * 9.81])) / np.array([6.0, 5.0, 3.0])
    qd = np.concatenate([np.zeros((1, 3)), np.cumsum(a * dt, 0)])
    inc = qd[1:] * dt if stepper == "euler" else qd[:-1] * dt + 0.5 * a * dt ** 2
    return np.concatenate([np.zeros((1, 3)), np.cumsum(inc, 0)]), qd


@pytest.mark.parametrize("stepper", STEPPERS)
def test_zero_order_hold_is_exact(stepper):
    """Random step inputs: every stepper holds U[k] over [t_k, t_k+1) at all its stages."""
    U = np.random.default_rng(0).normal(size=(9, 3)) * 10
    tr = jaxdyn.rollout(gantry(), np.zeros(3), np.zeros(3), U, dt=0.1, steps=9, stepper=stepper)
    q, qd = gantry_exact(U, 0.1, stepper)
    np.testing.assert_allclose(tr.qd, qd, atol=1e-12)
    np.testing.assert_allclose(tr.q, q, atol=1e-12)
    np.testing.assert_array_equal(tr.tau[:-1], U)
    assert bool(tr.ok)


@pytest.mark.parametrize("stepper", STEPPERS)
def test_step_input_on_puma_does_not_leak_into_earlier_step(stepper):
    """PUMA at rest without gravity, U[0] = 0, U[1:] = 100 on joint 6: after step 0 nothing moves."""
    m = jaxdyn.robots.puma560().replace(gravity=jnp.zeros(3))
    U = np.zeros((4, 6)); U[1:, 5] = 100.0
    tr = jaxdyn.rollout(m, np.zeros(6), np.zeros(6), U, dt=0.01, steps=4, stepper=stepper)
    np.testing.assert_allclose(tr.qd[1], 0.0, atol=1e-12)
    np.testing.assert_allclose(tr.q[1], 0.0, atol=1e-12)
    assert float(tr.qd[2, 5]) > 0.1


def test_gradient_wrt_held_torques_is_exact():
    """d qd_T / d U[k] = dt / M_jj for every k (linear system): the hold, differentiated."""
    U = np.random.default_rng(1).normal(size=(6, 3))
    g = jax.grad(lambda U: jaxdyn.rollout(gantry(), jnp.zeros(3), jnp.zeros(3), U, dt=0.05, steps=6).qd[-1].sum())(U)
    np.testing.assert_allclose(g, np.tile(0.05 / np.array([6.0, 5.0, 3.0]), (6, 1)), rtol=1e-12)


def test_puma_100_step_gradient_matches_central_differences():
    """The optimizer's view: L(U) over a 100-step RK4 rollout of the PUMA under a true hold."""
    m = jaxdyn.robots.puma560()
    rng = np.random.default_rng(2)
    U0 = rng.normal(size=(100, 6)) * 5
    q0 = rng.normal(size=6) * 0.3

    def L(U):
        tr = jaxdyn.rollout(m, q0, jnp.zeros(6), U, dt=0.01, steps=100, stepper="rk4")
        return jnp.sum(tr.q[-1] ** 2) + 0.1 * jnp.sum(tr.qd[-1] ** 2)

    g = jax.jit(jax.grad(L))(U0)
    idx = [(0, 0), (17, 2), (50, 3), (99, 5), (98, 1), (73, 4)]
    eps = 1e-5
    D = np.zeros((2 * len(idx), 100, 6))
    for n, (i, j) in enumerate(idx):
        D[2 * n, i, j], D[2 * n + 1, i, j] = eps, -eps
    Ls = np.asarray(jax.jit(jax.vmap(lambda d: L(U0 + d)))(D))
    fd = (Ls[0::2] - Ls[1::2]) / (2 * eps)
    np.testing.assert_allclose([g[i, j] for i, j in idx], fd, rtol=1e-6, atol=1e-8 * np.abs(fd).max())  # FD noise
    assert abs(float(g[99, 5])) > 1e-6       # the last row acts (it is no longer skipped)


def test_rollout_without_a_controller_compiles_once_and_a_controller_is_read_every_call():
    """Zero / held torques: one compiled program per structure, steps and options, so a second
    call with new q0, dt, t0 and torques compiles nothing and equals its own closed form (the
    gantry).  A controller function is traced on every call: one that reads a global gain
    follows the gain (no stale program), and equals the held constant torque it produces."""
    compiles = []

    def listen(event, duration, **kw):
        if event.endswith("backend_compile_duration"):
            compiles.append(event)
    U = np.random.default_rng(1).normal(size=(2, 9, 3)) * 10
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:                          # the listener is process-wide: removed once the counts are taken
        for stepper in ("rk4", "abm"):
            jaxdyn.rollout(gantry(), np.zeros(3), np.zeros(3), U[0], dt=0.1, steps=9, stepper=stepper)
            n = len(compiles)
            tr = jaxdyn.rollout(gantry(), np.ones(3), np.zeros(3), U[1], dt=0.05, steps=9, stepper=stepper, t0=2.0)
            assert len(compiles) == n, (stepper, compiles[n:])
            q, qd = gantry_exact(U[1], 0.05, stepper)
            np.testing.assert_allclose(tr.q, q + 1.0, atol=1e-12)
            np.testing.assert_allclose(tr.qd, qd, atol=1e-12)
            np.testing.assert_allclose(tr.t, 2.0 + 0.05 * np.arange(10), atol=1e-14)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    gain = [1.0]
    ctrl = lambda t, q, qd: gain[0] * jnp.array([60.0, 50.0, 30.0])
    for g in (1.0, 2.0):
        gain[0] = g
        tr = jaxdyn.rollout(gantry(), np.zeros(3), np.zeros(3), ctrl, dt=0.1, steps=9, stepper="rk4")
        q, qd = gantry_exact(np.tile(g * np.array([60.0, 50.0, 30.0]), (9, 1)), 0.1, "rk4")
        np.testing.assert_allclose(tr.qd, qd, atol=1e-12)
        np.testing.assert_allclose(tr.q, q, atol=1e-12)


def test_partial_controller_reuses_one_program_with_bounded_memory():
    """A controller given as jax.tree_util.Partial(law, gains) carries its gains as data: 30
    rollouts with new gains compile once, follow the gains (the gantry's closed form), and the
    process does not grow (a plain lambda per call would compile 30 times)."""
    import resource
    compiles = []

    def listen(event, duration, **kw):
        if event.endswith("backend_compile_duration"):
            compiles.append(event)
    law = lambda k, t, q, qd: k * jnp.array([60.0, 50.0, 30.0])
    run = lambda g: jaxdyn.rollout(gantry(), np.zeros(3), np.zeros(3), jax.tree_util.Partial(law, jnp.asarray(g)),
                                   dt=0.1, steps=9, stepper="rk4")
    run(np.float64(0.5))
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        rss = []
        for i, g in enumerate(np.linspace(1.0, 2.0, 30)):
            tr = run(g)
            rss.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        assert compiles == []
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    q, qd = gantry_exact(np.tile(2.0 * np.array([60.0, 50.0, 30.0]), (9, 1)), 0.1, "rk4")
    np.testing.assert_allclose(tr.q, q, atol=1e-12)
    assert rss[-1] - rss[5] < 20_000            # KiB: no per-call growth


def test_torque_array_length_must_equal_steps():
    m = jaxdyn.robots.puma560()
    with pytest.raises(ShapeError, match=r"torques must have shape \(steps, nv\) = \(100, 6\).*got \(50, 6\)"):
        jaxdyn.rollout(m, np.zeros(6), np.zeros(6), np.zeros((50, 6)), steps=100)
    with pytest.raises(ShapeError, match=r"got \(100, 5\)"):
        jaxdyn.rollout(m, np.zeros(6), np.zeros(6), np.zeros((100, 5)), steps=100)


def test_steps_and_dt_types():
    m = gantry()
    tr = jaxdyn.rollout(m, np.zeros(3), np.zeros(3), None, dt=jnp.asarray(0.01), steps=np.int64(5))
    assert tr.q.shape == (6, 3)
    for bad in (0, -1, 2.5, "5"):
        with pytest.raises(ArgumentError, match="steps"):
            jaxdyn.rollout(m, np.zeros(3), np.zeros(3), steps=bad)
    for bad in (0.0, -0.1, float("nan"), "0.1", np.ones(2)):
        with pytest.raises(ArgumentError, match="dt"):
            jaxdyn.rollout(m, np.zeros(3), np.zeros(3), dt=bad, steps=2)
    with pytest.raises(ArgumentError, match="unknown stepper"):
        jaxdyn.rollout(m, np.zeros(3), np.zeros(3), steps=2, stepper="rk5")
    # a float32 (or integer) state of a float64 model runs in float64, as the same state in float64
    U = np.random.default_rng(2).normal(size=(4, 3))
    ref = jaxdyn.rollout(m, np.full(3, 0.5), np.zeros(3), U, dt=0.1, steps=4, stepper="abm")
    for q0, qd0 in ((np.full(3, 0.5, np.float32), np.zeros(3, np.float32)), (np.full(3, 0.5), np.zeros(3, np.int32))):
        tr = jaxdyn.rollout(m, q0, qd0, U, dt=0.1, steps=4, stepper="abm")
        assert tr.q.dtype == tr.qd.dtype == jnp.float64
        np.testing.assert_array_equal(tr.q, ref.q)


def test_traced_dt_jit_and_gradient():
    """dt may be traced (time-optimal problems): jit over it and differentiate w.r.t. it."""
    m = jaxdyn.robots.puma560()
    q0 = np.linspace(-0.5, 0.5, 6)

    def f(dt):
        return jnp.sum(jaxdyn.rollout(m, q0, jnp.zeros(6), None, dt=dt, steps=20).q[-1] ** 2)

    fj = jax.jit(f)
    np.testing.assert_allclose(fj(0.01), f(0.01), rtol=1e-13)
    g = jax.jit(jax.grad(f))(0.01)
    eps = 1e-6
    np.testing.assert_allclose(g, (fj(0.01 + eps) - fj(0.01 - eps)) / (2 * eps), rtol=1e-6)


def massless_leaf():
    """A massless body on a revolute joint: ABA's pivot D = 0, the dynamics are NaN."""
    return jaxdyn.build_model(parent=[-1, 0], jtype=["revolute"] * 2, Xtree_E=np.tile(np.eye(3), (2, 1, 1)),
                              Xtree_r=np.array([[0, 0, 0], [1.0, 0, 0]]), axis=np.tile([0, 1.0, 0], (2, 1)),
                              mass=[1.0, 0.0], com=np.array([[0.5, 0, 0], [0, 0, 0]]),
                              inertia=np.stack([np.eye(3) * 0.1, np.zeros((3, 3))]),
                              joint_names=["shoulder", "wrist"])


@pytest.mark.parametrize("stepper", STEPPERS)
def test_nonfinite_dynamics_end_the_rollout_and_are_reported(stepper):
    """Before: RKF45 rejected every step, ran max_steps per sample and returned the initial
    state unchanged.  Now the rollout stops at once, ok is False and the failure is located."""
    tr = jaxdyn.rollout(massless_leaf(), np.zeros(2), np.zeros(2), None, dt=0.01, steps=50, stepper=stepper)
    assert not bool(tr.ok)
    assert np.all(~np.isfinite(np.asarray(tr.qd[1:])))    # never a frozen finite state
    if stepper == "rkf45":
        assert int(tr.accepted) == 0 and int(tr.rejected) == 0   # one failed trial, no retries
    k, t, what = jaxdyn.first_nonfinite(massless_leaf(), tr)
    assert k == 1 and t == pytest.approx(0.01)
    assert what.startswith("q[") or what.startswith("qd[")
    assert "joint '" in what


def test_rkf45_good_run_reports_ok():
    tr = jaxdyn.rollout(jaxdyn.robots.planar3(), np.array([0.1, 0.2, 0.3]), np.zeros(3), None, dt=0.01,
                        steps=5, stepper="rkf45")
    assert bool(tr.ok) and jaxdyn.first_nonfinite(jaxdyn.robots.planar3(), tr) is None


# ---- parameters ----------------------------------------------------------------------------

def test_rkf45_derivatives_are_forward_mode_only():
    """rkf45's adaptive loop (lax.while_loop): jax.jacfwd of the final state matches central
    differences; jax.grad is refused by JAX ("Reverse-mode differentiation does not work for
    lax.while_loop"), the documented result (docs/rollouts.md; use jacfwd or a fixed-step
    stepper)."""
    m = jaxdyn.robots.double_pendulum()

    def final(q0):
        return jaxdyn.rollout(m, q0, jnp.zeros(2), None, 0.05, 4, stepper="rkf45", rtol=1e-10, atol=1e-12).q[-1]

    q0 = jnp.array([0.3, -0.2])
    J = np.asarray(jax.jacfwd(final)(q0))
    h = 1e-6
    fd = np.stack([(np.asarray(final(q0.at[i].add(h))) - np.asarray(final(q0.at[i].add(-h)))) / (2 * h)
                   for i in range(2)], 1)
    np.testing.assert_allclose(J, fd, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="while_loop"):
        jax.grad(lambda q: final(q)[0])(q0)


def test_optax_updates_parameters_directly():
    """optax on jaxdyn.parameters(model): no integer leaves, no allow_int, the loss drops."""
    true = jaxdyn.robots.puma560()
    rng = np.random.default_rng(3)
    Q, V, A = (rng.normal(size=(16, 6)) for _ in range(3))
    tau = jax.vmap(lambda q, v, a: jaxdyn.rnea(true, q, v, a))(Q, V, A)
    start = true.replace(mass=true.mass * 1.3)
    p = jaxdyn.parameters(start, ("mass", "com", "inertia"))
    assert all(jnp.issubdtype(x.dtype, jnp.floating) for x in p.values())

    def loss(p):
        m = jaxdyn.with_parameters(start, p)
        return jnp.mean((jax.vmap(lambda q, v, a: jaxdyn.rnea(m, q, v, a))(Q, V, A) - tau) ** 2)

    opt = optax.adam(1e-2)
    l0 = float(loss(p))

    @jax.jit
    def step(p, s):
        g = jax.grad(loss)(p)                   # jaxdyn: strict dtype promotion
        with jax.numpy_dtype_promotion("standard"):   # optax's counters are not strict-clean
            upd, s = opt.update(g, s, p)
            return optax.apply_updates(p, upd), s

    with jax.numpy_dtype_promotion("standard"):
        state = opt.init(p)
    for _ in range(20):
        p, state = step(p, state)
    assert float(loss(p)) < 0.5 * l0
    np.testing.assert_allclose(p["inertia"], np.swapaxes(p["inertia"], 1, 2), atol=1e-15)


def test_inertia_gradient_is_symmetric():
    m = jaxdyn.robots.puma560()
    q, qd, tau = np.linspace(0.1, 0.6, 6), np.linspace(-1, 1, 6), np.linspace(1, 2, 6)
    f = lambda p: jnp.sum(jnp.sin(jaxdyn.aba(jaxdyn.with_parameters(m, p), q, qd, tau)))
    f = jax.jit(f)
    g = jax.jit(jax.grad(f))(jaxdyn.parameters(m))["inertia"]
    np.testing.assert_allclose(g, np.swapaxes(g, 1, 2), atol=1e-14)
    assert np.abs(g).max() > 1e-3
    gm = jax.grad(lambda mm: jnp.sum(jnp.sin(jaxdyn.aba(mm, q, qd, tau))), allow_int=True)(m).inertia
    np.testing.assert_allclose(gm, np.swapaxes(gm, 1, 2), atol=1e-14)
    # the symmetric gradient is the true directional derivative for symmetric perturbations
    d = np.random.default_rng(4).normal(size=(6, 3, 3)); d = 1e-3 * (d + np.swapaxes(d, 1, 2))
    eps = 1e-6
    p = jaxdyn.parameters(m)
    fd = (f({**p, "inertia": p["inertia"] + eps * d}) - f({**p, "inertia": p["inertia"] - eps * d})) / (2 * eps)
    np.testing.assert_allclose(np.sum(g * d), fd, rtol=1e-6)


def test_with_parameters_checks_names_and_shapes():
    m = jaxdyn.robots.puma560()
    with pytest.raises(ArgumentError, match="unknown parameter 'parent'"):
        jaxdyn.parameters(m, ("parent",))
    with pytest.raises(ArgumentError, match="unknown parameter 'masses'"):
        jaxdyn.with_parameters(m, {"masses": m.mass})
    with pytest.raises(ShapeError, match=r"parameter 'com' must have shape \(6, 3\)"):
        jaxdyn.with_parameters(m, {"com": np.zeros((5, 3))})


@pytest.mark.parametrize("field,fn,match", [
    ("mass", lambda m: m.mass.at[2].set(-1.0), r"body 2 \('link3'\): negative mass"),
    ("inertia", lambda m: m.inertia.at[4].set(jnp.diag(jnp.array([1.0, -1.0, 1.0]))), r"body 4 .*positive"),
    ("inertia", lambda m: m.inertia.at[1].set(jnp.diag(jnp.array([0.1, 0.1, 1.0]))), r"body 1 .*triangle"),
    ("com", lambda m: m.com.at[0, 1].set(jnp.nan), r"com has a non-finite entry at \(0, 1\)"),
    ("axis", lambda m: m.axis.at[3].set(jnp.array([0.0, 0.0, 2.0])), r"body 3 .*unit vector"),
    ("damping", lambda m: m.damping.at[0].set(-1.0), r"damping must be nonnegative"),
])
def test_validate_catches_invalid_replace(field, fn, match):
    m = jaxdyn.robots.puma560()
    assert jaxdyn.validate(m) == []
    bad = m.replace(**{field: fn(m)})
    with pytest.raises(ModelError, match=match):
        jaxdyn.validate(bad)
    assert len(jaxdyn.validate(bad, raise_errors=False)) >= 1


def test_validate_stacked_names_the_robot():
    s = jaxdyn.stack([jaxdyn.robots.puma560(), jaxdyn.robots.planar3()])
    assert jaxdyn.validate(s) == []
    bad = s.replace(mass=s.mass.at[1, 0].set(-2.0))
    with pytest.raises(ModelError, match=r"\[robot 1\]: body 0 .*negative mass"):
        jaxdyn.validate(bad)


def test_log_cholesky_round_trip():
    """theta -> (m, c, Ic) -> theta to 1e-14, and (m, c, Ic) -> theta -> (m, c, Ic) for the
    PUMA's bodies and random valid bodies; any theta is a valid body."""
    from jaxdyn.spatial import inertia as spi
    rng = np.random.default_rng(5)
    theta = rng.normal(size=(20, 10)) * 0.5
    back = jax.jit(jax.vmap(lambda t: spi.to_log_cholesky(spi.from_log_cholesky(t))))(theta)
    np.testing.assert_allclose(back, theta, atol=1e-14)
    for m in (jaxdyn.robots.puma560(), jaxdyn.robots.random_tree(8, seed=6)):
        th = jax.jit(jaxdyn.log_cholesky_parameters)(m)
        assert np.all(np.isfinite(th))
        m2 = jax.jit(jaxdyn.with_log_cholesky_parameters)(m, th)
        for f in ("mass", "com", "inertia"):
            ref = np.asarray(getattr(m, f))
            np.testing.assert_allclose(getattr(m2, f), ref, atol=1e-14 * max(1.0, np.abs(ref).max()))
    m3 = jax.jit(jaxdyn.with_log_cholesky_parameters)(jaxdyn.robots.puma560(), rng.normal(size=(6, 10)))
    assert jaxdyn.validate(m3) == []
    # the pseudo-inertia of the result is J = U U^T (independent check of the factorization)
    I = spi.from_log_cholesky(theta[0])
    J = np.asarray(spi.pseudo_inertia(I))
    assert np.linalg.eigvalsh(J).min() > 0
