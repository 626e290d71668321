"""The animation viewer: the body (and contact-frame) poses embedded in the HTML equal
frame_poses of the trajectory at the embedded times; headless Chromium (Debian's ``chromium``)
loads the pages without a JavaScript error and draws a robot that moves between two times;
``jaxdyn view`` rebuilds the page of a run folder."""
import os
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from jaxdyn import viewer
from jaxdyn.errors import JaxdynWarning

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    d = tmp_path_factory.mktemp("viewer")
    puma = jaxdyn.robots.puma560()
    tr = jaxdyn.rollout(puma, jnp.full(6, 0.3), jnp.zeros(6), None, 0.01, 150)
    cm, q0 = jaxdyn.mechanisms.MECHANISMS["four_bar"]()
    tr4 = jaxdyn.rollout(cm, q0, jnp.zeros(cm.model.nv), None, 0.005, 150, stabilization=(10.0, 10.0))
    free = jaxdyn.robots.random_tree(5, seed=3, joint_types=("revolute", "spherical"), floating_base=True)
    qf = jaxdyn.random_configuration(free, jax.random.PRNGKey(0))
    trf = jaxdyn.rollout(free, qf, jnp.ones(free.nv), None, 0.01, 100)
    # thrown: 30 m/s along the root body's x, so it travels ~30 m, about 10 times its own size
    thrown = jaxdyn.rollout(free, qf, jnp.ones(free.nv).at[:3].set(jnp.array([30.0, 0.0, 0.0])), None, 0.01, 100)
    one = viewer.animate(puma, tr, d / "puma.html")
    many = viewer.animate([puma, cm, free], [tr, tr4, trf], d / "three.html", max_samples=60)
    # a Stack and its lanes' trajectory in the union's layout (as a vmapped rollout returns it)
    st = jaxdyn.stack([puma, free]).lanes([1, 0, 1])
    tr_p = jaxdyn.integrators.Trajectory(tr.t[:101], tr.q[:101], tr.qd[:101], tr.tau[:101], 100, 0, True)
    Q = jnp.stack([st.q(1, trf.q), st.q(0, tr_p.q), st.q(1, trf.q)])
    lanes = jaxdyn.integrators.Trajectory(jnp.stack([trf.t] * 3), Q, jnp.zeros(Q.shape[:2] + (st.nv,)),
                                          jnp.zeros(Q.shape[:2] + (st.nv,)), 100, 0, True)
    stacked = viewer.animate(st, lanes, d / "stack.html")
    far = viewer.animate(free, thrown, d / "far.html")
    out = dict(one=(one, [puma], [tr]), many=(many, [puma, cm, free], [tr, tr4, trf]),
               stack=(stacked, [free, puma, free], [trf, tr_p, trf]), far=(far, [free], [thrown]))
    from jaxdyn.io.named import ERD_URDFS, example_robot_data_dir
    if example_robot_data_dir() is not None:     # a URDF robot drawn with its meshes
        path = os.path.join(example_robot_data_dir(), ERD_URDFS["ur5"])
        ur5 = jaxdyn.load_urdf(path)
        tr5 = jaxdyn.rollout(ur5, jnp.full(6, 0.3), jnp.zeros(6), None, 0.01, 100)
        out["mesh"] = (viewer.animate(ur5, tr5, d / "ur5.html", visuals=path), [ur5], [tr5])
    try:                                         # an MJCF robot drawn with its geoms (MuJoCo's meshes)
        import mujoco
    except ImportError:
        return out
    hand = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data", "shadow_hand", "right_hand.xml")
    hm = jaxdyn.load_mjcf(hand)
    s = jnp.linspace(0.0, 1.0, 51)[:, None]       # the fingers close: q from 0 to 1.2 rad (clipped to limits)
    Qh = jnp.clip(1.2 * s * jnp.ones((1, hm.nq)), hm.q_lower[None], hm.q_upper[None])
    trh = jaxdyn.integrators.Trajectory(s[:, 0], Qh, jnp.zeros_like(Qh), jnp.zeros_like(Qh), 50, 0, True)
    out["mjcf"] = (viewer.animate(hm, trh, d / "hand.html", visuals=hand), [hm], [trh])
    return out


def _page(pages, page):
    if page not in pages:
        pytest.skip(f"the {page!r} page needs example-robot-data (mesh) or mujoco (mjcf)")
    return pages[page]


def test_mesh_page_embeds_the_urdf_meshes(pages):
    path, (ur5,), _ = _page(pages, "mesh")
    rob = viewer.read_scene(path)["robots"][0]
    assert rob["boxes"] == []                       # meshes instead of inertia boxes
    assert {b for b, _, _ in rob["meshes"]} == {-1, 0, 1, 2, 3, 4, 5}       # base (world-fixed) + 6 links
    assert sum(len(f) // 3 for _, _, f in rob["meshes"]) > 1000


def test_mjcf_page_embeds_the_geoms(pages):
    path, (hand,), _ = _page(pages, "mjcf")
    rob = viewer.read_scene(path)["robots"][0]
    assert rob["boxes"] == []
    # forearm and wrist fixed to the world, then every moving body of the hand carries a geom
    assert -1 in {b for b, _, _ in rob["meshes"]} and len({b for b, _, _ in rob["meshes"]}) >= 20
    assert 2000 < sum(len(f) // 3 for _, _, f in rob["meshes"]) <= 8000 + 60 * len(rob["meshes"])


@pytest.mark.parametrize("page", ["one", "many", "stack", "mesh", "mjcf"])
def test_embedded_frames_are_frame_poses(pages, page):
    path, models, trajs = _page(pages, page)
    sc = viewer.read_scene(path)
    assert len(sc["robots"]) == len(models)
    if page == "stack":
        free = models[0]
        assert [r["name"] for r in sc["robots"]] == [f"{free.name} (lane 0)", "puma560 (lane 1)", f"{free.name} (lane 2)"], \
            [r["name"] for r in sc["robots"]]
    for rob, model, tr in zip(sc["robots"], models, trajs):
        tree = getattr(model, "model", model)
        t = np.asarray(tr.t)
        idx = np.searchsorted(t, np.asarray(rob["t"]) - 1e-12)
        np.testing.assert_allclose(t[idx], rob["t"], atol=1e-12)
        R, p = jax.vmap(jaxdyn.frame_poses, (None, 0))(tree, tr.q[idx])
        P = np.asarray(rob["poses"]).reshape(len(idx), -1, 12)
        nb = tree.nb
        np.testing.assert_allclose(P[:, :, :3], np.asarray(p)[:, :nb], rtol=0, atol=1e-9)
        np.testing.assert_allclose(P[:, :, 3:], np.asarray(R)[:, :nb].reshape(len(idx), nb, 9), rtol=0, atol=1e-9)
        if hasattr(model, "frames_a"):       # contact frames of the closed model
            fr = sorted({f for f in model.frames_a + model.frames_b if f >= 0})
            C = np.asarray(rob["contacts"]["poses"]).reshape(len(idx), -1, 12)
            np.testing.assert_allclose(C[:, :, :3], np.asarray(p)[:, fr], rtol=0, atol=1e-9)


def _chromium(url, tmp_path, name, *extra):
    if CHROMIUM is None:
        pytest.skip("chromium not installed (Debian: apt-get install chromium; .ci/run installs it)")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=800,600",
           *extra, url]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def _png(tmp_path, url, name):
    from matplotlib.image import imread
    out = tmp_path / name
    _chromium(url, tmp_path, name, f"--screenshot={out}")
    assert out.is_file(), f"no screenshot of {url}"
    return imread(str(out))[:, :, :3]


@pytest.mark.parametrize("page", ["one", "many", "mesh", "mjcf"])
def test_chromium_draws_a_moving_robot(pages, page, tmp_path):
    path = str(_page(pages, page)[0])
    dom = _chromium(f"file://{path}#t=0&paused", tmp_path, "dom", "--dump-dom").stdout
    assert 'data-drawn="1"' in dom and "data-error" not in dom, dom[-2000:]
    sc = viewer.read_scene(path)
    t_end = max(r["t"][-1] for r in sc["robots"])
    a = _png(tmp_path, f"file://{path}#t=0&paused", "a.png")
    b = _png(tmp_path, f"file://{path}#t={t_end:.6f}&paused", "b.png")
    view = (slice(0, a.shape[0] - 60), slice(None))          # the canvas, not the control bar
    # not blank: the robots' colours on the light background; moved: the two times differ
    colours = len(np.unique((a[view] * 255).astype(int).reshape(-1, 3), axis=0))
    assert colours > 50, colours
    changed = np.mean(np.any(np.abs(a[view] - b[view]) > 0.1, axis=-1))
    assert changed > 0.002, changed


def test_a_page_of_one_sample_plays_at_that_sample(tmp_path):
    """A page of a single configuration (e.g. a pose from inverse kinematics): playing it keeps
    the clock at its one time instead of running a second past it."""
    puma = jaxdyn.robots.puma560()
    path = viewer.animate(puma, np.full((1, 6), 0.3), tmp_path / "pose.html", t=np.array([2.0]))
    dom = _chromium(f"file://{path}", tmp_path, "dom", "--virtual-time-budget=1500", "--dump-dom").stdout
    assert 'data-drawn="1"' in dom and "data-error" not in dom, dom[-2000:]
    shown = float(dom.split('data-time="')[1].split('"')[0])
    assert shown == 2.0, shown


def test_camera_follows_a_robot_that_travels_far(pages, tmp_path):
    """A floating robot thrown 30 m: the camera follows it (``follow``; the robots
    that stay in place keep the fixed camera), so at the first and the last sample alike the
    robot fills the middle of the picture at its own scale, instead of a dot in a box 30 m
    wide."""
    path, (free,), (thrown,) = pages["far"]
    sc = viewer.read_scene(path)
    assert sc["follow"] and not any(viewer.read_scene(pages[k][0])["follow"] for k in ("one", "many", "stack"))
    p = np.asarray(sc["robots"][0]["poses"]).reshape(len(sc["robots"][0]["t"]), free.nb, 12)[:, :, :3]
    own = max(np.ptp(p[k], 0).max() for k in range(len(p)))        # the robot's size at one sample
    assert np.ptp(p.reshape(-1, 3), 0).max() > 10 * own              # it travels far
    assert sc["extent"] < 2 * max(own, 0.2) + 0.5, (sc["extent"], own)
    for t in (0.0, sc["robots"][0]["t"][-1]):
        img = _png(tmp_path, f"file://{path}#t={t:.6f}&paused", "f.png")
        h, w = img.shape[0] - 60, img.shape[1]                      # the canvas, not the control bar
        middle = img[h // 4:3 * h // 4, w // 4:3 * w // 4]
        drawn = np.mean(np.any(np.abs(middle - middle[0, 0]) > 0.1, axis=-1))
        assert drawn > 0.02, (t, drawn)


def test_view_command_rebuilds_a_run(tmp_path, monkeypatch, capsys):
    from jaxdyn.cli import main
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "short.toml"
    cfg.write_text('[robot]\nname = "planar3"\n[simulation]\nT = 0.2\ndt = 0.01\nintegrator = "rk4"\n')
    assert main(["simulate", str(cfg), "--out", "run"]) == 0      # writes run/animation.html
    first = viewer.read_scene(tmp_path / "run" / "animation.html")
    (tmp_path / "run" / "animation.html").unlink()
    with pytest.raises(SystemExit):
        main(["view"])
    assert main(["view", "run", "--robot", "planar3"]) == 0
    assert viewer.read_scene(tmp_path / "run" / "animation.html")["robots"][0]["poses"] == first["robots"][0]["poses"]
    assert main(["view", "run"]) == 0                             # the robot named in summary.txt
    assert viewer.read_scene(tmp_path / "run" / "animation.html")["robots"][0]["poses"] == first["robots"][0]["poses"]
    # a summary without its "robot source" line (an older run): the robot of the config named on
    # its first line, which needs that config (here a file in the cwd, not found by its name)
    summary = tmp_path / "run" / "summary.txt"
    summary.write_text("".join(x for x in summary.read_text().splitlines(True) if not x.startswith("robot source")))
    assert main(["view", "run"]) == 2 and "pass --robot" in capsys.readouterr().err
    assert main(["view", "run", "--robot", "puma560"]) == 2      # nq 6 vs the CSV's 3 columns
    assert "is it the run's robot" in capsys.readouterr().err
    # simulate --robot with a relative path, viewed from another folder
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "arm.urdf").write_text(
        '<robot name="arm"><link name="base"/><link name="l1"><inertial><origin xyz="0 0.1 0"/><mass value="1"/>'
        '<inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>'
        '<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="1 0 0"/>'
        '<limit lower="-3" upper="3" effort="10" velocity="5"/></joint></robot>')
    assert main(["simulate", str(cfg), "--robot", "urdf:m/arm.urdf", "--out", "run2"]) == 0
    first = viewer.read_scene(tmp_path / "run2" / "animation.html")
    (tmp_path / "run2" / "animation.html").unlink()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert main(["view", str(tmp_path / "run2")]) == 0
    again = viewer.read_scene(tmp_path / "run2" / "animation.html")
    assert again["robots"][0]["poses"] == first["robots"][0]["poses"] and len(first["robots"][0]["t"]) == 21


def test_a_failed_rollout_is_shown_up_to_its_last_finite_sample(tmp_path):
    puma = jaxdyn.robots.puma560()
    Q = np.tile(np.linspace(0.0, 1.0, 10)[:, None], (1, 6))
    Q[6:, 2] = np.nan                                   # the rollout failed at sample 6
    with pytest.warns(JaxdynWarning, match="not finite from t = 6 on; the page shows the 6 samples"):
        sc = viewer.scene(puma, Q, t=np.arange(10.0))
    assert sc["robots"][0]["t"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    with pytest.raises(ValueError, match="first sample .* is not finite"):
        viewer.scene(puma, np.full((3, 6), np.nan))


def _rot(axis, a):
    """The rotation by angle a about the unit axis (Rodrigues)."""
    k = np.asarray(axis, float)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(a) * K + (1 - np.cos(a)) * K @ K


def test_view_command_tours_the_joints_of_a_model_file(tmp_path, monkeypatch, capsys):
    """``jaxdyn view robot.urdf`` (a model, no run): every dof in turn goes to its lower and
    upper limit and back; the embedded poses at the ends of each leg are the URDF's joint
    motions in closed form; a dof without limits moves +-viewer TOUR_AMPLITUDE."""
    from jaxdyn.apps.view_cli import TOUR_AMPLITUDE
    from jaxdyn.cli import main
    monkeypatch.chdir(tmp_path)
    link = ('<link name="{}"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" '
            'iyz="0"/></inertial></link>')
    (tmp_path / "arm.urdf").write_text(
        '<robot name="arm"><link name="base"/>' + "".join(link.format(n) for n in ("l1", "l2", "l3")) +
        '<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 0.1"/>'
        '<axis xyz="0 0 1"/><limit lower="-1" upper="2" effort="1" velocity="1"/></joint>'
        '<joint name="j2" type="prismatic"><parent link="l1"/><child link="l2"/><origin xyz="0.5 0 0"/>'
        '<axis xyz="1 0 0"/><limit lower="-0.1" upper="0.3" effort="1" velocity="1"/></joint>'
        '<joint name="j3" type="continuous"><parent link="l2"/><child link="l3"/><origin xyz="0 0 0.2"/>'
        '<axis xyz="0 1 0"/></joint></robot>')
    assert main(["view", "arm.urdf"]) == 0
    assert "wrote jaxdyn-out/view/arm.html" in capsys.readouterr().err
    rob = viewer.read_scene(tmp_path / "jaxdyn-out" / "view" / "arm.html")["robots"][0]
    n = 12                                                   # samples per leg
    assert len(rob["t"]) == 9 * n + 1 and rob["t"][-1] == pytest.approx(9.0)
    P = np.asarray(rob["poses"], float).reshape(len(rob["t"]), 3, 12)     # (samples, bodies, [p, R])
    p, R = P[..., :3], P[..., 3:].reshape(P.shape[:2] + (3, 3))

    def expect(k, a1, d2, a3):
        R1 = _rot([0, 0, 1], a1)
        p2 = np.array([0, 0, 0.1]) + R1 @ np.array([0.5 + d2, 0, 0])
        np.testing.assert_allclose(R[k, 0], R1, rtol=0, atol=1e-9)
        np.testing.assert_allclose(p[k, 1], p2, rtol=0, atol=1e-9)
        np.testing.assert_allclose(R[k, 2], R1 @ _rot([0, 1, 0], a3), rtol=0, atol=1e-9)
        np.testing.assert_allclose(p[k, 2], p2 + R1 @ np.array([0, 0, 0.2]), rtol=0, atol=1e-9)
    a = TOUR_AMPLITUDE[0]
    for k, state in [(0, (0, 0, 0)), (n, (-1, 0, 0)), (2 * n, (2, 0, 0)), (3 * n, (0, 0, 0)), (4 * n, (0, -0.1, 0)),
                     (5 * n, (0, 0.3, 0)), (7 * n, (0, 0, -a)), (8 * n, (0, 0, a)), (9 * n, (0, 0, 0))]:
        expect(k, *state)
    assert main(["view", "arm.urdf"]) == 0 and "replaced jaxdyn-out/view/arm.html" in capsys.readouterr().err
    # a model is not a run: --robot is refused; a name that is neither says what view takes
    assert main(["view", "arm.urdf", "--robot", "planar3"]) == 2 and "is a robot model" in capsys.readouterr().err
    assert main(["view", "nothing_here"]) == 2 and "URDF / MJCF file or robot name" in capsys.readouterr().err
    (tmp_path / "fixed.urdf").write_text('<robot name="fixed"><link name="base"/>' + link.format("l1") +
                                         '<joint name="j" type="fixed"><parent link="base"/><child link="l1"/></joint>'
                                         '</robot>')
    assert main(["view", "fixed.urdf"]) == 2 and "no joint to tour" in capsys.readouterr().err
    # a closed mechanism by name: it moves along the one motion its loop allows, the loop closed
    # throughout: the rocker's tip stays on its ground pivot (2, 0, 0), the crank turns
    assert main(["view", "four_bar", "--out", "fb.html"]) == 0
    assert "closed chain, 1 directions of motion" in capsys.readouterr().err
    fb = viewer.read_scene(tmp_path / "fb.html")["robots"][0]
    tip = np.asarray(fb["contacts"]["poses"], float).reshape(len(fb["t"]), 12)[:, :3]
    assert len(fb["t"]) == 3 * n + 1
    np.testing.assert_allclose(tip, np.tile([2.0, 0.0, 0.0], (len(tip), 1)), rtol=0, atol=1e-9)
    crank = np.asarray(fb["poses"], float).reshape(len(fb["t"]), 3, 12)[:, 0, 3:]   # body 0's R, row-major
    assert np.ptp(np.arctan2(crank[:, 3], crank[:, 0])) > 0.3


def test_view_command_runs_in_float64(tmp_path):
    """``jaxdyn view`` in a process of its own (jax_enable_x64 off by default) computes its
    poses in float64, as the other commands: the embedded neutral pose of the PUMA equals
    frame_poses in float64 to 1e-9 (float32 is off by ~1e-7)."""
    out = tmp_path / "puma.html"
    r = subprocess.run([sys.executable, "-m", "jaxdyn.cli", "view", "puma560", "--out", str(out)],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "JAXDYN_CACHE_DIR": ""})
    assert r.returncode == 0, r.stderr[-2000:]
    puma = jaxdyn.robots.puma560()
    P = np.asarray(viewer.read_scene(out)["robots"][0]["poses"][0], float).reshape(puma.nb, 12)
    R, p = jaxdyn.frame_poses(puma, jaxdyn.neutral(puma))
    np.testing.assert_allclose(P[:, :3], np.asarray(p)[:puma.nb], rtol=0, atol=1e-9)
    np.testing.assert_allclose(P[:, 3:], np.asarray(R)[:puma.nb].reshape(puma.nb, 9), rtol=0, atol=1e-9)


def test_view_command_tours_an_mjcf_file_to_mujocos_joint_ranges(tmp_path, capsys):
    """An MJCF file (told from a URDF by its root element): the hinge reaches the range that
    MuJoCo compiles (degrees in the file, radians in MuJoCo's model).  The spring jaxdyn drops
    is named in one line "jaxdyn: warning: ..." (not Python's "FILE:LINE: UserWarning" and a
    line of jaxdyn's source)."""
    mujoco = pytest.importorskip("mujoco")
    from jaxdyn.cli import main
    xml = ('<mujoco model="hinge"><worldbody><body name="b" pos="0 0 1"><joint name="h" type="hinge" axis="1 1 0" '
           'range="-30 75" stiffness="2"/><geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.05"/></body>'
           '</worldbody></mujoco>')
    (tmp_path / "hinge.xml").write_text(xml)
    lo, hi = mujoco.MjModel.from_xml_string(xml).jnt_range[0]
    assert main(["view", str(tmp_path / "hinge.xml"), "--out", str(tmp_path / "h.html")]) == 0
    err = capsys.readouterr().err
    assert "joint tour of its 1 dofs" in err
    assert "jaxdyn: warning: hinge: MuJoCo features jaxdyn does not model are dropped: joint springs (stiffness) " \
           "on ['h']\n" in err and "UserWarning" not in err, err
    P = np.asarray(viewer.read_scene(tmp_path / "h.html")["robots"][0]["poses"], float).reshape(-1, 1, 12)
    axis = np.array([1.0, 1.0, 0.0]) / np.sqrt(2.0)
    for k, ang in ((0, 0.0), (12, lo), (24, hi), (36, 0.0)):
        np.testing.assert_allclose(P[k, 0, 3:].reshape(3, 3), _rot(axis, ang), rtol=0, atol=1e-9)


def test_view_command_moves_an_mjcf_closed_chain_with_its_loop_closed(tmp_path, capsys):
    """An MJCF four-bar whose loop is a connect equality (its qpos0 closes the loop): the page
    moves it along its one free motion, and the two sites the equality connects coincide at
    every embedded sample."""
    pytest.importorskip("mujoco")
    from jaxdyn.cli import main
    from test_apps_cli import _FOURBAR
    (tmp_path / "fourbar.xml").write_text(_FOURBAR)
    assert main(["view", str(tmp_path / "fourbar.xml"), "--out", str(tmp_path / "fb.html")]) == 0
    assert "closed chain, 1 directions of motion" in capsys.readouterr().err
    rob = viewer.read_scene(tmp_path / "fb.html")["robots"][0]
    C = np.asarray(rob["contacts"]["poses"], float).reshape(len(rob["t"]), -1, 12)
    (a, b), = rob["contacts"]["pairs"]
    np.testing.assert_allclose(C[:, a, :3], C[:, b, :3], rtol=0, atol=1e-9)
    P = np.asarray(rob["poses"], float).reshape(len(rob["t"]), -1, 12)
    assert np.ptp(P[:, 0, 3]) > 0.05                    # the crank turns
