"""Property tests over random trees (hypothesis) and the compile-once-per-structure contract
(chex): identities between algorithms hold on every tree hypothesis draws, and a jitted
function of a Model traces once per structure, whatever the states or parameter values."""
import chex
import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings, strategies as st

import jaxdyn
from helpers import close


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
    m = jaxdyn.robots.random_tree(nb, branching, seed, joint_types=("revolute", "prismatic", "helical",
                                                                    "spherical", "planar"), floating_base=floating)
    rng = np.random.default_rng(seed)
    q = np.asarray(jaxdyn.random_configuration(m, jax.random.PRNGKey(seed)))
    qd, tau = rng.normal(size=m.nv), rng.normal(size=m.nv)
    tau_back, Mh, qdd_udut = _identities(m, jnp.asarray(q), jnp.asarray(qd), jnp.asarray(tau))
    close(tau_back, tau, 1e-9, "rnea(aba(tau))")
    close(Mh, tau, 1e-9, "M qdd + h")
    close(qdd_udut, jaxdyn.aba(m, q, qd, tau), 1e-9, "udut vs aba")


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
