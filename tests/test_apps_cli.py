"""``jaxdyn identify`` and ``jaxdyn trajopt``: the defaults run end to end and write their
outputs to ./jaxdyn-out/<config>/; bad configs and data files get named errors (exit 2)."""

import numpy as np
import pytest

import jaxdyn
from jaxdyn.cli import main


def _summary(path):
    with open(path) as fh:
        return fh.read()


def test_identify_default_runs_and_writes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["identify"]) == 0
    out = tmp_path / "jaxdyn-out" / "identify_puma"
    for f in ("parameters.csv", "base_parameters.csv", "identified.urdf", "animation.html", "params.png",
              "residuals.png", "loss.png", "summary.txt"):
        assert (out / f).is_file(), f
    s = _summary(out / "summary.txt")
    assert "all valid" in s
    assert "joint limits: none (the model's position limits are infinite)" in s     # the PUMA's are
    # the identified parameters are closer to the truth than the +-50 % start (independent
    # check from the CSV: base parameters true vs identified)
    B = np.loadtxt(out / "base_parameters.csv", delimiter=",", skiprows=1)
    rel = np.linalg.norm(B[:, 3] - B[:, 1]) / np.linalg.norm(B[:, 1])
    assert rel < 0.05, rel
    # identified.urdf holds the identified column of parameters.csv (read back by load_urdf)
    P = np.loadtxt(out / "parameters.csv", delimiter=",", skiprows=1, usecols=4)
    got = jaxdyn.sysid.inertial_parameters(jaxdyn.load_urdf(str(out / "identified.urdf")))
    np.testing.assert_allclose(got, P, rtol=1e-9, atol=1e-9)


def test_identify_friction_config_recovers_the_urdf_friction(tmp_path):
    """The built-in identify_xarm7_friction (viscous and Coulomb columns, noisy data from the
    URDF's <dynamics damping friction>), shortened: parameters.csv's identified friction is
    within 5 % of the coefficients Pinocchio reads from the URDF, the summary prints them, and
    identified.urdf carries them (Pinocchio reads it back)."""
    import os
    pin = pytest.importorskip("pinocchio")
    from jaxdyn.config import read_toml
    from jaxdyn.io.named import ERD_URDFS, example_robot_data_dir
    raw, _ = read_toml("identify_xarm7_friction", "identify_xarm7_friction", kind="identify")
    assert raw["estimation"]["friction"] is True
    cfg = tmp_path / "fr.toml"
    cfg.write_text('[robot]\nname = "erd:xarm7"\n[excitation]\nT = 40.0\noptimize_steps = 0\n[noise]\n'
                   'torque_std = 0.2\n[estimation]\nfriction = true\nsteps = 300\n[validation]\nT = 2.0\n')
    out = tmp_path / "o"
    assert main(["identify", str(cfg), "--out", str(out)]) == 0
    pm = pin.buildModelFromUrdf(os.path.join(example_robot_data_dir(), ERD_URDFS["xarm7"]))
    rows = [ln.split(",") for ln in (out / "parameters.csv").read_text().splitlines()[1:]]
    for term, want in (("viscous", pm.damping), ("coulomb", pm.friction)):
        got = np.array([float(r[4]) for r in rows if r[1] == term])
        assert [r[0] for r in rows if r[1] == term] == [f"joint{i}" for i in range(1, 8)]
        np.testing.assert_allclose(got, want, rtol=0.05, err_msg=term)
        back = pin.buildModelFromUrdf(str(out / "identified.urdf"))
        np.testing.assert_allclose(back.damping if term == "viscous" else back.friction, got, rtol=1e-9)
    s = _summary(out / "summary.txt")
    assert "viscous (N m s/rad or N s/m) per joint: true [10.0, 10.0, 5.0, 5.0, 5.0, 2.0, 2.0]" in s, s
    assert "coulomb (N m or N) per joint: true [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]" in s, s


@pytest.mark.parametrize("robot", ["planar3", "double_pendulum"])
def test_identify_flat_robots(tmp_path, robot):
    """Robots whose every body is flat (no positive-definite pseudo-inertia; started at the
    true model, so that no body is fitted) finish, say so, and their noise-free least squares
    recovers the true base parameters."""
    cfg = tmp_path / "flat.toml"
    cfg.write_text(f'[robot]\nname = "{robot}"\n[excitation]\nT = 4.0\ndt = 0.02\noptimize_steps = 0\n'
                   '[noise]\ntorque_std = 0.0\nq_std = 0.0\nqd_std = 0.0\nqdd_std = 0.0\n'
                   '[estimation]\nsteps = 20\nperturb = 0.0\n[validation]\nT = 2.0\n')
    out = tmp_path / "o"
    assert main(["identify", str(cfg), "--out", str(out)]) == 0
    s = _summary(out / "summary.txt")
    assert "no body was fitted with a consistency constraint" in s, s
    B = np.loadtxt(out / "base_parameters.csv", delimiter=",", skiprows=1, ndmin=2)
    assert np.linalg.norm(B[:, 2] - B[:, 1]) <= 1e-6 * np.linalg.norm(B[:, 1])


_TWO_LINK = """<robot name="two_link"><link name="base"/>
  <link name="upper"><inertial><origin xyz="0.1 0.02 -0.2"/><mass value="2.5"/>
    <inertia ixx="0.05" iyy="0.04" izz="0.02" ixy="0.001" ixz="0.002" iyz="-0.001"/></inertial></link>
  <link name="lower"><inertial><origin xyz="0 0.05 -0.15"/><mass value="1.25"/>
    <inertia ixx="0.02" iyy="0.03" izz="0.015" ixy="0" ixz="0.001" iyz="0"/></inertial></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="50" velocity="5"/></joint>
  <joint name="elbow" type="revolute"><parent link="upper"/><child link="lower"/><origin xyz="0 0 -0.4"/>
    <axis xyz="1 0 0"/><limit lower="-2" upper="2" effort="50" velocity="5"/></joint></robot>"""


def test_identify_robot_option_runs_the_config_on_that_robot(tmp_path, monkeypatch, capsys):
    """`jaxdyn identify CONFIG --robot urdf:PATH` identifies the URDF's robot with the config's
    excitation, noise and estimation: the true parameters are the file's masses and first
    moments m c, noise-free least squares recovers the base parameters, the folder is named
    after config and robot; a closed mechanism is refused (exit 2, one line), and an unknown
    robot is named as --robot (also by simulate)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "two.urdf").write_text(_TWO_LINK)
    (tmp_path / "c.toml").write_text('[robot]\nname = "planar3"\n[excitation]\nT = 4.0\ndt = 0.02\noptimize_steps = 0\n'
                                     '[noise]\ntorque_std = 0.0\nq_std = 0.0\nqd_std = 0.0\nqdd_std = 0.0\n'
                                     '[estimation]\nsteps = 20\n[validation]\nT = 2.0\n')
    assert main(["identify", "c.toml", "--robot", "urdf:two.urdf"]) == 0
    out = tmp_path / "jaxdyn-out" / "c_two"
    assert "robot: two_link (nb=2, 20 inertial parameters)" in _summary(out / "summary.txt")
    rows = {tuple(r[:2]): float(r[2]) for r in (ln.split(",") for ln in (out / "parameters.csv").read_text().splitlines()[1:])}
    want = {("upper", "m"): 2.5, ("upper", "mcx"): 0.25, ("upper", "mcy"): 0.05, ("upper", "mcz"): -0.5,
            ("lower", "m"): 1.25, ("lower", "mcx"): 0.0, ("lower", "mcy"): 0.0625, ("lower", "mcz"): -0.1875}
    for k, w in want.items():
        assert abs(rows[k] - w) <= 1e-12, (k, rows[k], w)
    B = np.loadtxt(out / "base_parameters.csv", delimiter=",", skiprows=1, ndmin=2)
    assert np.linalg.norm(B[:, 2] - B[:, 1]) <= 1e-6 * np.linalg.norm(B[:, 1])
    capsys.readouterr()
    assert main(["identify", "c.toml", "--robot", "four_bar"]) == 2
    err = capsys.readouterr().err
    assert "four_bar' is closed" in err and len(err.strip().splitlines()) == 1, err
    for cmd in ("identify", "simulate"):              # an unknown robot is named as the user gave it
        assert main([cmd, "--robot", "erd:nosuch"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("jaxdyn: error: --robot 'erd:nosuch': unknown short name") and \
            len(err.strip().splitlines()) == 1, err


def _check_replay(model, out, q0, qT):
    """From trajectory.csv alone (columns t, q, qd, tau; row k's tau held over sample k): the
    torques replayed open-loop on RK4 at dt give the CSV's states (the optimizer's model) and on
    RK4 at dt / 10 end within 1e-2 of (q_final, 0), the numbers the summary reports."""
    import jax.numpy as jnp
    X = np.loadtxt(out / "trajectory.csv", delimiter=",", skiprows=1)
    nq, nv = model.nq, model.nv
    dt, n = X[1, 0] - X[0, 0], X.shape[0] - 1
    U = jnp.asarray(X[:-1, 1 + nq + nv:1 + nq + 2 * nv])
    tr = jaxdyn.rollout(model, jnp.asarray(q0), jnp.zeros(nv), U, dt, n, stepper="rk4")
    np.testing.assert_allclose(np.asarray(tr.q), X[:, 1:1 + nq], atol=1e-9)
    fine = jaxdyn.rollout(model, jnp.asarray(q0), jnp.zeros(nv), jnp.repeat(U, 10, axis=0), dt / 10, 10 * n,
                          stepper="rk4")
    rep_q = np.abs(np.asarray(fine.q[-1]) - qT).max()
    rep_v = np.abs(np.asarray(fine.qd[-1])).max()
    assert max(rep_q, rep_v) <= 1e-2, (rep_q, rep_v)
    line = [s for s in _summary(out / "summary.txt").splitlines() if s.startswith("terminal error replayed")][0]
    said = [float(x.split(",")[0]) for x in line.split("= ")[2:]]
    np.testing.assert_allclose(said, [rep_q, rep_v], rtol=1e-2)
    return X, dt, n


def test_trajopt_closed_chain_config_reaches_in_replay(tmp_path):
    """trajopt_four_bar (a closed chain, only the crank actuated), as shipped: from
    trajectory.csv alone, its torques replayed open-loop on the constrained four-bar (Baumgarte
    (10, 10), RK4 at dt / 10) bring the crank within 1e-2 rad of 2 rad at rest, with the loop
    closed; the unactuated joints get no torque; the summary reports the same replay error."""
    import jax.numpy as jnp
    out = tmp_path / "o"
    assert main(["trajopt", "trajopt_four_bar", "--out", str(out)]) == 0
    cm, _ = jaxdyn.mechanisms.MECHANISMS["four_bar"]()
    X = np.loadtxt(out / "trajectory.csv", delimiter=",", skiprows=1)
    dt, n = X[1, 0] - X[0, 0], X.shape[0] - 1
    U = X[:-1, 7:10]
    assert np.all(U[:, 1:] == 0) and np.abs(U[:, 0]).max() > 1.0
    fine = jaxdyn.rollout(cm, jnp.asarray(X[0, 1:4]), jnp.asarray(X[0, 4:7]), jnp.repeat(jnp.asarray(U), 10, axis=0),
                          dt / 10, 10 * n, stepper="rk4", stabilization=(10.0, 10.0))
    rep_q, rep_v = abs(float(fine.q[-1, 0]) - 2.0), abs(float(fine.qd[-1, 0]))
    assert max(rep_q, rep_v) <= 1e-2, (rep_q, rep_v)
    assert float(jnp.abs(jaxdyn.constraints.constraint_residual(cm, fine.q[-1])).max()) < 1e-6
    line = [s for s in _summary(out / "summary.txt").splitlines() if s.startswith("terminal error replayed")][0]
    said = [float(x.split(",")[0]) for x in line.split("= ")[2:]]
    np.testing.assert_allclose(said, [rep_q, rep_v], rtol=0.05, atol=1e-9)


def test_trajopt_default_runs_replays_and_beats_cycloidal(tmp_path, monkeypatch):
    """The PUMA minimum-effort problem (terminal state as an augmented-Lagrangian constraint):
    the torques of trajectory.csv, replayed open-loop here from the CSV alone (row k held over
    sample k), give the CSV's states on the optimizer's model (RK4 at dt) and reach the target
    within 1e-2 rad on an accurate integrator (RK4 at dt / 10), as the summary says; they cost
    less effort than the cycloidal trajectory (Saha eq. 18) between the same endpoints executed
    by computed torque."""
    monkeypatch.chdir(tmp_path)
    assert main(["trajopt"]) == 0
    out = tmp_path / "jaxdyn-out" / "trajopt_puma_p2p"
    for f in ("trajectory.csv", "cost.png", "joints.png", "torques.png", "summary.txt"):
        assert (out / f).is_file(), f
    qT = np.array([0.5, -0.5, 0.5, 0.3, 0.3, 0.3])
    import jax.numpy as jnp
    m = jaxdyn.robots.puma560()
    X, dt, n = _check_replay(m, out, np.zeros(6), qT)
    # the animation plays the CSV's trajectory (the poses it embeds are frame_poses of the CSV's q)
    from jaxdyn.viewer import read_scene
    rob = read_scene(out / "animation.html")["robots"][0]
    k = np.searchsorted(X[:, 0], np.asarray(rob["t"]) - 1e-12)
    _, p = jaxdyn.frame_poses(m, jnp.asarray(X[k[-1], 1:7]))
    np.testing.assert_allclose(np.asarray(rob["poses"][-1]).reshape(-1, 12)[:, :3], np.asarray(p)[:m.nb], atol=1e-9)
    T = dt * n
    cyc = jaxdyn.rollout(m, jnp.zeros(6), jnp.zeros(6),
                         jaxdyn.integrators.computed_torque(m, jaxdyn.integrators.cycloidal(jnp.zeros(6), jnp.asarray(qT), T), 100.0, 20.0),
                         dt, n, stepper="rk4")
    assert np.abs(np.asarray(cyc.q[-1]) - qT).max() < 0.05       # the comparison reaches the target too
    e_opt = np.sum(X[:-1, 13:19] ** 2) * dt
    e_cyc = float(np.sum(np.asarray(cyc.tau[:-1]) ** 2) * dt)
    assert e_opt < 0.8 * e_cyc, (e_opt, e_cyc)
    assert "joint limits: none (the model's position limits are infinite)" in _summary(out / "summary.txt")
    line = [s for s in _summary(out / "summary.txt").splitlines() if s.startswith("cycloidal")][0]
    assert float(line.rsplit("=", 1)[1]) == pytest.approx(e_opt / e_cyc, abs=1e-3)


def _cfg(tmp_path, text, name="c.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("cmd,text,match", [
    ("trajopt", '[robot]\nname = "nosuchrobot"\n[problem]\nT = 1.0\ndt = 0.1\nq_final = [0.0]\n', "nosuchrobot"),
    ("trajopt", '[robot]\nname = "double_pendulum"\n[problem]\nT = 1.0\ndt = 0.1\nq_final = [0.0, 0.0]\n'
                'wibble = 1.0\n', "problem.wibble"),
    ("trajopt", '[robot]\nname = "double_pendulum"\n[problem]\nT = 1.0\ndt = 0.1\n', "problem.q_final"),
    ("trajopt", '[robot]\nname = "double_pendulum"\n[problem]\nT = 1.0\ndt = 0.1\nq_final = [0.0, 0.0]\n'
                '[robust]\nbody = "nosuchbody"\nextra_masses = [1.0]\n', "nosuchbody"),
    ("identify", '[robot]\nname = "puma560"\n[data]\nfile = "missing.csv"\n', "missing.csv"),
    ("identify", '[robot]\nname = "puma560"\n[estimation]\nsteps = "many"\n', "estimation.steps"),
    ("identify", '[robot]\nname = "nosuchrobot"\n', "nosuchrobot"),
])
def test_bad_configs_are_named(tmp_path, capsys, cmd, text, match):
    assert main([cmd, _cfg(tmp_path, text), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err, err


def test_data_file_with_nan_names_its_row(tmp_path, capsys):
    cols = [f"{p}{i + 1}" for p in ("q", "qd", "qdd", "tau") for i in range(6)]
    rows = np.ones((5, 24))
    rows[3, 7] = np.nan
    data = tmp_path / "d.csv"
    np.savetxt(data, rows, delimiter=",", header=",".join(cols), comments="")
    cfg = _cfg(tmp_path, f'[robot]\nname = "puma560"\n[data]\nfile = "{data}"\n')
    assert main(["identify", cfg, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "row 4" in err and "qd2" in err, err
    bad = tmp_path / "e.csv"
    bad.write_text("q1,q2\n1,2\n")
    cfg = _cfg(tmp_path, f'[robot]\nname = "puma560"\n[data]\nfile = "{bad}"\n', "e.toml")
    assert main(["identify", cfg, "--out", str(tmp_path / "o")]) == 2
    assert "missing columns" in capsys.readouterr().err


def test_limit_report_names_the_joint():
    from jaxdyn.apps.trajopt_cli import limit_report
    m = jaxdyn.robots.double_pendulum()
    m = m.replace(q_lower=m.q_lower.at[1].set(-0.5), q_upper=m.q_upper.at[1].set(0.5))
    Q = np.zeros((10, 2))
    Q[6, 1] = 0.7
    lines = limit_report(m, Q)
    assert len(lines) == 1 and "q[1]" in lines[0] and "sample 6" in lines[0]
    assert limit_report(m, np.zeros((10, 2))) == []


def test_trajopt_torque_limits_default_to_the_models_effort_limits():
    from jaxdyn.apps.trajopt_cli import torque_limits
    from helpers import urdf_path
    from jaxdyn.io.named import robot_by_name
    pin = pytest.importorskip("pinocchio")
    m = robot_by_name("erd:ur5")
    lim, why = torque_limits({"problem": {}}, "c", m, m.nv)
    np.testing.assert_array_equal(lim, pin.buildModelFromUrdf(urdf_path("ur5")).effortLimit)   # <limit effort>
    assert why == "the model's effort limits"
    lim, why = torque_limits({"problem": {"tau_limit": [1.0] * 6}}, "c", m, m.nv)
    assert lim.tolist() == [1.0] * 6 and why == "problem.tau_limit"
    assert torque_limits({"problem": {}}, "c", jaxdyn.robots.puma560(), 6)[0] is None     # DH: none


def test_trajopt_ur5_reach_replays(tmp_path):
    """A config on a robot from example-robot-data (the UR5 URDF): its plan replays open-loop
    from the CSV alone to the target within 1e-2 rad on RK4 at dt / 10."""
    from jaxdyn.io.named import robot_by_name
    out = tmp_path / "ur5"
    assert main(["trajopt", "trajopt_ur5_reach", "--out", str(out)]) == 0
    m = robot_by_name("erd:ur5")
    _check_replay(m, out, np.array([0.0, -1.5, 1.5, 0.0, 0.0, 0.0]), np.array([0.9, -0.8, 0.6, -0.7, 0.5, 0.4]))


def test_cli_help_lists_configs_and_robot_override_names_the_folder(tmp_path, monkeypatch, capsys):
    """``--help`` of each tool lists its built-in configs; ``simulate --robot`` writes into a
    folder named after the config and the robot (not the config's own folder)."""
    from jaxdyn.config import builtin_configs
    for cmd in ("simulate", "trajopt", "identify"):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        names = builtin_configs(cmd)
        assert names and all(n in text for n in names), (cmd, names)
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "short.toml"
    cfg.write_text('[robot]\nname = "puma560"\n[simulation]\nT = 0.05\ndt = 0.01\nintegrator = "rk4"\n')
    assert main(["simulate", str(cfg)]) == 0
    assert main(["simulate", str(cfg), "--robot", "erd:ur5"]) == 0
    assert sorted(p.name for p in (tmp_path / "jaxdyn-out").iterdir()) == ["short", "short_ur5"]
    assert "robot         ur5" in (tmp_path / "jaxdyn-out" / "short_ur5" / "summary.txt").read_text()
    line = [x for x in (tmp_path / "jaxdyn-out" / "short" / "summary.txt").read_text().splitlines()
            if x.startswith("wall time")][0]
    command, rollout = float(line.split("command ")[1].split()[0]), float(line.rsplit(") ", 1)[1].split()[0])
    assert command > rollout > 0, line          # the command's time covers imports, compiling, plots


def test_identify_names_joints_drowned_in_noise(tmp_path, capsys):
    """Torque noise (1 N m) above the PUMA's wrist torques (a few tenths of N m) but far below
    the shoulder's gravity torques: the summary gives the per-joint signal-to-noise ratio and
    warns on the wrists (joints 4-6), not on the shoulder (joint 2); without noise it says so."""
    text = ('[robot]\nname = "puma560"\n[excitation]\nT = 4.0\ndt = 0.02\noptimize_steps = 0\n'
            '[noise]\ntorque_std = {}\n[estimation]\nsteps = 10\n[validation]\nT = 1.0\n')
    cfg = tmp_path / "n.toml"
    cfg.write_text(text.format(1.0))
    assert main(["identify", str(cfg), "--out", str(tmp_path / "a")]) == 0
    line = [x for x in _summary(tmp_path / "a" / "summary.txt").splitlines() if x.startswith("signal-to-noise")][0]
    snr = np.array(eval(line.split(": ", 1)[1].split("]")[0] + "]"))
    assert snr[1] > 10 and np.all(snr[3:] < 3), snr
    warned = line.split("warning: below 3.0 on ")[1]
    assert all(f"joint{j}" in warned for j in (4, 5, 6)) and "joint2" not in warned, line
    assert "signal-to-noise below 3.0" in capsys.readouterr().err
    cfg.write_text(text.format(0.0))
    assert main(["identify", str(cfg), "--out", str(tmp_path / "b")]) == 0
    assert "signal-to-noise per joint (no torque noise): [inf, inf" in _summary(tmp_path / "b" / "summary.txt")


def test_second_run_loads_every_program_from_the_persistent_cache(tmp_path):
    """The command keeps JAX's persistent compilation cache (``$JAXDYN_CACHE_DIR``): run twice
    with the same config and cache folder, the second run loads every program it compiles
    from the cache (JAX's own log: one "Persistent compilation cache hit" per "Finished XLA
    compilation").  A program JAX cannot cache (e.g. one holding a host callback) fails it."""
    import os
    import subprocess
    import sys
    cfgs = {"simulate": '[robot]\nname = "puma560"\n[simulation]\nT = 0.05\ndt = 0.01\nintegrator = "rk4"\n',
            "trajopt": '[robot]\nname = "double_pendulum"\n[problem]\nT = 0.5\ndt = 0.05\nq_final = [0.1, 0.1]\n'
                       '[optimizer]\niterations = 5\nrounds = 2\n'}
    env = {**os.environ, "JAXDYN_CACHE_DIR": str(tmp_path / "cache"), "JAX_LOG_COMPILES": "1"}
    for tool, text in cfgs.items():
        (tmp_path / f"{tool}.toml").write_text(text)
        logs = []
        for run in ("cold", "warm"):
            p = subprocess.run([sys.executable, "-m", "jaxdyn.cli", tool, str(tmp_path / f"{tool}.toml"), "--out",
                                str(tmp_path / f"{tool}_{run}")], env=env, capture_output=True, text=True, timeout=600)
            assert p.returncode == 0, p.stderr[-3000:]
            logs.append(p.stderr)
        compiled, hits = (logs[1].count(s) for s in ("Finished XLA compilation", "Persistent compilation cache hit"))
        assert compiled >= 5 and hits == compiled, (tool, compiled, hits)     # simulate: 5 programs
        assert logs[0].count("Persistent compilation cache hit") == 0, tool


_FOURBAR = """<mujoco model="fourbar"><compiler angle="radian"/><worldbody>
  <body name="crank"><joint name="j1" type="hinge" axis="0 1 0" ref="0.3"/>
    <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="1"/>
    <body name="coupler" pos="0.2 0 0"><joint name="j2" type="hinge" axis="0 1 0" ref="-0.3"/>
      <geom type="capsule" fromto="0 0 0 0 0 0.4" size="0.02" mass="1"/><site name="tip" pos="0 0 0.4"/></body></body>
  <body name="rocker" pos="0.5 0 0"><joint name="j3" type="hinge" axis="0 1 0"/>
    <geom type="capsule" fromto="0 0 0 -0.3 0 0.4" size="0.02" mass="1"/><site name="rtip" pos="-0.3 0 0.4"/></body>
</worldbody><equality><connect name="loop" site1="tip" site2="rtip"/></equality></mujoco>"""


def test_simulate_mjcf_four_bar_with_a_connect_equality(tmp_path):
    """A four-bar written in MJCF (its loop a connect equality) starts from the pose the file
    describes, MuJoCo's qpos0 (the joints' ``ref``: q = (0.3, -0.3, 0), where the loop is closed;
    at q = 0 it is open), and falls under gravity as a closed chain: the loop stays closed and
    the energy is conserved (zero torque, no damping), each to 1e-6 over 0.2 s of RKF45; the
    same with ``--robot`` on a tree config."""
    xml = tmp_path / "fourbar.xml"
    xml.write_text(_FOURBAR)
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[robot]\nname = "mjcf:{xml}"\n[simulation]\nT = 0.2\ndt = 0.01\n')
    assert main(["simulate", str(cfg), "--out", str(tmp_path / "o")]) == 0
    summary = (tmp_path / "o" / "summary.txt").read_text()
    value = {k: float(line.split()[3 if k == "constraints" else 2])
             for line in summary.splitlines() for k in ("constraints", "energy") if line.startswith(k)}
    assert value["constraints"] < 1e-6 and value["energy"] < 1e-6, summary
    q = np.loadtxt(tmp_path / "o" / "trajectory.csv", delimiter=",", skiprows=1)
    np.testing.assert_allclose(q[0, 1:4], [0.3, -0.3, 0.0], atol=1e-9)
    assert np.ptp(q[:, 1]) > 0.5, "the four-bar did not move"
    tree = tmp_path / "tree.toml"                   # --robot on a tree config: the same start
    tree.write_text('[robot]\nname = "puma560"\n[simulation]\nT = 0.2\ndt = 0.01\n')
    assert main(["simulate", str(tree), "--robot", f"mjcf:{xml}", "--out", str(tmp_path / "r")]) == 0
    np.testing.assert_allclose(np.loadtxt(tmp_path / "r" / "trajectory.csv", delimiter=",", skiprows=1), q, atol=1e-12)


_TREE_MJCF = """<mujoco><compiler angle="radian"/><worldbody>
  <body name="base" pos="0.1 -0.2 0.75" quat="0.9238795 0 0.3826834 0"><freejoint name="root"/>
    <geom type="box" size="0.1 0.1 0.05" mass="2"/>
    <body name="arm" pos="0.1 0 0"><joint name="elbow" type="hinge" axis="0 1 0" ref="0.4"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.5"/></body></body>
</worldbody></mujoco>"""
_PENDULUM_MJCF = """<mujoco><compiler angle="radian"/><worldbody><body name="link">
  <joint name="hinge" type="hinge" axis="0 1 0" ref="0.4"/>
  <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.5"/></body></worldbody></mujoco>"""


def test_mjcf_tree_starts_from_the_pose_its_file_describes(tmp_path):
    """An MJCF robot without ``initial.q0`` starts where MuJoCo's ``mj_resetData`` puts it:
    ``qpos0`` (a free body where the XML places it, a hinge at its ``ref``), not at
    ``jaxdyn.neutral`` (the torso at the world origin): the first sample's bodies are where
    MuJoCo's ``mj_kinematics`` puts them at qpos0, with ``simulate`` from a config, with
    ``--robot`` and as ``trajopt``'s default q0."""
    mujoco = pytest.importorskip("mujoco")
    xml = tmp_path / "tree.xml"
    xml.write_text(_TREE_MJCF)
    mj = mujoco.MjModel.from_xml_path(str(xml))
    d = mujoco.MjData(mj)
    mujoco.mj_kinematics(mj, d)                       # MjData starts at qpos0
    model = jaxdyn.load_mjcf(str(xml))
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[robot]\nname = "mjcf:{xml}"\n[simulation]\nT = 0.02\ndt = 0.01\n')
    tree = tmp_path / "tree.toml"
    tree.write_text('[robot]\nname = "puma560"\n[simulation]\nT = 0.02\ndt = 0.01\n')
    for args in ([str(cfg)], [str(tree), "--robot", f"mjcf:{xml}"]):
        out = tmp_path / f"o{len(args)}"
        assert main(["simulate", *args, "--out", str(out)]) == 0
        q0 = np.loadtxt(out / "trajectory.csv", delimiter=",", skiprows=1)[0, 1:1 + model.nq]
        for body in ("base", "arm"):
            R, p = jaxdyn.frame_pose(model, q0, model.frame_id(body))
            np.testing.assert_allclose(p, d.body(body).xpos, atol=1e-9, err_msg=f"{args}: {body}")
            np.testing.assert_allclose(R, d.body(body).xmat.reshape(3, 3), atol=1e-9, err_msg=f"{args}: {body}")
    pend = tmp_path / "pendulum.xml"
    pend.write_text(_PENDULUM_MJCF)
    cfg.write_text(f'[robot]\nname = "mjcf:{pend}"\n[problem]\nT = 0.4\ndt = 0.05\nq_final = [0.6]\n'
                   '[optimizer]\niterations = 2\nrounds = 1\n')
    assert main(["trajopt", str(cfg), "--out", str(tmp_path / "t")]) == 0
    q = np.loadtxt(tmp_path / "t" / "trajectory.csv", delimiter=",", skiprows=1)
    np.testing.assert_allclose(q[0, 1], 0.4, atol=1e-12)
    assert main(["view", str(tmp_path / "t"), "--out", str(tmp_path / "t.html")]) == 0   # the robot its summary names
