"""rnea_derivatives / aba_derivatives against Pinocchio's computeRNEADerivatives /
computeABADerivatives (tangent-space convention), against finite differences of Pinocchio's
own rnea where its analytical derivatives are inconsistent, and against the identity
d qdd / d q = -M^-1 d tau / d q (at qdd = ABA(q, qd, tau))."""
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from helpers import close, rng_states

pin = pytest.importorskip("pinocchio")
from pinutil import align_rub_axes, to_pinocchio  # noqa: E402


def _sym(A):
    return np.triu(A) + np.triu(A, 1).T


def check_against_pinocchio(m, pm, states, batch=False):
    """Per state; with ``batch`` also ``jax.vmap`` (the batch-last chunks) on all states at
    once."""
    d = pm.createData()
    refs = []
    for q, v, a, _ in states:
        tau = pin.rnea(pm, d, q, v, a).copy()
        pin.computeRNEADerivatives(pm, d, q, v, a)
        rnea_ref = (d.dtau_dq.copy(), d.dtau_dv.copy(), _sym(d.M))
        dq, dv, M = jaxdyn.rnea_derivatives(m, q, v, a)
        close(dq, d.dtau_dq, 1e-9, "dtau_dq"); close(dv, d.dtau_dv, 1e-9, "dtau_dv"); close(M, _sym(d.M), 1e-9, "M")
        pin.computeABADerivatives(pm, d, q, v, tau)
        dq, dv, Mi = jaxdyn.aba_derivatives(m, q, v, tau)
        close(dq, d.ddq_dq, 1e-9, "ddq_dq"); close(dv, d.ddq_dv, 1e-9, "ddq_dv"); close(Mi, _sym(d.Minv), 1e-9, "Minv")
        refs.append((tau, rnea_ref, (d.ddq_dq.copy(), d.ddq_dv.copy(), _sym(d.Minv))))
    if batch:
        Q, V, A = (jnp.asarray(np.stack([s[j] for s in states])) for j in range(3))
        T = jnp.asarray(np.stack([r[0] for r in refs]))
        for fn, X, k in ((jaxdyn.rnea_derivatives, A, 1), (jaxdyn.aba_derivatives, T, 2)):
            got = jax.vmap(fn, (None, 0, 0, 0))(m, Q, V, X)
            for i, r in enumerate(refs):
                for g, want, what in zip(got, r[k], ("d/dq", "d/dqd", "M or Minv")):
                    close(g[i], want, 1e-9, f"vmap {fn.__name__} {what}, state {i}")


@pytest.mark.parametrize("name", ["panda", "ur5", "anymal_c", "talos_reduced", "g1"])
def test_urdf_robots_match_pinocchio(robot_pair, name):
    m, pm = robot_pair(name)
    check_against_pinocchio(m, pm, rng_states(m, pm, 3, seed=5), batch=name != "panda")


def test_random_floating_tree_every_joint_type_matches_pinocchio():
    # Pinocchio's RNEA derivatives agree with finite differences of its rnea on this tree, not
    # on every tree with every joint type (test_tree_where_pinocchio_derivatives_are_inconsistent)
    m = align_rub_axes(jaxdyn.robots.random_tree(10, 0.5, 918, floating_base=True))
    assert len(set(m.types)) == 7
    pm = to_pinocchio(m)
    r = np.random.default_rng(1)
    states = [(np.asarray(jaxdyn.random_configuration(m, jax.random.PRNGKey(s))), r.normal(size=m.nv),
               r.normal(size=m.nv), None) for s in range(2)]
    check_against_pinocchio(m, pm, states)


def test_external_forces_in_either_frame():
    """f_ext enters both derivatives.  Given in the bodies' frames (a force that turns with its
    body) against Pinocchio's computeRNEADerivatives / computeABADerivatives with fext; given in
    world coordinates (a force that does not turn), under jax.vmap over states, forces and
    gravity, against central differences of Pinocchio's rnea and aba with that force moved
    into the body frames at each perturbed q.  On a floating tree with every joint type."""
    from pinutil import pin_forces
    m = align_rub_axes(jaxdyn.robots.random_tree(10, 0.5, 918, floating_base=True))
    assert len(set(m.types)) == 7
    pm = to_pinocchio(m)
    d = pm.createData()
    r = np.random.default_rng(4)
    q = np.asarray(jaxdyn.random_configuration(m, jax.random.PRNGKey(3)))
    v, a, fx = r.normal(size=m.nv), r.normal(size=m.nv), r.normal(size=(m.nb, 6))
    tau = pin.rnea(pm, d, q, v, a, pin_forces(fx)).copy()
    pin.computeRNEADerivatives(pm, d, q, v, a, pin_forces(fx))
    dq, dv, M = jaxdyn.rnea_derivatives(m, q, v, a, fx)
    close(dq, d.dtau_dq, 1e-9, "dtau_dq"); close(dv, d.dtau_dv, 1e-9, "dtau_dv"); close(M, _sym(d.M), 1e-9, "M")
    pin.computeABADerivatives(pm, d, q, v, tau, pin_forces(fx))
    dq, dv, Mi = jaxdyn.aba_derivatives(m, q, v, tau, fx)
    close(dq, d.ddq_dq, 1e-9, "ddq_dq"); close(dv, d.ddq_dv, 1e-9, "ddq_dv"); close(Mi, _sym(d.Minv), 1e-9, "Minv")

    B = 2
    Q = np.stack([jaxdyn.random_configuration(m, jax.random.PRNGKey(s)) for s in range(B)])
    V, X, F = (r.normal(size=s) for s in ((B, m.nv), (B, m.nv), (B, m.nb, 6)))
    G = np.array([[0.0, 0.0, -9.81], [1.0, -2.0, -5.0]])
    got = jax.jit(lambda *s: [jax.vmap(lambda q, v, x, f, g, fn=fn: fn(m, q, v, x, f, g, "world")[:2])(*s)
                              for fn in (jaxdyn.rnea_derivatives, jaxdyn.aba_derivatives)])(Q, V, X, F, G)

    def world(fn, q, v, x, fw):              # Pinocchio's rnea or aba with world wrenches fw
        pin.forwardKinematics(pm, d, q)
        return fn(pm, d, q, v, x, [pin.Force.Zero()] + [d.oMi[i + 1].actInv(pin.Force(f[:3], f[3:])) for i, f in enumerate(fw)]).copy()
    eps = 1e-6
    for i in range(B):
        pm.gravity.linear = G[i]
        for fn, (dq, dv) in zip((pin.rnea, pin.aba), got):
            at = lambda step_q, step_v: world(fn, pin.integrate(pm, Q[i], step_q), V[i] + step_v, X[i], F[i])
            fd_q = np.stack([(at(eps * e, 0 * e) - at(-eps * e, 0 * e)) / (2 * eps) for e in np.eye(m.nv)], 1)
            fd_v = np.stack([(at(0 * e, eps * e) - at(0 * e, -eps * e)) / (2 * eps) for e in np.eye(m.nv)], 1)
            close(dq[i], fd_q, 1e-6, f"{fn.__name__} world f_ext d/dq, state {i}")
            close(dv[i], fd_v, 1e-6, f"{fn.__name__} world f_ext d/dqd, state {i}")


def _states(m, n, seed):
    r = np.random.default_rng(seed)
    Q = jnp.stack([jaxdyn.random_configuration(m, jax.random.PRNGKey(seed + s)) for s in range(n)])
    return Q, jnp.asarray(r.normal(size=(n, m.nv))), jnp.asarray(r.normal(size=(n, m.nv)))


@pytest.mark.parametrize("floating", [True, False])
def test_analytic_equals_autodiff_on_random_trees(floating):
    """Carpentier-Mansard sweeps == reverse-mode autodiff through the scans (tangent at q), on
    random trees with every joint type, several states per compiled call."""
    kinds = ("revolute", "revolute_unbounded", "prismatic", "helical", "spherical", "planar")
    m = jaxdyn.robots.random_tree(12, 0.5, 94 if floating else 13, floating_base=floating, joint_types=kinds)
    assert set(m.types) >= {1, 2, 3, 4, 5, 7}
    Q, V, X = _states(m, 3, 3)
    for f in (jaxdyn.rnea_derivatives, jaxdyn.aba_derivatives):
        got = jax.vmap(f, (None, 0, 0, 0))(m, Q, V, X)
        ref = jax.vmap(partial(f, method="autodiff"), (None, 0, 0, 0))(m, Q, V, X)
        for g, r, what in zip(got, ref, ("d/dq", "d/dqd", "M or Minv")):
            close(g, r, 1e-10, f"{f.__name__} {what}")


def test_vmap_of_derivatives_with_a_shared_argument_and_forward_mode():
    """jax.vmap of aba_derivatives / rnea_derivatives with an unbatched argument broadcast
    equals the per-state calls; forward mode through that vmap differentiates the one-state
    terms, and outputs that do not depend on a batched input keep the batch axis."""
    m = jaxdyn.robots.random_tree(5, 0.5, 4, floating_base=True, joint_types=("revolute", "spherical", "prismatic"))
    Q, V, X = _states(m, 3, 7)
    for fn, f in (("aba", jaxdyn.aba_derivatives), ("rnea", jaxdyn.rnea_derivatives)):
        got = jax.vmap(f, (None, 0, None, 0))(m, Q, V[0], X)
        for i in range(3):
            for g, r in zip(got, f(m, Q[i], V[0], X[i])):
                close(g[i], r, 1e-11, fn)
        if fn == "aba":     # (reverse mode under vmap: test_derivatives_are_differentiable)
            continue
        g = lambda X: jax.vmap(lambda x: f(m, Q[0], V[0] + 0.1 * x, x))(X)
        tan = jax.jit(lambda X, dX: jax.jvp(g, (X,), (dX,))[1])(X, V)
        one = jax.jit(lambda x, dx: jax.jvp(lambda y: f(m, Q[0], V[0] + 0.1 * y, y), (x,), (dx,))[1])
        for i in range(3):
            for t, r in zip(tan, one(X[i], V[i])):
                assert t.shape == (3,) + r.shape
                close(t[i], r, 1e-10, fn)


def test_tree_where_pinocchio_derivatives_are_inconsistent():
    """Fixed-base random tree (seed 11, planar joint below a branch): pin 4.1's analytical RNEA
    derivatives differ from finite differences of its own rnea by ~100 %; the reference is
    those finite differences (along pin.integrate, i.e. in Pinocchio's tangent convention)."""
    m = align_rub_axes(jaxdyn.robots.random_tree(8, 0.5, 11, floating_base=False))
    pm = to_pinocchio(m)
    d = pm.createData()
    q = np.asarray(jaxdyn.random_configuration(m, jax.random.PRNGKey(0)))
    r = np.random.default_rng(0)
    v, a = r.normal(size=m.nv), r.normal(size=m.nv)
    eps = 1e-6
    E = np.eye(m.nv)
    fd_q = np.stack([(pin.rnea(pm, d, pin.integrate(pm, q, eps * e), v, a)
                      - pin.rnea(pm, d, pin.integrate(pm, q, -eps * e), v, a)) / (2 * eps) for e in E], 1)
    fd_v = np.stack([(pin.rnea(pm, d, q, v + eps * e, a) - pin.rnea(pm, d, q, v - eps * e, a)) / (2 * eps) for e in E], 1)
    dq, dv, _ = jaxdyn.rnea_derivatives(m, q, v, a)
    close(dq, fd_q, 1e-7, "dtau_dq vs FD")
    close(dv, fd_v, 1e-7, "dtau_dv vs FD")


def test_aba_derivatives_identity_and_batch():
    """d qdd/dq = -M^-1 d tau/dq and d qdd/dqd = -M^-1 d tau/dqd at qdd = ABA(tau), in a
    vmapped batch; M^-1 and M equal minv and crba."""
    m = jaxdyn.robots.random_tree(7, 0.5, 2, floating_base=True, joint_types=("revolute", "spherical"))
    B = 5
    Q = jnp.stack([jaxdyn.random_configuration(m, jax.random.PRNGKey(s)) for s in range(B)])
    r = np.random.default_rng(3)
    V, T = jnp.asarray(r.normal(size=(B, m.nv))), jnp.asarray(r.normal(size=(B, m.nv)))
    QDD = jax.vmap(lambda q, v, t: jaxdyn.aba(m, q, v, t))(Q, V, T)
    a_dq, a_dv, Mi = jax.vmap(jaxdyn.aba_derivatives, (None, 0, 0, 0))(m, Q, V, T)
    r_dq, r_dv, M = jax.vmap(jaxdyn.rnea_derivatives, (None, 0, 0, 0))(m, Q, V, QDD)
    for i in range(B):
        close(a_dq[i], -Mi[i] @ r_dq[i], 1e-10)
        close(a_dv[i], -Mi[i] @ r_dv[i], 1e-10)
        close(Mi[i] @ M[i], np.eye(m.nv), 1e-10)
    for i in (0, 3, 4):
        close(Mi[i], jaxdyn.minv(m, Q[i]), 1e-10)
        close(M[i], jaxdyn.crba(m, Q[i]), 1e-10)


def test_no_lapack_call_in_dynamics_kernels():
    """The joint pivots (up to 6 x 6 for a free flyer) are inverted without LAPACK: jax's batched
    LAPACK kernels split big batches over XLA:CPU's thread pool from inside a pool task, and
    jit(vmap(jacfwd(aba))) on talos_reduced at B = 1024 deadlocked there (every thread waiting
    in jax::ParallelBatchMap under lapack_dtrsm_ffi)."""
    m = jaxdyn.robots.random_tree(4, 0.5, 1, floating_base=True, joint_types=("spherical", "revolute"))
    q, z = jaxdyn.neutral(m), jnp.zeros(m.nv)
    progs = [jax.jit(jax.vmap(jax.jacfwd(jaxdyn.aba, argnums=(1, 2)), (None, 0, 0, 0))).lower(m, q[None], z[None], z[None]),
             jax.jit(jaxdyn.rnea_derivatives).lower(m, q, z, z),
             jax.jit(jaxdyn.aba_derivatives).lower(m, q, z, z),
             jax.jit(jax.vmap(jaxdyn.aba_derivatives, (None, 0, 0, 0))).lower(m, q[None], z[None], z[None]),
             jax.jit(jax.vmap(jaxdyn.aba, (None, 0, 0, 0))).lower(m, q[None], z[None], z[None])]
    for p in progs:
        assert "lapack" not in p.as_text().lower()


@pytest.mark.parametrize("floating, frame", [(True, "world"), (False, "local")])
def test_aba_implicit_rule_equals_autodiff_through_the_passes(floating, frame):
    """jaxdyn.aba's derivative rule (d qdd = M^-1 (d tau - d RNEA)) == autodiff through the three
    ABA passes (:func:`jaxdyn.dynamics.aba.aba_passes`): jvp and vjp w.r.t. q (ambient directions, quaternions
    included), qd, tau, f_ext (both frames), gravity, masses and COMs (armature nonzero), and
    a Hessian-vector product (second order through the rule)."""
    from jaxdyn.dynamics.aba import aba_passes
    aba_unwrapped = lambda m, *a: aba_passes(m, *a)
    kinds = ("revolute", "revolute_unbounded", "prismatic", "helical", "spherical", "planar")
    m = jaxdyn.robots.random_tree(6, 0.5, 6 if floating else 10, floating_base=floating, joint_types=kinds)
    assert len(set(m.types)) == 6         # fixed: each kind; floating: the free base and five kinds
    m = m.replace(armature=jnp.linspace(0.0, 0.1, m.nv))
    r = np.random.default_rng(0)
    q = jaxdyn.random_configuration(m, jax.random.PRNGKey(1))
    v, t, w = (jnp.asarray(r.normal(size=m.nv)) for _ in range(3))
    args = (m.mass, m.com, q, v, t, jnp.asarray(r.normal(size=(m.nb, 6))), jnp.array([0.1, -0.3, -9.0]))
    tans = jax.tree_util.tree_map(lambda a: jnp.asarray(r.normal(size=a.shape)), args)
    fs = [lambda mass, com, q, v, t, fe, g, f=f: f(m.replace(mass=mass, com=com), q, v, t, fe, g, frame)
          for f in (jaxdyn.aba, aba_unwrapped)]
    (p1, t1), (p2, t2) = (jax.jit(lambda *x, f=f: jax.jvp(f, args, x))(*tans) for f in fs)
    close(p1, p2, 1e-12, "primal"); close(t1, t2, 1e-10, "jvp")
    g1, g2 = (jax.jit(jax.grad(lambda *x, f=f: f(*x) @ w, argnums=tuple(range(7))))(*args) for f in fs)
    for a, b in zip(g1, g2):
        close(a, b, 1e-10, "vjp")
    if floating:
        return
    dq = jnp.asarray(r.normal(size=m.nq))
    h1, h2 = (jax.jit(lambda q, f=f: jax.jvp(jax.grad(lambda x: f(m, x, v, t) @ w), (q,), (dq,))[1])(q)
              for f in (jaxdyn.aba, aba_unwrapped))
    close(h1, h2, 1e-9, "Hessian-vector product")


def test_singular_mass_matrix_gives_nan_per_state():
    """A massless leaf body on a joint makes M singular: aba_derivatives returns NaN for that
    state (all three matrices; documented), and a batch keeps the other states exact."""
    m = jaxdyn.robots.random_tree(5, 0.5, 4, floating_base=True, joint_types=("revolute",))
    leaf = m.nb - 1
    bad = m.replace(mass=m.mass.at[leaf].set(0.0), inertia=m.inertia.at[leaf].set(0.0),
                    com=m.com.at[leaf].set(0.0))
    q = jaxdyn.random_configuration(m, jax.random.PRNGKey(0))
    v = jnp.linspace(-1.0, 1.0, m.nv)
    for out in jaxdyn.aba_derivatives(bad, q, v, v):
        assert np.all(np.isnan(out))
    stack = jax.tree_util.tree_map(lambda a, b: jnp.stack([a, b]), m, bad)
    Q, V = jnp.stack([q, q]), jnp.stack([v, v])
    outs = jax.vmap(lambda mm, qq, vv: jaxdyn.aba_derivatives(mm, qq, vv, vv))(stack, Q, V)
    ref = jaxdyn.aba_derivatives(m, q, v, v, method="autodiff")
    for o, r in zip(outs, ref):
        close(o[0], r, 1e-9)
        assert np.all(np.isnan(o[1]))


def test_derivatives_are_differentiable():
    """Second derivatives: reverse mode through rnea_derivatives and aba_derivatives (the M^-1
    sweeps by their own rule, d M^-1 = -M^-1 dM M^-1) matches finite differences, also under
    vmap."""
    from jax.test_util import check_grads
    m = jaxdyn.robots.random_tree(4, 0.5, 2, floating_base=True, joint_types=("revolute", "prismatic"))
    q = jaxdyn.random_configuration(m, jax.random.PRNGKey(2))
    v = jnp.linspace(-0.5, 0.7, m.nv)
    w = jnp.asarray(np.random.default_rng(0).normal(size=(m.nv, m.nv)))
    for f in (jaxdyn.rnea_derivatives, jaxdyn.aba_derivatives):
        scalar = jax.jit(lambda q, v, t, f=f: sum(jnp.sum(w * x) for x in f(m, q, v, t)))
        check_grads(scalar, (q, v, 0.3 * v), order=1, modes=("rev",), eps=1e-5, atol=1e-6, rtol=1e-6)
        batched = jax.jit(jax.grad(lambda V: jnp.sum(jax.vmap(lambda x: scalar(q, x, 0.3 * x))(V))))
        V = jnp.stack([v, -v])
        one = jax.jit(jax.grad(lambda x: scalar(q, x, 0.3 * x)))
        close(batched(V), jnp.stack([one(x) for x in V]), 1e-10)


def test_forest_of_two_trees_matches_autodiff():
    """Two trees under the world (each in its own root frame, gravity per root), rotated and
    offset root placements, revolute / spherical / prismatic / helical joints: the batch-last
    chunks (vmap) and the one-state path equal autodiff through the sweeps."""
    r = np.random.default_rng(0)
    nb = 6
    E = np.stack([np.asarray(jaxdyn.spatial.exp3(jnp.asarray(r.normal(size=3)))) for _ in range(nb)])
    m = jaxdyn.build_model(parent=[-1, 0, 1, -1, 3, 3],
                           jtype=["revolute", "spherical", "prismatic", "revolute", "revolute", "helical"],
                           Xtree_E=E, Xtree_r=r.normal(size=(nb, 3)), axis=np.tile([0, 0, 1.0], (nb, 1)),
                           pitch=np.full(nb, 0.1), mass=r.uniform(0.5, 2, nb), com=r.normal(size=(nb, 3)) * 0.1,
                           inertia=np.tile(np.eye(3) * 0.1, (nb, 1, 1)))
    Q = jnp.stack([jaxdyn.random_configuration(m, jax.random.PRNGKey(i)) for i in range(3)])
    V, T = (jnp.asarray(r.normal(size=(3, m.nv))) for _ in range(2))
    for fn, f in (("aba", jaxdyn.aba_derivatives), ("rnea", jaxdyn.rnea_derivatives)):
        batch = jax.vmap(f, (None, 0, 0, 0))(m, Q, V, T)
        for i in (0, 2):
            ref = f(m, Q[i], V[i], T[i], method="autodiff")
            for g, x in zip(batch, ref):
                close(g[i], x, 1e-11, fn)
        for g, x in zip(f(m, Q[2], V[2], T[2]), f(m, Q[2], V[2], T[2], method="autodiff")):
            close(g, x, 1e-11, fn)
