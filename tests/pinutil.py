"""Build the Pinocchio twin of a jaxdyn Model (for reference tests only)."""
import numpy as np
import pinocchio as pin

from jaxdyn.model import joints as J


def to_pinocchio(model):
    pm = pin.Model()
    pm.gravity = pin.Motion(np.concatenate([np.asarray(model.gravity), np.zeros(3)]))
    ids = []
    for i in range(model.nb):
        t = int(model.jtype[i])
        ax = np.asarray(model.axis[i])
        if t == J.REVOLUTE:
            jm = pin.JointModelRevoluteUnaligned(ax)
        elif t == J.REVOLUTE_UB:
            # pin's Python bindings cannot set an unaligned RUB axis: only axis-aligned ones
            cls = {0: pin.JointModelRUBX, 1: pin.JointModelRUBY, 2: pin.JointModelRUBZ}
            k = int(np.argmax(np.abs(ax)))
            if not np.allclose(ax, np.eye(3)[k]):
                raise NotImplementedError("unaligned revolute_unbounded axis")
            jm = cls[k]()
        elif t == J.PRISMATIC:
            jm = pin.JointModelPrismaticUnaligned(ax)
        elif t == J.HELICAL:
            jm = pin.JointModelHelicalUnaligned(ax, float(model.pitch[i]))
        elif t == J.SPHERICAL:
            jm = pin.JointModelSpherical()
        elif t == J.FREE:
            jm = pin.JointModelFreeFlyer()
        elif t == J.PLANAR:
            jm = pin.JointModelPlanar()
        else:
            raise NotImplementedError(t)
        p = int(model.parent[i])
        pid = 0 if p < 0 else ids[p]
        placement = pin.SE3(np.asarray(model.Xtree_E[i]).T, np.asarray(model.Xtree_r[i]))
        jid = pm.addJoint(pid, jm, placement, model.joint_names[i])
        pm.appendBodyToJoint(jid, pin.Inertia(float(model.mass[i]), np.asarray(model.com[i]),
                                              np.asarray(model.inertia[i])), pin.SE3.Identity())
        ids.append(jid)
    return pm


def align_rub_axes(model):
    """Copy of model with revolute_unbounded axes snapped to +z (Pinocchio RUBZ)."""
    ax = np.asarray(model.axis).copy()
    ax[np.asarray(model.jtype) == J.REVOLUTE_UB] = (0.0, 0.0, 1.0)
    import jax.numpy as jnp
    return model.replace(axis=jnp.asarray(ax))


def pin_constraint_dynamics(pm, constraint_models, q, v, tau):
    """Pinocchio's constraintDynamics for a list / StdVec of RigidConstraintModels: (qdd, lambda_c)."""
    pcm, pcd = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    for c in constraint_models:
        pcm.append(c)
        pcd.append(c.createData())
    data = pm.createData()
    pin.initConstraintDynamics(pm, data, pcm, pcd)
    qdd = pin.constraintDynamics(pm, data, q, v, tau, pcm, pcd, pin.ProximalSettings(1e-14, 1e-14, 1e-12, 50))
    return qdd, data.lambda_c.copy()


def pin_twin_constraints(cm, pm):
    """Pinocchio RigidConstraintModels equal to a ClosedModel's point / weld constraints, for the
    Pinocchio twin of cm.model (tests/pinutil: joint id = body index + 1)."""
    fb, fE, fr = (np.asarray(x) for x in (cm.model.frame_body, cm.model.frame_E, cm.model.frame_r))
    out = pin.StdVec_RigidConstraintModel()
    for i, kind in enumerate(cm.kinds):
        ends = []
        for f in (cm.frames_a[i], cm.frames_b[i]):
            if f < 0:
                ends.append((0, pin.SE3(np.asarray(cm.world_R[i]), np.asarray(cm.world_p[i]))))
            else:
                ends.append((int(fb[f]) + 1, pin.SE3(fE[f].T, fr[f])))
        ct = pin.ContactType.CONTACT_3D if kind == "point" else pin.ContactType.CONTACT_6D
        out.append(pin.RigidConstraintModel(ct, pm, ends[0][0], ends[0][1], ends[1][0], ends[1][1],
                                            pin.ReferenceFrame.LOCAL_WORLD_ALIGNED))
    return out


def pin_forces(fx):
    """Pinocchio's external forces (one per joint, the universe's zero) from jaxdyn's (nb, 6)
    body-frame wrenches [f; n] (Pinocchio's Force(linear, angular))."""
    return [pin.Force.Zero()] + [pin.Force(f[:3], f[3:]) for f in fx]


def pin_mass_matrix(pm, pd, q, use_crba=True):
    """Pinocchio's M: crba, or (use_crba=False) columns of pin.rnea(q, 0, e_k) - g."""
    if use_crba:
        M = pin.crba(pm, pd, q)
        return np.triu(M) + np.triu(M, 1).T
    z = np.zeros(pm.nv)
    g = pin.rnea(pm, pd, q, z, z)
    return np.stack([pin.rnea(pm, pd, q, z, e) - g for e in np.eye(pm.nv)], 1)


def pin_minv(pm, pd, q, use_crba=True):
    """Pinocchio's M^-1: computeMinverse, or (use_crba=False) numpy's inverse of the rnea columns."""
    if not use_crba:
        return np.linalg.inv(pin_mass_matrix(pm, pd, q, False))
    Mi = pin.computeMinverse(pm, pd, q)
    return np.triu(Mi) + np.triu(Mi, 1).T


# The robots every algorithm is checked on against Pinocchio: five example-robot-data URDFs and
# two random trees with every joint type (floating, and fixed with a planar joint below a branch).
REFERENCE_CASES = ["panda", "ur5", "anymal_c", "talos_reduced", "g1", "tree_float", "tree_fixed"]
_TREES = {"tree_float": (4, True), "tree_fixed": (11, False)}
# Pinocchio 4.1's crba / computeMinverse disagree with its own rnea on trees with a planar joint
# below a branch (tree_fixed): their mass-matrix reference is built from pin.rnea columns.
PIN_CRBA_INCONSISTENT = {"tree_fixed"}


def reference_case(robot_pair, name):
    """(jaxdyn model, Pinocchio model, states) for a name of REFERENCE_CASES; states are
    (q, v, a, tau) tuples: 4 from Pinocchio's randomConfiguration within the limits for a URDF,
    3 from jaxdyn.random_configuration for a random tree."""
    import jax
    import jaxdyn
    from helpers import rng_states
    if name not in _TREES:
        m, pm = robot_pair(name)
        return m, pm, rng_states(m, pm, 4, seed=3)
    seed, floating = _TREES[name]
    m = align_rub_axes(jaxdyn.robots.random_tree(12, 0.5, seed, floating_base=floating))
    states = []
    for s in range(3):
        q = np.asarray(jaxdyn.random_configuration(m, jax.random.PRNGKey(s)))
        r = np.random.default_rng(s)
        states.append((q, r.normal(size=m.nv), r.normal(size=m.nv), r.normal(size=m.nv)))
    return m, to_pinocchio(m), states


def world_and_local_forces(pm, q, seed=0):
    """Random external wrenches given in world coordinates and the same wrenches in each body's
    frame (Pinocchio's placements oMi): (f_world, f_local), each (nb, 6)."""
    pd = pm.createData()
    pin.forwardKinematics(pm, pd, q)
    fx_w = np.random.default_rng(seed).normal(size=(pm.njoints - 1, 6))
    fx_l = np.stack([pd.oMi[i + 1].actInv(pin.Force(f[:3], f[3:])).vector for i, f in enumerate(fx_w)])
    return fx_w, fx_l
