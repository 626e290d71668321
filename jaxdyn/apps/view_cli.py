"""``jaxdyn view RUN_DIR_OR_CSV [--robot NAME] [--out FILE]``: the animation of a run's
``trajectory.csv`` (columns t, q1..qn, ...), written as one HTML file (:mod:`jaxdyn.viewer`).

The robot is ``--robot`` (a built-in name, ``urdf:PATH``, ``erd:NAME``, ``mjcf:PATH``), else the
``robot source`` line of the run's ``summary.txt`` (what ``simulate`` and ``trajopt`` ran: the
config's ``robot.name`` or ``simulate --robot``, file paths made absolute), else, for a
summary without that line, the ``robot.name`` of the config named on its first line (a
built-in config, or a TOML path from the working folder).  The HTML goes to ``--out``, else
``animation.html`` beside the CSV (an existing one is replaced, and the command says so).
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


def run(args) -> int:
    """``jaxdyn view``: write the animation of ``args.path`` (see the module docstring)."""
    from ..errors import ArgumentError
    from ..io.named import robot_by_name
    from ..io.named import model_file
    from ..viewer import animate
    src = args.path
    if os.path.isdir(src):
        run_dir, csv = src, os.path.join(src, "trajectory.csv")
    else:
        run_dir, csv = os.path.dirname(os.path.abspath(src)), src
    if not os.path.exists(csv):
        raise ArgumentError(f"{csv}: no such file (give a run folder with trajectory.csv, or a CSV)")
    robot = args.robot or _robot_from_summary(run_dir)
    built = robot_by_name(robot)
    model = built[0] if isinstance(built, tuple) else built          # a mechanism: (ClosedModel, q0)
    tree = getattr(model, "model", model)
    t, Q = read_csv(csv, tree.nq)
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(csv)), "animation.html")
    existed = os.path.exists(out)
    animate(model, Q, out, t=t, title=f"{os.path.basename(os.path.abspath(run_dir))} ({tree.name})",
            visuals=model_file(robot))
    print(f"{'replaced' if existed else 'wrote'} {out}: {robot}, {len(t)} samples, t = {t[0]:g}..{t[-1]:g} s",
          file=sys.stderr)
    return 0
