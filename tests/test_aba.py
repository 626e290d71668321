"""ABA (Featherstone 2008, Table 7.1) and forward dynamics: against Pinocchio (<= 1e-10
relative, f64) on example-robot-data robots and random trees with every joint type, with
external forces in body and world coordinates, and to 1e-13 on ill-conditioned trees; the
identities rnea(aba(tau)) = tau and ABA = CRBA + Cholesky (with f_ext, gravity, damping,
armature, forests, on every tree hypothesis draws); NaN exactly where M is singular; gradients
against central differences (check_grads); one trace per structure."""
import os
import warnings

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from jax.test_util import check_grads

pin = pytest.importorskip("pinocchio")

import jaxdyn
from helpers import close, rand_state, rng_states, singular_forest, SMALL_MODELS
from pinutil import REFERENCE_CASES, pin_forces, pin_mass_matrix, reference_case, world_and_local_forces


@pytest.mark.parametrize("name", REFERENCE_CASES)
def test_aba_matches_pinocchio(robot_pair, name):
    m, pm, states = reference_case(robot_pair, name)
    pd = pm.createData()
    rng = np.random.default_rng(7)
    for q, v, _, tau in states:
        close(jaxdyn.aba(m, q, v, tau), pin.aba(pm, pd, q, v, tau), err="aba")
        fx = rng.normal(size=(m.nb, 6))
        close(jaxdyn.aba(m, q, v, tau, f_ext=fx), pin.aba(pm, pd, q, v, tau, pin_forces(fx)), err="aba f_ext")


def test_world_frame_f_ext_equals_local(robot_pair):
    """f_ext given in world coordinates equals the same wrenches given per body (Pinocchio's local)."""
    m, pm = robot_pair("panda")
    q, v, _, tau = rng_states(m, pm, 1, seed=9)[0]
    fx_w, fx_l = world_and_local_forces(pm, q)
    close(jaxdyn.aba(m, q, v, tau, f_ext=fx_w, f_ext_frame="world"), jaxdyn.aba(m, q, v, tau, f_ext=fx_l))


@pytest.mark.parametrize("rel,floating", [("tiago_description/robots/tiago_no_hand.urdf", False),
                                          ("tiago_description/robots/tiago_no_hand.urdf", True),
                                          ("pr2_description/urdf/pr2.urdf", False)])
def test_one_state_aba_as_exact_as_pinocchio_on_ill_conditioned_trees(rel, floating):
    """On trees with light links far from the root (tiago's and pr2's arms and grippers, cond(M)
    1e6-1e7) aba agrees with Pinocchio's aba to 1e-13 relative, and crba's diagonal agrees
    entry by entry to 1e-13 (composite inertias in body frames, as Pinocchio forms them).
    Four states in one compiled call per robot."""
    from helpers import ROBOTS_DIR
    if ROBOTS_DIR is None:
        pytest.skip("example-robot-data not installed")
    path = os.path.join(ROBOTS_DIR, rel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = jaxdyn.load_urdf(path, floating_base=floating)
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromUrdf(path)
    pd = pm.createData()
    rng = np.random.default_rng(5)
    lo = np.maximum(np.where(np.isfinite(pm.lowerPositionLimit), pm.lowerPositionLimit, -1.0), -3.0)
    hi = np.minimum(np.where(np.isfinite(pm.upperPositionLimit), pm.upperPositionLimit, 1.0), 3.0)
    Q = np.stack([pin.randomConfiguration(pm, lo, hi) for _ in range(4)])
    V, T = rng.normal(size=(2, 4, pm.nv))
    got, Mj = jax.jit(lambda *a: jax.lax.map(lambda s: (jaxdyn.aba(m, *s), jaxdyn.crba(m, s[0])), a))(Q, V, T)
    for s in range(4):
        M = pin_mass_matrix(pm, pd, Q[s])
        assert np.linalg.cond(M) > 1e4          # the case the test is about
        close(got[s], pin.aba(pm, pd, Q[s], V[s], T[s]), rtol=1e-13, err=f"state {s}")
        # crba of one state (the same M): each diagonal entry to its own round-off
        # (composites about the root origin: 6.6e-13 relative on tiago_no_hand's gripper)
        np.testing.assert_allclose(np.diag(Mj[s]), np.diag(M), rtol=1e-13, err_msg=f"diag M, state {s}")


@pytest.mark.parametrize("name", SMALL_MODELS)
def test_aba_inverts_rnea_and_equals_crba_cholesky(name):
    m = SMALL_MODELS[name]()
    for s in range(3):
        q, qd, tau = rand_state(m, s)
        qdd = jaxdyn.aba(m, q, qd, tau)
        np.testing.assert_allclose(jaxdyn.rnea(m, q, qd, qdd), tau, atol=1e-10)
        np.testing.assert_allclose(jaxdyn.forward_dynamics(m, q, qd, tau, method="crba"), qdd, atol=1e-10)


def test_aba_agrees_with_f_ext_gravity_and_forests():
    """rnea(aba(tau)) = tau with f_ext in both frames and a gravity override, forward dynamics
    by CRBA and Cholesky equals aba, on a floating random tree with every joint type and on a
    fixed-base forest (two roots: one Cholesky solve per tree).  Three states per program."""
    g = jnp.array([0.5, -1.0, -9.0])
    tree = jaxdyn.robots.random_tree(11, 0.5, 92, floating_base=True)     # in 4 runs
    fixed = jaxdyn.robots.random_tree(11, 0.5, 157)                       # in 3 runs
    assert len(set(tree.types)) == 7 and len(set(fixed.types)) == 6
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
    from jaxdyn.model import build_model
    mu = build_model(parent=m.parent, jtype=["revolute_unbounded"] * 6, Xtree_E=m.Xtree_E, Xtree_r=m.Xtree_r,
                     axis=m.axis, mass=m.mass, com=m.com, inertia=m.inertia)
    th = jnp.linspace(-2, 2, 6)
    qu = jnp.stack([jnp.cos(th), jnp.sin(th)], 1).reshape(-1)
    qd, tau = jnp.ones(6) * 0.3, jnp.arange(6.0)
    np.testing.assert_allclose(jaxdyn.aba(mu, qu, qd, tau), jaxdyn.aba(m, th, qd, tau), atol=1e-12)
    np.testing.assert_allclose(jaxdyn.frame_pose(mu, qu, "body5")[1], jaxdyn.frame_pose(m, th, "body5")[1], atol=1e-12)


@jax.jit
def _identities(model, q, qd, tau):
    qdd = jaxdyn.aba(model, q, qd, tau)
    M = jaxdyn.crba(model, q)
    h = jaxdyn.rnea(model, q, qd, jnp.zeros_like(qd))
    return jaxdyn.rnea(model, q, qd, qdd), M @ qdd + h, jaxdyn.forward_dynamics(model, q, qd, tau, method="udut")


@settings(max_examples=6, deadline=None, derandomize=True)
@given(nb=st.integers(2, 7), branching=st.floats(0.0, 1.0), seed=st.integers(0, 2 ** 16),
       floating=st.booleans())
def test_rnea_inverts_aba_on_random_trees(nb, branching, seed, floating):
    """rnea(aba(tau)) == tau, M qdd + h == tau and the UDU^T method agrees, on random trees
    with every joint type (hypothesis shrinks a failure to the smallest tree)."""
    m = jaxdyn.robots.random_tree(nb, branching, seed, joint_types=("revolute", "prismatic", "helical", "spherical",
                                                                    "revolute_unbounded", "planar"), floating_base=floating)
    rng = np.random.default_rng(seed)
    q = np.asarray(jaxdyn.random_configuration(m, jax.random.PRNGKey(seed)))
    qd, tau = rng.normal(size=m.nv), rng.normal(size=m.nv)
    tau_back, Mh, qdd_udut = _identities(m, jnp.asarray(q), jnp.asarray(qd), jnp.asarray(tau))
    close(tau_back, tau, 1e-9, "rnea(aba(tau))")
    close(Mh, tau, 1e-9, "M qdd + h")
    close(qdd_udut, jaxdyn.aba(m, q, qd, tau), 1e-9, "udut vs aba")


def test_aba_gradients_check_grads():
    """d aba / d(q, qd, tau) to second order in both modes, d aba / d(mass, inertia) to first."""
    m = jaxdyn.robots.puma560()
    q, qd, tau = rand_state(m, 0)
    check_grads(jax.jit(lambda q, qd, tau: jaxdyn.aba(m, q, qd, tau)), (q, qd, tau), order=2, modes=["fwd", "rev"])

    @jax.jit
    def aba_params(mass, inertia):
        return jaxdyn.aba(m.replace(mass=mass, inertia=inertia), q, qd, tau)
    # eps = 1e-6: the default step 1e-4 along a random direction changes the wrist inertias
    # (smallest principal moment 0.007) by ~1%, and the central difference's truncation error
    # (1.5e-5 relative, falling as eps^2) is then what the check measures
    check_grads(aba_params, (m.mass, m.inertia), order=1, modes=["fwd", "rev"], eps=1e-6)


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


def test_one_trace_per_structure():
    """jit(vmap(aba)) over a Model argument traces once for new states and for new parameter
    values of the same structure (masses, inertias, placements are data, not static)."""
    m = jaxdyn.robots.puma560()

    @jax.jit
    @chex.assert_max_traces(n=1)
    def f(model, Q, V, T):
        return jax.vmap(lambda q, v, t: jaxdyn.aba(model, q, v, t))(Q, V, T)

    rng = np.random.default_rng(0)
    for k in range(3):
        mk = m.replace(mass=m.mass * (1.0 + 0.1 * k), Xtree_r=m.Xtree_r + 0.01 * k)
        Q, V, T = (rng.normal(size=(16, 6)) for _ in range(3))
        out = f(mk, Q, V, T)
        close(out[3], jaxdyn.aba(mk, Q[3], V[3], T[3]), 1e-10, "vmapped state 3")
    chex.clear_trace_counter()
