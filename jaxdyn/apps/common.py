"""Pieces the application tools share: the output folder of a command, the check of a fixed
step against the robot's joint damping, optax's dtype promotion and a pytree select."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile

import jax
import jax.numpy as jnp

from ..errors import ConfigError


def output_dir(out, name):
    """The output folder of a command, made and checked writable before anything is computed:
    ``out`` or ``./jaxdyn-out/<name>``.  A folder that exists and is not empty (an earlier run,
    anything else) is never written into, so runs never mix: the run goes to the first free
    ``<out>-2``, ``<out>-3``, ... and the command says so on stderr.  Returns the folder.
    Raises ConfigError naming the path when it is a file or cannot be written."""
    base = out or os.path.join("jaxdyn-out", name)
    if os.path.exists(base) and not os.path.isdir(base):
        raise ConfigError(f"--out {base!r} exists and is not a directory")
    path, k = base, 1
    while os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
        k += 1
        path = f"{base.rstrip(os.sep)}-{k}"
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        raise ConfigError(f"--out {path!r} cannot be written: {e.strerror or e}") from None
    if path != base:
        print(f"jaxdyn: {base} is not empty (an earlier run?); writing to {path}", file=sys.stderr)
    return path


def discard(path):
    """Remove the output folder ``path`` of a failed or interrupted run, with what the run wrote
    into it (:func:`output_dir` gave an empty or new folder, so everything in it is the run's):
    no half-written results are left.  Returns True when a folder was removed."""
    if not path or not os.path.isdir(path):
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True


def with_robot(cfg, robot):
    """``cfg`` run on another robot (``--robot``: a robot name as ``robot.name`` takes it): its
    robot.name replaced, its name suffixed with the robot file's stem (the output folder's
    name), e.g. identify_puma_panda."""
    stem = os.path.splitext(os.path.basename(robot.split(":", 1)[-1]))[0]
    cfg["robot"]["name"] = robot
    cfg["name"] = cfg["name"] + "_" + "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)
    return cfg


def robot_key(args):
    """Where the user named the robot, for error messages: "--robot" when ``args.robot`` is
    given, else "robot.name" (the config's key)."""
    return "--robot" if getattr(args, "robot", None) else "robot.name"


def start(args, load):
    """The common start of a tool's run: float64 on, the config read by ``load(args.config)``
    (on ``args.robot`` where given: :func:`with_robot`), the robot (``robot_by_name``) and the
    output folder (:func:`output_dir`) -> (cfg, out, robot).  The folder is also
    ``args.out_dir``, which :func:`jaxdyn.cli.main` discards on an error or Ctrl-C."""
    from ..io.named import robot_by_name
    jax.config.update("jax_enable_x64", True)
    cfg = load(args.config)
    key = robot_key(args)
    if getattr(args, "robot", None):
        cfg = with_robot(cfg, args.robot)
    robot = robot_by_name(cfg["robot"]["name"], key)
    require_joints(robot[0].model if isinstance(robot, tuple) else robot, cfg["robot"]["name"], key)
    args.out_dir = output_dir(args.out, cfg["name"])
    return cfg, args.out_dir, robot


def require_joints(model, name, key="robot.name"):
    """Raise ConfigError when the robot ``name`` (its tree ``model``; given as ``key``) has no
    degrees of freedom (every joint fixed, as in example-robot-data's quadrotor_base.urdf):
    nothing moves."""
    if model.nv == 0:
        raise ConfigError(f"{key} {name!r}: robot {model.name!r} has no degrees of freedom "
                          "(every joint is fixed): nothing to simulate, identify or optimize")


def require_stable_step(system, q, dt, stepper, key, alternative=""):
    """Raise ConfigError naming ``key`` (e.g. "simulation.dt") when the fixed-step ``stepper``
    is unstable at step ``dt`` on the joint damping of ``system`` (a Model, or a ClosedModel on
    its constraints' null space) at configuration q: such a rollout diverges whatever its
    torques (:mod:`jaxdyn.integrators.stability`).  A singular M (no finite step) is left to
    the rollout's own report.  ``alternative``: what else the user may choose, appended."""
    from ..integrators.stability import STABLE_STEP, max_stable_step
    h = max_stable_step(system, q, stepper)
    if 0 < h < dt:
        raise ConfigError(f"{key} = {dt:g} s is too long for {stepper!r} on robot "
                          f"{getattr(system, 'model', system).name!r}: its joint "
                          f"damping makes it stiff (at the initial configuration its fastest damped mode "
                          f"decays at {STABLE_STEP[stepper] / h:.4g} 1/s, the largest eigenvalue of M^-1 D), and "
                          f"{stepper} is stable there only for dt <= {h:.3g} s: a rollout would diverge; "
                          f"use dt <= {_round_down(h):g} s{alternative}")


def why_nonfinite(system, Q, k, dt, stepper):
    """Why a rollout became non-finite at sample k (:func:`jaxdyn.first_nonfinite`), for its
    error message, judged at the configuration q before sample k in the first trajectory of Q
    (..., steps + 1, nq) that is non-finite there: the joints whose motion meets no inertia
    when the tree's M(q) is singular (:data:`jaxdyn.integrators.stability.SINGULAR`; the
    dofs with weight in its null space, named as
    :func:`jaxdyn.output.dof_labels` names them), or the joint damping that ``stepper`` at
    ``dt`` cannot follow there (``system`` a Model, or a ClosedModel on its constraints' null
    space), or else the generic causes."""
    import numpy as np

    from ..batching import crba
    from ..integrators.stability import SINGULAR, max_stable_step
    from ..output import dof_labels
    model = getattr(system, "model", system)
    Q = np.asarray(Q).reshape(-1, *np.shape(Q)[-2:])
    q = Q[int(np.argmax(~np.isfinite(Q[:, k]).all(-1))), max(k - 1, 0)]
    w, V = np.linalg.eigh(np.asarray(crba(model, q)))
    if model.nv and not w[0] > SINGULAR * max(w[-1], 0.0):
        v = np.linalg.norm(V[:, w <= max(SINGULAR * w[-1], w[0])], axis=1)     # weight of each dof in the null space
        names = [repr(dof_labels(model)[j][0]) for j in np.argsort(-v) if v[j] >= 0.1 * v.max()]
        more = f" and {len(names) - 6} more" if len(names) > 6 else ""
        return (f"the mass matrix is singular there (smallest eigenvalue {w[0]:.3g}, largest {w[-1]:.3g}): the "
                f"motion of {', '.join(names[:6])}{more} meets no mass or inertia (a massless body on a joint?)")
    h = max_stable_step(system, q, stepper)
    if 0 < h < dt:
        return (f"the joint damping is too stiff there for {stepper!r} at dt = {dt:g} s (stable only for "
                f"dt <= {h:.3g} s): use dt <= {_round_down(h):g} s")
    return "the dynamics are singular there (e.g. a massless body on a joint) or the integration diverged"


def _round_down(x):
    """x rounded down to two significant digits."""
    import math
    e = 10.0 ** (math.floor(math.log10(x)) - 1)
    return math.floor(x / e) * e


def optax_promotion():
    """Context for optax's own updates: they add int32 step counts to int64 ones and raise
    floats to int32 powers, which ``jax_numpy_dtype_promotion="strict"`` rejects.  jaxdyn's
    code is strict-clean; its optax calls run under ``"standard"`` so strict users can call it."""
    return jax.numpy_dtype_promotion("standard")


def tree_where(c, a, b):
    """``jnp.where(c, x, y)`` leaf by leaf over two pytrees of one structure (c a bool scalar
    or broadcastable to every leaf)."""
    return jax.tree_util.tree_map(lambda x, y: jnp.where(c, x, y), a, b)
