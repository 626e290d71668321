"""An MJCF humanoid through MuJoCo's compiler: load, check one state against MuJoCo, fall.

Loads MJX's humanoid (``mujoco-mjx`` test data; gymnasium's humanoid otherwise) with
``jaxdyn.load_mjcf``, compares forward dynamics at a random state with MuJoCo's own
``qacc_smooth`` (contacts and springs off there: jaxdyn does not model them), then lets it fall
for 1 s under gravity and writes the animation (the humanoid drawn with its MJCF geoms).

    python examples/mjcf_humanoid.py        (needs: pip install "jaxdyn[mjcf]" mujoco-mjx)
"""
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
import jaxdyn  # noqa: E402
from jaxdyn import viewer  # noqa: E402
from jaxdyn.io.mjcf import from_mujoco, to_mujoco  # noqa: E402

from _common import SMALL, out_dir  # noqa: E402


def humanoid_path():
    import mujoco
    p = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data", "humanoid", "humanoid.xml")
    if os.path.exists(p):
        return p
    import gymnasium
    return os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "humanoid.xml")


def main():
    import mujoco
    path = humanoid_path()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # springs are dropped, with a warning
        model = jaxdyn.load_mjcf(path)
    print(model)
    # one random state against MuJoCo (contacts, constraints, actuators, springs off there)
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.disableflags |= (mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
                           | mujoco.mjtDisableBit.mjDSBL_ACTUATION | mujoco.mjtDisableBit.mjDSBL_SPRING)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    d.qvel[:] = rng.normal(size=m.nv)
    mujoco.mj_forward(m, d)
    q, v, _, _ = from_mujoco(model, d.qpos.copy(), d.qvel.copy())
    qacc = to_mujoco(model, q, v, jaxdyn.forward_dynamics(model, q, v, jnp.zeros(model.nv)))[2]
    print(f"max |qacc - MuJoCo qacc_smooth| = {np.abs(np.asarray(qacc) - d.qacc_smooth).max():.2e}")
    # a 1 s fall (no contacts: it falls through the floor), animated
    steps = 100 if SMALL else 500
    traj = jaxdyn.rollout(model, q, v * 0.1, None, 0.002, steps, stepper="rk4")
    out = viewer.animate(model, traj, os.path.join(out_dir("mjcf_humanoid"), "animation.html"), visuals=path)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
