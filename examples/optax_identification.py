"""Identify the PUMA 560's link masses, COMs and inertias from torque data with optax,
working directly on ``jaxdyn.parameters(model)`` (a dict of float arrays).

The "true" robot is Saha's PUMA; data are inverse-dynamics torques at random states plus
noise.  The start is a perturbed but physical robot (log-Cholesky parameters of the truth plus noise).
Two runs of plain optax (Adam) on the torque residual:

1. on ``jaxdyn.parameters(model, ("mass", "com", "inertia"))``: fits the data, but the
   identified inertias are not physical (``jaxdyn.validate`` lists them);
2. on the log-Cholesky parameters ``jaxdyn.log_cholesky_parameters(model)`` (nb, 10): every
   iterate is a valid rigid body by construction.

Identification in earnest (base parameters, excitation, priors) is the job of a dedicated
tool; this example shows the mechanics.

    python examples/optax_identification.py
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax

jax.config.update("jax_enable_x64", True)
import jaxdyn  # noqa: E402


def main(steps=400, n=256, noise=0.05):
    true = jaxdyn.robots.puma560()
    rng = np.random.default_rng(0)
    Q, V, A = rng.uniform(-2, 2, (n, 6)), rng.normal(size=(n, 6)), rng.normal(size=(n, 6))
    tau = jax.vmap(lambda q, v, a: jaxdyn.rnea(true, q, v, a))(Q, V, A)
    tau = tau + noise * rng.normal(size=tau.shape)

    names = ("mass", "com", "inertia")
    p_true = jaxdyn.parameters(true, names)
    # a perturbed but physical start: log-Cholesky parameters of the truth plus noise (mass
    # and inertia scales change by factors of e^(2 * 0.3) ~ 1.8 at one sigma)
    theta0 = jaxdyn.log_cholesky_parameters(true) + 0.3 * rng.normal(size=(true.nb, 10))
    start = jaxdyn.with_log_cholesky_parameters(true, theta0)
    p = jaxdyn.parameters(start, names)

    def fit(p, to_model, label):
        def loss(p):
            m = to_model(p)
            pred = jax.vmap(lambda q, v, a: jaxdyn.rnea(m, q, v, a))(Q, V, A)
            return jnp.mean((pred - tau) ** 2)

        opt = optax.adam(1e-2)
        state = opt.init(p)

        @jax.jit
        def step(p, state):
            l, g = jax.value_and_grad(loss)(p)
            upd, state = opt.update(g, state, p)
            return optax.apply_updates(p, upd), state, l

        l0 = float(loss(p))
        for i in range(steps):
            p, state, l = step(p, state)
        print(f"{label}: torque MSE {l0:.4e} -> {float(loss(p)):.4e} (noise floor {noise ** 2:.1e})")
        problems = jaxdyn.validate(to_model(p), raise_errors=False)
        print("  identified model is physical" if not problems else
              f"  {len(problems)} bodies not physical, e.g. {problems[0]}")
        print("  masses: true", np.round(np.asarray(p_true["mass"]), 3), "identified",
              np.round(np.asarray(to_model(p).mass), 3))

    fit(p, lambda p: jaxdyn.with_parameters(start, p), "mass/com/inertia")
    fit(theta0, lambda th: jaxdyn.with_log_cholesky_parameters(start, th),
        "log-Cholesky")


if __name__ == "__main__":
    from _common import SMALL
    main(*((20, 32) if SMALL else ()))      # the test suite's smoke run
