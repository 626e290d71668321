"""Integrators: convergence order, conservation, planar 3R closed-form simulation, CLI/config."""
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from jaxdyn.errors import ConfigError
from test_saha_models import planar_M, planar_h


def _energy(m):
    return jax.vmap(lambda q, v: jaxdyn.kinetic_energy(m, q, v) + jaxdyn.potential_energy(m, q))


@pytest.mark.parametrize("stepper,order", [("euler", 1), ("rk4", 4), ("abm", 4)])
def test_fixed_step_convergence_order(stepper, order):
    """Global error at T vs dt against an RKF45 (rtol 1e-12) reference: log-log slope = order."""
    m = jaxdyn.robots.planar3()
    q0, qd0, T = jnp.array([0.3, -0.2, 0.1]), jnp.zeros(3), 0.4
    ref = jaxdyn.rollout(m, q0, qd0, None, T, 1, stepper="rkf45", rtol=1e-13, atol=1e-14)
    dts = [T / n for n in (40, 80, 160)] if order > 1 else [T / n for n in (200, 400, 800)]
    errs = []
    for dt in dts:
        tr = jaxdyn.rollout(m, q0, qd0, None, dt, int(round(T / dt)), stepper=stepper)
        errs.append(float(jnp.max(jnp.abs(tr.q[-1] - ref.q[-1]))))
    slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
    assert abs(slope - order) < 0.35, (slope, errs)


def _damped_link(damping, izz=0.01, armature=0.0):
    """One revolute link about z through its mass centre, no gravity: M = izz + armature."""
    return jaxdyn.build_model(parent=[-1], jtype=["revolute"], Xtree_E=np.eye(3)[None], Xtree_r=np.zeros((1, 3)),
                              axis=[[0.0, 0.0, 1.0]], mass=[1.0], com=np.zeros((1, 3)),
                              inertia=np.diag([0.02, 0.02, izz])[None], damping=[damping], armature=[armature],
                              gravity=(0.0, 0.0, 0.0), name="damped_link")


def test_fixed_steps_are_stable_up_to_their_interval_on_joint_damping():
    """A damped link decays as qd' = -(d / I) qd.  Each fixed-step stepper keeps qd bounded for dt
    just inside its stability interval (``STABLE_STEP[stepper] / (d / I)``) and lets it grow just
    outside (the closed-form intervals of semi-implicit Euler, RK4 and ABM4 PECE); and
    ``max_stable_step`` gives that dt, with the armature in M."""
    from jaxdyn.integrators.stability import STABLE_STEP, max_stable_step
    m = _damped_link(5.0, izz=0.01, armature=0.015)       # lambda = 5 / 0.025 = 200 1/s
    q0, qd0 = jnp.zeros(1), jnp.ones(1)
    for stepper, h in STABLE_STEP.items():
        h_dt = max_stable_step(m, q0, stepper)
        assert abs(h_dt - h / 200.0) <= 1e-12 * h_dt, stepper
        dts = jnp.array([0.97, 1.03]) * h_dt
        tr = jax.vmap(lambda dt: jaxdyn.rollout(m, q0, qd0, None, dt, 300, stepper=stepper))(dts)
        end = np.abs(np.asarray(tr.qd[:, -1, 0]))
        assert end[0] < 1.0 < 10.0 < end[1], (stepper, end)
    assert max_stable_step(m, q0, "rkf45") == np.inf
    assert max_stable_step(_damped_link(0.0), q0, "rk4") == np.inf


def test_damping_rate_on_a_constraint_null_space():
    """The fastest rate of D x = lambda M x is the largest eigenvalue of M^-1 D; on the null
    space of K it is the rate of the motions K allows."""
    from jaxdyn.integrators.stability import damping_rate
    rng = np.random.default_rng(0)
    A = rng.normal(size=(4, 4))
    M, d = A @ A.T + np.eye(4), rng.uniform(0.5, 3.0, 4)
    assert abs(damping_rate(M, d) - np.linalg.eigvals(np.linalg.solve(M, np.diag(d))).real.max()) < 1e-12
    M2, d2 = np.diag([1.0, 1.0]), np.array([1.0, 100.0])
    assert damping_rate(M2, d2) == pytest.approx(100.0)
    assert damping_rate(M2, d2, K=np.array([[0.0, 1.0]])) == pytest.approx(1.0)     # dof 1 locked
    assert damping_rate(M2, np.zeros(2)) == 0.0


@pytest.mark.parametrize("robot,q0", [("puma560", np.zeros(6)), ("stanford_arm", [0, np.pi / 2, 0, 0, 0, 0])])
def test_free_fall_conserves_energy_rkf45(robot, q0):
    m = getattr(jaxdyn.robots, robot)()
    tr = jaxdyn.rollout(m, jnp.asarray(q0, float), jnp.zeros(6), None, 0.01, 1000, stepper="rkf45",
                        rtol=1e-10, atol=1e-12)
    E = _energy(m)(tr.q, tr.qd)
    assert float(jnp.max(jnp.abs(E - E[0])) / jnp.max(jnp.abs(E))) < 1e-8
    assert float(jnp.max(jnp.abs(tr.q))) > 0.1  # it really fell


def test_semi_implicit_euler_energy_error_bounded():
    """Symplectic for a separable Hamiltonian (constant M): a 1-link DH pendulum, 20 s at 10 ms.
    (For configuration-dependent M, velocity-form semi-implicit Euler is not symplectic.)"""
    m = jaxdyn.from_dh([[1.0, 0, 0, 0]], mass=[1.0], r=[[0.5, 0, 0]], inertia=[[0, 1 / 12, 1 / 12]],
                       gravity=(0.0, -9.81, 0.0), name="pendulum")
    tr = jaxdyn.rollout(m, jnp.array([1.0]), jnp.zeros(1), None, 1e-2, 2000, stepper="euler")
    E = np.asarray(_energy(m)(tr.q, tr.qd))
    err = np.abs(E - E[0])
    first, last = err[: len(err) // 2].max(), err[len(err) // 2:].max()
    assert last < 3 * first and last < 0.05 * np.abs(E).max()  # oscillates, does not grow


def _closed_form_rhs(q, qd, tau):
    return np.linalg.solve(planar_M(q), tau - planar_h(q, qd))


@pytest.mark.parametrize("forced", [False, True])
def test_planar3_simulation_matches_closed_form(forced):
    """Same RK4 on the closed-form planar 3R equations (numpy) and on jaxdyn: <= 1e-8 over 2 s."""
    m = jaxdyn.robots.planar3()
    dt, n = 0.01, 200
    q0 = np.zeros(3)
    traj = jaxdyn.integrators.cycloidal(q0, np.full(3, np.pi), 10.0)
    ctrl = jaxdyn.integrators.feedforward(m, traj) if forced else None
    tr = jaxdyn.rollout(m, q0, np.zeros(3), ctrl, dt, n, stepper="rk4")

    def tau_of(t):
        return np.asarray(ctrl(t, None, None)) if forced else np.zeros(3)

    y, t = np.zeros(6), 0.0
    for k in range(n):
        tt = t
        f = lambda s, y: np.concatenate([y[3:], _closed_form_rhs(y[:3], y[3:], tau_of(s))])
        k1 = f(tt, y); k2 = f(tt + dt / 2, y + dt / 2 * k1); k3 = f(tt + dt / 2, y + dt / 2 * k2)
        k4 = f(tt + dt, y + dt * k3)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        t += dt
    np.testing.assert_allclose(tr.q[-1], y[:3], atol=1e-8)
    np.testing.assert_allclose(tr.qd[-1], y[3:], atol=1e-8)


def test_forced_runs_track_then_deviate():
    """Open-loop feed-forward torques track eq. (18) at first, then the error grows (Saha's Stanford
    arm deviates after ~2.5 s).  We record when |q - q_d| first exceeds 0.01 rad / m."""
    m = jaxdyn.robots.stanford_arm()
    q0 = np.array([0, np.pi / 2, 0, 0, 0, 0.0])
    qT = np.array([np.pi / 3, np.pi / 3, 0.1, np.pi / 3, np.pi / 3, np.pi / 3])
    traj = jaxdyn.integrators.cycloidal(q0, qT, 10.0)
    tr = jaxdyn.rollout(m, q0, np.zeros(6), jaxdyn.integrators.feedforward(m, traj), 0.01, 1000, stepper="rkf45",
                        rtol=1e-6, atol=1e-9)
    qd = jax.vmap(lambda t: traj(t)[0])(tr.t)
    dev = np.abs(np.asarray(tr.q - qd)).max(1)
    assert dev[:100].max() < 1e-3                     # tracks during the first second
    k = int(np.argmax(dev > 1e-2))
    assert dev.max() > 1e-2 and 1.0 < tr.t[k] < 10.0  # then deviates
    print(f"stanford forced run deviates at t = {float(tr.t[k]):.2f} s")


def test_rollout_vmaps_over_initial_states_and_stacked_models():
    ms = [jaxdyn.robots.puma560(), jaxdyn.robots.stanford_arm()]
    big = jaxdyn.stack(ms)
    q0 = [jnp.zeros(6), jnp.array([0, 1.5, 0, 0, 0, 0.0])]
    Q0 = jnp.stack([big.q(j, q) for j, q in enumerate(q0)])
    trs = jax.vmap(lambda mm, q: jaxdyn.rollout(mm, q, jnp.zeros(big.nv), None, 0.01, 50))(big, Q0)
    for j, m in enumerate(ms):
        tr = jaxdyn.rollout(m, q0[j], jnp.zeros(6), None, 0.01, 50)
        np.testing.assert_allclose(big.member_q(j, trs.q[j]), tr.q, atol=1e-12)


def test_chunked_rollout_gradient_matches_plain():
    m = jaxdyn.robots.planar3()
    U = jnp.ones((40, 3)) * 0.1

    def loss(U, chunk):
        tr = jaxdyn.rollout(m, jnp.zeros(3), jnp.zeros(3), U, 0.01, 40, stepper="rk4", chunk=chunk)
        return jnp.sum(tr.q[-1] ** 2)

    g1, g2 = (jax.jit(jax.grad(loss), static_argnums=1)(U, c) for c in (None, 8))
    np.testing.assert_allclose(g1, g2, atol=1e-12)
    eps = 1e-6
    plain = jax.jit(lambda U: loss(U, None))
    fd = (plain(U.at[3, 1].add(eps)) - plain(U.at[3, 1].add(-eps))) / (2 * eps)
    np.testing.assert_allclose(g1[3, 1], fd, rtol=1e-5)


def test_config_errors_name_the_key(tmp_path):
    from jaxdyn.config import load_config
    p = tmp_path / "c.toml"
    for body, pattern in (('[simulation]\ndt = -0.01', r"simulation\.dt must be > 0"),
                          ('[simulation]\nstep = 0.01', r"unknown key simulation\.step"),
                          ('[simulation]\nT = "ten"', r"simulation\.T must be float"),
                          ('[initial]\nq0 = [0, nan, 0, 0, 0, 0]', r"initial\.q0 contains NaN")):
        p.write_text('[robot]\nname = "puma560"\n' + body + '\n')
        with pytest.raises(ConfigError, match=pattern):
            load_config(str(p))
    for name in ("puma_freefall", "puma_forced", "stanford_freefall", "stanford_forced",
                 "planar3_freefall", "planar3_forced"):
        cfg = load_config(name)
        assert cfg["simulation"]["T"] == 10.0 and cfg["simulation"]["dt"] == 0.01


def test_cli_main_job_writes_outputs(tmp_path):
    cfg = tmp_path / "short.toml"
    cfg.write_text('[robot]\nname = "planar3"\n[simulation]\nT = 0.2\ndt = 0.01\nintegrator = "rk4"\n'
                   '[control]\ntype = "feedforward"\nq_final = [1.0, 1.0, 1.0]\n')
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "jaxdyn.cli", "simulate", str(cfg), "--out", str(out),
                        "--batch", "2"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    data = np.loadtxt(out / "trajectory.csv", delimiter=",", skiprows=1)
    header = (out / "trajectory.csv").read_text().splitlines()[0]
    assert header == "t,q1,q2,q3,qd1,qd2,qd3,tau1,tau2,tau3"
    assert data.shape == (21, 10)
    for f in ("joints.png", "torques.png", "ee.png", "summary.txt"):
        assert (out / f).stat().st_size > 1000 or f == "summary.txt"
    r = subprocess.run([sys.executable, "-m", "jaxdyn.cli", "simulate", str(tmp_path / "nope.toml")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "not found" in r.stderr


def test_cli_energy_line_is_drift_when_passive_and_balance_when_forced(tmp_path):
    """The summary's energy line: for a passive run (zero torque, no damping) the drift
    max |E - E0| / max |E|; for a forced run the balance with the work W of the torques, which
    the test recomputes from trajectory.csv (E from the model's energies, W by the trapezoid
    rule), both relative to the energy exchanged (planar3 starts at E = 0): conservation of
    energy holds to the integrator's and the sampling's O(dt^2) errors."""
    import jax
    import jax.numpy as jnp
    from jaxdyn.cli import main
    m = jaxdyn.robots.planar3()
    for ctrl, key in (("", "energy drift"), ('[control]\ntype = "feedforward"\nq_final = [1.0, 1.0, 1.0]\n',
                                              "energy balance")):
        cfg = tmp_path / "c.toml"
        cfg.write_text('[robot]\nname = "planar3"\n[simulation]\nT = 0.5\ndt = 0.002\nintegrator = "rk4"\n' + ctrl)
        out = tmp_path / key.replace(" ", "_")
        assert main(["simulate", str(cfg), "--out", str(out)]) == 0
        text = (out / "summary.txt").read_text()
        line = [x for x in text.splitlines() if x.startswith("energy")]
        assert len(line) == 1 and line[0].startswith(key), line
        said = float(line[0][len(key):].split()[0])
        X = np.loadtxt(out / "trajectory.csv", delimiter=",", skiprows=1)
        t, q, v, tau = X[:, 0], X[:, 1:4], X[:, 4:7], X[:, 7:10]
        K = np.asarray(jax.vmap(lambda a, b: jaxdyn.kinetic_energy(m, a, b))(jnp.asarray(q), jnp.asarray(v)))
        V = np.asarray(jax.vmap(lambda a: jaxdyn.potential_energy(m, a))(jnp.asarray(q)))
        E = K + V
        P = np.sum(tau * v, 1)
        W = np.concatenate([[0.0], np.cumsum(0.5 * (P[1:] + P[:-1]) * np.diff(t))])
        ref = np.max(np.abs(E - E[0] - W)) / max(K.max(), np.abs(V - V[0]).max(), np.abs(W).max())
        assert said == pytest.approx(ref, rel=1e-3, abs=1e-15)
        assert said < (1e-9 if key == "energy drift" else 1e-4), said
        if key == "energy balance":
            assert np.max(np.abs(W)) > 0.1 * K.max()      # the torques did work


def test_cli_without_matplotlib_writes_data_and_says_plots_skipped(tmp_path, monkeypatch):
    """Plotting is the optional ``plot`` extra: with matplotlib unimportable the main job still
    writes the trajectory and the summary, names no figure, and says why."""
    from jaxdyn.cli import main
    from jaxdyn.output import PLOTS_SKIPPED
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.pyplot"):     # importing them raises ImportError,
        monkeypatch.setitem(sys.modules, name, None)                        # also where an earlier test loaded them
    cfg = tmp_path / "short.toml"
    cfg.write_text('[robot]\nname = "planar3"\n[simulation]\nT = 0.05\ndt = 0.01\nintegrator = "rk4"\n')
    out = tmp_path / "out"
    assert main(["simulate", str(cfg), "--out", str(out)]) == 0
    assert np.loadtxt(out / "trajectory.csv", delimiter=",", skiprows=1).shape == (6, 10)
    summary = (out / "summary.txt").read_text()
    assert PLOTS_SKIPPED in summary and ".png" not in summary
    assert not list(out.glob("*.png"))


def test_outputs_leave_the_callers_matplotlib_backend_and_pyplot_alone(tmp_path):
    """The figures are plain matplotlib Figures saved with Agg: a program that chose another
    backend keeps it after jaxdyn wrote its PNGs, and jaxdyn does not load pyplot."""
    cfg = tmp_path / "short.toml"
    cfg.write_text('[robot]\nname = "planar3"\n[simulation]\nT = 0.05\ndt = 0.01\nintegrator = "rk4"\n')
    code = ("import sys, matplotlib; matplotlib.use('svg'); from jaxdyn.cli import main; "
            f"assert main(['simulate', {str(cfg)!r}, '--out', {str(tmp_path / 'out')!r}]) == 0; "
            "print(matplotlib.get_backend(), 'matplotlib.pyplot' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "JAXDYN_CACHE_DIR": ""})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == "svg False"
    assert sorted(p.name for p in (tmp_path / "out").glob("*.png")) == ["ee.png", "joints.png"]


def test_position_columns_show_bases_as_position_and_roll_pitch_yaw():
    """joints.png's columns: a free joint as x, y, z and roll, pitch, yaw (SciPy's extrinsic
    xyz angles of the quaternion, R = Rz(yaw) Ry(pitch) Rx(roll)), a spherical joint as its
    three angles, revolute_unbounded and planar angles from (cos, sin); names and units."""
    from scipy.spatial.transform import Rotation

    from jaxdyn.output import position_columns
    m = jaxdyn.robots.random_tree(6, 0.5, 3, joint_types=("spherical", "revolute_unbounded", "planar", "prismatic"),
                                  floating_base=True)
    Q = np.stack([np.asarray(jaxdyn.random_configuration(m, jax.random.PRNGKey(s))) for s in range(3)])
    S, labels = position_columns(m, Q)
    assert S.shape == (3, len(labels))
    assert labels[:6] == [(f"{m.joint_names[0]} {a}", u) for a, u in
                          (("x", "m"), ("y", "m"), ("z", "m"), ("roll", "rad"), ("pitch", "rad"), ("yaw", "rad"))]
    np.testing.assert_allclose(S[:, :3], Q[:, :3], atol=1e-12)
    ref = Rotation.from_quat(Q[:, 3:7]).as_euler("xyz")
    np.testing.assert_allclose(np.sin(S[:, 3:6]), np.sin(ref), atol=1e-9)      # equal up to 2 pi
    np.testing.assert_allclose(np.cos(S[:, 3:6]), np.cos(ref), atol=1e-9)
    assert not any(lab[0].startswith("q[") for lab in labels)
    assert S.shape[1] == sum({"free": 6, "spherical": 3, "planar": 3}.get(jaxdyn.model.joints.JOINT_NAMES[int(t)], 1)
                             for t in m.jtype)


def test_dof_labels_units_follow_the_motion_of_each_dof():
    """The units of the summaries' and plots' dof columns: a dof is linear ("m", "m/s", "N")
    exactly when moving along it (jaxdyn.integrate) leaves its body's orientation unchanged."""
    from jaxdyn.output import dof_labels
    types = ("spherical", "revolute_unbounded", "planar", "prismatic", "revolute", "helical")
    m = jaxdyn.robots.random_tree(8, 0.5, 22, joint_types=types, floating_base=True)
    assert {jaxdyn.model.joints.JOINT_NAMES[int(t)] for t in m.jtype} == set(types) | {"free"}
    q = jaxdyn.random_configuration(m, jax.random.PRNGKey(4))
    R0 = jaxdyn.frame_poses(m, q)[0]
    moved = jax.vmap(lambda dq: jaxdyn.frame_poses(m, jaxdyn.integrate(m, q, dq))[0])(0.3 * jnp.eye(m.nv))
    labels = dof_labels(m)
    for j, b in enumerate(m.topology.dof_body):
        linear = bool(np.allclose(moved[j, b], R0[b], atol=1e-12))
        assert labels[j][1:] == (("m", "m/s", "N") if linear else ("rad", "rad/s", "N m")), (j, labels[j])
