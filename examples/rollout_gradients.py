"""Gradients of a rollout: d(final position error)/d(torques) and /d(link masses) of the PUMA
560, by reverse mode through ``jaxdyn.rollout`` (RK4), checked against central finite
differences along random directions; plots dL/dU over time.

    python examples/rollout_gradients.py
"""
import os

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
import jaxdyn  # noqa: E402

from _common import SMALL, out_dir  # noqa: E402

model = jaxdyn.robots.puma560()
steps, dt = (30 if SMALL else 200), 0.01
q0, qT = jnp.zeros(6), jnp.array([0.5, -0.4, 0.3, 0.2, 0.1, 0.0])


def loss(mass, U):
    m = model.replace(mass=mass)
    tr = jaxdyn.rollout(m, q0, jnp.zeros(6), U, dt, steps, stepper="rk4")
    return jnp.sum((tr.q[-1] - qT) ** 2)


def main():
    U = jnp.asarray(np.random.default_rng(0).normal(size=(steps, 6)))
    vg = jax.jit(jax.value_and_grad(loss, (0, 1)))
    L, (g_mass, g_U) = vg(model.mass, U)
    print(f"loss {float(L):.6g}")
    rng = np.random.default_rng(1)
    for what, x, g in (("masses", model.mass, g_mass), ("torques", U, g_U)):
        d = jnp.asarray(rng.normal(size=x.shape))
        eps = 1e-6
        f = (lambda y: vg(y, U)[0]) if what == "masses" else (lambda y: vg(model.mass, y)[0])
        fd = (f(x + eps * d) - f(x - eps * d)) / (2 * eps)
        print(f"d loss / d {what} along a random direction: reverse mode {float(jnp.vdot(g, d)):.9g}, "
              f"finite differences {float(fd):.9g}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6.5, 3.5))
    t = np.arange(steps) * dt
    for j in range(6):
        ax.plot(t, np.asarray(g_U)[:, j], label=f"joint {j + 1}")
    ax.set_xlabel("time of the held torque sample (s)")
    ax.set_ylabel("d loss / d tau_k (1 / (N m))")
    ax.set_title("PUMA 560: gradient of the final position error w.r.t. the torques")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    out = os.path.join(out_dir("rollout_gradients"), "gradients.png")
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
