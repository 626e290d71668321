"""Every matrix product that jaxdyn traces asks for full precision (``jaxdyn.compiled.MATMUL_PRECISION``):
on a GPU, JAX's default runs f32 products in TF32, which put ``vmap(rnea)`` 1e-2 to 1e-1 off on an
H100 (``benchmarks/results/gpu.json``).  The CPU ignores the setting, so these tests read the
programs JAX traces (every ``dot_general``, in every sub-program) instead of the answers; a
user's own products keep the user's setting."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend.core import ClosedJaxpr, Jaxpr

import jaxdyn
from jaxdyn.compiled import MATMUL_PRECISION
from jaxdyn.dynamics import aba_unwrapped

HIGHEST = (lax.Precision(MATMUL_PRECISION),) * 2


def dot_precisions(closed):
    """The ``precision`` of every dot_general in a (closed) jaxpr and its sub-jaxprs."""
    out = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "dot_general":
                out.append(eqn.params["precision"])
            for v in eqn.params.values():
                for sub in (v if isinstance(v, (list, tuple)) else [v]):
                    if isinstance(sub, ClosedJaxpr):
                        walk(sub.jaxpr)
                    elif isinstance(sub, Jaxpr):
                        walk(sub)

    walk(closed.jaxpr)
    return out


def states(m, B, dtype):
    keys = jax.random.split(jax.random.PRNGKey(0), B)
    Q = jax.vmap(lambda k: jaxdyn.random_configuration(m, k))(keys).astype(dtype)
    r = np.random.default_rng(0)
    return Q, jnp.asarray(r.normal(size=(B, m.nv)), dtype), jnp.asarray(r.normal(size=(B, m.nv)), dtype)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_jaxdyn_products_ask_for_full_precision(dtype):
    m = jaxdyn.robots.random_tree(6, 0.5, 2, floating_base=True)
    m = jax.tree_util.tree_map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, m)
    Q, V, T = states(m, 4, dtype)
    w = jnp.arange(m.nv, dtype=dtype)       # weights by elementwise products: no product of the test's own
    programs = {
        "rnea": lambda Q, V, T: jaxdyn.rnea(m, Q[0], V[0], T[0]),
        "aba": lambda Q, V, T: jaxdyn.aba(m, Q[0], V[0], T[0]),
        "crba": lambda Q, V, T: jaxdyn.crba(m, Q[0]),
        "vmap rnea": lambda Q, V, T: jax.vmap(jaxdyn.rnea, (None, 0, 0, 0))(m, Q, V, T),
        "vmap rnea f_ext": lambda Q, V, T: jax.vmap(lambda q, v, t: jaxdyn.rnea(
            m, q, v, t, f_ext=jnp.ones((m.nb, 6), dtype)))(Q, V, T),
        "vmap aba": lambda Q, V, T: jax.vmap(jaxdyn.aba, (None, 0, 0, 0))(m, Q, V, T),
        "vmap aba_unwrapped": lambda Q, V, T: jax.vmap(aba_unwrapped, (None, 0, 0, 0))(m, Q, V, T),
        "grad aba_unwrapped": lambda Q, V, T: jax.grad(lambda t: jnp.sum(aba_unwrapped(m, Q[0], V[0], t) * w))(T[0]),
        "vmap crba": lambda Q, V, T: jax.vmap(jaxdyn.crba, (None, 0))(m, Q),
        "vmap minv": lambda Q, V, T: jax.vmap(jaxdyn.minv, (None, 0))(m, Q),
        "grad aba": lambda Q, V, T: jax.grad(lambda q, v, t: jnp.sum(jaxdyn.aba(m, q, v, t) * w), (0, 1, 2))(Q[0], V[0], T[0]),
        "vmap grad aba": lambda Q, V, T: jax.vmap(jax.grad(lambda q, v, t: jnp.sum(jaxdyn.aba(m, q, v, t) * w)))(Q, V, T),
        "jacfwd rnea": lambda Q, V, T: jax.jacfwd(lambda q: jaxdyn.rnea(m, q, V[0], T[0]))(Q[0]),
        "jacfwd crba": lambda Q, V, T: jax.jacfwd(lambda q: jaxdyn.crba(m, q))(Q[0]),
        "vmap aba_derivatives": lambda Q, V, T: jax.vmap(jaxdyn.aba_derivatives, (None, 0, 0, 0))(m, Q, V, T),
        "jvp aba_derivatives": lambda Q, V, T: jax.jvp(lambda t: jaxdyn.aba_derivatives(m, Q[0], V[0], t),
                                                       (T[0],), (T[1],)),
        "rollout": lambda Q, V, T: jaxdyn.rollout(m, Q[0], V[0], T[0], 1e-3, 3).q,
    }
    for name, f in programs.items():
        precisions = dot_precisions(jax.make_jaxpr(f)(Q, V, T))
        assert precisions, f"{name}: no matrix product traced (the test would pass vacuously)"
        wrong = [p for p in precisions if p != HIGHEST]
        assert not wrong, f"{name}: {len(wrong)} of {len(precisions)} products at {set(wrong)}"


def test_users_own_products_keep_their_precision():
    """``jaxdyn.jit`` of a user's function: jaxdyn's products inside it are exact, the user's own
    product keeps the default (None) precision."""
    m = jaxdyn.robots.puma560()
    Q, V, T = states(m, 2, jnp.float64)
    A = jnp.ones((m.nv, m.nv))

    def mine(q, v, t):
        return A @ jaxdyn.rnea(m, q, v, t)

    for jit in (jax.jit, jaxdyn.jit):
        precisions = dot_precisions(jax.make_jaxpr(jit(mine))(Q[0], V[0], T[0]))
        assert precisions.count(None) == 1, (jit, precisions)
        assert len(precisions) > 1 and all(p in (None, HIGHEST) for p in precisions)
