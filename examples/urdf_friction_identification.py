"""Identify a URDF robot's link inertias and joint friction from noisy torque data.

The UFactory xArm7 of example-robot-data declares viscous and Coulomb friction per joint
(``<dynamics damping friction>``).  Its motor torques along a Fourier excitation are
``rnea + damping qd + friction sign(qd)``; with torque and measurement noise added, the
regressor with friction columns (``terms=("viscous", "coulomb")``) gives the base parameters
by least squares, then a physically consistent fit (log-Cholesky inertias; the friction
coefficients, linear in the torques, solved for at every step).  Writes ``friction.png``: true vs identified coefficients per joint.

    python examples/urdf_friction_identification.py      (needs: pip install example-robot-data)
"""
import os

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
import jaxdyn  # noqa: E402
from jaxdyn.apps import joint_terms as jt  # noqa: E402
from jaxdyn.io.named import ERD_URDFS, example_robot_data_dir  # noqa: E402

from _common import SMALL, out_dir  # noqa: E402

si = jaxdyn.sysid
TERMS = ("viscous", "coulomb")


def main():
    true = jaxdyn.load_urdf(os.path.join(example_robot_data_dir(), ERD_URDFS["xarm7"]))
    T, steps = (20.0, 200) if SMALL else (40.0, 2000)
    t = jnp.arange(int(T / 0.02), dtype=float) * 0.02
    Q, QD, QDD = si.sample_fourier(si.fourier_excitation(true, jax.random.PRNGKey(0)), t)
    tau = jax.vmap(lambda q, v, a: jaxdyn.rnea(true, q, v, a) + jt.joint_torque(true, v, a, TERMS))(Q, QD, QDD)
    rng = np.random.default_rng(1)
    noisy = lambda x, s: np.asarray(x) + s * rng.normal(size=x.shape)  # noqa: E731
    Qm, QDm, QDDm, TAUm = noisy(Q, 1e-4), noisy(QD, 1e-3), noisy(QDD, 1e-2), noisy(tau, 0.2)

    lay = jt.layout(true, TERMS)
    Y = np.asarray(si.regressors(true, Qm, QDm, QDDm, TERMS))
    base = si.base_parameters(Y.reshape(-1, lay.p))
    x_ls = base.alone(si.identify_least_squares(Y, TAUm, base))
    # consistent fit from the URDF's inertias (the friction is solved for at every step)
    fit = si.identify_consistent(Y, TAUm, jaxdyn.log_cholesky_parameters(true), steps=steps, layout=lay)
    x_c, x_true = np.asarray(fit.pi), np.asarray(si.parameters(true, TERMS))
    J = lay.joint.reshape(true.nv, len(TERMS))
    print(f"{true.name}: {len(t)} samples, base parameters rank {base.rank} of {lay.p}")
    for k, term in enumerate(TERMS):
        for name, x in (("least squares", x_ls), ("consistent", x_c)):
            rel = np.abs(x[J[:, k]] - x_true[J[:, k]]) / x_true[J[:, k]]
            print(f"  {term:8s} {name:14s} {np.round(x[J[:, k]], 3)}  worst relative error {rel.max():.2%}")
    plot(true, x_true, x_ls, x_c, J, os.path.join(out_dir("urdf_friction_identification"), "friction.png"))


def plot(model, x_true, x_ls, x_c, J, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    joints = np.arange(1, model.nv + 1)
    for k, (ax, label) in enumerate(zip(axes, ("viscous friction (N m s/rad)", "Coulomb friction (N m)"))):
        ax.bar(joints - 0.27, x_true[J[:, k]], 0.27, label="URDF (true)")
        ax.bar(joints, x_ls[J[:, k]], 0.27, label="least squares")
        ax.bar(joints + 0.27, x_c[J[:, k]], 0.27, label="consistent")
        ax.set_xticks(joints, [f"joint{j}" for j in joints], fontsize=8)
        ax.set_ylabel(label)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{model.name} (xArm7 URDF): joint friction identified from noisy torques")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print("wrote", path)


if __name__ == "__main__":
    main()
