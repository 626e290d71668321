"""Pieces the application tools share: the output folder of a command and an L-BFGS loop."""
from __future__ import annotations

import os

import jax
import optax

from ..errors import ConfigError


def output_dir(out, name):
    """The output folder of a command: ``out`` or ``./jaxdyn-out/<name>``; a path that exists
    and is not a folder is a named error."""
    out = out or os.path.join("jaxdyn-out", name)
    if os.path.exists(out) and not os.path.isdir(out):
        raise ConfigError(f"--out {out!r} exists and is not a directory")
    return out


def start(args, load):
    """The common start of a tool's run: float64 on, the config read by ``load(args.config)``,
    the output folder and the robot (``robot_by_name``) -> (cfg, out, robot)."""
    from ..io.named import robot_by_name
    jax.config.update("jax_enable_x64", True)
    cfg = load(args.config)
    return cfg, output_dir(args.out, cfg["name"]), robot_by_name(cfg["robot"]["name"])


def optax_promotion():
    """Context for optax's own updates: they add int32 step counts to int64 ones and raise
    floats to int32 powers, which ``jax_numpy_dtype_promotion="strict"`` rejects.  jaxdyn's
    code is strict-clean; its optax calls run under ``"standard"`` so strict users can call it."""
    return jax.numpy_dtype_promotion("standard")


def lbfgs_minimize(loss, x0, steps, memory_size=20):
    """``steps`` optax L-BFGS steps (zoom line search) on ``loss`` from x0 in one ``lax.scan``
    (call it under jit).  Returns (x, history (steps,) of loss values before each step)."""
    opt = optax.lbfgs(memory_size=memory_size)
    vg = optax.value_and_grad_from_state(loss)

    def step(carry, _):
        x, s = carry
        v, g = vg(x, state=s)
        with optax_promotion():
            upd, s = opt.update(g, s, x, value=v, grad=g, value_fn=loss)
            return (optax.apply_updates(x, upd), s), v

    with optax_promotion():
        s0 = opt.init(x0)
    (x, _), hist = jax.lax.scan(step, (x0, s0), None, length=steps)
    return x, hist
