"""forward_dynamics(method=...): every method (Featherstone's ABA and CRBA + Cholesky, Saha's
UDU^T, Rodriguez-Kreutz's operator FD1-FD4, Yamane-Nakamura's virtual work) equals ABA, with
and without f_ext, with armature and damping, on a stack of different robots, and in its
gradients (ABA's own gradient against central differences).  Each method's own factors are
checked in test_udut, test_operators and test_virtual_work; ABA against Pinocchio in test_aba."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from helpers import SMALL_MODELS, batch_states, close, rng_states

METHODS = ("udut", "operator_fd1", "operator_fd2", "operator_fd3", "operator_fd4", "virtual_work")


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


@pytest.mark.parametrize("name", SMALL_MODELS)
def test_methods_equal_aba_builtin(name):
    m = SMALL_MODELS[name]()
    check_all_methods(m, *batch_states(m, 4, 1))


@pytest.mark.parametrize("name", ["panda", "anymal_c", "talos_reduced"])
def test_methods_equal_aba_urdf(robot_pair, name):
    pytest.importorskip("pinocchio")
    m, pm = robot_pair(name)
    st = rng_states(m, pm, 3, seed=2)
    q = jnp.asarray(np.stack([s[0] for s in st]))
    qd = jnp.asarray(np.stack([s[1] for s in st]))
    tau = jnp.asarray(np.stack([s[3] for s in st]))
    fx = jnp.asarray(np.random.default_rng(3).normal(size=(3, m.nb, 6)))
    check_all_methods(m, q, qd, tau, fx)


@pytest.mark.parametrize("name", ["puma560", "tree_float", "tree_sph"])
def test_methods_with_armature_and_damping(name):
    """Armature enters D (Saha) and the articulated inertias; damping enters the front door's
    tau.  Virtual work has no armature term: NaN, as documented."""
    m = SMALL_MODELS[name]()
    m = dataclasses.replace(m, armature=jnp.linspace(0.05, 0.5, m.nv), damping=jnp.linspace(0.1, 0.3, m.nv))
    for s in range(2):
        q = jaxdyn.random_configuration(m, jax.random.PRNGKey(s))
        r = np.random.default_rng(s)
        qd, tau = jnp.asarray(r.normal(size=m.nv)), jnp.asarray(r.normal(size=m.nv))
        ref = jaxdyn.aba(m, q, qd, tau - m.damping * qd)
        for meth in ("crba",) + METHODS[:-1]:
            close(jaxdyn.forward_dynamics(m, q, qd, tau, method=meth), ref, err=meth + " armature")
        assert np.all(np.isnan(np.asarray(jaxdyn.forward_dynamics(m, q, qd, tau, method="virtual_work"))))


def test_gradients_match_aba():
    """Every method's derivatives equal ABA's: the reverse-mode gradient of w . qdd with
    respect to (q, qd, tau, masses) and the forward-mode derivative of qdd along a direction d
    of q, for random w and d (a random projection of two different Jacobians differs with
    probability one); ABA's own along d against central differences."""
    m = SMALL_MODELS["tree_sph"]()
    q, qd, tau, _ = batch_states(m, 1, 8)
    q, qd, tau = q[0], qd[0], tau[0]
    rng = np.random.default_rng(1)
    w, d = jnp.asarray(rng.normal(size=m.nv)), jnp.asarray(rng.normal(size=m.nq))

    def derivatives(q, qd, tau, mass):
        out = []
        for meth in ("aba",) + METHODS:
            def f(q, qd, tau, mass, meth=meth):
                return jaxdyn.forward_dynamics(dataclasses.replace(m, mass=mass), q, qd, tau, method=meth)
            rev = jax.grad(lambda *a: w @ f(*a), argnums=(0, 1, 2, 3))(q, qd, tau, mass)
            out.append((rev, jax.jvp(lambda q: f(q, qd, tau, mass), (q,), (d,))[1]))
        return out

    (ref_rev, ref_fwd), *others = jax.jit(derivatives)(q, qd, tau, m.mass)
    for meth, (rev, fwd) in zip(METHODS, others):
        for g, g0, what in zip(rev, ref_rev, ("q", "qd", "tau", "mass")):
            close(g, g0, rtol=1e-8, err=f"{meth} d/d{what} (reverse)")
        close(fwd, ref_fwd, rtol=1e-8, err=f"{meth} d/dq (forward)")
    # and the reference itself against central differences in q along d
    eps = 1e-6
    ref = jax.jit(lambda q: jaxdyn.forward_dynamics(m, q, qd, tau, method="aba"))
    close(ref_fwd, (ref(q + eps * d) - ref(q - eps * d)) / (2 * eps), rtol=1e-5)


def test_stacked_heterogeneous_models():
    ms = [jaxdyn.robots.puma560(), jaxdyn.robots.stanford_arm(), SMALL_MODELS["tree_float"]()]
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
