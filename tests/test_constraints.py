"""Closed chains: constrained forward dynamics against Pinocchio's constraintDynamics
(quadruped with four point feet, humanoid with two welded feet), against a least-squares
solve of the KKT system (planar four-bar, redundant constraint rows), the equations of motion
themselves, finite differences, and named errors for bad constraints."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from conftest import close, urdf_path
from jaxdyn.errors import ModelError

pin = pytest.importorskip("pinocchio")


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


def _world_contacts(m, q, kinds_frames):
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
    solve = jax.jit(lambda cm, q, v, t: (jaxdyn.constrained_forward_dynamics(cm, q, v, t),
                                         jaxdyn.constrained_forward_dynamics(cm, q, v, t, method="kkt")))
    for s in range(n_states):
        q = np.array(jaxdyn.neutral(m))
        q[7:] += 0.2 * rng.normal(size=m.nq - 7)
        cm = _world_contacts(m, q, kinds_frames)
        K = np.asarray(jaxdyn.constraint_jacobian(cm, q))
        v = rng.normal(size=m.nv)
        v = v - np.linalg.pinv(K) @ (K @ v)          # the velocity constraint holds
        tau = rng.normal(size=m.nv) * 5
        res, res_kkt = solve(cm, q, v, tau)
        pcm, pcd = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
        for c in _pin_constraints(m, pm, cm, q, kinds_frames):
            pcm.append(c)
            pcd.append(c.createData())
        pdata = pm.createData()
        pin.initConstraintDynamics(pm, pdata, pcm, pcd)
        prox = pin.ProximalSettings(1e-14, 1e-14, 1e-12, 50) if hasattr(pin, "ProximalSettings") else None
        tau_p = tau - np.asarray(m.damping) * v      # jaxdyn applies the URDF's joint damping
        qdd_p = pin.constraintDynamics(pm, pdata, q, v, tau_p, pcm, pcd, prox) if prox else \
            pin.constraintDynamics(pm, pdata, q, v, tau_p, pcm, pcd)
        close(res.qdd, qdd_p, 1e-9, f"{name} qdd vs pinocchio")
        close(res_kkt.qdd, res.qdd, 1e-9, f"{name} kkt vs schur")
        close(res.lam, pdata.lambda_c, 1e-8, f"{name} lam vs pinocchio")
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
    """Planar four-bar: ground link 2 m, crank 1 m, coupler 2 m, rocker 1.5 m; three revolute
    joints about z in a chain, the rocker tip pinned to the world at (2, 0, 0) by a 3-row point
    constraint (the z row is redundant: rank 2)."""
    L = [1.0, 2.0, 1.5]
    m = jaxdyn.build_model(parent=[-1, 0, 1], jtype=["revolute"] * 3, Xtree_E=np.tile(np.eye(3), (3, 1, 1)),
                           Xtree_r=np.array([[0, 0, 0], [L[0], 0, 0], [L[1], 0, 0]]),
                           axis=np.tile([0, 0, 1.0], (3, 1)), mass=[1.0, 2.0, 1.5],
                           com=np.array([[l / 2, 0, 0] for l in L]),
                           inertia=np.stack([np.diag([0.01, l * l / 12, l * l / 12]) * mm for l, mm in zip(L, [1, 2, 1.5])]),
                           gravity=(0.0, -9.81, 0.0), body_names=["crank", "coupler", "rocker"],
                           frames=[("tip", 2, np.eye(3), np.array([L[2], 0, 0]))])
    c = jaxdyn.Constraint("point", "tip", None, placement_b=(np.eye(3), np.array([2.0, 0, 0])))
    cm = jaxdyn.close_loops(m, [c])
    # a consistent configuration: crank at 60 degrees, the rest from projection
    q0 = np.array([np.pi / 3, -np.pi / 3, -np.pi / 2])
    q, _ = jaxdyn.project_constraints(cm, q0, np.zeros(3))
    return m, cm, np.asarray(q)


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


def test_constrained_rollout_drift_and_energy():
    """Passive four-bar under gravity, RK4 dt = 1 ms for 2 s: with Baumgarte stabilization the
    loop stays closed; the total energy of the passive mechanism is conserved."""
    m, cm, q = four_bar()
    steps = 2000
    run = jax.jit(lambda stab: jaxdyn.rollout(cm, q, jnp.zeros(3), None, dt=1e-3, steps=steps, stepper="rk4",
                                              stabilization=stab), static_argnums=0)
    tr = run((20.0, 20.0))
    assert bool(tr.ok)
    drift = np.abs(np.asarray(jax.vmap(lambda q: jaxdyn.constraint_residual(cm, q))(tr.q))).max()
    E = np.asarray(jax.vmap(lambda q, v: jaxdyn.kinetic_energy(m, q, v) + jaxdyn.potential_energy(m, q))(tr.q, tr.qd))
    assert drift < 1e-8, drift
    assert np.abs(E - E[0]).max() < 1e-6 * max(1.0, np.abs(E).max())
    assert np.ptp(np.asarray(tr.q[:, 0])) > 0.1       # it actually moves


def test_bad_constraints_named_at_close_loops():
    m, cm, q = four_bar()
    cases = [
        (jaxdyn.Constraint("point", "nope"), r"no frame 'nope'"),
        (jaxdyn.Constraint("hinge", "tip"), r"unknown kind 'hinge'"),
        (jaxdyn.Constraint("point", "tip", None, placement_b=(np.diag([1.0, 1.0, -1.0]), np.zeros(3))),
         r"placement_b: R is not a rotation"),
        (jaxdyn.Constraint("weld", "tip", "rocker"), r"same body"),
    ]
    for c, pat in cases:
        with pytest.raises(ModelError, match=pat):
            jaxdyn.close_loops(m, [c])
