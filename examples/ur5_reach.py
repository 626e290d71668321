"""Trajectory optimization of a UR5 reach (example-robot-data's URDF) with the Python API:
minimum effort, target at rest as a terminal constraint, RK4; the optimized torques replayed
open-loop on RK4 at dt / 10 (``trajopt.replay``); the plan and its replay animated side by side,
drawn with the URDF's meshes.  100 samples of 20 ms, L-BFGS 6 x 50 steps (about 50 s here).

    python examples/ur5_reach.py
"""
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import Partial

jax.config.update("jax_enable_x64", True)
from jaxdyn import viewer  # noqa: E402
from jaxdyn.apps import trajopt as to  # noqa: E402
from jaxdyn.io.named import model_file, robot_by_name  # noqa: E402

from _common import SMALL, out_dir  # noqa: E402


def effort(t, q, qd, u):
    return u @ u


def reach(qT, q, qd):
    return jnp.concatenate([q - qT, qd])


def main():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = robot_by_name("erd:ur5")
    q0 = jnp.array([0.0, -1.5, 1.5, 0.0, 0.0, 0.0])
    qT = jnp.array([0.9, -0.8, 0.6, -0.7, 0.5, 0.4])
    T, dt = 2.0, (0.05 if SMALL else 0.02)
    prob = to.problem(model, q0, jnp.zeros(6), dt, int(round(T / dt)), effort,
                      terminal_constraint=Partial(reach, qT), stepper="rk4", parametrization="acceleration")
    res = to.optimize(prob, iterations=5 if SMALL else 50, rounds=1 if SMALL else 6, rho=1e5)
    rep = to.replay(prob, res.U)
    err = lambda tr: float(jnp.abs(tr.q[-1] - qT).max())  # noqa: E731
    print(f"terminal error: optimizer's model {err(res.trajectory):.3g} rad, open-loop replay {err(rep):.3g} rad; "
          f"effort {float(to.effort(res.U, dt)):.4g}")
    out = viewer.animate([model, model], [res.trajectory, rep], os.path.join(out_dir("ur5_reach"), "animation.html"),
                         names=["optimized (RK4, dt)", "replayed (RK4, dt / 10)"], visuals=[model_file("erd:ur5")] * 2)
    print(f"wrote {out}")
    np.savetxt(os.path.join(out_dir("ur5_reach"), "torques.csv"), np.asarray(res.U), delimiter=",")


if __name__ == "__main__":
    main()
