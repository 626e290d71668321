"""``jaxdyn view PATH [--robot NAME] [--out FILE]``: one HTML file (:mod:`jaxdyn.viewer`) of a
run's ``trajectory.csv`` (columns t, q1..qn, ...) or of a robot model alone.

A run: PATH is a run folder or its CSV.  The robot is ``--robot`` (a built-in name,
``urdf:PATH``, ``erd:NAME``, ``mjcf:PATH``), else the ``robot source`` line of the run's
``summary.txt`` (what ``simulate`` and ``trajopt`` ran: the config's ``robot.name`` or
``simulate --robot``, file paths made absolute), else, for a summary without that line, the
``robot.name`` of the config named on its first line (a built-in config, or a TOML path from
the working folder).  The HTML goes to ``--out``, else ``animation.html`` beside the CSV.

A model: PATH is a URDF or MJCF file (told apart by its root element) or a robot name as
``--robot`` takes it.  The page is its joint tour (:func:`joint_tour`): from the start
configuration (MuJoCo's ``qpos0`` for an MJCF file, else neutral) every dof in turn moves to
its lower and upper limit and back, so that each joint's axis, sign and range can be seen.  A
closed chain moves instead along each direction its constraints allow (:func:`loop_tour`).  The HTML goes to ``--out``, else
``jaxdyn-out/view/<name>.html``.  An existing file is replaced, and the command says so.
"""
from __future__ import annotations

import os
import sys


def _robot_from_summary(run_dir):
    from ..config import read_toml
    from ..errors import ArgumentError, ConfigError
    path = os.path.join(run_dir, "summary.txt")
    if not os.path.exists(path):
        raise ArgumentError(f"{run_dir}: no summary.txt naming the config; pass --robot")
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines()
    for line in lines:
        if line.startswith("robot source"):
            return line[len("robot source"):].lstrip(" :").strip()
    first = lines[0] if lines else ""
    if not first.startswith("config"):
        raise ArgumentError(f"{path}: the first line does not name a config; pass --robot")
    name = first[len("config"):].lstrip(" :").strip()
    try:
        raw, _ = read_toml(name, None)
    except ConfigError as e:
        raise ArgumentError(f"{path}: config {name!r} cannot be read ({e}); pass --robot") from None
    robot = raw.get("robot", {}).get("name") if isinstance(raw.get("robot"), dict) else None
    if not isinstance(robot, str):
        raise ArgumentError(f"{path}: config {name!r} has no robot.name; pass --robot")
    return robot


def read_csv(path, nq):
    """(t (N,), Q (N, nq)) from a trajectory.csv (header t, q1..q<nq>, ...)."""
    import numpy as np

    from ..errors import ArgumentError
    try:
        with open(path, encoding="utf-8") as fh:
            header = fh.readline().strip().split(",")
        X = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ArgumentError(f"{path}: cannot be read as a trajectory CSV: {e}") from None
    want = ["t"] + [f"q{i + 1}" for i in range(nq)]
    if header[:nq + 1] != want:
        raise ArgumentError(f"{path}: columns {header[:nq + 1]} are not {want[:4]}{'...' if nq > 3 else ''} "
                            f"(the robot has nq = {nq}: is it the run's robot?)")
    if X.shape[1] != len(header):
        raise ArgumentError(f"{path}: rows have {X.shape[1]} values but the header names {len(header)} columns")
    return X[:, 0], X[:, 1:nq + 1]


def _extent(model, q):
    """The largest extent (m) of the body origins of ``model`` at configuration q along a
    world axis (0 without bodies): the robot's size, for the tours' amplitudes and tolerances."""
    import numpy as np

    from ..kinematics import frame_poses
    p = np.asarray(frame_poses(model, q)[1], float)[:model.nb]
    return float(np.max(p.max(0) - p.min(0))) if model.nb else 0.0


TOUR_AMPLITUDE = (0.5, 0.25)
"""How far :func:`joint_tour` moves a dof without finite limits each way: 0.5 rad, or a
quarter of the robot's size for a linear dof (m)."""
TOUR_SAMPLES = 12
"""Samples per leg of a tour (:func:`joint_tour`, :func:`loop_tour`): three legs per direction."""


def _legs(low, up, samples):
    """The three legs of a tour along one direction, 0 -> low -> up -> 0 ((3 * samples,)), each on
    a cosine profile ending at its end point."""
    import numpy as np
    s = 0.5 - 0.5 * np.cos(np.pi * np.arange(1, samples + 1) / samples)          # (samples,) in (0, 1]
    return np.concatenate([a + (c - a) * s for a, c in ((0.0, low), (low, up), (up, 0.0))])


def joint_tour(model, q0, seconds=1.0, samples=TOUR_SAMPLES):
    """(t (N,), Q (N, nq)): every dof of ``model`` in turn, in v order, moved from ``q0`` to
    its lower limit, to its upper limit and back, by ``jaxdyn.integrate`` along the dof with
    a cosine profile (``seconds`` and ``samples`` per leg, three legs per dof).  A dof of a
    1-dof joint with finite limits reaches them (q0's coordinate clipped into them first);
    any other dof moves by +-:data:`TOUR_AMPLITUDE` (angular, linear)."""
    import jax
    import numpy as np

    from ..model.configuration import integrate
    from ..model.joints import NQ
    from ..output import dof_labels
    q0 = np.asarray(q0, float).copy()
    lo, hi = np.asarray(model.q_lower, float), np.asarray(model.q_upper, float)
    qaddr, dof_body = model.topology.qaddr, model.topology.dof_body
    one = [NQ[int(model.jtype[b])] == 1 and np.isfinite(lo[qaddr[b]]) and np.isfinite(hi[qaddr[b]])
           for b in dof_body]
    for j, b in enumerate(dof_body):
        if one[j]:
            q0[qaddr[b]] = np.clip(q0[qaddr[b]], lo[qaddr[b]], hi[qaddr[b]])
    size = max(_extent(model, q0), 0.2)
    n = 3 * samples                                                             # samples per dof
    D = np.zeros((1 + n * model.nv, model.nv))                                  # row 0: q0 itself
    for j, (b, lab) in enumerate(zip(dof_body, dof_labels(model))):
        if one[j]:
            low, up = lo[qaddr[b]] - q0[qaddr[b]], hi[qaddr[b]] - q0[qaddr[b]]
        else:
            up = TOUR_AMPLITUDE[0] if lab[1] == "rad" else TOUR_AMPLITUDE[1] * size
            low = -up
        D[1 + n * j:1 + n * (j + 1), j] = _legs(low, up, samples)
    Q = np.asarray(jax.jit(jax.vmap(integrate, (None, None, 0)))(model, q0, D))
    return seconds / samples * np.arange(len(D)), Q


def loop_tour(cm, q0, seconds=1.0, samples=TOUR_SAMPLES, tries=6):
    """(t (N,), Q (N, nq)) of a closed chain ``cm`` (:class:`jaxdyn.ClosedModel`): along each
    direction of motion that its constraints allow at ``q0`` (projected onto the constraints
    first; an orthonormal basis of the null space of the constraint Jacobian K(q0), scaled to
    a largest component of 1) the configuration moves by -a, +a and back (three legs as in
    :func:`joint_tour`), every
    sample projected onto the constraints (:func:`jaxdyn.project_constraints`).  a starts at
    :data:`TOUR_AMPLITUDE` [0] and is halved (at most ``tries`` times) while a sample of that
    direction does not close (residual above 1e-9 of the mechanism's size); a direction that
    never closes is left out.  No allowed motion: q0 alone."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from ..constraints import constraint_jacobian, constraint_residual, project_constraints
    from ..constraints.dynamics import null_space
    from ..model.configuration import integrate
    tree = cm.model
    zero = jnp.zeros(tree.nv)
    q0 = np.asarray(project_constraints(cm, jnp.asarray(q0, float), zero)[0])      # e.g. an MJCF's qpos0
    N = null_space(constraint_jacobian(cm, q0), tree.nv)
    N = N / np.abs(N).max(0)                                                    # (nv, k), largest component 1
    tol = 1e-9 * max(_extent(tree, q0), 1.0)
    legs = _legs(-1.0, 1.0, samples)

    @jax.jit
    def along(n, a):
        """The samples of one direction n at amplitude a and their largest residual."""
        Q = jax.vmap(lambda x: project_constraints(cm, integrate(tree, q0, x * a * n), zero)[0])(legs)
        return Q, jnp.max(jnp.abs(jax.vmap(lambda q: constraint_residual(cm, q))(Q)))
    Qs = [q0[None]]
    for n in N.T:
        for k in range(tries + 1):
            Q, r = along(n, TOUR_AMPLITUDE[0] / 2 ** k)
            if float(r) <= tol:
                Qs.append(np.asarray(Q))
                break
    Q = np.concatenate(Qs)
    return seconds / samples * np.arange(len(Q)), Q


def _model_spec(path):
    """The robot that ``jaxdyn view``'s PATH names ("urdf:..." or "mjcf:..." for a file with a
    URDF's or an MJCF's root element, a robot name as it is), or None for a run folder or CSV."""
    from ..io import mechanisms
    from ..io.meshes import xml_root_tag
    from ..io.named import BUILTIN
    if os.path.isdir(path):
        return None
    if os.path.isfile(path):
        kind = {"robot": "urdf", "mujoco": "mjcf"}.get(xml_root_tag(path))
        return None if kind is None else f"{kind}:{os.path.abspath(path)}"
    if path.split(":", 1)[0] in ("urdf", "mjcf", "erd") or path in BUILTIN or path in mechanisms.MECHANISMS:
        return path
    return None


def _write(model, Q, t, out, title, robot, what):
    """The page of ``model`` playing (t, Q) at ``out``, and the command's line about it."""
    from ..io.named import model_file
    from ..viewer import animate
    existed = os.path.exists(out)
    animate(model, Q, out, t=t, title=title, visuals=model_file(robot))
    print(f"{'replaced' if existed else 'wrote'} {out}: {robot}, {what}", file=sys.stderr)
    return 0


def run(args) -> int:
    """``jaxdyn view``: write the page of ``args.path`` (see the module docstring), in float64
    as the other commands."""
    import jax

    from ..errors import ArgumentError
    from ..io.named import robot_by_name, start_configuration
    from .common import robot_key
    jax.config.update("jax_enable_x64", True)
    src = args.path
    spec = _model_spec(src)
    if spec is not None:
        if args.robot:
            raise ArgumentError(f"{src} is a robot model; --robot names the robot of a run folder or CSV")
        built = robot_by_name(spec)
        model = built[0] if isinstance(built, tuple) else built
        tree = getattr(model, "model", model)
        name = os.path.splitext(os.path.basename(spec.split(":", 1)[-1]))[0]
        out = args.out or os.path.join("jaxdyn-out", "view", f"{name}.html")
        if isinstance(built, tuple):                  # a closed chain: the motions its constraints allow
            t, Q = loop_tour(model, built[1])
            return _write(model, Q, t, out, f"{tree.name}: the motions its loops allow", spec,
                          f"closed chain, {(len(t) - 1) // (3 * TOUR_SAMPLES)} directions of motion, {t[-1]:g} s")
        if tree.nv == 0:
            raise ArgumentError(f"{src}: robot {tree.name!r} has no degrees of freedom (every joint is fixed): "
                                "no joint to tour")
        t, Q = joint_tour(tree, start_configuration(spec, tree))
        return _write(model, Q, t, out, f"{tree.name}: joint tour", spec,
                      f"joint tour of its {tree.nv} dofs, {t[-1]:g} s")
    if os.path.isdir(src):
        run_dir, csv = src, os.path.join(src, "trajectory.csv")
    else:
        run_dir, csv = os.path.dirname(os.path.abspath(src)), src
    if not os.path.exists(csv):
        raise ArgumentError(f"{csv}: no such file (give a run folder with trajectory.csv, a CSV, or a URDF / MJCF "
                            "file or robot name to see the robot)")
    robot = args.robot or _robot_from_summary(run_dir)
    built = robot_by_name(robot, robot_key(args))
    model = built[0] if isinstance(built, tuple) else built          # a mechanism: (ClosedModel, q0)
    tree = getattr(model, "model", model)
    t, Q = read_csv(csv, tree.nq)
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(csv)), "animation.html")
    return _write(model, Q, t, out, f"{os.path.basename(os.path.abspath(run_dir))} ({tree.name})", robot,
                  f"{len(t)} samples, t = {t[0]:g}..{t[-1]:g} s")
