"""jaxdyn.apps.lbfgs: the Wolfe line search's conditions, L-BFGS to the closed-form minimum of
Rosenbrock's function, and a vmapped multi-start equal to the starts run one by one."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxdyn.apps.lbfgs import lbfgs_minimize, search_over, search_result, search_start, search_update


def rosen(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def wolfe_search(value_and_grad, x, d, f0, g0):
    """One line search alone: search_update trials in a while_loop -> (t, f, g, ok)."""
    def body(st):
        f, g = value_and_grad(x + st.t * d)
        return search_update(st, f, g, d)
    return search_result(jax.lax.while_loop(lambda st: ~search_over(st), body, search_start(f0, g0, d)))


def test_wolfe_search_meets_both_conditions_or_expands_and_brackets():
    """From x = (-1.2, 1) along -g (a step of 1 overshoots by orders of magnitude) and along a
    tiny multiple of -g (t = 1 far too short: expansion): the step returned satisfies
    f(x + t d) <= f(x) + 1e-4 t g.d and |g(x + t d).d| <= 0.9 |g.d|, and the values returned are
    f and its gradient there."""
    vg = jax.jit(jax.value_and_grad(rosen))
    x = jnp.array([-1.2, 1.0])
    f0, g0 = vg(x)
    for d in (-g0, -1e-6 * g0):
        t, f, g, ok = jax.jit(lambda x, d: wolfe_search(vg, x, d, f0, g0))(x, d)
        assert bool(ok)
        s0 = float(g0 @ d)
        assert float(t) > 0
        assert float(f) <= float(f0) + 1e-4 * float(t) * s0
        assert abs(float(g @ d)) <= -0.9 * s0
        fe, ge = vg(x + t * d)
        np.testing.assert_allclose([float(f), *np.asarray(g)], [float(fe), *np.asarray(ge)], rtol=1e-12)


def test_lbfgs_reaches_rosenbrocks_minimum_and_vmaps_per_start():
    X0 = jnp.asarray(np.random.default_rng(0).normal(size=(3, 8)))
    run = jax.jit(lambda x: lbfgs_minimize(rosen, x, 150))
    xs = [run(x) for x in X0]
    for x, h in xs:
        np.testing.assert_allclose(np.asarray(x), np.ones(8), atol=1e-6)    # the minimum x = 1
        assert np.all(np.diff(np.asarray(h)) <= 1e-12)                       # never increases
    Xv, Hv = jax.jit(jax.vmap(lambda x: lbfgs_minimize(rosen, x, 150)))(X0)
    for (x, h), xv, hv in zip(xs, Xv, Hv):
        np.testing.assert_allclose(np.asarray(xv), np.asarray(x), atol=1e-10)
        np.testing.assert_allclose(np.asarray(hv), np.asarray(h), rtol=1e-9, atol=1e-12)


def test_the_program_evaluates_the_loss_at_one_site():
    """The whole minimization (start, line-search trials, steps) holds one copy of the loss:
    its one sinh appears once in the jaxpr, also under vmap over starts (optax's zoom search
    holds it three times)."""
    def loss(x):
        return jnp.sum(jnp.sinh(x) ** 2) + rosen(x)

    x0 = jnp.ones(4)
    for fn, arg in ((lambda x: lbfgs_minimize(loss, x, 5), x0),
                    (jax.vmap(lambda x: lbfgs_minimize(loss, x, 5)), jnp.stack([x0, 2 * x0]))):
        assert str(jax.make_jaxpr(fn)(arg)).count("sinh") == 1
