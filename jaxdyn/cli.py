"""Command line: ``jaxdyn simulate [CONFIG] [--out DIR] [--batch N] [--robot urdf:PATH]``,
``jaxdyn trajopt [CONFIG] [--out DIR]``, ``jaxdyn identify [CONFIG] [--out DIR] [--robot NAME]``,
``jaxdyn view ROBOT_OR_RUN [--robot NAME] [--out FILE]``.

Exit codes: 0 success; 2 bad input (config, robot file, arguments: one line naming the
problem, no traceback); 3 the simulation became non-finite (names the time and quantity).
jaxdyn's warnings (a feature of a robot file that is dropped, an inertia repaired) print as
one line each, ``jaxdyn: warning: ...``.
"""
from __future__ import annotations

import _thread
import argparse
import contextlib
import gc
import os
import sys
import threading
import time
import warnings
from typing import NamedTuple

GC_THRESHOLDS = (100_000, 50, 100)
"""Python's cyclic-GC thresholds in the ``jaxdyn`` command (and the test run): at the defaults
(700, 10, 10) the collector runs every 700 allocations and walks JAX's trace objects, a
noticeable share of the CPU time of tracing and compiling (figures:
``benchmarks/results/history.md``).  Set by :func:`main` only: importing
jaxdyn leaves your process's collector as it is."""


def use_compilation_cache():
    """Turn on JAX's persistent compilation cache for this process, in ``$JAXDYN_CACHE_DIR``
    or ``~/.cache/jaxdyn`` (unless ``JAX_COMPILATION_CACHE_DIR`` already names one): a second
    run of the same config loads its programs instead of compiling them.  An empty
    ``JAXDYN_CACHE_DIR`` turns it off.  Returns the folder (or None)."""
    import jax
    if os.environ.get("JAXDYN_CACHE_DIR") == "":
        return None
    path = os.environ.get("JAX_COMPILATION_CACHE_DIR") or os.environ.get("JAXDYN_CACHE_DIR") or \
        os.path.join(os.path.expanduser("~"), ".cache", "jaxdyn")
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path


def _robot(name, key="robot.name"):
    from .io.named import robot_by_name
    return robot_by_name(name, key)


def _hold(model, q_ref, kp, kd):
    """PD controller holding the actuated joints at q_ref: tau = kp (q_ref - q) - kd qd on every
    dof except free-flyer ones (unactuated)."""
    import jax.numpy as jnp
    import numpy as np

    import jaxdyn
    from .model import joints as J
    act = np.ones(model.nv)
    for i in range(model.nb):
        if int(model.jtype[i]) == J.FREE:
            act[np.asarray(model.vidx[i])[np.asarray(model.vidx[i]) < model.nv]] = 0.0
    act, q_ref = jnp.asarray(act), jnp.asarray(q_ref)
    return lambda t, q, qd: act * (kp * jaxdyn.difference(model, q, q_ref) - kd * qd)


def _positive_int(s):
    try:
        n = int(s)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {s!r}")
    return n


class _Setup(NamedTuple):
    """What a simulate run needs, built from the config (the first stage of :func:`simulate`)."""
    cfg: dict
    out: str
    model: object           # the tree Model (state layout, outputs)
    system: object          # what rollout integrates: the Model, a ClosedModel, GraspSystem or LeggedSystem
    closed: object          # the ClosedModel (drift), or None
    q0: object
    qd0: object
    ctrl: object
    traj_fn: object         # the reference trajectory of tracking configs, or None
    steps: int
    started: float | None   # time.perf_counter() at the command's start


CLOSED_METHODS = ("schur", "kkt", "rccfd", "lilly_orin")
"""simulation.method values that solve closed chains."""


def _is_mechanism(name):
    from .io.mechanisms import MECHANISMS
    return name in MECHANISMS


def _setup(args) -> _Setup:
    """config -> model, system and consistent initial state, controller."""
    import numpy as np

    import jaxdyn
    from .apps.common import output_dir, require_joints, require_stable_step, robot_key, with_robot
    from .config import check_method, load_config, sim_steps
    from .errors import ConfigError
    from .io.named import start_configuration
    from .model.configuration import normalized_or_raise

    cfg = load_config(args.config)
    if args.robot:
        sim, robot = cfg["simulation"], cfg["robot"]["name"]
        why = ([f"robot {robot!r} is a closed mechanism"] if _is_mechanism(robot) else []) + \
            ([f"simulation.method = {sim['method']!r} solves closed chains"] if sim["method"] in CLOSED_METHODS
             else []) + (["simulation.stabilization applies to closed chains"] if "stabilization" in sim else [])
        if why:
            raise ConfigError(f"--robot {args.robot}: config {cfg['name']!r} is for a closed chain "
                              f"({'; '.join(why)}); --robot simulates a tree with zero torque: give "
                              "a tree config (e.g. puma_freefall) or none")
        cfg = with_robot(cfg, args.robot)
    out_name = cfg["name"]
    key = robot_key(args)
    built = _robot(cfg["robot"]["name"], key)
    closed, q_closed = built if isinstance(built, tuple) else (None, None)
    model = closed.model if closed is not None else built
    require_joints(model, cfg["robot"]["name"], key)
    check_method(cfg, closed is not None)       # again: a file's equalities are known once it is loaded
    sim, ctl = cfg["simulation"], cfg["control"]
    init = cfg.get("initial", {})
    q_default = q_closed if closed is not None else start_configuration(cfg["robot"]["name"], model)
    q0 = np.asarray(init.get("q0", q_default), float)
    qd0 = np.asarray(init.get("qd0", np.zeros(model.nv)), float)
    if args.robot:              # neutral; an MJCF robot: the pose its file describes
        q0, qd0 = np.asarray(q_default, float), np.zeros(model.nv)
        ctl = {"type": "zero"}
    if q0.shape != (model.nq,) or qd0.shape != (model.nv,):
        raise ConfigError(f"{cfg['name']}: initial.q0 must have {model.nq} and initial.qd0 {model.nv} "
                          f"entries for robot {model.name!r}; got {q0.shape[0]}, {qd0.shape[0]}")
    q0, changed = normalized_or_raise(model, q0, f"{cfg['name']}: initial.q0")
    if changed:
        print("warning: initial.q0 had non-unit quaternions; normalized", file=sys.stderr)
    if closed is not None:      # consistent initial conditions on the constraint manifold
        q0, qd0 = (np.asarray(x) for x in jaxdyn.project_constraints(closed, q0, qd0))
        jaxdyn.constraints.check_assembled(closed, q0, f"{cfg['name']}: initial.q0")
    T = sim["T"]
    traj_fn = None
    if ctl["type"] == "zero":
        ctrl = jaxdyn.integrators.zero_torque(model)
    elif ctl["type"] == "hold":
        ctrl = _hold(model, q0, ctl.get("kp", 100.0), ctl.get("kd", 20.0))
    else:
        qT = np.asarray(ctl["q_final"], float)
        if qT.shape != (model.nv,):
            raise ConfigError(f"{cfg['name']}: control.q_final must have {model.nv} entries")
        traj_fn = jaxdyn.integrators.cycloidal(q0, qT, T)
        ctrl = jaxdyn.integrators.feedforward(model, traj_fn) if ctl["type"] == "feedforward" else \
            jaxdyn.integrators.computed_torque(model, traj_fn, ctl.get("kp", 100.0), ctl.get("kd", 20.0))
    system = closed if closed is not None else model
    if closed is not None and sim["method"] in ("rccfd", "lilly_orin"):
        from .io.mechanisms import STRUCTURED
        system = STRUCTURED[cfg["robot"]["name"]]()[0]      # same state layout, chain structure
    require_stable_step(closed if closed is not None else model, q0, sim["dt"], sim["integrator"],
                        f"{cfg['name']}: simulation.dt", " or integrator = \"rkf45\" (adaptive)")
    args.out_dir = output_dir(args.out, out_name)
    return _Setup(cfg, args.out_dir, model, system, closed, q0, qd0, ctrl, traj_fn, sim_steps(cfg),
                  getattr(args, "started", None))


def _run(st: _Setup, batch: int):
    """Chunked, vmapped rollout with a progress bar: (t, Q, V, TAU (batch, steps + 1, .),
    accepted, rejected, wall seconds).  Raises SimulationError at the first non-finite state."""
    import jax
    import numpy as np

    import jaxdyn
    from .apps.common import why_nonfinite
    from .errors import SimulationError
    from .output import progress_bar

    cfg, model, sim = st.cfg, st.model, st.cfg["simulation"]
    dt, steps = sim["dt"], st.steps
    n_chunks = 20 if steps % 20 == 0 else 1
    per = steps // n_chunks
    stab = tuple(sim["stabilization"]) if "stabilization" in sim else None

    def run_chunk(q, qd, t0):
        return jaxdyn.rollout(st.system, q, qd, st.ctrl, dt, per,
                              stepper=sim["integrator"], method=sim["method"], rtol=sim["rtol"], atol=sim["atol"],
                              t0=t0, stabilization=stab)

    Q0, QD0 = np.tile(st.q0, (batch, 1)), np.tile(st.qd0, (batch, 1))
    if batch > 1:
        Q0[1:] += 1e-3 * np.asarray(jax.random.normal(jax.random.PRNGKey(0), (batch - 1, model.nq)))
        Q0 = np.asarray(jax.vmap(lambda q: jaxdyn.normalize(model, q))(Q0))
    step_fn = jax.jit(jax.vmap(run_chunk, in_axes=(0, 0, None)))
    t_wall = time.time()
    print(f"jaxdyn simulate {cfg['name']}: robot {model.name} (nq={model.nq}), T={sim['T']} s, dt={dt} s, "
          f"{sim['integrator']}, method={sim['method']}, batch={batch}", file=sys.stderr)
    parts, q, qd, acc, rej = [], Q0, QD0, 0, 0
    progress_bar(0, n_chunks, t_wall)
    for c in range(n_chunks):
        tr = jax.device_get(step_fn(q, qd, c * per * dt))     # host arrays: no device op per chunk
        if not bool(np.all(tr.ok)):
            k, t_bad, what = jaxdyn.first_nonfinite(model, tr)
            sys.stderr.write("\n")
            why = why_nonfinite(st.closed if st.closed is not None else model, tr.q, k, dt, sim["integrator"])
            raise SimulationError(f"{cfg['name']}: the state became non-finite at t = {t_bad:.6g} s "
                                  f"(sample {c * per + k}): {what}; {why}")
        q, qd = tr.q[:, -1], tr.qd[:, -1]
        parts.append(tr if c == 0 else jax.tree_util.tree_map(lambda x: x[:, 1:] if np.ndim(x) > 1 else x, tr))
        acc += int(np.sum(tr.accepted)); rej += int(np.sum(tr.rejected))
        progress_bar(c + 1, n_chunks, t_wall)
    wall = time.time() - t_wall
    cat = lambda f: np.concatenate([np.asarray(getattr(p, f)) for p in parts], 1)
    return np.arange(steps + 1) * dt, cat("q"), cat("qd"), cat("tau"), acc, rej, wall


def _outputs(st: _Setup, t, Qs, Vs, Ts, acc, rej, wall):
    """Constraint drift (closed models) and the files and summary of :func:`jaxdyn.output.write_outputs`."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxdyn
    from .output import write_outputs

    drift = None
    if st.closed is not None:
        res = jax.jit(jax.vmap(lambda q: jaxdyn.constraint_residual(st.closed, q)))(jnp.asarray(Qs[0]))
        drift = np.abs(np.asarray(res)).max(1)
    return write_outputs(st.out, st.model, st.cfg, t, Qs, Vs, Ts, st.traj_fn, acc, rej, wall, drift=drift,
                         started=st.started, closed=st.closed)


def simulate(args):
    """``jaxdyn simulate``: config -> model and initial state (:func:`_setup`) -> chunked rollout
    (:func:`_run`) -> outputs (:func:`_outputs`).  Returns the exit status (0); raises
    ConfigError / SimulationError (exit 2 / 3 in :func:`main`)."""
    import jax
    jax.config.update("jax_enable_x64", True)
    st = _setup(args)
    print(_outputs(st, *_run(st, max(1, int(args.batch)))))
    return 0


def main(argv=None):
    """Entry point of the ``jaxdyn`` command: parse ``argv`` and dispatch; returns the exit status."""
    p = argparse.ArgumentParser(prog="jaxdyn", description="Rigid-body dynamics in JAX")
    sub = p.add_subparsers(dest="cmd", required=True)
    from .config import builtin_configs
    s = sub.add_parser("simulate", help="simulate a config (default: PUMA free fall of Saha 2003)")
    s.add_argument("config", nargs="?", default=None,
                   help=f"TOML file or built-in name: {', '.join(builtin_configs('simulate'))}")
    s.add_argument("--out", default=None, help="output directory (default ./jaxdyn-out/<config name>/)")
    s.add_argument("--batch", type=_positive_int, default=1, help="simulate N perturbed copies at once (vmap)")
    s.add_argument("--robot", default=None, help="urdf:PATH, erd:NAME or mjcf:PATH to simulate any URDF or MJCF "
                   "file (zero torque from neutral, an MJCF file from its qpos0; output folder named after "
                   "config and robot)")
    for cmd, hlp in (("trajopt", "optimize a trajectory (default: PUMA point-to-point minimum effort)"),
                     ("identify", "identify link inertias (default: PUMA, simulated noisy data)")):
        a = sub.add_parser(cmd, help=hlp)
        a.add_argument("config", nargs="?", default=None,
                       help=f"TOML file or built-in name: {', '.join(builtin_configs(cmd))}")
        a.add_argument("--out", default=None, help="output directory (default ./jaxdyn-out/<config name>/)")
        if cmd == "identify":
            a.add_argument("--robot", default=None, help="urdf:PATH, erd:NAME or mjcf:PATH: identify that robot "
                           "with the config's excitation, noise and estimation (output folder named after config "
                           "and robot)")
    v = sub.add_parser("view", help="write the animation (one HTML file) of a run folder or a trajectory.csv, "
                       "or the joint tour of a robot model")
    v.add_argument("path", help="a run folder (with trajectory.csv and summary.txt), a trajectory CSV, or a robot "
                   "model: a URDF or MJCF file or a robot name (built-in, urdf:PATH, erd:NAME, mjcf:PATH)")
    v.add_argument("--robot", default=None, help="the robot of a run or CSV (built-in name, urdf:PATH, erd:NAME, "
                   "mjcf:PATH); default: the robot named in the run's summary.txt")
    v.add_argument("--out", default=None, help="the HTML file (default: animation.html beside the CSV; "
                   "jaxdyn-out/view/<name>.html for a model)")
    started = time.perf_counter()
    args = p.parse_args(argv)
    args.started = started          # the command's start, for the summaries' wall times
    gc.set_threshold(*GC_THRESHOLDS)
    use_compilation_cache()
    from .errors import JaxdynError, SimulationError
    try:
        with interrupts_reach_main(), warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return _dispatch(args)
    except KeyboardInterrupt:       # Ctrl-C: one line, the shell's 128 + SIGINT
        print(f"jaxdyn: {args.cmd} interrupted{_discarded(args)}", file=sys.stderr)
        return 130
    except SimulationError as e:    # the run failed numerically: exit 3
        print(f"jaxdyn: error: {e}{_discarded(args)}", file=sys.stderr)
        return 3
    except JaxdynError as e:        # bad input: exit 2, one line
        print(f"jaxdyn: error: {e}{_discarded(args)}", file=sys.stderr)
        return 2


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """``warnings.showwarning`` inside :func:`main`: a :class:`~jaxdyn.errors.JaxdynWarning`
    as one line, ``jaxdyn: warning: MESSAGE`` (not Python's "FILE:LINE: UserWarning" and a
    line of jaxdyn's source); other warnings in Python's format."""
    from .errors import JaxdynWarning
    out = file or sys.stderr
    if issubclass(category, JaxdynWarning):
        out.write(f"jaxdyn: warning: {message}\n")
    else:
        out.write(warnings.formatwarning(message, category, filename, lineno, line))


def _dispatch(args):
    """Run the subcommand ``args.cmd``; its exit status."""
    if args.cmd == "simulate":
        return simulate(args)
    if args.cmd == "trajopt":
        from .apps.trajopt_cli import run
    elif args.cmd == "identify":
        from .apps.identify_cli import run
    else:
        from .apps.view_cli import run
    return run(args)


@contextlib.contextmanager
def interrupts_reach_main():
    """While inside, a KeyboardInterrupt that Python would drop is raised again in the main
    thread.  Ctrl-C raises KeyboardInterrupt in whatever Python code runs when the signal is
    handled; if that is a garbage-collector callback or a ``__del__`` (JAX runs one of each
    while it compiles), Python reports it as "Exception ignored in ..." and goes on, so the
    command would finish as if never interrupted.  Here such a report is replaced by a
    second interrupt 10 ms later (``_thread.interrupt_main`` from a timer thread: raised in the
    main thread once that callback has returned, and again if it lands in another one); one
    still waiting when the block ends is raised there."""
    previous, lock, state = sys.unraisablehook, threading.Lock(), {"waiting": 0, "closed": False}

    def deliver():
        with lock:
            if state["closed"]:
                return
            state["waiting"] -= 1
        _thread.interrupt_main()

    def hook(unraisable):
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            return previous(unraisable)
        with lock:
            state["waiting"] += 1
        threading.Timer(0.01, deliver).start()
    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous
        with lock:
            state["closed"] = True
            waiting = state["waiting"] > 0
        if waiting:
            raise KeyboardInterrupt


def _discarded(args) -> str:
    """Remove a failed run's output folder (``args.out_dir``, see :func:`jaxdyn.apps.common.discard`);
    the words to add to its one-line message."""
    from .apps.common import discard
    out = getattr(args, "out_dir", None)
    return f" (removed its output folder {out})" if discard(out) else ""


def entry(argv=None):
    """The ``jaxdyn`` command: runs :func:`main` and ends the process with its exit status by
    ``os._exit`` once stdout and stderr are flushed (every output file is closed by then).
    Finalizing the interpreter would only tear down what the command built (JAX's backend,
    its traces, matplotlib); and after Ctrl-C (exit 130, output folder already removed) XLA's
    compiler threads may still be running, and finalizing the interpreter under them can
    crash (seen: SIGSEGV at exit after the "interrupted" line)."""
    code = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(entry())
