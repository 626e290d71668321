"""save_urdf: every example-robot-data URDF that Pinocchio loads (fixed base and free flyer),
loaded by jaxdyn, written and read back: Pinocchio's rnea and crba of the written file equal
those of the original file (1e-12 relative), and load_urdf gives back the same parameters,
names, body order and frames.  Refusals and warnings for what URDF cannot hold."""
import glob
import os
import warnings

import numpy as np
import pytest

import jaxdyn
from helpers import ROBOTS_DIR
from jaxdyn.errors import JaxdynWarning, ModelError

pin = pytest.importorskip("pinocchio")
FIELDS = ("Xtree_E", "Xtree_r", "axis", "mass", "com", "inertia", "damping", "friction", "q_lower", "q_upper",
          "effort_limit", "velocity_limit")


def _load_pin(path, fb):
    return pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if fb else pin.buildModelFromUrdf(path)


def test_every_erd_robot_round_trips(tmp_path):
    if ROBOTS_DIR is None:
        pytest.skip("example-robot-data not installed")
    rng = np.random.default_rng(0)
    n, bad = 0, []
    for f in sorted(glob.glob(os.path.join(ROBOTS_DIR, "**", "*.urdf"), recursive=True)):
        for fb in (False, True):
            try:
                pm = _load_pin(f, fb)
            except Exception:          # e.g. ur3.urdf: "No name given for the robot" (urdfdom)
                continue
            rel = f"{os.path.relpath(f, ROBOTS_DIR)} fb={fb}"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")     # mimic / triangle warnings of the sources
                m = jaxdyn.load_urdf(f, floating_base=fb)
                out = jaxdyn.save_urdf(m, tmp_path / "out.urdf")
                m2 = jaxdyn.load_urdf(out, floating_base=fb)
            pm2 = _load_pin(out, fb)
            assert (pm2.nq, pm2.nv, list(pm2.names)) == (pm.nq, pm.nv, list(pm.names)), rel
            d1, d2 = pm.createData(), pm2.createData()
            lo, hi = pm.lowerPositionLimit.copy(), pm.upperPositionLimit.copy()
            lo[~np.isfinite(lo)], hi[~np.isfinite(hi)] = -1.0, 1.0
            for _ in range(2 if pm.nv else 0):
                q = pin.randomConfiguration(pm, np.maximum(lo, -3), np.minimum(hi, 3))
                v, a = rng.normal(size=(2, pm.nv))
                for ref, got in ((pin.rnea(pm, d1, q, v, a), pin.rnea(pm2, d2, q, v, a)),
                                 (pin.crba(pm, d1, q), pin.crba(pm2, d2, q))):
                    err = np.abs(got - ref).max() / max(1.0, np.abs(ref).max())
                    if err > 1e-12:
                        bad.append(f"{rel}: pinocchio {err:.1e}")
            for k in FIELDS:
                x, y = np.asarray(getattr(m, k)), np.asarray(getattr(m2, k))
                if x.shape != y.shape or not np.allclose(x, y, rtol=1e-13, atol=1e-13):
                    bad.append(f"{rel}: {k}")
            if (m.body_names, m.joint_names) != (m2.body_names, m2.joint_names):
                bad.append(f"{rel}: names or body order")
            # every frame comes back: same name, body and placement (bodies and Xtree equal
            # above: the same pose at every q; numpy only, no program compiled per robot)
            back = {}
            for j, nm in enumerate(m2.frame_names):
                b = int(m2.frame_body[j])
                back.setdefault(nm, []).append((m2.body_names[b] if b >= 0 else None, m2.frame_E[j], m2.frame_r[j]))
            for i, nm in enumerate(m.frame_names):
                b = int(m.frame_body[i])
                if not any(bb == (m.body_names[b] if b >= 0 else None) and np.allclose(E, m.frame_E[i], atol=1e-12)
                           and np.allclose(r, m.frame_r[i], atol=1e-12) for bb, E, r in back.get(nm, [])):
                    bad.append(f"{rel}: frame {nm}")
                    break
            n += 1
    assert n >= 130 and not bad, bad[:20]


@pytest.mark.named_errors
def test_what_urdf_cannot_hold(tmp_path):
    ball = jaxdyn.build_model(parent=[-1], jtype=["spherical"], Xtree_E=np.eye(3)[None], Xtree_r=np.zeros((1, 3)),
                              axis=np.array([[0, 0, 1.0]]), mass=[1.0], com=np.zeros((1, 3)),
                              inertia=np.eye(3)[None] * 0.1, body_names=["ball_link"], name="ballbot")
    with pytest.raises(ModelError, match="body 0 \\('ball_link'\\) has a spherical joint"):
        jaxdyn.save_urdf(ball, tmp_path / "b.urdf")
    arm = jaxdyn.robots.planar3().replace(armature=np.full(3, 0.1), gravity=np.array([0.0, -9.81, 0.0]))
    with pytest.warns(JaxdynWarning, match="armature .* is not written.*") as rec:
        jaxdyn.save_urdf(arm, tmp_path / "p.urdf")
    assert any("gravity" in str(w.message) for w in rec)
    with pytest.raises(ModelError, match="does not exist"):
        jaxdyn.save_urdf(jaxdyn.robots.planar3(), tmp_path / "missing" / "p.urdf")


def test_rpy_round_trip_including_gimbal_lock():
    from jaxdyn.io.urdf import rpy_to_R
    from jaxdyn.io.urdf_out import R_to_rpy
    rng = np.random.default_rng(0)
    angles = list(rng.uniform(-3, 3, (200, 3))) + [(0.3, np.pi / 2, 1.1), (0.7, -np.pi / 2, -2.0),
                                                   (1.0, np.pi / 2 - 1e-13, 0.2)]
    for rpy in angles:
        R = rpy_to_R(rpy)
        np.testing.assert_allclose(rpy_to_R(R_to_rpy(R)), R, atol=1e-12)
