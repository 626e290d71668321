"""Closed chains: constrained forward dynamics against Pinocchio's constraintDynamics
(quadruped with four point feet, humanoid with two welded feet), against a least-squares
solve of the KKT system (planar four-bar, redundant constraint rows), the equations of motion
themselves, finite differences, and named errors for bad constraints."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from helpers import close, urdf_path
from jaxdyn.errors import ModelError

pin = pytest.importorskip("pinocchio")
from pinutil import pin_constraint_dynamics, pin_twin_constraints  # noqa: E402


def _pin_constraints(m, pm, cm, q, kinds_frames):
    """Pinocchio RigidConstraintModels for world contacts of the named frames at q."""
    data = pm.createData()
    pin.framesForwardKinematics(pm, data, q)
    cms = []
    for kind, fname in kinds_frames:
        fid = pm.getFrameId(fname)
        fr = pm.frames[fid]
        ct = pin.ContactType.CONTACT_3D if kind == "point" else pin.ContactType.CONTACT_6D
        cms.append(pin.RigidConstraintModel(ct, pm, fr.parentJoint, fr.placement, 0, data.oMf[fid],
                                            pin.ReferenceFrame.LOCAL_WORLD_ALIGNED))
    return cms


def consistent_state(cm, q, rng, tau_scale=5.0):
    """K at q, a random qd with K qd = 0 and a random tau; and both solvers' results there."""
    K = np.asarray(jaxdyn.constraint_jacobian(cm, q))
    v = rng.normal(size=cm.model.nv)
    v = v - np.linalg.pinv(K) @ (K @ v)
    tau = rng.normal(size=cm.model.nv) * tau_scale
    solve = lambda method: jaxdyn.constrained_forward_dynamics(cm, q, v, tau, method=method)
    return K, v, tau, solve("schur"), solve("kkt")


def world_contacts(m, q, kinds_frames):
    cs = []
    for kind, f in kinds_frames:
        R, p = jaxdyn.frame_pose(m, q, f)
        cs.append(jaxdyn.Constraint(kind, f, None, placement_b=(np.asarray(R), np.asarray(p)), name=f))
    return jaxdyn.close_loops(m, cs)


def _check_against_pinocchio(name, kinds_frames, n_states=2):
    path = urdf_path(name)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = jaxdyn.load_urdf(path, floating_base=True)
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())
    rng = np.random.default_rng(0)
    for s in range(n_states):
        q = np.array(jaxdyn.neutral(m))
        q[7:] += 0.2 * rng.normal(size=m.nq - 7)
        cm = world_contacts(m, q, kinds_frames)
        K, v, tau, res, res_kkt = consistent_state(cm, q, rng)     # the velocity constraint holds
        tau_p = tau - np.asarray(m.damping) * v      # jaxdyn applies the URDF's joint damping
        qdd_p, lam_p = pin_constraint_dynamics(pm, _pin_constraints(m, pm, cm, q, kinds_frames), q, v, tau_p)
        close(res.qdd, qdd_p, 1e-9, f"{name} qdd vs pinocchio")
        close(res_kkt.qdd, res.qdd, 1e-9, f"{name} kkt vs schur")
        close(res.lam, lam_p, 1e-8, f"{name} lam vs pinocchio")
        # the equations of motion themselves
        M = np.asarray(jaxdyn.crba(m, q))
        h = np.asarray(jaxdyn.rnea(m, q, v, np.zeros(m.nv))) + np.asarray(m.damping) * v
        close(M @ np.asarray(res.qdd) + h - tau, K.T @ np.asarray(res.lam), 1e-10, "M qdd + h - tau = K^T lam")
        close(res.residual, np.zeros(K.shape[0]), 1e-9, "K qdd + k = 0")
        assert int(res.rank) == K.shape[0]


def test_quadruped_four_point_feet():
    _check_against_pinocchio("anymal_c", [("point", f) for f in ("LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT")])


def test_humanoid_double_support_welded_feet():
    _check_against_pinocchio("talos_reduced", [("weld", "left_sole_link"), ("weld", "right_sole_link")], n_states=1)


def four_bar():
    """The built-in planar four-bar (3-row point constraint, rank 2) at its initial pose."""
    cm, q = jaxdyn.mechanisms.four_bar()
    return cm.model, cm, q


def test_four_bar_redundant_rows_least_squares_reference():
    m, cm, q = four_bar()
    close(jaxdyn.constraint_residual(cm, q), np.zeros(3), 1e-12, "projection")
    K = np.asarray(jaxdyn.constraint_jacobian(cm, q))
    _, qd = jaxdyn.project_constraints(cm, q, np.array([1.0, 0.3, -0.2]))
    qd = np.asarray(qd)
    close(K @ qd, np.zeros(3), 1e-12, "velocity projection")
    tau = np.array([0.5, -0.2, 0.1])
    res = jaxdyn.constrained_forward_dynamics(cm, q, qd, tau)
    res_k = jaxdyn.constrained_forward_dynamics(cm, q, qd, tau, method="kkt")
    assert int(res.rank) == 2 and np.all(np.isfinite(res.lam)) and np.isfinite(float(res.cond))
    # independent reference: least-squares (least-norm) solution of the singular KKT system
    M = np.asarray(jaxdyn.crba(m, q)); h = np.asarray(jaxdyn.rnea(m, q, qd, np.zeros(3)))
    k = np.asarray(jaxdyn.constraints.constraint_bias(cm, q, qd))
    Z = np.block([[M, -K.T], [K, np.zeros((3, 3))]])
    x = np.linalg.lstsq(Z, np.concatenate([tau - h, -k]), rcond=1e-12)[0]
    close(res.qdd, x[:3], 1e-9, "schur vs lstsq KKT")
    close(res_k.qdd, x[:3], 1e-9, "kkt vs lstsq KKT")
    close(M @ np.asarray(res.qdd) + h - tau, K.T @ np.asarray(res.lam), 1e-10)


def test_constrained_gradients_match_finite_differences():
    """jvp and vjp of qdd with respect to (q tangent, qd, tau) through the proximal solve."""
    from jax.test_util import check_grads
    m, cm, q = four_bar()
    qd = np.asarray(jaxdyn.project_constraints(cm, q, np.array([1.0, 0.3, -0.2]))[1])
    tau = np.array([0.5, -0.2, 0.1])

    @jax.jit
    def f(dq, qd, tau):
        qq = jaxdyn.integrate(m, q, dq)
        return jaxdyn.constrained_forward_dynamics(cm, qq, qd, tau, stabilization=(5.0, 5.0)).qdd

    check_grads(f, (np.zeros(3), qd, tau), order=1, modes=["fwd", "rev"], eps=1e-6)


def test_schur_derivative_rule_every_kind_and_parameters():
    """The Schur solve's implicit derivative (jaxdyn.constraints.schur: one RNEA and one
    kinematics jvp, then the solves of the primal) against finite differences, jvp and vjp of
    qdd and lam: two PUMAs holding a floating box by a revolute and a soft-finger (subspace)
    grasp, the box welded to the world, Baumgarte terms on; with respect to the
    state, tau, the link masses and the contact frames' placements (the model's parameters)."""
    from jax.test_util import check_grads
    held, q = jaxdyn.mechanisms.arms_holding_box(2)
    m = held.model
    pose = lambda f: tuple(np.asarray(x) for x in jaxdyn.frame_pose(m, q, f))
    (Rb, pb), (R0, p0), (R1, p1) = pose("box"), pose("arm0_ee"), pose("arm1_ee")
    cm = jaxdyn.close_loops(m, [
        jaxdyn.Constraint("revolute", "box", "arm0_ee", placement_a=(Rb.T @ R0, Rb.T @ (p0 - pb))),
        jaxdyn.Constraint("subspace", "box", "arm1_ee", placement_a=(Rb.T @ R1, Rb.T @ (p1 - pb)),
                          subspace=np.eye(6)[:, [0, 1, 2, 5]]),
        jaxdyn.Constraint("weld", "box", None, placement_b=(Rb, pb))])
    rng = np.random.default_rng(7)
    K, qd, tau, _, _ = consistent_state(cm, q, rng, 10.0)
    tau, m = jnp.asarray(tau), cm.model          # cm.model: m with the constraints' placement frames

    def f(dq, qd, tau, s):
        mm = m.replace(mass=m.mass * (1 + s[0]), frame_r=m.frame_r * (1 + s[1]))
        r = jaxdyn.constrained_forward_dynamics(cm.replace(model=mm), jaxdyn.integrate(m, q, dq), qd, tau,
                                                stabilization=(5.0, 5.0))
        return r.qdd, r.lam

    args = (np.zeros(m.nv), qd, tau, np.zeros(2))
    assert not bool(jaxdyn.constrained_forward_dynamics(cm, q, qd, tau).singular)
    check_grads(jax.jit(f), args, order=1, modes=["fwd", "rev"], eps=1e-6, atol=1e-5, rtol=1e-5)


def test_constrained_rollout_drift_and_energy():
    """Passive four-bar under gravity, RK4 dt = 1 ms for 10 s: with Baumgarte stabilization
    (10, 10) the loop stays closed to 1e-9 (measured 1.4e-10; 7e-8 without), and the total
    energy of the passive mechanism is conserved (measured 5e-8 of 40 J)."""
    m, cm, q = four_bar()
    tr = jax.jit(lambda: jaxdyn.rollout(cm, q, jnp.zeros(3), None, dt=1e-3, steps=10000, stepper="rk4",
                                        stabilization=(10.0, 10.0)))()
    assert bool(tr.ok)
    drift = np.abs(np.asarray(jax.jit(jax.vmap(lambda q: jaxdyn.constraint_residual(cm, q)))(tr.q))).max()
    E = np.asarray(jax.jit(jax.vmap(lambda q, v: jaxdyn.kinetic_energy(m, q, v) + jaxdyn.potential_energy(m, q)))(tr.q, tr.qd))
    assert drift < 1e-9, drift
    assert np.abs(E - E[0]).max() < 1e-6 * np.abs(E).max()
    assert np.ptp(np.asarray(tr.q[:, 0])) > 0.1       # it actually moves


def test_bad_constraints_named_at_close_loops():
    m, cm, q = four_bar()
    cases = [
        (jaxdyn.Constraint("point", "nope"), r"no frame 'nope'"),
        (jaxdyn.Constraint("hinge", "tip"), r"unknown kind 'hinge'"),
        (jaxdyn.Constraint("point", "tip", None, placement_b=(np.diag([1.0, 1.0, -1.0]), np.zeros(3))),
         r"placement_b: R is not a rotation"),
        (jaxdyn.Constraint("weld", "tip", "rocker"), r"same body"),
        (jaxdyn.Constraint("subspace", "tip"), r"needs subspace= a \(6, r\) matrix"),
        (jaxdyn.Constraint("subspace", "tip", subspace=np.ones((6, 2))), r"of rank r"),
        (jaxdyn.Constraint("point", "tip", subspace=np.eye(6)[:, :2]), r"only for kind 'subspace'"),
    ]
    for c, pat in cases:
        with pytest.raises(ModelError, match=pat):
            jaxdyn.close_loops(m, [c])
    from jaxdyn.errors import ArgumentError
    with pytest.raises(ArgumentError, match="method must be 'schur' or 'kkt', got 'udut'"):
        jaxdyn.rollout(cm, q, np.zeros(3), None, steps=2, method="udut")
    with pytest.raises(ArgumentError, match="stabilization applies to closed models"):
        jaxdyn.rollout(m, q, np.zeros(3), None, steps=2, stabilization=(1.0, 1.0))


def test_placements_are_rotations_to_the_precision_they_are_given_in():
    """A placement computed in float32 (e.g. from frame poses with jax_enable_x64 off, as
    mechanisms.arms_holding_box(3) does) is a rotation to float32 round-off, not to 1e-9: it is
    accepted; a matrix 0.1 % off a rotation is refused in either precision."""
    m, cm, q = four_bar()
    c, s_ = np.float32(np.cos(0.7)), np.float32(np.sin(0.7))
    axis = np.array([1, 2, 2], np.float32) / np.float32(3)
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]], np.float32)
    R32 = np.eye(3, dtype=np.float32) + s_ * K + (np.float32(1) - c) * (K @ K)
    assert R32.dtype == np.float32 and np.abs(R32.astype(float) @ R32.astype(float).T - np.eye(3)).max() > 1e-9
    for R in (R32, jnp.asarray(R32, jnp.float32)):
        jaxdyn.close_loops(m, [jaxdyn.Constraint("point", "tip", None, placement_b=(R, np.zeros(3)))])
    for R in (1.001 * R32, 1.001 * R32.astype(float)):
        with pytest.raises(ModelError, match="R is not a rotation matrix"):
            jaxdyn.close_loops(m, [jaxdyn.Constraint("point", "tip", None, placement_b=(R, np.zeros(3)))])


def _rot(rng):
    A = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    return A * np.sign(np.linalg.det(A))


def test_bias_is_exact_time_derivative_every_kind():
    """d/dt (K(q) qd) = K qdd + k along q(t) = q (+) (qd t + qdd t^2 / 2), qd(t) = qd + qdd t, for
    point, weld, revolute and subspace constraints between two bodies and to the world."""
    rng = np.random.default_rng(7)
    m = jaxdyn.robots.random_tree(6, 0.5, 3, floating_base=True, joint_types=("revolute", "spherical", "prismatic"))
    phi = rng.normal(size=(6, 4))
    cs = [jaxdyn.Constraint("point", "body5", "body2", (_rot(rng), rng.normal(size=3)), (_rot(rng), rng.normal(size=3))),
          jaxdyn.Constraint("weld", "body4", None, (_rot(rng), rng.normal(size=3)), (_rot(rng), rng.normal(size=3))),
          jaxdyn.Constraint("revolute", "body3", "body1", (_rot(rng), rng.normal(size=3)), None),
          jaxdyn.Constraint("subspace", "body5", "body0", None, (_rot(rng), rng.normal(size=3)), subspace=phi)]
    cm = jaxdyn.close_loops(m, cs)
    assert cm.m == 3 + 6 + 5 + 4
    q = jaxdyn.random_configuration(m, jax.random.PRNGKey(3))
    qd, qdd = jnp.asarray(rng.normal(size=m.nv)), jnp.asarray(rng.normal(size=m.nv))

    @jax.jit
    def c(t):
        qt = jaxdyn.integrate(m, q, qd * t + 0.5 * qdd * t * t)
        return jaxdyn.constraint_jacobian(cm, qt) @ (qd + qdd * t)

    eps = 1e-5
    fd = (c(eps) - c(-eps)) / (2 * eps)
    ana = jaxdyn.constraint_jacobian(cm, q) @ qdd + jax.jit(jaxdyn.constraints.constraint_bias)(cm, q, qd)
    close(ana, fd, 1e-7, "K qdd + k vs d/dt (K qd)")


def test_four_bar_closed_by_revolute_or_subspace_equals_point():
    """In a planar mechanism a hinge about z, or only the in-plane position rows, close the
    loop exactly as the point constraint does: same accelerations."""
    m, cm_pt, q = four_bar()
    qd = np.asarray(jaxdyn.project_constraints(cm_pt, q, np.array([1.0, 0.3, -0.2]))[1])
    tau = np.array([0.5, -0.2, 0.1])
    ref = jaxdyn.constrained_forward_dynamics(cm_pt, q, qd, tau).qdd
    pl = (np.eye(3), np.array([2.0, 0, 0]))
    for c in (jaxdyn.Constraint("revolute", "tip", None, placement_b=pl),
              jaxdyn.Constraint("subspace", "tip", None, placement_b=pl, subspace=np.eye(6)[:, :2])):
        cm = jaxdyn.close_loops(m, [c])
        res = jaxdyn.constrained_forward_dynamics(cm, q, qd, tau)
        close(res.qdd, ref, 1e-10, c.kind)
        assert int(res.rank) == 2


def test_dual_arm_hands_welded_together():
    """talos_reduced (fixed base) with its two wrists welded to each other at their current
    relative pose: a closed loop through the torso, against Pinocchio's 6-D constraint between
    two joints (at a state where the velocity constraint holds); the loop's Delassus matrix by
    the operational-space recursion against K M^-1 K^T."""
    import warnings
    path = urdf_path("talos_reduced")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = jaxdyn.load_urdf(path)
    pm = pin.buildModelFromUrdf(path)
    rng = np.random.default_rng(4)
    q = 0.3 * rng.normal(size=m.nq)
    Ra, pa = (np.asarray(x) for x in jaxdyn.frame_pose(m, q, "arm_left_7_link"))
    Rb, pb = (np.asarray(x) for x in jaxdyn.frame_pose(m, q, "arm_right_7_link"))
    place_b = (Rb.T @ Ra, Rb.T @ (pa - pb))                   # frame a's pose in frame b
    cm = jaxdyn.close_loops(m, [jaxdyn.Constraint("weld", "arm_left_7_link", "arm_right_7_link", placement_b=place_b)])
    close(jaxdyn.constraint_residual(cm, q), np.zeros(6), 1e-12)
    K, v, tau, res, res_k = consistent_state(cm, q, rng)
    ja, jb = pm.getJointId("arm_left_7_joint"), pm.getJointId("arm_right_7_joint")
    c = pin.RigidConstraintModel(pin.ContactType.CONTACT_6D, pm, ja, pin.SE3.Identity(), jb,
                                 pin.SE3(place_b[0], place_b[1]), pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
    qdd_p, _ = pin_constraint_dynamics(pm, [c], q, v, tau - np.asarray(m.damping) * v)
    close(res.qdd, qdd_p, 1e-9, "qdd vs pinocchio")
    close(res_k.qdd, res.qdd, 1e-9, "kkt vs schur")
    M = np.asarray(jaxdyn.crba(m, q))
    h = np.asarray(jaxdyn.rnea(m, q, v, np.zeros(m.nv))) + np.asarray(m.damping) * v
    close(M @ np.asarray(res.qdd) + h - tau, K.T @ np.asarray(res.lam), 1e-10)
    from jaxdyn.constraints.dynamics import delassus       # O(N) operational-space route, cross terms
    close(delassus(cm, q), K @ np.linalg.solve(M, K.T), 1e-9, "delassus vs K M^-1 K^T")


def test_cli_simulates_closed_mechanisms(tmp_path, capsys):
    """`jaxdyn simulate` on a closed mechanism: projected initial state, constrained rollout,
    drift plot and summary line; the shipped closed-chain configs validate."""
    from jaxdyn.cli import main
    from jaxdyn.config import load_config
    for name in ("four_bar", "five_bar", "quadruped_stand", "three_arms_box"):
        assert load_config(name)["simulation"]["stabilization"] == [10.0, 10.0]
    cfg = tmp_path / "fb.toml"
    cfg.write_text('[robot]\nname = "five_bar"\n[simulation]\nT = 0.2\ndt = 0.001\nintegrator = "rk4"\n'
                   'method = "kkt"\nstabilization = [10.0, 10.0]\n')
    out = tmp_path / "out"
    assert main(["simulate", str(cfg), "--out", str(out)]) == 0
    text = (out / "summary.txt").read_text()
    drift = float(text.split("max drift ")[1].split()[0])
    assert drift < 1e-8 and (out / "drift.png").stat().st_size > 1000
    cfg.write_text('[robot]\nname = "five_bar"\n[simulation]\nmethod = "udut"\n')
    assert main(["simulate", str(cfg)]) == 2 and "simulation.method must be one of ['schur', 'kkt'" in capsys.readouterr().err


def test_three_arms_holding_a_box_against_pinocchio():
    """Rodriguez and Kreutz's ell arms rigidly grasping one object (ell = 3 PUMAs, floating box):
    schur and kkt against Pinocchio's constraintDynamics on the model's Pinocchio twin."""
    from pinutil import to_pinocchio
    cm, q = jaxdyn.mechanisms.arms_holding_box(3)
    m = cm.model
    pm = to_pinocchio(m)
    rng = np.random.default_rng(2)
    K, v, tau, res, res_k = consistent_state(cm, q, rng, 10.0)
    qdd_p, lam_p = pin_constraint_dynamics(pm, pin_twin_constraints(cm, pm), q, v, tau)
    close(res.qdd, qdd_p, 1e-9, "qdd vs pinocchio")
    close(res_k.qdd, res.qdd, 1e-9, "kkt vs schur")
    close(res.lam, lam_p, 1e-8, "grasp wrenches vs pinocchio")
    assert int(res.rank) == 18


@pytest.mark.parametrize("ell", [3])
def test_rccfd_and_lilly_orin_equal_schur_and_kkt(ell):
    """Rodriguez and Kreutz's RCCFD 1 (arms vmapped, Omega from the O(N) recursion (6.10)) and
    Lilly and Orin's Type 0 algorithm (6 x 6 solve for the held object) against the
    Schur-complement and KKT solves of the same system as a ClosedModel."""
    cm, q = jaxdyn.mechanisms.arms_holding_box(ell)
    gs, q2 = jaxdyn.mechanisms.arms_holding_box(ell, form="grasp")
    np.testing.assert_array_equal(q, q2)
    rng = np.random.default_rng(ell)
    K, v, tau, res, res_k = consistent_state(cm, q, rng, 10.0)
    for stab in (None, (10.0, 10.0)):
        ref = res if stab is None else jaxdyn.constrained_forward_dynamics(cm, q, v, tau, stabilization=stab)
        for method in ("rccfd", "lilly_orin"):
            r = jaxdyn.constrained_forward_dynamics(gs, q, v, tau, method=method, stabilization=stab)
            close(r.qdd, ref.qdd, 1e-10, f"{method} vs schur qdd")
            close(r.lam, ref.lam, 1e-10, f"{method} vs schur lam")
            close(r.residual, np.zeros(6 * ell), 1e-9, f"{method} residual")
            assert int(r.rank) == int(r.rows) == 6 * ell and not r.singular   # Omega on the 6 ell weld rows
    close(res_k.qdd, res.qdd, 1e-9, "kkt vs schur")


def test_method_structure_errors():
    from jaxdyn.errors import ArgumentError
    cm, q = jaxdyn.mechanisms.arms_holding_box(1)
    gs, _ = jaxdyn.mechanisms.arms_holding_box(1, form="grasp")
    z = np.zeros(cm.model.nv)
    for method in ("rccfd", "lilly_orin"):
        with pytest.raises(ArgumentError, match=f"method='{method}' needs the structure of arms"):
            jaxdyn.constrained_forward_dynamics(cm, q, z, z, method=method)
    with pytest.raises(ArgumentError, match="a GraspSystem is solved by method='rccfd' or 'lilly_orin'"):
        jaxdyn.constrained_forward_dynamics(gs, q, z, z, method="schur")
    box = gs.obj
    with pytest.raises(ModelError, match="does not have the structure of arm 0"):
        jaxdyn.grasp_system(box, [jaxdyn.robots.puma560(), jaxdyn.robots.stanford_arm()], "ee", ["grasp0", "grasp0"])
    with pytest.raises(ModelError, match="must have a free-flyer root"):
        jaxdyn.grasp_system(jaxdyn.robots.puma560(), [jaxdyn.robots.puma560()], "ee", ["ee"])
