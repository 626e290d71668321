"""Simulation outputs: trajectory.csv, plots (joints, tracking, torques, end effector), summary."""
from __future__ import annotations

import os

import sys
import time

import numpy as np


def dof_labels(model):
    """(name, position unit, velocity unit, force unit) of each of the nv dofs: the joint's name
    (with the dof's index for multi-dof joints); "m", "m/s", "N" for the linear dofs (a
    prismatic joint's, a free joint's first three: v = [linear; angular], a planar joint's
    first two: v = (vx, vy, wz)), else "rad", "rad/s", "N m"."""
    from .model.joints import FREE, NV, PLANAR, PRISMATIC
    out = []
    dof_body = model.topology.dof_body
    n_linear = {PRISMATIC: 1, FREE: 3, PLANAR: 2}
    for j, b in enumerate(dof_body):
        jt, first = int(model.jtype[b]), int(np.flatnonzero(dof_body == b)[0])
        nm = model.joint_names[b] + (f"[{j - first}]" if NV[jt] > 1 else "")
        linear = j - first < n_linear.get(jt, 0)
        out.append((nm, "m", "m/s", "N") if linear else (nm, "rad", "rad/s", "N m"))
    return out


def position_columns(model, Q):
    """Joint positions as users read them: (series (N, k), labels k x (name, unit)) from Q
    (N, nq).  A 1-dof joint's coordinate as it is (a revolute_unbounded's angle from its
    (cos, sin)); a free joint as its position x, y, z (m) and roll, pitch, yaw (rad; URDF's
    R = Rz(yaw) Ry(pitch) Rx(roll), unwrapped in time) of its quaternion; a spherical joint as
    roll, pitch, yaw; a planar joint as x, y (m) and its angle (rad)."""
    from .model import joints as J
    Q = np.asarray(Q, float).reshape(-1, model.nq)
    cols, labels = [], []
    qa = np.concatenate([[0], np.cumsum([J.NQ[int(t)] for t in model.jtype])])
    for b, t in enumerate(int(x) for x in model.jtype):
        q, nm = Q[:, qa[b]:qa[b + 1]], model.joint_names[b]
        if t in (J.REVOLUTE, J.HELICAL):
            cols.append(q[:, 0]); labels.append((nm, "rad"))
        elif t == J.PRISMATIC:
            cols.append(q[:, 0]); labels.append((nm, "m"))
        elif t == J.REVOLUTE_UB:
            cols.append(np.unwrap(np.arctan2(q[:, 1], q[:, 0]))); labels.append((nm, "rad"))
        elif t == J.PLANAR:
            cols += [q[:, 0], q[:, 1], np.unwrap(np.arctan2(q[:, 3], q[:, 2]))]
            labels += [(f"{nm} x", "m"), (f"{nm} y", "m"), (f"{nm} angle", "rad")]
        elif t in (J.FREE, J.SPHERICAL):
            if t == J.FREE:
                cols += [q[:, 0], q[:, 1], q[:, 2]]
                labels += [(f"{nm} x", "m"), (f"{nm} y", "m"), (f"{nm} z", "m")]
            cols += list(_quaternion_rpy(q[:, -4:]).T)
            labels += [(f"{nm} {a}", "rad") for a in ("roll", "pitch", "yaw")]
    return (np.stack(cols, 1) if cols else np.zeros((Q.shape[0], 0))), labels


def _quaternion_rpy(quat):
    """(N, 3) roll, pitch, yaw of quaternions (N, 4) [x y z w] (normalized here), unwrapped."""
    x, y, z, w = (quat / np.linalg.norm(quat, axis=1, keepdims=True)).T
    r00, r10 = 1 - 2 * (y * y + z * z), 2 * (x * y + z * w)
    r20, r21, r22 = 2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)
    rpy = np.stack([np.arctan2(r21, r22), np.arctan2(-r20, np.hypot(r00, r10)), np.arctan2(r10, r00)], 1)
    return np.unwrap(rpy, axis=0) if len(rpy) else rpy


def write_trajectory_csv(path, t, Q, V, Tau):
    """trajectory.csv: columns t, q1..qn, qd1..qdn, tau1..taun; t (N,), Q (N, nq), V and Tau (N, nv)."""
    n, nv = Q.shape[1], V.shape[1]
    header = ",".join(["t"] + [f"q{i + 1}" for i in range(n)] + [f"qd{i + 1}" for i in range(nv)] +
                      [f"tau{i + 1}" for i in range(nv)])
    np.savetxt(path, np.column_stack([t, Q, V, Tau]), delimiter=",", header=header, comments="", fmt="%.17g")


PLOTS_SKIPPED = "plots skipped: matplotlib is not installed (pip install 'jaxdyn[plot]')"
"""The summary line the CLIs write instead of their figures when matplotlib is missing."""


def _figure_class():
    """:class:`matplotlib.figure.Figure`, or None when matplotlib is not installed."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return Figure


def figure(figsize):
    """A new :class:`matplotlib.figure.Figure` of ``figsize`` (width, height) inches, or None
    when matplotlib is not installed (plotting is the optional ``plot`` extra; the CLIs then
    write their CSV files and summary and say :data:`PLOTS_SKIPPED`).  The figure belongs to
    no pyplot window: ``fig.savefig`` draws a PNG with Agg, and the process's pyplot state and
    matplotlib backend are left as they are."""
    Figure = _figure_class()
    return None if Figure is None else Figure(figsize=figsize)


def can_plot():
    """Whether matplotlib is installed (:func:`figure` gives figures)."""
    return _figure_class() is not None


def inch_margins(fig, left=1.05, right=0.2, bottom=0.55, top=0.3, wspace=1.1, hspace=0.7, title=None):
    """Place a figure's subplot grid by margins and gaps in inches, and its ``title`` (if any)
    0.12 in below the top edge: a fixed layout (the figure sizes of the CLIs scale with their
    panel counts) that skips matplotlib's layout solvers, which measure every tick label by
    drawing.  Call it once the panels are plotted: ``left`` and ``wspace`` grow to fit the
    longest y tick label of a linear axis (its characters at 0.09 in each, plus the axis label)."""
    w, h = fig.get_size_inches()
    if title is not None:
        fig.suptitle(title, y=1 - 0.12 / h, va="top")
    (rows, cols) = fig.axes[0].get_subplotspec().get_gridspec().get_geometry() if fig.axes else (1, 1)
    ticks = [ax.yaxis.get_major_formatter().format_ticks(ax.get_yticks()) for ax in fig.axes
             if ax.get_visible() and ax.get_yscale() == "linear"]
    need = 0.09 * max((len(t) for tt in ticks for t in tt), default=0) + 0.45
    left, wspace = max(left, need), max(wspace, need + 0.1)
    fig.subplots_adjust(left=left / w, right=1 - right / w, bottom=bottom / h, top=1 - top / h,
                        wspace=wspace * cols / max(w - left - right - wspace * (cols - 1), 1e-3),
                        hspace=hspace * rows / max(h - top - bottom - hspace * (rows - 1), 1e-3))


def steady_axis(ax, *ys):
    """Give a panel whose curves ``ys`` are constant up to round-off (span below 1e-9 of their
    magnitude, at least 1e-9) a fixed window of +-1e-3 (relative, at least 1e-3) around their
    value, so that round-off noise is not blown up to the panel's height; plain tick labels
    (no offset)."""
    y = np.concatenate([np.ravel(np.asarray(v, float)) for v in ys])
    y = y[np.isfinite(y)]
    ax.ticklabel_format(axis="y", useOffset=False)
    if y.size and np.ptp(y) <= 1e-9 * max(1.0, float(np.max(np.abs(y)))):
        mid = float(np.mean(y))
        half = 1e-3 * max(1.0, abs(mid))
        ax.set_ylim(mid - half, mid + half)


def plot_columns(path, title, t, series, ylabel, label="simulated", other=None, other_label=None, other_t=None,
                 marks=None, marks_label="target"):
    """One panel per column of series (N, n) against t (N,) (three panels a row), with an
    optional dashed comparison ``other`` (M, n) against ``other_t`` (default t) and optional
    end-point marks (n,) (NaN: none) drawn at t[-1]; PNG at path.  Returns False (and writes
    nothing) without matplotlib."""
    ncol = series.shape[1]
    cols = 3 if ncol > 3 else max(ncol, 1)
    rows = max(int(np.ceil(ncol / cols)), 1)
    fig = figure((4.2 * cols, 2.8 * rows))
    if fig is None:
        return False
    axs = fig.subplots(rows, cols, squeeze=False).ravel()
    for j in range(ncol):
        axs[j].plot(t, series[:, j], label=label)
        if other is not None:
            axs[j].plot(t if other_t is None else other_t, other[:, j], "--", label=other_label)
        if marks is not None and np.isfinite(marks[j]):
            axs[j].plot([t[-1]], [marks[j]], "rx", ms=9, mew=2, label=marks_label)
        steady_axis(axs[j], series[:, j], *([] if other is None else [other[:, j]]),
                    *([] if marks is None else [marks[j:j + 1]]))
        axs[j].set_xlabel("time (s)")
        axs[j].set_ylabel(ylabel(j))
        axs[j].grid(alpha=0.3)
    if other is not None or marks is not None:
        axs[0].legend(fontsize=7)
    for ax in axs[ncol:]:
        ax.set_visible(False)
    inch_margins(fig, top=0.5, title=title)
    fig.savefig(path, dpi=90)
    return True


def plot_curve(path, title, y, xlabel, ylabel):
    """A loss / cost history y (K,) on a log axis (shifted to positive if it reaches <= 0).
    Returns False (and writes nothing) without matplotlib."""
    fig = figure((6, 3.5))
    if fig is None:
        return False
    y = np.asarray(y)
    ax = fig.subplots()
    ax.semilogy(np.arange(len(y)), np.maximum(y - y.min() + 1e-12, 1e-12) if y.min() <= 0 else y)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    inch_margins(fig, left=1.3, top=0.4)           # room for a two-line label beside log ticks
    fig.savefig(path, dpi=90)
    return True


def write_outputs(out, model, cfg, t, Q, V, Tau, traj_fn, accepted, rejected, wall, drift=None, started=None,
                  closed=None):
    """Q, V, Tau: (batch, steps + 1, n).  Writes files for copy 0; returns the summary text.
    ``drift`` (steps + 1,): max |constraint residual| per sample of a closed model (plotted;
    ``closed`` that ClosedModel, whose contact frames the animation shows);
    ``wall`` the rollout's seconds, ``started`` the command's ``time.perf_counter()`` start."""
    import jax

    import jaxdyn

    plots = can_plot()
    os.makedirs(out, exist_ok=True)
    q, v, tau = Q[0], V[0], Tau[0]
    write_trajectory_csv(os.path.join(out, "trajectory.csv"), t, q, v, tau)
    from .viewer import animate
    from .io.named import model_file
    animate(closed if closed is not None else model, q, os.path.join(out, "animation.html"), t=t,
            title=f"{cfg['name']} ({model.name})", visuals=model_file(cfg["robot"]["name"]))
    files = ["trajectory.csv", "animation.html"]
    forced = traj_fn is not None
    qdes = np.asarray(jax.jit(jax.vmap(lambda tt: traj_fn(tt)[0]))(t)) if forced else None

    def panels(title, series, ylabel, fname, desired=None):
        """One panel per column (Figs. 4-6): series (steps + 1, n), optional dashed desired."""
        if plot_columns(os.path.join(out, fname), title, t, series, ylabel, other=desired,
                        other_label="desired (eq. 18)"):
            files.append(fname)

    lab = dof_labels(model)
    qs, qlab = position_columns(model, q)
    panels(f"{cfg['name']}: joint positions ({model.name})", qs, lambda j: f"{qlab[j][0]} ({qlab[j][1]})",
           "joints.png", None if qdes is None else position_columns(model, qdes)[0])
    if forced:  # Fig. 5: the feed-forward torques
        panels(f"{cfg['name']}: joint torques / forces", tau, lambda j: f"{lab[j][0]} ({lab[j][3]})",
               "torques.png")

    if plots and model.frame_names:  # the DH "ee" frame, else the last body
        name = "ee" if "ee" in model.frame_names else model.body_names[-1]
        fid = model.frame_id(name)
        pos = jax.jit(jax.vmap(lambda qq: jaxdyn.frame_pose(model, qq, fid)[1]))
        ee = np.asarray(pos(q))
        fig = figure((12, 3.2))
        axs = fig.subplots(1, 3)
        ee_d = np.asarray(pos(qdes)) if forced else None
        for k, lab in enumerate("XYZ"):
            axs[k].plot(t, ee[:, k], label="simulated")
            if forced:
                axs[k].plot(t, ee_d[:, k], "--", label="desired")
            axs[k].set_xlabel("time (s)")
            axs[k].set_ylabel(f"{name} {lab.lower()} (m)")
            steady_axis(axs[k], ee[:, k], *([] if ee_d is None else [ee_d[:, k]]))
            axs[k].grid(alpha=0.3)
        axs[0].legend(fontsize=7)
        inch_margins(fig, top=0.45, title=f"{cfg['name']} ({model.name}): position of frame '{name}' in the world frame")
        fig.savefig(os.path.join(out, "ee.png"), dpi=90)
        files.append("ee.png")

    if plots and drift is not None:
        fig = figure((6, 3.2))
        ax = fig.subplots()
        ax.semilogy(t, np.maximum(drift, 1e-18))
        ax.set_xlabel("time (s)")
        ax.set_ylabel("max |constraint residual| (m, rad)")
        stab = cfg["simulation"].get("stabilization")
        ax.set_title(f"{cfg['name']}: constraint drift (Baumgarte {stab if stab else 'off'})")
        ax.grid(alpha=0.3)
        inch_margins(fig, top=0.4)
        fig.savefig(os.path.join(out, "drift.png"), dpi=90)
        files.append("drift.png")
    kin, pot = (np.asarray(x) for x in jax.jit(jax.vmap(lambda a, b: (jaxdyn.kinetic_energy(model, a, b),
                                                                       jaxdyn.potential_energy(model, a))))(q, v))
    E = kin + pot
    scale = max(1e-300, np.max(kin), np.max(np.abs(pot - pot[0])))    # the energy exchanged in the run
    d = np.asarray(model.damping, float)
    passive = not np.any(tau) and not np.any(d)
    if passive:
        e_line = (f"energy drift  {float(np.max(np.abs(E - E[0])) / scale):.3e} (max |E - E0| / max(kinetic energy, "
                  "|potential energy - its start|))")
    else:   # the work of the torques and joint damping, trapezoid rule on the samples
        P = np.sum((tau - d * v) * v, 1)
        W = np.concatenate([[0.0], np.cumsum(0.5 * (P[1:] + P[:-1]) * np.diff(t))])
        bal = float(np.max(np.abs(E - E[0] - W)) / max(scale, np.max(np.abs(W))))
        e_line = (f"energy balance {bal:.3e} (max |E - E0 - W| / max(kinetic, |potential - start|, |W|) energy, W the "
                  "work of the torques and joint damping by the trapezoid rule on the samples: O(dt^2) of the "
                  "sampling, not only the integrator)")
    from .io.named import absolute_name
    lines = [f"config        {cfg['name']}", f"robot         {model.name} (nq={model.nq}, nv={model.nv})",
             f"robot source  {absolute_name(cfg['robot']['name'])}",
             f"integrator    {cfg['simulation']['integrator']}  dt={cfg['simulation']['dt']}  T={t[-1]:.3f} s",
             f"samples       {len(t)}", f"internal steps accepted {accepted}, rejected {rejected}",
             e_line,
             wall_time_line(wall, started, "rollout (its first chunk compiles)"), f"batch         {Q.shape[0]}"]
    if drift is not None:
        lines.append(f"constraints   max drift {float(np.max(drift)):.3e} (max |residual| over the run)")
    if forced:
        dev = np.abs(q - qdes).max(1)
        k = np.argmax(dev > 1e-2) if np.any(dev > 1e-2) else None
        lines.append("tracking      " + (f"deviates by > 0.01 from eq. (18) at t = {t[k]:.2f} s" if k is not None
                                         else "stays within 0.01 of eq. (18)"))
    if Q.shape[0] > 1:
        spread = np.abs(Q[:, -1] - Q[0, -1]).max()
        lines.append(f"batch spread  max |q_k(T) - q_0(T)| = {spread:.3e}")
    if not plots:
        lines.append(PLOTS_SKIPPED)
    lines.append(f"output        {os.path.abspath(out)}: {', '.join(files)}")
    text = "\n".join(lines)
    with open(os.path.join(out, "summary.txt"), "w") as fh:
        fh.write(text + "\n")
    return text


def wall_time_line(part, started, what):
    """"wall time     <command> s (<what> <part> s)": the command's seconds since ``started``
    (its ``time.perf_counter()`` start: imports, model, compiling, plots; None: unknown) and
    those of its main part."""
    total = "" if started is None else f"command {time.perf_counter() - started:.2f} s so far; "
    return f"wall time     {total}{what} {part:.2f} s"


def progress_bar(i, n, t0, width=30):
    """Progress on stderr, step i of n, seconds since t0: a one-line bar redrawn in place on a
    terminal; elsewhere (a log file, a pipe) one plain line per call."""
    frac = i / n
    if not sys.stderr.isatty():
        sys.stderr.write(f"progress {i}/{n} ({100 * frac:.0f}%), {time.time() - t0:.1f} s\n")
        sys.stderr.flush()
        return
    bar = "#" * int(width * frac) + "-" * (width - int(width * frac))
    sys.stderr.write(f"\r[{bar}] {100 * frac:5.1f}%  {time.time() - t0:6.1f}s")
    sys.stderr.flush()
    if i == n:
        sys.stderr.write("\n")
