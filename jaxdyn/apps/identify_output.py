"""The files of a ``jaxdyn identify`` run (:mod:`jaxdyn.apps.identify_cli`): parameter tables,
the identified model as a URDF, the animation of the identification data, the summary and
the plots."""
from __future__ import annotations

import os
import warnings


def write_outputs(out, name, model, lay, base, pi_true, pi_start, pi_c, pib_true, pib_ls, pib_c, tv, res_c, res_ls, hist, lines,
           Q_data, dt, visuals=None):
    """The files of a run; parameters in the order of ``lay`` (:func:`joint_terms.layout`),
    base parameters of ``base``;
    ``Q_data`` (N, nq) the identification data's configurations at spacing ``dt`` (animated
    with the identified model, drawn with the meshes of the URDF ``visuals``)."""
    import numpy as np

    from ..output import PLOTS_SKIPPED, can_plot, dof_labels, plot_columns, plot_curve
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "parameters.csv"), "w") as fh:
        fh.write("body_or_joint,parameter,true,start,identified\n")
        for i, (owner, pn) in enumerate(lay.names):
            fh.write(f"{owner},{pn},{pi_true[i]:.10g},{pi_start[i]:.10g},{pi_c[i]:.10g}\n")
    np.savetxt(os.path.join(out, "base_parameters.csv"),
               np.column_stack([np.arange(pib_true.size), pib_true, pib_ls, pib_c]), delimiter=",",
               header="index,true,least_squares,consistent", comments="", fmt="%.10g")
    from ..errors import ModelError
    from ..io.urdf_out import save_urdf
    from .sysid import with_parameters
    from ..viewer import animate
    urdf = ["identified.urdf"]
    identified = with_parameters(model, np.asarray(pi_c), lay.terms)
    animate(identified, Q_data, os.path.join(out, "animation.html"), t=np.arange(len(Q_data)) * dt,
            title=f"{name}: identification data, identified model", visuals=visuals)
    try:        # the model with the consistent estimate's masses, COMs and inertias
        with warnings.catch_warnings(record=True) as caught:       # e.g. a gravity URDF cannot hold
            warnings.simplefilter("always")
            save_urdf(identified, os.path.join(out, "identified.urdf"))
        notes = [f"identified.urdf: {w.message}" for w in caught]
    except ModelError as e:
        urdf, notes = [], [f"identified.urdf not written: {e}"]
    lines = lines[:-1] + notes + lines[-1:]          # before the wall-time line
    plotted = can_plot()
    plots = ["params.png", "residuals.png", "loss.png"] if plotted else []
    files = ["parameters.csv", "base_parameters.csv"] + urdf + ["animation.html"] + plots + ["summary.txt"]
    with open(os.path.join(out, "summary.txt"), "w") as fh:
        fh.write("\n".join(lines + ([] if plotted else [PLOTS_SKIPPED]) + ["files: " + ", ".join(files)])
                 + "\n")
    if not plotted:
        return
    plot_base_parameters(os.path.join(out, "params.png"), f"{name} ({model.name})", lay, base, pib_true,
                          pib_ls, pib_c)
    lab = dof_labels(model)
    plot_columns(os.path.join(out, "residuals.png"), f"{name} ({model.name}): held-out torque prediction error", tv,
                 res_ls, lambda j: f"{lab[j][0]} error ({lab[j][3]})", label="least squares", other=res_c,
                 other_label="consistent")
    plot_curve(os.path.join(out, "loss.png"), f"{name}: consistent refinement", hist, "L-BFGS iteration",
               "weighted torque loss")


UNITS = (("m", "mass (kg)"), ("mc", "first moment (kg m)"), ("I", "inertia (kg m^2)"),
         ("armature", "armature (kg m^2 or kg)"), ("viscous", "viscous (N m s/rad or N s/m)"),
         ("coulomb", "Coulomb (N m or N)"))
"""Kinds of parameters by the prefix of their name, and the axis label of each kind."""


def plot_base_parameters(path, title, lay, base, pib_true, pib_ls, pib_c):
    """params.png: true, least-squares and consistent base parameters, one panel per kind of
    parameter (the kind of the parameter each base parameter is kept at: its unit), x the index
    in base_parameters.csv."""
    import numpy as np

    from ..output import figure
    kind = [next(i for i, (pre, _) in reversed(list(enumerate(UNITS))) if lay.names[j][1].startswith(pre))
            for j in base.independent]
    kinds = sorted(set(kind))
    fig = figure((max(6.0, 0.22 * len(kind)), 1.9 * len(kinds) + 0.8))
    axes = fig.subplots(len(kinds), 1, squeeze=False)
    for ax, k in zip(axes[:, 0], kinds):
        x = np.flatnonzero(np.asarray(kind) == k)
        for dx, v, lab in ((-0.27, pib_true, "true"), (0.0, pib_ls, "least squares"), (0.27, pib_c, "consistent")):
            ax.bar(x + dx, v[x], 0.27, label=lab)
        ax.set_xlim(-1, len(kind))
        ax.set_ylabel(UNITS[k][1], fontsize=8)
    axes[0, 0].legend(fontsize=7, ncol=3)
    axes[0, 0].set_title(f"{title}: identified vs true base parameters")
    axes[-1, 0].set_xlabel("base parameter (index in base_parameters.csv)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
