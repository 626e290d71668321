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


def test_auxiliary_output_is_the_losss_at_the_minimizer_from_the_one_site():
    """With aux0 the loss returns (value, aux): the same iterates as without, and the aux
    returned is the loss's aux recomputed at the returned x (also for 0 steps, x = x0, and
    under vmap); the program still holds one copy of the loss."""
    def loss(x):
        r = x[1:] - x[:-1] ** 2
        return rosen(x) + jnp.sum(jnp.sinh(x) ** 2), (r, jnp.sum(x))

    aux0 = (jnp.zeros(3), jnp.zeros(()))
    x0 = jnp.asarray([-1.2, 1.0, 0.3, 0.5])
    for steps in (0, 7, 40):
        x, h, aux = jax.jit(lambda x: lbfgs_minimize(loss, x, steps, aux0=aux0))(x0)
        xp, hp = jax.jit(lambda x: lbfgs_minimize(lambda y: loss(y)[0], x, steps))(x0)
        np.testing.assert_array_equal(np.asarray(x), np.asarray(xp))
        np.testing.assert_array_equal(np.asarray(h), np.asarray(hp))
        if steps == 0:
            np.testing.assert_array_equal(np.asarray(x), np.asarray(x0))
        for a, b in zip(aux, loss(x)[1]):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-14)
    X0 = jnp.stack([x0, 0.5 * x0])
    Xv, _, (rv, sv) = jax.jit(jax.vmap(lambda x: lbfgs_minimize(loss, x, 7, aux0=aux0)))(X0)
    for x, r, s in zip(Xv, rv, sv):
        np.testing.assert_allclose(np.asarray(r), np.asarray(loss(x)[1][0]), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(float(s), float(jnp.sum(x)), rtol=1e-12)
    assert str(jax.make_jaxpr(lambda x: lbfgs_minimize(loss, x, 5, aux0=aux0))(x0)).count("sinh") == 1


def test_minimization_ends_where_its_line_search_cannot_resolve_the_loss():
    """Rosenbrock from a start whose minimum L-BFGS reaches to rounding (f ~ 1e-30) in under 100
    steps: its later searches cannot meet the Wolfe conditions (the slope along d is rounding
    noise), and the first that fails ends the minimization, so 400 allowed steps cost about as
    many evaluations as the steps taken, not MAX_TRIALS per step left (9967 before); x is the
    minimum, and the history never increases and ends at the loss of the returned x."""
    count = [0]

    def loss(x):
        jax.debug.callback(lambda: count.__setitem__(0, count[0] + 1))
        return rosen(x)

    x0 = jnp.asarray(np.random.default_rng(0).normal(size=(3, 8)))[0]
    x, h = jax.jit(lambda x: lbfgs_minimize(loss, x, 400))(x0)
    h = np.asarray(h)
    assert count[0] <= 200, count[0]
    np.testing.assert_allclose(np.asarray(x), np.ones(8), atol=1e-6)
    assert np.all(np.diff(h) <= 1e-12) and h[-1] == float(rosen(x))
