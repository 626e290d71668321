"""Multi-chain mechanisms with structure: non-rigid grasps (Rodriguez and Kreutz, Apps. A-B)
in RCCFD and Lilly-Orin, and Lilly and Orin's Type 1 (legs under a body).  References: the
same mechanisms as ClosedModels solved by the Schur / KKT solvers, Pinocchio's
constraintDynamics, the equations of motion, and rollouts of both forms."""
import json
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from helpers import close, urdf_path
from jaxdyn.errors import ArgumentError, ConfigError, ModelError

pin = pytest.importorskip("pinocchio")
from pinutil import pin_constraint_dynamics, pin_twin_constraints  # noqa: E402

FEET4 = ["LF_foot", "RF_foot", "LH_foot", "RH_foot"]


def consistent(cm, q, rng, tau_scale=5.0, n=2):
    """n random (qd, tau) at q with K qd = 0."""
    K = np.asarray(jaxdyn.constraint_jacobian(cm, q))
    out = []
    for _ in range(n):
        v = rng.normal(size=cm.model.nv)
        out.append((v - np.linalg.pinv(K) @ (K @ v), rng.normal(size=cm.model.nv) * tau_scale))
    return K, out


def test_nonrigid_grasps_equal_the_closed_model():
    """Three PUMAs holding a box through a hinge, a soft finger and a ball (Apps. A-B): RCCFD's
    (b.9) and Lilly-Orin's general-joint Table 1 against schur on the ClosedModel with
    "revolute" / "subspace" / "point" closures, at a generic state on the manifold (the
    contacts rotated away from the grasp pose by projecting a perturbed configuration)."""
    kinds = ("revolute", "soft_finger", "point")
    cm, q0 = jaxdyn.mechanisms.arms_holding_box(3, contacts=kinds)
    gs, _ = jaxdyn.mechanisms.arms_holding_box(3, form="grasp", contacts=kinds)
    rng = np.random.default_rng(5)
    qp = q0.copy()
    qp[7:] += 0.3 * rng.normal(size=q0.size - 7)
    q = np.asarray(jaxdyn.project_constraints(cm, qp, np.zeros(cm.model.nv))[0])
    assert np.abs(np.asarray(jaxdyn.constraint_residual(cm, q))).max() < 1e-12
    grasp = [f"grasp{i}:{s}" for i, s in enumerate("aab")]      # the box-side contact frames
    rel = [np.asarray(jaxdyn.frame_pose(cm.model, q, f"arm{i}_ee")[0]).T
           @ np.asarray(jaxdyn.frame_pose(cm.model, q, grasp[i])[0]) for i in range(3)]
    assert min(np.arccos(np.clip((np.trace(R) - 1) / 2, -1, 1)) for R in rel) > 0.02   # the contacts have turned
    K, states = consistent(cm, q, rng, 10.0)
    for v, tau in states:
        ref = jaxdyn.constrained_forward_dynamics(cm, q, v, tau)
        gen_ref = K.T @ np.asarray(ref.lam)                       # generalized constraint force
        for method in ("rccfd", "lilly_orin"):
            r = jaxdyn.constrained_forward_dynamics(gs, q, v, tau, method=method)
            close(r.qdd, ref.qdd, 1e-9, f"{method} qdd vs schur")
            lam = np.asarray(r.lam).reshape(3, 6)
            # lam acts on the tips and, opposite, on the box at the same points
            jac = lambda f: np.asarray(jaxdyn.frame_jacobian(cm.model, q, f, "local_world_aligned"))
            J = [jac(f"arm{i}_ee") - jac(grasp[i]) for i in range(3)]
            close(sum(Ji.T @ li for Ji, li in zip(J, lam)), gen_ref, 1e-8, f"{method} J^T lam vs K^T lam")
            Rg = [np.asarray(jaxdyn.frame_pose(cm.model, q, grasp[i])[0]) for i in range(3)]
            # no moment along a free rotation: hinge z; soft finger x, y; ball x, y, z (b.1c)
            free = [Rg[0][:, 2:], Rg[1][:, :2], Rg[2]]
            close(np.concatenate([f.T @ lam[i, 3:] for i, f in enumerate(free)]), np.zeros(6), 1e-9, "free moments")
            close(r.residual, np.zeros(18), 1e-9, f"{method} residual")
    # off the manifold with Baumgarte gains both structured solvers solve the same equations
    a = [jaxdyn.constrained_forward_dynamics(gs, qp, v, tau, method=m, stabilization=(10.0, 10.0))
         for m in ("rccfd", "lilly_orin")]
    close(a[0].qdd, a[1].qdd, 1e-9, "rccfd vs lilly_orin with stabilization")


def test_ball_grasps_against_pinocchio():
    """Three arms holding a box by ball contacts (Case 2, 3-DOF): rccfd and lilly_orin against
    Pinocchio's constraintDynamics with CONTACT_3D; the point constraint force is the force
    part of the grasp wrench and its moment is zero."""
    from pinutil import to_pinocchio
    cm, q = jaxdyn.mechanisms.arms_holding_box(3, contacts="point")
    gs, _ = jaxdyn.mechanisms.arms_holding_box(3, form="grasp", contacts="point")
    pm = to_pinocchio(cm.model)
    K, states = consistent(cm, q, np.random.default_rng(3), 10.0)
    for v, tau in states:
        qdd_p, lam_p = pin_constraint_dynamics(pm, pin_twin_constraints(cm, pm), q, v, tau)
        for method in ("rccfd", "lilly_orin"):
            r = jaxdyn.constrained_forward_dynamics(gs, q, v, tau, method=method)
            close(r.qdd, qdd_p, 1e-9, f"{method} vs pinocchio")
            lam = np.asarray(r.lam).reshape(3, 6)
            close(lam[:, :3].reshape(-1), lam_p, 1e-8, f"{method} ball forces vs pinocchio")
            close(lam[:, 3:], np.zeros((3, 3)), 1e-9, "ball moments")


def _anymal():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = jaxdyn.load_urdf(urdf_path("anymal_c"), floating_base=True)
    q = np.zeros(m.nq)
    q[2], q[6] = 0.6, 1.0
    q[7:] = np.array([0.1, 0.6, -1.0, -0.1, -0.6, 1.0, -0.1, 0.6, -1.0, 0.1, -0.6, 1.0])
    return m, q


def _biped():
    """A floating pelvis on two 6-DOF legs (hip z, x, y; knee y; ankle y, x) with soles: the
    humanoid lower body of a double-support (weld) Type 1 test."""
    parent, jt, E, r, ax, mass, com, I, names, frames = [-1], ["free"], [np.eye(3)], [np.zeros(3)], \
        [[0, 0, 1.0]], [8.0], [np.array([0.0, 0.0, 0.1])], [np.diag([0.1, 0.08, 0.06])], ["pelvis"], []
    axes = [[0, 0, 1.0], [1.0, 0, 0], [0, 1.0, 0], [0, 1.0, 0], [0, 1.0, 0], [1.0, 0, 0]]
    offs = [[0, 0, -0.05], [0, 0, -0.04], [0.01, 0, -0.03], [0, 0, -0.35], [0, 0, -0.33], [0, 0, 0]]
    for s, leg in ((1, "left"), (-1, "right")):
        for j in range(6):
            parent.append(0 if j == 0 else len(parent) - 1)
            jt.append("revolute")
            E.append(np.eye(3))
            r.append(np.array([0.0, s * 0.1, -0.05]) if j == 0 else np.array(offs[j]))
            ax.append(axes[j])
            mass.append([1.0, 0.8, 2.5, 1.8, 0.6, 0.4][j])
            com.append(np.array([0.01, 0.0, -0.1 if j in (2, 3) else -0.02]))
            I.append(np.diag([0.02, 0.021, 0.005]) * mass[-1])
            names.append(f"{leg}_{j}")
        frames.append((f"{leg}_sole", len(parent) - 1, np.eye(3), np.array([0.02, 0.0, -0.06])))
    m = jaxdyn.build_model(parent=parent, jtype=jt, Xtree_E=np.stack(E), Xtree_r=np.stack(r), axis=np.array(ax),
                           mass=mass, com=np.stack(com), inertia=np.stack(I), body_names=names, frames=frames,
                           name="biped")
    q = np.zeros(m.nq)
    q[2], q[6] = 0.9, 1.0
    for k in (0, 6):
        q[7 + k: 13 + k] = [0.05, 0.02, -0.4, 0.8, -0.4, -0.02]
    return m, q


@pytest.mark.parametrize("robot", ["quadruped", "anymal_c", "biped"])
def test_type1_against_pinocchio_and_the_closed_model(robot):
    """Lilly and Orin's Type 1: legs re-rooted at their feet, hips as general joints with the
    hip torque as known force.  lilly_orin and rccfd (tree coordinates) against Pinocchio's
    constraintDynamics (CONTACT_3D feet / CONTACT_6D soles), schur, and M qdd + h - tau =
    K^T lam with the ground reactions they return."""
    from pinutil import to_pinocchio
    if robot == "quadruped":
        cm, q = jaxdyn.mechanisms.quadruped()
        ls = jaxdyn.legged_system(cm.model, q, FEET4)
    elif robot == "anymal_c":
        m, q = _anymal()
        ls = jaxdyn.legged_system(m, q, ["LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"])
    else:
        m, q = _biped()
        ls = jaxdyn.legged_system(m, q, ["left_sole", "right_sole"], contact="weld")
    m = ls.model
    pm = to_pinocchio(m)
    K, states = consistent(ls.closed, q, np.random.default_rng(7), 5.0)
    M = np.asarray(jaxdyn.crba(m, q))
    for v, tau in states:
        qdd_p, lam_p = pin_constraint_dynamics(pm, pin_twin_constraints(ls.closed, pm), q, v, tau)
        ref = jaxdyn.constrained_forward_dynamics(ls, q, v, tau, method="schur")
        close(ref.qdd, qdd_p, 1e-9, "schur vs pinocchio")
        h = np.asarray(jaxdyn.rnea(m, q, v, np.zeros(m.nv)))
        for method in ("lilly_orin", "rccfd"):
            r = jaxdyn.constrained_forward_dynamics(ls, q, v, tau, method=method)
            close(r.qdd, qdd_p, 1e-9, f"{method} qdd vs pinocchio")
            close(r.lam, lam_p, 1e-8, f"{method} ground reactions vs pinocchio")
            close(M @ np.asarray(r.qdd) + h - tau, K.T @ np.asarray(r.lam), 1e-9, f"{method} M qdd + h - tau = K^T lam")
            close(r.residual, np.zeros(ls.m), 1e-9, f"{method} feet accelerations")
            # Omega on the 5 constrained hip modes per leg, full rank at these stances
            assert int(r.rank) == int(r.rows) == 5 * len(ls.feet) and not r.singular


def _colinear_quadruped(m):
    """The quadruped with straight legs, abducted so that the four feet lie on the body's x axis
    (Newton on each abduction angle; checked)."""
    q = np.zeros(m.nq)
    q[2], q[6] = 0.6, 1.0
    for k, f in enumerate(FEET4):
        a = 7 + 3 * k
        for _ in range(20):
            y = lambda x: float(jaxdyn.frame_pose(m, np.r_[q[:a], x, q[a + 1:]], f)[1][1])
            q[a] -= y(q[a]) / ((y(q[a] + 1e-7) - y(q[a] - 1e-7)) / 2e-7)
    feet = np.array([np.asarray(jaxdyn.frame_pose(m, q, f)[1]) for f in FEET4])
    assert np.abs(feet[:, 1:] - feet[0, 1:]).max() < 1e-12             # on one line, parallel to x
    return q


def test_structured_methods_at_singular_stances():
    """#47: Lilly-Orin and RCCFD where a chain is singular (its phi^c^T Lambda^-1 phi^c has no
    inverse): straight legs, straight legs with the feet on one line, weld feet (two-joint
    chains), PUMA arms at zero and with wrists at q5 = 0 (all arms, one arm).  At rest (the bias acceleration of a
    singular stance is then consistent) they agree with schur on the closed form and report
    the same rank deficiency (K M^-1 K^T on the feet's rows, Omega on the hips' / grasps'), and
    they report the singular chain (chain_deficit).  Before: NaN (Table 1's M_k = A_k^-1 did
    not exist)."""
    cm, q0 = jaxdyn.mechanisms.quadruped()
    m = cm.model
    straight = np.zeros(m.nq)
    straight[2], straight[6] = 0.6, 1.0
    rng = np.random.default_rng(11)
    cases = [("straight", jaxdyn.legged_system(m, straight, FEET4), straight),
             ("colinear", jaxdyn.legged_system(m, _colinear_quadruped(m), FEET4), _colinear_quadruped(m)),
             ("weld", jaxdyn.legged_system(m, q0, FEET4, contact="weld"), q0)]
    for label, arm_q in (("zero", (0.0,) * 6), ("wrists", (0.0, -0.6, 0.4, 0.0, 0.0, 0.0)),
                         ("one wrist", [(0.0, -0.6, 0.4, 0.0, 0.0, 0.0)] + [(0.3, -0.5, 0.6, 0.2, 0.7, 0.1)] * 2)):
        closed, q = jaxdyn.mechanisms.arms_holding_box(3, arm_q=arm_q)
        gs, _ = jaxdyn.mechanisms.arms_holding_box(3, arm_q=arm_q, form="grasp")
        cases.append((label, (closed, gs), q))
    for label, sys_, q in cases:
        closed, structured = (sys_.closed, sys_) if isinstance(sys_, jaxdyn.LeggedSystem) else sys_
        nv = closed.model.nv
        for v in (np.zeros(nv),):
            tau = rng.normal(size=nv) * 5
            ref = jaxdyn.constrained_forward_dynamics(closed, q, v, tau)
            # singular mechanisms: four vertical legs (a statically indeterminate table), weld feet (24
            # rows, 18 dof), arms at zero; the other stances have singular chains but a regular whole
            assert bool(ref.singular) == (label in ("straight", "weld", "zero")), label
            for method in ("lilly_orin", "rccfd"):
                r = jaxdyn.constrained_forward_dynamics(structured, q, v, tau, method=method)
                close(r.qdd, ref.qdd, 1e-8, f"{label}: {method} vs schur")
                close(r.residual, np.zeros_like(r.residual), 1e-8, f"{label}: {method} residual")
                assert int(r.rows) - int(r.rank) == int(ref.rows) - int(ref.rank), (label, method, r.rank, ref.rank)
                # every case has a singular chain: the structured methods report it (chain_deficit,
                # part of singular) even where the whole is regular (colinear, wrists)
                assert int(r.chain_deficit) >= 1 and bool(r.singular), (label, method, r.chain_deficit)
    for method in ("lilly_orin", "rccfd"):            # a regular stance: no chain reported
        r = jaxdyn.constrained_forward_dynamics(jaxdyn.legged_system(m, q0, FEET4), q0, np.zeros(m.nv),
                                                np.ones(m.nv), method=method)
        assert int(r.chain_deficit) == 0 and not bool(r.singular), (method, r.chain_deficit)


_BATCH_SCRIPT = """
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
import jaxdyn
cm, q = jaxdyn.mechanisms.quadruped()
ls = jaxdyn.legged_system(cm.model, q, ["LF_foot", "RF_foot", "LH_foot", "RH_foot"])
B = 250
st = jax.tree.map(lambda x: jnp.stack([x] * B), ls)
Q, V = jnp.stack([jnp.asarray(q)] * B), jnp.zeros((B, ls.model.nv))
T = jnp.asarray(np.random.default_rng(0).normal(size=(B, ls.model.nv)))
f = jax.jit(jax.vmap(lambda s, q, v, t: jaxdyn.constrained_forward_dynamics(s, q, v, t, method="rccfd")))
for i in range(50):
    r = jax.block_until_ready(f(st, Q, V, T * (1 + 0.01 * i)))
    assert float(jnp.max(jnp.abs(r.residual))) < 1e-8 and not bool(jnp.any(r.singular))
print("done")
"""


def test_batched_structured_solve_does_not_stall():
    """A 250-state batch of RCCFD on the quadruped, called 50 times, returns (in a subprocess
    with a time limit).  Before: the rank diagnostic's batched eigendecomposition ran beside
    the solver's batched Cholesky factorization, and jaxlib 0.10's LAPACK kernels, each
    waiting on the intra-op pool for its batch's pieces, left XLA:CPU idle forever on the
    first or second call (4 of 4 tries; 4 of 4 returned once the decomposition waits for the
    solve)."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}    # XLA's defaults, as users run it
    try:
        out = subprocess.run([sys.executable, "-c", _BATCH_SCRIPT], capture_output=True, text=True, timeout=240,
                             env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("a 250-state batched rccfd call did not return within 240 s (XLA:CPU stall)")
    assert out.returncode == 0 and out.stdout.strip() == "done", out.stderr[-2000:]


def test_type1_rollout_and_cli(tmp_path):
    """A PD-held quadruped stands for 1 s: the Lilly-Orin rollout follows the Schur rollout of the
    closed form, and the feet stay on the ground as well as with schur (dt = 4 ms, gains 10);
    `jaxdyn simulate` runs a Type 1 config with method lilly_orin."""
    from jaxdyn.cli import main
    ls, q = jaxdyn.mechanisms.quadruped(form="legged")
    m = ls.model
    kp, kd = 200.0, 10.0

    def hold(t, qq, v):
        return jnp.zeros(m.nv).at[6:].set(kp * (q[7:] - qq[7:]) - kd * v[6:])
    trs = [jaxdyn.rollout(ls, q, np.zeros(m.nv), hold, dt=0.004, steps=250, method=meth, stabilization=(10.0, 10.0))
           for meth in ("lilly_orin", "schur")]
    close(trs[0].q, trs[1].q, 1e-8, "lilly_orin vs schur rollout")
    drift = [np.abs(np.asarray(jax_vmap_residual(ls.closed, t.q))).max() for t in trs]
    assert drift[0] < 1e-7 and drift[0] <= 1.01 * drift[1] + 1e-12, drift     # feet held as well as by schur
    out = tmp_path / "out"
    cfg = tmp_path / "q.toml"
    cfg.write_text('[robot]\nname = "quadruped"\n[simulation]\nT = 0.2\ndt = 0.002\nintegrator = "rk4"\n'
                   'method = "lilly_orin"\nstabilization = [10.0, 10.0]\n[control]\ntype = "hold"\nkp = 200.0\nkd = 10.0\n')
    assert main(["simulate", str(cfg), "--out", str(out)]) == 0
    assert float((out / "summary.txt").read_text().split("max drift ")[1].split()[0]) < 1e-8   # schur: 2.8e-9


def test_type1_gradients_match_finite_differences():
    """Forward and reverse derivatives through Lilly-Orin Type 1 (the state maps, the re-rooted
    chains, the hip contacts with known force: the general-joint path of the grasp solvers)
    against central differences, w.r.t. qd and tau, with Baumgarte gains on."""
    import jax
    ls, q = jaxdyn.mechanisms.quadruped(form="legged")
    rng = np.random.default_rng(11)
    nv = ls.model.nv
    v, tau, dv, dtau, ct = (rng.normal(size=nv) for _ in range(5))
    f = lambda v, t: jaxdyn.constrained_forward_dynamics(ls, q, v, t, method="lilly_orin",
                                                         stabilization=(5.0, 5.0)).qdd
    fj = jax.jit(f)
    jvp = jax.jit(lambda v, t: jax.jvp(f, (v, t), (dv, dtau))[1])(v, tau)
    h = 1e-6
    fd = (np.asarray(fj(v + h * dv, tau + h * dtau)) - np.asarray(fj(v - h * dv, tau - h * dtau))) / (2 * h)
    close(jvp, fd, 1e-6, "jvp vs central differences")
    gv, gt = jax.jit(lambda v, t: jax.vjp(f, v, t)[1](ct))(v, tau)
    close(np.dot(gv, dv) + np.dot(gt, dtau), np.dot(ct, np.asarray(jvp)), 1e-10, "vjp vs jvp")


def jax_vmap_residual(cm, Q):
    import jax
    return jax.jit(jax.vmap(lambda q: jaxdyn.constraint_residual(cm, q)))(jnp.asarray(Q))


def test_grasp_system_rollout_equals_closed_rollout():
    """A GraspSystem rolls out in its tree's layout (rccfd) exactly as the ClosedModel (schur)."""
    gs, q = jaxdyn.mechanisms.arms_holding_box(2, form="grasp", contacts=("weld", "point"))
    cm, _ = jaxdyn.mechanisms.arms_holding_box(2, contacts=("weld", "point"))
    trs = [jaxdyn.rollout(s, q, np.zeros(cm.model.nv), None, dt=0.005, steps=60, stabilization=(10.0, 10.0))
           for s in (gs, cm)]
    close(trs[0].q, trs[1].q, 1e-8, "rccfd vs schur rollout")
    drift = [np.abs(np.asarray(jax_vmap_residual(cm, t.q))).max() for t in trs]
    assert drift[0] < 1e-7 and drift[0] <= 1.01 * drift[1] + 1e-12, drift


def test_multichain_named_errors(tmp_path):
    """Structures that do not fit get named errors at construction; methods that do not fit at
    the call; configs that ask for a structured method on a general loop closure at load."""
    from jaxdyn.cli import main
    cm, q = jaxdyn.mechanisms.quadruped()
    m = cm.model
    with pytest.raises(ModelError, match="has no frame 'paw'"):
        jaxdyn.legged_system(m, q, ["LF_foot", "paw"])
    with pytest.raises(ModelError, match="contact must be 'point' or 'weld'"):
        jaxdyn.legged_system(m, q, FEET4, contact="line")
    with pytest.raises(ModelError, match=r"bodies .* are on no leg"):
        jaxdyn.legged_system(m, q, FEET4[:3])
    with pytest.raises(ModelError, match="share body"):
        jaxdyn.legged_system(m, q, ["LF_foot", "LF_foot", "LH_foot", "RH_foot"])
    with pytest.raises(ModelError, match="needs one root body with a free-flyer"):
        jaxdyn.legged_system(jaxdyn.robots.puma560(), np.zeros(6), ["ee"])
    with pytest.raises(ModelError, match="unknown contact kind 'glue'"):
        jaxdyn.grasp_system(*_box_parts(), contacts="glue")
    # one vocabulary of contact kinds: a ball contact is "point" in Constraint, legged_system and grasp_system
    with pytest.raises(ModelError, match=r"unknown contact kind 'spherical'; kinds are \[.*'point'"):
        jaxdyn.grasp_system(*_box_parts(), contacts="spherical")
    assert {"point", "weld"} <= set(jaxdyn.constraints.model.KINDS) & set(jaxdyn.constraints.grasp.CONTACTS)
    ls = jaxdyn.legged_system(m, q, FEET4)
    z = np.zeros(m.nv)
    with pytest.raises(ArgumentError, match="unknown constrained method 'udut' for a LeggedSystem"):
        jaxdyn.constrained_forward_dynamics(ls, q, z, z, method="udut")
    cfg = tmp_path / "fb.toml"
    cfg.write_text('[robot]\nname = "four_bar"\n[simulation]\nmethod = "lilly_orin"\n')
    assert main(["simulate", str(cfg)]) == 2
    with pytest.raises(ConfigError, match="'four_bar' is a general loop closure"):
        from jaxdyn.config import load_config
        load_config(str(cfg))


def _box_parts():
    gs, _ = jaxdyn.mechanisms.arms_holding_box(1, form="grasp")
    return gs.obj, [jaxdyn.robots.puma560()], "ee", ["grasp0"]


def test_float32_structured_methods_agree_or_report_the_chain():
    """#47: in float32, Lilly-Orin and RCCFD agree with float64 schur to 1e-3 or report a
    singular chain (res.singular), at the two stances of the singularity sweep where they
    disagreed unreported (chains just above a 100-eps rank threshold, cond(A_k) ~ 1e4-1e5)."""
    data = json.load(open(os.path.join(os.path.dirname(__file__), "data", "quadruped_f32_chain_states.json")))
    m = jaxdyn.mechanisms.quadruped()[0].model
    f32 = lambda t: jax.tree.map(lambda x: x.astype(jnp.float32) if jnp.issubdtype(jnp.result_type(x), jnp.floating)
                                 else x, t)
    for s in data["states"]:
        q, v, tau = (np.asarray(s[k]) for k in ("q", "v", "tau"))
        ls = jaxdyn.legged_system(m, q, FEET4)
        ref = np.asarray(jaxdyn.constrained_forward_dynamics(ls.closed, q, v, tau).qdd)
        for method in ("lilly_orin", "rccfd"):
            r = jaxdyn.constrained_forward_dynamics(f32(ls), *(jnp.asarray(x, jnp.float32) for x in (q, v, tau)),
                                                    method=method)
            assert r.qdd.dtype == jnp.float32
            rel = np.abs(np.asarray(r.qdd, float) - ref).max() / max(np.abs(ref).max(), 1.0)
            assert rel <= 1e-3 or bool(r.singular), (s["i"], method, rel)
