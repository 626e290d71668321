"""The seeds' O(n) methods: Saha UDU^T, Rodriguez-Kreutz operators FD1-FD4 and M^-1,
Yamane-Nakamura virtual work, operational-space inverse inertia.

References: ABA and CRBA (themselves checked against Pinocchio), Pinocchio directly (M^-1,
joint forces data.f), dense linear algebra (J M^-1 J^T, triangular structure), and each
other."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from jaxdyn.dynamics import slots
from helpers import close, rng_states

METHODS = ("udut", "operator_fd1", "operator_fd2", "operator_fd3", "operator_fd4", "virtual_work")


def builtin_models():
    return {
        "puma560": jaxdyn.robots.puma560(),
        "stanford": jaxdyn.robots.stanford_arm(),
        "planar3": jaxdyn.robots.planar3(),
        # floating root, all seven joint types
        "tree_float": jaxdyn.robots.random_tree(10, 0.5, 4, floating_base=True),
        # fixed base, spherical + prismatic + revolute, branched
        "tree_sph": jaxdyn.robots.random_tree(9, 0.3, 2, joint_types=("spherical", "prismatic", "revolute")),
    }


def batch_states(m, n, seed):
    keys = jax.random.split(jax.random.PRNGKey(seed), n)
    q = jax.vmap(lambda k: jaxdyn.random_configuration(m, k))(keys)
    r = np.random.default_rng(seed)
    return q, jnp.asarray(r.normal(size=(n, m.nv))), jnp.asarray(r.normal(size=(n, m.nv)) * 3), \
        jnp.asarray(r.normal(size=(n, m.nb, 6)))


def check_all_methods(m, q, qd, tau, fx):
    """Every method equals the front door's ABA (same damping) on a batch, with and without
    f_ext; one compiled program for all methods keeps the suite fast."""
    def all_methods(q, qd, tau, f):
        return jnp.stack([jaxdyn.forward_dynamics(m, q, qd, tau, method=meth, f_ext=ff)
                          for ff in (None, f) for meth in ("aba",) + METHODS])
    out = jax.jit(jax.vmap(all_methods))(q, qd, tau, fx)
    n = len(METHODS) + 1
    for i, meth in enumerate(METHODS):
        close(out[:, i + 1], out[:, 0], err=meth)
        close(out[:, n + i + 1], out[:, n], err=meth + " f_ext")
    # the front door's ABA is aba with damping, and f_ext changes the answer
    close(out[0, 0], jaxdyn.aba(m, q[0], qd[0], tau[0] - m.damping * qd[0]))
    assert float(jnp.abs(out[:, 0] - out[:, n]).max()) > 1e-6


@pytest.mark.parametrize("name", list(builtin_models()))
def test_methods_equal_aba_builtin(name):
    m = builtin_models()[name]
    check_all_methods(m, *batch_states(m, 4, 1))


@pytest.mark.parametrize("name", ["panda", "anymal_c", "talos_reduced"])
def test_methods_equal_aba_urdf(robot_pair, name):
    pin = pytest.importorskip("pinocchio")
    m, pm = robot_pair(name)
    st = rng_states(m, pm, 3, seed=2)
    q = jnp.asarray(np.stack([s[0] for s in st]))
    qd = jnp.asarray(np.stack([s[1] for s in st]))
    tau = jnp.asarray(np.stack([s[3] for s in st]))
    fx = jnp.asarray(np.random.default_rng(3).normal(size=(3, m.nb, 6)))
    check_all_methods(m, q, qd, tau, fx)
    pd = pm.createData()
    for i in range(3):
        qi = np.asarray(q[i])
        Mi = pin.computeMinverse(pm, pd, qi)
        Mi = np.triu(Mi) + np.triu(Mi, 1).T
        close(jaxdyn.minv(m, q[i], method="operator"), Mi, err="operator M^-1 vs pin")
        close(jaxdyn.saha.udut_inverse(m, q[i]), Mi, err="Saha explicit inverse vs pin")
        # virtual-work joint wrenches = Pinocchio's joint forces data.f after rnea
        qdd, w = jaxdyn.virtual_work(m, q[i], qd[i], tau[i])
        pin.rnea(pm, pd, qi, np.asarray(qd[i]), np.asarray(qdd))
        fpin = np.stack([pd.f[j + 1].vector for j in range(m.nb)])
        close(w, fpin, err="virtual-work wrenches vs pin data.f")


@pytest.mark.parametrize("name", ["puma560", "tree_float", "tree_sph"])
def test_factorizations(name):
    m = builtin_models()[name]
    m = dataclasses.replace(m, armature=jnp.linspace(0.05, 0.5, m.nv))   # armature enters D
    anc = np.asarray(jaxdyn.kinematics.ancestors(m))
    body_of = np.full(m.nv, -1)
    for b, row in enumerate(np.asarray(m.vidx)):
        body_of[row[row < m.nv]] = b
    for s in range(2):
        q = jaxdyn.random_configuration(m, jax.random.PRNGKey(s))
        M = jaxdyn.crba(m, q)
        U, D = jaxdyn.saha.udut(m, q)
        close(U @ D @ U.T, M, err="U D U^T = M")
        # U: unit diagonal, U[i, j] = 0 unless body(i) is body(j) or an ancestor (no fill-in)
        np.testing.assert_allclose(np.diag(U), 1.0, atol=1e-14)
        allowed = anc[body_of[None, :], body_of[:, None]] > 0      # row dof's body is anc of col's
        assert np.all(np.abs(np.asarray(U))[~allowed] < 1e-14)
        # D block diagonal per joint
        same = body_of[:, None] == body_of[None, :]
        assert np.all(np.abs(np.asarray(D))[~same] == 0)
        K, Dk, Kinv = jaxdyn.operators.innovations_operators(m, q)
        close(K, U, err="(1 + H Phi L) = Saha's U")
        close(Dk, D)
        close(K @ Dk @ K.T, M, err="(4.11)")
        close(Kinv @ K, np.eye(m.nv), err="(4.14)")
        Mi = np.linalg.inv(np.asarray(M))
        close(Kinv.T @ np.linalg.inv(np.asarray(Dk)) @ Kinv, Mi, err="(4.16)")
        close(jaxdyn.minv(m, q, method="operator"), Mi)
        close(jaxdyn.saha.udut_inverse(m, q), Mi)
        # Saha's DeNOC matrices (2)-(5) and the GIM elements (6)
        dn = jaxdyn.saha.denoc(m, q)
        close(dn.N_d.T @ dn.N_l.T @ dn.M @ dn.N_l @ dn.N_d + jnp.diag(m.armature), M, err="(2)")
        close(jaxdyn.saha.gim_denoc(m, q), M, err="(6)")
        # all methods still agree with ABA with armature and damping (virtual work: NaN, documented)
        r = np.random.default_rng(s)
        qd, tau = jnp.asarray(r.normal(size=m.nv)), jnp.asarray(r.normal(size=m.nv))
        ref = jaxdyn.aba(m, q, qd, tau)
        for meth in METHODS[:-1]:
            close(jaxdyn.forward_dynamics(m, q, qd, tau, method=meth), ref, err=meth + " armature")
        assert np.all(np.isnan(np.asarray(jaxdyn.forward_dynamics(m, q, qd, tau, method="virtual_work"))))


def test_denoc_twists_are_mass_centre_velocities():
    """t = N_l N_d thd gives [omega_i; v_Ci] (Eq. 4), checked against point velocities."""
    m = builtin_models()["tree_sph"]
    q = jaxdyn.random_configuration(m, jax.random.PRNGKey(4))
    qd = jnp.asarray(np.random.default_rng(4).normal(size=m.nv))
    dn = jaxdyn.saha.denoc(m, q)
    t = (dn.N_l @ dn.N_d @ qd).reshape(m.nb, 6)
    for b, name in enumerate(m.body_names):
        vC = jaxdyn.kinematics.point_velocity(m, q, qd, name, m.com[b])           # world-frame velocity of C_b
        close(t[b, 3:], vC, err=f"v_C of {name}")
        w = jaxdyn.frame_velocity(m, q, qd, name, reference="local_world_aligned")[3:]
        close(t[b, :3], w, err=f"omega of {name}")


def test_virtual_work_wrenches_equal_rnea():
    for name, m in builtin_models().items():
        q, qd, tau, fx = batch_states(m, 3, 5)

        def both(q, qd, tau, f):
            qdd, w = jaxdyn.virtual_work(m, q, qd, tau, f_ext=f)
            S = slots.padded(m, jaxdyn.kinematics.joint_transforms(m, q)[1])
            return qdd, w, jaxdyn.joint_wrenches(m, q, qd, qdd, f_ext=f), S
        qdd, w, wr, S = jax.jit(jax.vmap(both))(q, qd, tau, fx)
        close(w, wr, err=name)
        # the constraint part does no work: S^T wrench = tau on every joint
        tb = jax.vmap(lambda t: slots.per_body(m, t))(tau) * slots.dof_mask(m)[None]
        wf = jnp.concatenate([w[..., 3:], w[..., :3]], -1)
        close(jnp.einsum("bkij,bki->bkj", S, wf), tb, err=name + " S^T f = tau")


def test_operator_fd2_link_accelerations():
    """FD2's alpha (5.6) are the bodies' spatial accelerations under the computed qdd."""
    m = builtin_models()["tree_float"]
    q, qd, tau, _ = batch_states(m, 1, 6)
    qdd, alpha = jaxdyn.operators.operator_fd2(m, q[0], qd[0], tau[0])
    close(qdd, jaxdyn.aba(m, q[0], qd[0], tau[0]))
    for b, name in enumerate(m.body_names):
        close(alpha[b], jaxdyn.frame_acceleration(m, q[0], qd[0], qdd, name, reference="local"), err=name)


@pytest.mark.parametrize("name", ["puma560", "tree_float", "tree_sph"])
def test_opspace_inverse_inertia(name):
    m = builtin_models()[name]
    frames = list(m.frame_names)
    pick = [frames[-1], frames[len(frames) // 2], frames[1]]
    for s in range(2):
        q = jaxdyn.random_configuration(m, jax.random.PRNGKey(10 + s))
        Mi = jaxdyn.minv(m, q)
        for ref in ("world", "local", "local_world_aligned"):
            J = jnp.concatenate([jaxdyn.frame_jacobian(m, q, f, reference=ref) for f in pick], 0)
            close(jaxdyn.operators.opspace_inverse_inertia(m, q, pick, reference=ref), J @ Mi @ J.T, err=ref)
    if name == "puma560":
        J = jaxdyn.frame_jacobian(m, q, "ee", reference="local_world_aligned")
        Lam = jaxdyn.operators.opspace_inertia(m, q, "ee")
        close(Lam @ (J @ Mi @ J.T), np.eye(6), rtol=1e-9)
        # 3 frames on a 6-dof arm: 18 coordinates, rank 6 -> singular -> NaN (documented)
        assert np.isnan(np.asarray(jaxdyn.operators.opspace_inertia(m, q, pick))).any()


def test_opspace_two_feet_talos(robot_pair):
    m, pm = robot_pair("talos_reduced")
    q = jnp.asarray(rng_states(m, pm, 1, seed=9)[0][0])
    fr = ["left_sole_link", "right_sole_link", "gripper_left_joint"]
    fr = [f for f in fr if f in m.frame_names] or list(m.frame_names)[-2:]
    J = jnp.concatenate([jaxdyn.frame_jacobian(m, q, f, reference="local") for f in fr], 0)
    close(jaxdyn.operators.opspace_inverse_inertia(m, q, fr, reference="local"), J @ jaxdyn.minv(m, q) @ J.T)


def test_gradients_match_aba():
    m = builtin_models()["tree_sph"]
    q, qd, tau, _ = batch_states(m, 1, 8)
    q, qd, tau = q[0], qd[0], tau[0]

    def all_methods(q, qd, tau, mass):
        mm = dataclasses.replace(m, mass=mass)
        return jnp.stack([jaxdyn.forward_dynamics(mm, q, qd, tau, method=meth) for meth in ("aba",) + METHODS])

    args = (q, qd, tau, m.mass)
    rev = jax.jit(jax.jacrev(all_methods, argnums=(0, 1, 2, 3)))(*args)
    fwd = jax.jit(jax.jacfwd(all_methods, argnums=(0,)))(*args)
    for i, meth in enumerate(METHODS):
        for g, what in zip(rev, ("q", "qd", "tau", "mass")):
            close(g[i + 1], g[0], rtol=1e-8, err=f"{meth} d/d{what} (reverse)")
        close(fwd[0][i + 1], fwd[0][0], rtol=1e-8, err=f"{meth} d/dq (forward)")
    # and the reference itself against central differences in q along a direction
    d = jnp.asarray(np.random.default_rng(1).normal(size=m.nq))
    eps = 1e-6
    ref = jax.jit(lambda q: jaxdyn.forward_dynamics(m, q, qd, tau, method="aba"))    # all_methods(...)[0]
    fd = (ref(q + eps * d) - ref(q - eps * d)) / (2 * eps)
    close(fwd[0][0] @ d, fd, rtol=1e-5)


def test_stacked_heterogeneous_models():
    ms = [jaxdyn.robots.puma560(), jaxdyn.robots.stanford_arm(), builtin_models()["tree_float"]]
    big = jaxdyn.stack(ms)
    qs, qds, taus = [], [], []
    for i, m in enumerate(ms):
        q, qd, tau, _ = batch_states(m, 1, 20 + i)
        qs.append(q[0]); qds.append(qd[0]); taus.append(tau[0])
    Q = jnp.stack([big.q(i, q) for i, q in enumerate(qs)])
    QD = jnp.stack([big.v(i, v) for i, v in enumerate(qds)])
    T = jnp.stack([big.v(i, t) for i, t in enumerate(taus)])
    for meth in [k for k in METHODS if k != "virtual_work"]:     # the stack's unit armature
        out = jax.vmap(lambda mm, a, b, c: jaxdyn.forward_dynamics(mm, a, b, c, method=meth))(big, Q, QD, T)
        for i, m in enumerate(ms):
            close(big.member_v(i, out[i]), jaxdyn.aba(m, qs[i], qds[i], taus[i]), err=f"{meth} robot {i}")
