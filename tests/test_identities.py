"""Identities between algorithms, stacking under vmap, gradients, singular states."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxdyn
from helpers import singular_forest, urdf_path


def models():
    return [jaxdyn.robots.puma560(), jaxdyn.robots.stanford_arm(), jaxdyn.robots.planar3(),
            jaxdyn.robots.random_tree(10, 0.5, 4, floating_base=True),
            jaxdyn.robots.random_tree(9, 0.3, 2, joint_types=("spherical", "prismatic", "revolute"))]


def rand_state(m, s):
    q = jaxdyn.random_configuration(m, jax.random.PRNGKey(s))
    r = np.random.default_rng(s)
    return q, jnp.asarray(r.normal(size=m.nv)), jnp.asarray(r.normal(size=m.nv) * 3)


@pytest.mark.parametrize("i", range(5))
def test_rnea_aba_crba_identities(i):
    m = models()[i]
    for s in range(3):
        q, qd, tau = rand_state(m, s)
        qdd = jaxdyn.aba(m, q, qd, tau)
        np.testing.assert_allclose(jaxdyn.rnea(m, q, qd, qdd), tau, atol=1e-10)
        M, h = jaxdyn.crba(m, q), jaxdyn.bias_forces(m, q, qd)
        np.testing.assert_allclose(M @ qdd + h, tau, atol=1e-10)
        np.testing.assert_allclose(jaxdyn.forward_dynamics(m, q, qd, tau, method="crba"), qdd, atol=1e-10)
        np.testing.assert_allclose(jaxdyn.minv(m, q) @ M, np.eye(m.nv), atol=1e-10)
        np.testing.assert_allclose(jaxdyn.minv(m, q, method="cholesky"), jaxdyn.minv(m, q), atol=1e-10)
        # kinetic energy = 1/2 qd^T M qd
        np.testing.assert_allclose(jaxdyn.kinetic_energy(m, q, qd), 0.5 * qd @ M @ qd, rtol=1e-12)


def test_algorithms_agree_with_f_ext_gravity_and_forests():
    """rnea(aba(tau)) = tau with f_ext in both frames and a gravity override, forward dynamics
    by CRBA and Cholesky equals aba, on a floating random tree with every joint type and on a
    fixed-base forest (two roots: one Cholesky solve per tree).  Three states per program."""
    g = jnp.array([0.5, -1.0, -9.0])
    tree = jaxdyn.robots.random_tree(11, 0.5, 7, floating_base=True)
    fixed = jaxdyn.robots.random_tree(11, 0.5, 8)
    forest = fixed.replace(parent=np.where(np.arange(fixed.nb) == 6, -1, fixed.parent))
    for m, frames in ((tree, ("local", "world")), (forest, ("local",))):
        states = [rand_state(m, s) for s in range(3)]
        Q, V, X = (jnp.stack(a) for a in zip(*states))
        F = jnp.asarray(np.random.default_rng(1).normal(size=(3, m.nb, 6)))

        def one(q, qd, x, f):
            out = []
            for frame in frames:
                qdd = jaxdyn.aba(m, q, qd, x, f, g, frame)
                out += [jaxdyn.rnea(m, q, qd, qdd, f, g, frame), x]
            qdd = jaxdyn.forward_dynamics(m, q, qd, x, gravity=g)
            out += [jaxdyn.forward_dynamics(m, q, qd, x, method="crba", gravity=g), qdd]
            return out
        out = jax.jit(lambda *a: jax.lax.map(lambda s: one(*s), a))(Q, V, X, F)
        for i in range(0, len(out), 2):
            np.testing.assert_allclose(out[i], out[i + 1], rtol=1e-10, atol=1e-10, err_msg=f"pair {i // 2}")


def test_damping_and_armature_enter_consistently():
    m = jaxdyn.robots.puma560()
    m = m.replace(damping=jnp.linspace(0.1, 0.6, 6), armature=jnp.linspace(0.01, 0.06, 6))
    q, qd, tau = rand_state(m, 1)
    qdd = jaxdyn.forward_dynamics(m, q, qd, tau)
    np.testing.assert_allclose(qdd, jaxdyn.aba(m, q, qd, tau - m.damping * qd), atol=1e-12)
    M = jaxdyn.crba(m, q)
    np.testing.assert_allclose(M @ qdd + jaxdyn.bias_forces(m, q, qd), tau - m.damping * qd, atol=1e-10)
    np.testing.assert_allclose(jaxdyn.forward_dynamics(m, q, qd, tau, method="crba"), qdd, atol=1e-10)


def test_revolute_unbounded_equals_revolute():
    m = jaxdyn.robots.random_tree(6, 0.3, 8, joint_types=("revolute",))
    mu = m.replace(jtype=jnp.full_like(m.jtype, jaxdyn.model.REVOLUTE_UB))
    from jaxdyn.model import build_model
    mu = build_model(parent=m.parent, jtype=["revolute_unbounded"] * 6, Xtree_E=m.Xtree_E, Xtree_r=m.Xtree_r,
                     axis=m.axis, mass=m.mass, com=m.com, inertia=m.inertia)
    th = jnp.linspace(-2, 2, 6)
    qu = jnp.stack([jnp.cos(th), jnp.sin(th)], 1).reshape(-1)
    qd, tau = jnp.ones(6) * 0.3, jnp.arange(6.0)
    np.testing.assert_allclose(jaxdyn.aba(mu, qu, qd, tau), jaxdyn.aba(m, th, qd, tau), atol=1e-12)
    np.testing.assert_allclose(jaxdyn.frame_pose(mu, qu, "body5")[1], jaxdyn.frame_pose(m, th, "body5")[1], atol=1e-12)


def test_stacked_heterogeneous_models_under_vmap():
    """Forward kinematics over a stack equals each member's, body by body (through the
    stack's body maps); aba, rnea and crba are checked in test_batching."""
    panda = jaxdyn.load_urdf(urdf_path("panda"))
    ms = [jaxdyn.robots.puma560(), jaxdyn.robots.stanford_arm(), panda,
          jaxdyn.robots.random_tree(5, 0.5, 1, floating_base=True)]
    big = jaxdyn.stack(ms)
    qs = [rand_state(m, j)[0] for j, m in enumerate(ms)]
    Q = jnp.stack([big.q(j, q) for j, q in enumerate(qs)])
    R, P = jax.vmap(jaxdyn.forward_kinematics)(big, Q)
    for j, m in enumerate(ms):
        Rj, Pj = jaxdyn.forward_kinematics(m, qs[j])
        u = np.asarray(big.body_maps[j])
        np.testing.assert_allclose(P[j, u], Pj, atol=1e-12)
        np.testing.assert_allclose(R[j, u], Rj, atol=1e-12)


def test_integrate_difference_roundtrip():
    m = jaxdyn.robots.random_tree(10, 0.5, 4, floating_base=True)
    for s in range(3):
        q0 = jaxdyn.random_configuration(m, jax.random.PRNGKey(s))
        v = jnp.asarray(np.random.default_rng(s).normal(size=m.nv))
        q1 = jaxdyn.integrate(m, q0, v, 0.5)
        np.testing.assert_allclose(jaxdyn.difference(m, q0, q1), 0.5 * v, atol=1e-10)


def test_jacobian_columns_equal_fd_of_fk():
    m = jaxdyn.robots.random_tree(8, 0.5, 4, floating_base=True)
    q = jaxdyn.random_configuration(m, jax.random.PRNGKey(0))
    name = m.body_names[-1]
    J = jaxdyn.frame_jacobian(m, q, name, "local_world_aligned")
    R0, p0 = jaxdyn.frame_pose(m, q, name)
    eps = 1e-6
    from jaxdyn.spatial.rotations import log3
    for k in range(m.nv):
        dv = jnp.zeros(m.nv).at[k].set(eps)
        Rp, pp = jaxdyn.frame_pose(m, jaxdyn.integrate(m, q, dv), name)
        Rm, pm_ = jaxdyn.frame_pose(m, jaxdyn.integrate(m, q, -dv), name)
        np.testing.assert_allclose((pp - pm_) / (2 * eps), J[:3, k], atol=1e-7)
        np.testing.assert_allclose((log3(Rp @ R0.T) - log3(Rm @ R0.T)) / (2 * eps), J[3:, k], atol=1e-7)


def test_gradients_check_grads():
    m = jaxdyn.robots.puma560()
    q, qd, tau = rand_state(m, 0)
    check_grads(jax.jit(lambda q, qd, tau: jaxdyn.aba(m, q, qd, tau)), (q, qd, tau), order=2, modes=["fwd", "rev"])
    check_grads(jax.jit(lambda q, qd: jaxdyn.rnea(m, q, qd, tau)), (q, qd), order=2, modes=["fwd", "rev"])
    check_grads(jax.jit(lambda q: jaxdyn.crba(m, q)), (q,), order=1, modes=["fwd", "rev"])

    @jax.jit
    def aba_params(mass, inertia):
        return jaxdyn.aba(m.replace(mass=mass, inertia=inertia), q, qd, tau)
    # eps = 1e-6: the default step 1e-4 along a random direction changes the wrist inertias
    # (smallest principal moment 0.007) by ~1%, and the central difference's truncation error
    # (1.5e-5 relative, falling as eps^2) is then what the check measures
    check_grads(aba_params, (m.mass, m.inertia), order=1, modes=["fwd", "rev"], eps=1e-6)
    check_grads(jax.jit(lambda mass: jaxdyn.rnea(m.replace(mass=mass), q, qd, tau)), (m.mass,), order=2, modes=["rev"])


def test_gradients_nan_free_at_neutral_and_quaternion_poles():
    m = jaxdyn.robots.random_tree(6, 0.5, 4, floating_base=True,
                                  joint_types=("spherical", "revolute", "prismatic"))
    q0 = jaxdyn.neutral(m)
    for q in (q0, q0.at[6].set(-1.0)):  # free-flyer quaternion w = +1 and w = -1
        qd = jnp.zeros(m.nv)
        for f in (lambda q: jnp.sum(jaxdyn.aba(m, q, qd, qd)), lambda q: jnp.sum(jaxdyn.crba(m, q)),
                  lambda q: jnp.sum(jaxdyn.integrate(m, q, qd))):
            g = jax.grad(f)(q)
            assert np.all(np.isfinite(g))
        gm = jax.grad(lambda mm: jnp.sum(jaxdyn.aba(mm, q, qd, qd)), allow_int=True)(m)
        assert all(np.all(np.isfinite(x)) for x in jax.tree_util.tree_leaves(gm)
                   if jnp.issubdtype(x.dtype, jnp.floating))


def test_singular_articulated_inertia_returns_nan():
    """A massless, inertia-free leaf body on a revolute joint: D = 0 -> aba returns NaN."""
    m = jaxdyn.robots.puma560()
    m = m.replace(mass=m.mass.at[5].set(0.0), inertia=m.inertia.at[5].set(0.0))
    q, qd, tau = rand_state(m, 0)
    assert np.all(np.isnan(jaxdyn.aba(m, q, qd, tau)))
    assert np.all(np.isfinite(jaxdyn.rnea(m, q, qd, tau)))  # inverse dynamics stays defined


def test_every_method_is_nan_on_the_singular_tree_only():
    """A fixed-base forest whose first tree ends in a massless leaf on a joint (its M block is
    singular) and a regular second tree: every forward-dynamics method gives NaN on exactly
    the first tree's dofs, every M^-1 method on exactly its rows and columns (ABA's rule, the
    module docstring of jaxdyn.dynamics.aba); on the second tree each equals numpy's solve /
    inverse of that tree's own M block."""
    m, A, B = singular_forest(damping=0.2)                       # nv = 8
    q, qd, tau = rand_state(m, 1)

    @jax.jit
    def everything(q, qd, tau):
        fd = jnp.stack([jaxdyn.forward_dynamics(m, q, qd, tau, method=k) for k in jaxdyn.methods()])
        mi = jnp.stack([jaxdyn.minv(m, q, method=k) for k in jaxdyn.minv_methods()])
        return fd, mi, jaxdyn.crba(m, q), jaxdyn.rnea(m, q, qd, jnp.zeros_like(qd))
    fd, mi, M, h = (np.asarray(x) for x in everything(q, qd, tau))
    MB = M[np.ix_(B, B)]
    want = np.linalg.solve(MB, (np.asarray(tau) - 0.2 * np.asarray(qd) - h)[B])
    for k, x in zip(jaxdyn.methods(), fd):
        assert np.isnan(x[A]).all() and np.isfinite(x[B]).all(), (k, x)
        np.testing.assert_allclose(x[B], want, rtol=1e-10, atol=1e-10, err_msg=k)
    for k, x in zip(jaxdyn.minv_methods(), mi):
        assert np.isnan(x[A]).all() and np.isnan(x[:, A]).all() and np.isfinite(x[np.ix_(B, B)]).all(), k
        np.testing.assert_allclose(x[np.ix_(B, B)], np.linalg.inv(MB), rtol=1e-10, atol=1e-12, err_msg=k)


def test_tree_solve_is_blockwise_with_nan_per_tree():
    """forward.tree_solve: M block diagonal over trees (masks), one Cholesky per tree.  It
    equals numpy's solve of each block; a block that is not positive definite gives NaN on
    its own dofs only."""
    from jaxdyn.dynamics.forward import tree_solve
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(3, 3)), rng.normal(size=(2, 2))
    A, B = A @ A.T + 3 * np.eye(3), B @ B.T + 2 * np.eye(2)
    idx_a, idx_b = [0, 2, 4], [1, 3]                     # interleaved trees
    M = np.zeros((5, 5))
    M[np.ix_(idx_a, idx_a)], M[np.ix_(idx_b, idx_b)] = A, B
    masks = np.zeros((2, 5))
    masks[0, idx_a], masks[1, idx_b] = 1.0, 1.0
    b = rng.normal(size=5)
    x = np.asarray(jax.jit(lambda M, b: tree_solve(M, b, masks))(M, b))
    np.testing.assert_allclose(x[idx_a], np.linalg.solve(A, b[idx_a]), rtol=1e-13)
    np.testing.assert_allclose(x[idx_b], np.linalg.solve(B, b[idx_b]), rtol=1e-13)
    Ms = M.copy()
    Ms[np.ix_(idx_b, idx_b)] = [[1.0, 2.0], [2.0, 1.0]]   # indefinite block
    x = np.asarray(tree_solve(jnp.asarray(Ms), jnp.asarray(b), masks))
    assert np.all(np.isnan(x[idx_b])) and np.all(np.isfinite(x[idx_a]))
    np.testing.assert_allclose(x[idx_a], np.linalg.solve(A, b[idx_a]), rtol=1e-13)


def test_q_off_the_unit_sphere_is_its_projection():
    """Quaternions and (cos, sin) pairs are normalized inside the joint transforms: at a q off
    the unit sphere (every rotation coordinate scaled and perturbed), rnea, crba, aba and the
    kinematics equal the same functions at jaxdyn.normalize(q).  A floating random tree with
    every joint type; one compiled call."""
    m = jaxdyn.robots.random_tree(10, 0.4, 3, floating_base=True)
    q, qd, x = rand_state(m, 0)
    off = q * 1.3 + 0.05 * jnp.asarray(np.random.default_rng(2).normal(size=m.nq))

    def all_of(q):
        return (jaxdyn.rnea(m, q, qd, x), jaxdyn.crba(m, q), jaxdyn.aba(m, q, qd, x), jaxdyn.forward_kinematics(m, q)[0])

    at_off, at_unit = jax.jit(lambda a, b: (all_of(a), all_of(b)))(off, jaxdyn.normalize(m, off))
    for i, name in enumerate(("rnea", "crba", "aba", "fk")):
        np.testing.assert_allclose(at_off[i], at_unit[i], rtol=1e-11, atol=1e-11, err_msg=name)
