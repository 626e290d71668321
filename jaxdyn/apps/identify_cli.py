"""``jaxdyn identify [CONFIG]``: identify link inertias from (simulated or recorded) data.

Pipeline: excitation (finite Fourier series, optionally optimized for the condition number
of the base regressor) -> data (the true robot's inverse-dynamics torques along it, plus
torque noise; measured q, qd, qdd with noise standing for encoder and differentiating-filter
noise; or a CSV file) -> base parameters (QR with pivoting) -> (a) weighted linear least
squares with an optional prior toward the start -> (b) physically consistent refinement
through the log-Cholesky parametrization from a perturbed start -> report on a held-out
excitation.

Config (TOML; built-in ``identify_puma`` is the default)::

    [robot]       name
    [excitation]  harmonics (5), period (10 s), T (20 s), dt (0.02 s), amplitude (1 rad),
                  seed (0), optimize_steps (0)
    [noise]       torque_std (0.5), q_std (1e-4), qd_std (1e-3), qdd_std (1e-2), seed (1)
    [estimation]  perturb (0.5: masses, COMs, inertias, joint terms off by up to +-50 %),
                  steps (2000), prior_weight (0), seed (2), friction (false: viscous and Coulomb
                  friction columns), armature (false: armature columns)
    [validation]  T (10 s), seed (3)
    [data]        file: CSV with header q1..qn, qd1..qdn, qdd1..qddn, tau1..taun (replaces the
                  simulated training data)

Simulated torques are the motor torques of the true robot: inverse dynamics (with armature)
plus its joint damping and Coulomb friction (:mod:`jaxdyn.apps.joint_terms`).  Joint terms
that are not identified are known: the true robot's are subtracted from the torques.

Outputs in ``./jaxdyn-out/<config>/``: parameters.csv (per body or joint and parameter: true,
start, identified), base_parameters.csv, params.png, residuals.png, loss.png, summary.txt.
"""
from __future__ import annotations

import os
import sys
import time

import jax

from ..config import check_tables, read_toml
from ..errors import ConfigError
from . import common
from .identify_output import write_outputs

SCHEMA = {
    "robot": {"name": str},
    "excitation": {"harmonics": int, "period": float, "T": float, "dt": float, "amplitude": float, "seed": int,
                   "optimize_steps": int},
    "noise": {"torque_std": float, "q_std": float, "qd_std": float, "qdd_std": float, "seed": int},
    "estimation": {"perturb": float, "steps": int, "prior_weight": float, "seed": int, "friction": bool,
                   "armature": bool},
    "validation": {"T": float, "seed": int},
    "data": {"file": str},
}
DEFAULTS = {
    "excitation": {"harmonics": 5, "period": 10.0, "T": 20.0, "dt": 0.02, "amplitude": 1.0, "seed": 0,
                   "optimize_steps": 0},
    "noise": {"torque_std": 0.5, "q_std": 1e-4, "qd_std": 1e-3, "qdd_std": 1e-2, "seed": 1},
    "estimation": {"perturb": 0.5, "steps": 2000, "prior_weight": 0.0, "seed": 2, "friction": False,
                   "armature": False},
    "validation": {"T": 10.0, "seed": 3},
}
DEFAULT_CONFIG = "identify_puma"
MAX_SAMPLES = 200_000
"""Most samples of an excitation or validation run (the regressor holds samples x nv x 10 nb numbers)."""
MAX_VALUE = 1e6
"""Largest magnitude accepted in a data file (q, qd, qdd, tau in SI units)."""


def load(path=None) -> dict:
    """Read and validate an identification config (path or built-in name; default
    ``identify_puma``), filling defaults; named errors for bad keys and values."""
    raw, name = read_toml(path, DEFAULT_CONFIG, kind="identify")
    cfg = check_tables(raw, name, SCHEMA, DEFAULTS)
    if "name" not in cfg.get("robot", {}):
        raise ConfigError(f"{name}: missing robot.name")
    e, n, s = cfg["excitation"], cfg["noise"], cfg["estimation"]
    for k in ("period", "T", "dt", "amplitude"):
        if e[k] <= 0:
            raise ConfigError(f"{name}: excitation.{k} must be > 0, got {e[k]}")
    if e["harmonics"] < 1 or e["optimize_steps"] < 0 or s["steps"] < 1:
        raise ConfigError(f"{name}: need excitation.harmonics >= 1, excitation.optimize_steps >= 0, "
                          "estimation.steps >= 1")
    for k in ("torque_std", "q_std", "qd_std", "qdd_std"):
        if n[k] < 0:
            raise ConfigError(f"{name}: noise.{k} must be >= 0, got {n[k]}")
    if not 0 <= s["perturb"] < 1:
        raise ConfigError(f"{name}: estimation.perturb must be in [0, 1), got {s['perturb']}")
    for sec, k in (("excitation", "T"), ("validation", "T")):
        samples = cfg[sec][k] / e["dt"]
        if not 1 <= samples <= MAX_SAMPLES:
            raise ConfigError(f"{name}: {sec}.T / excitation.dt = {samples:.3g} samples; need 1 to {MAX_SAMPLES}")
    for sec, k, top in (("excitation", "harmonics", 1000), ("excitation", "optimize_steps", 100_000),
                        ("estimation", "steps", 100_000)):
        if cfg[sec][k] > top:
            raise ConfigError(f"{name}: {sec}.{k} = {cfg[sec][k]} is more than {top}")
    for sec in ("excitation", "noise", "estimation", "validation"):
        if cfg[sec]["seed"] < 0:
            raise ConfigError(f"{name}: {sec}.seed must be >= 0, got {cfg[sec]['seed']}")
    if s["prior_weight"] < 0:
        raise ConfigError(f"{name}: estimation.prior_weight must be >= 0, got {s['prior_weight']}")
    f = cfg.get("data", {}).get("file")
    if f is not None and not os.path.isabs(f) and path is not None and os.path.isfile(path):
        cfg["data"]["file"] = os.path.join(os.path.dirname(os.path.abspath(path)), f)   # the config's folder
    return cfg


def read_data(path, model):
    """(Q, QD, QDD, TAU) (N, nv) from a UTF-8 CSV (a byte-order mark is allowed) with header
    q1..qn, qd1..qdn, qdd1..qddn, tau1..taun (any order, other columns ignored).  Named errors:
    missing file or column, text that is not UTF-8, a row whose field count differs from the
    header's, non-numeric, non-finite or implausible (|x| > MAX_VALUE) values (row numbers
    counted from 1 after the header), no data rows."""
    import numpy as np
    if not os.path.isfile(path):
        raise ConfigError(f"data.file {path!r} not found")
    try:
        with open(path, encoding="utf-8-sig") as fh:
            header = [h.strip() for h in fh.readline().strip().split(",")]
            rows = fh.read().splitlines()
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason}); save the CSV as UTF-8") from None
    n = model.nv
    want = [f"{p}{i + 1}" for p in ("q", "qd", "qdd", "tau") for i in range(n)]
    missing = [w for w in want if w not in header]
    if missing:
        raise ConfigError(f"{path}: missing columns {missing} (robot {model.name!r} has nv = {n})")
    cols = [header.index(w) for w in want]
    out = []
    for r, line in enumerate(rows, start=1):
        if not line.strip():
            continue
        parts = line.split(",")
        if len(parts) != len(header):
            raise ConfigError(f"{path}: row {r}: {len(parts)} fields, the header has {len(header)}: {line[:80]!r}")
        try:
            vals = [float(parts[c]) for c in cols]
        except ValueError:
            raise ConfigError(f"{path}: row {r}: not {len(header)} numbers: {line[:80]!r}") from None
        bad = [want[i] for i, v in enumerate(vals) if not np.isfinite(v) or abs(v) > MAX_VALUE]
        if bad:
            raise ConfigError(f"{path}: row {r}: non-finite or implausible (|x| > {MAX_VALUE:g}) value in {bad}")
        out.append(vals)
    if not out:
        raise ConfigError(f"{path}: no data rows")
    A = np.asarray(out).reshape(len(out), 4, n)
    return A[:, 0], A[:, 1], A[:, 2], A[:, 3]


@jax.jit
def perturb(model, key, frac):
    """A physically valid model with masses, rotational inertias, armatures, damping and
    Coulomb friction scaled by factors in [1 - frac, 1 + frac] and COMs moved by up to frac of
    their distance (+ frac * 5 cm)."""
    import jax
    import jax.numpy as jnp
    k1, k2, k3, k4 = jax.random.split(key, 4)
    nb = model.nb
    fm = 1 + frac * jax.random.uniform(k1, (nb,), minval=-1, maxval=1)
    fI = 1 + frac * jax.random.uniform(k2, (nb,), minval=-1, maxval=1)
    dc = frac * (jnp.linalg.norm(model.com, axis=1, keepdims=True) + 0.05) * \
        jax.random.uniform(k3, (nb, 3), minval=-1, maxval=1) / jnp.sqrt(3.0)
    fj = 1 + frac * jax.random.uniform(k4, (3, model.nv), minval=-1, maxval=1)
    return model.replace(mass=model.mass * fm, com=model.com + dc, inertia=model.inertia * fI[:, None, None],
                         armature=model.armature * fj[0], damping=model.damping * fj[1], friction=model.friction * fj[2])


def run(args) -> int:
    """``jaxdyn identify``: load the config, make or read the data, identify, write the outputs.
    Returns the exit status (0); bad input raises ConfigError (exit 2 in :func:`jaxdyn.cli.main`)."""
    cfg, out, true = common.start(args, load)
    import jax
    import numpy as np

    import jaxdyn
    from ..io.named import model_file
    from . import joint_terms as jt
    from . import sysid as si
    from .trajopt_cli import NO_POSITION_LIMITS, has_position_limits, limit_report

    name = cfg["name"]
    if isinstance(true, tuple):
        raise ConfigError(f"{name}: identify needs an open-chain robot; {cfg['robot']['name']!r} is closed")
    if true.nq != true.nv:
        raise ConfigError(f"{name}: the Fourier excitation needs vector-space joints; {true.name!r} has "
                          f"nq = {true.nq}, nv = {true.nv} (give recorded data in [data] file)")
    e, nz, es = cfg["excitation"], cfg["noise"], cfg["estimation"]
    terms = jt.check_terms((("armature",) if es["armature"] else ()) + (("viscous", "coulomb") if es["friction"] else ()))
    known = tuple(x for x in jt.JOINT_TERMS if x not in terms)
    lay = jt.layout(true, terms)
    t_wall = time.time()
    print(f"jaxdyn identify {name}: robot {true.name} (nb={true.nb}, {lay.p} parameters)", file=sys.stderr)
    t = np.arange(int(round(e["T"] / e["dt"]))) * e["dt"]          # host arrays: no device op of their own
    f = si.fourier_excitation(true, jax.random.PRNGKey(e["seed"]), e["harmonics"], e["period"], e["amplitude"])
    Q, QD, QDD = si.sample_fourier(f, t)
    W0 = np.asarray(si.stacked_regressor(true, Q, QD, QDD, terms))
    base0 = si.base_parameters(W0)
    cond0 = float(si.condition_number(W0, base0))
    cond_hist = None
    if e["optimize_steps"]:
        print(f"optimizing the excitation ({e['optimize_steps']} Adam steps on log cond) ...", file=sys.stderr)
        f, cond_hist = si.optimize_excitation(true, f, t[::4], base0, steps=e["optimize_steps"], terms=terms)
        cond_hist = np.array(cond_hist)
        Q, QD, QDD = si.sample_fourier(f, t)
        cond_hist[-1] = si.condition_number(si.stacked_regressor(true, Q, QD, QDD, terms), base0)
    rngs = np.random.default_rng(nz["seed"])
    pi_true = np.asarray(si.parameters(true, terms))
    if "file" in cfg.get("data", {}):
        Qm, QDm, QDDm, TAU = read_data(cfg["data"]["file"], true)
        source = f"data file {cfg['data']['file']} ({Qm.shape[0]} rows)"
    else:
        tau_clean = np.asarray(jax.jit(jax.vmap(lambda q, v, a: jaxdyn.rnea(true, q, v, a) + jt.joint_torque(
            true, v, a, ("viscous", "coulomb"))))(Q, QD, QDD))           # motor torques (rnea has the armature)
        TAU = tau_clean + nz["torque_std"] * rngs.normal(size=tau_clean.shape)
        Qm = np.asarray(Q) + nz["q_std"] * rngs.normal(size=Q.shape)
        QDm = np.asarray(QD) + nz["qd_std"] * rngs.normal(size=Q.shape)
        QDDm = np.asarray(QDD) + nz["qdd_std"] * rngs.normal(size=Q.shape)
        source = f"simulated: {Q.shape[0]} samples over {e['T']} s, noise std tau {nz['torque_std']}, q {nz['q_std']}"
    lim_lines = limit_report(true, np.asarray(Qm))
    for x in lim_lines:
        print(f"warning: excitation {x}", file=sys.stderr)
    Y = np.asarray(si.regressors(true, Qm, QDm, QDDm, terms))
    tau_fit = TAU - np.asarray(jax.jit(jax.vmap(lambda v, a: jt.joint_torque(true, v, a, known)))(QDm, QDDm))
    base = si.base_parameters(Y.reshape(-1, Y.shape[-1]))
    if Y.shape[0] * Y.shape[1] <= base0.rank:
        raise ConfigError(f"{name}: {source}: {Y.shape[0]} samples give {Y.shape[0] * Y.shape[1]} equations for "
                          f"{base0.rank} base parameters; the fit would be exact and say nothing (give more samples)")
    cond = float(si.condition_number(Y.reshape(-1, Y.shape[-1]), base))
    start = perturb(true, jax.random.PRNGKey(es["seed"]), es["perturb"])
    pi_start = np.asarray(si.parameters(start, terms))
    w = 1.0 / np.maximum(np.std(tau_fit - np.einsum("nip,p->ni", Y, pi_start), 0), 1e-9)
    prior = base.reduce(pi_start) if es["prior_weight"] > 0 else None
    pib_ls = si.identify_least_squares(Y, tau_fit, base, weights=w, prior=prior, prior_weight=es["prior_weight"])
    snr, snr_how = signal_to_noise(tau_fit, base.columns(Y) @ pib_ls if "file" in cfg.get("data", {}) else None,
                                   nz["torque_std"])
    low = [f"{true.joint_names[int(true.topology.dof_body[j])]} ({snr[j]:.2g})" for j in np.flatnonzero(snr < SNR_LOW)]
    if low:
        print(f"warning: signal-to-noise below {SNR_LOW} on {', '.join(low)}: these joints' torques are mostly "
              "noise, their parameters are poorly determined (least squares can end worse than the start); "
              "excite them more or lower the noise", file=sys.stderr)
    print(f"consistent refinement ({es['steps']} L-BFGS steps on log-Cholesky parameters) ...", file=sys.stderr)
    theta0 = np.asarray(jax.jit(jaxdyn.log_cholesky_parameters)(start))
    fixed = ~np.isfinite(theta0).all(1)        # massless / flat bodies: kept at the start's values
    fit = si.identify_consistent(Y, tau_fit, theta0, weights=w, steps=es["steps"], fixed=fixed,
                                 pi_fixed=pi_start[lay.inertial], prior=pi_start if es["prior_weight"] > 0 else None,
                                 prior_weight=es["prior_weight"], layout=lay)
    pi_c = np.asarray(fit.pi)
    pib_true, pib_c, pib_start = base.reduce(pi_true), base.reduce(pi_c), base.reduce(pi_start)
    rel = lambda x: float(np.linalg.norm(x - pib_true) / np.linalg.norm(pib_true))  # noqa: E731
    # held-out excitation
    fv = si.fourier_excitation(true, jax.random.PRNGKey(cfg["validation"]["seed"]), e["harmonics"], e["period"],
                               e["amplitude"])
    tv = np.arange(int(round(cfg["validation"]["T"] / e["dt"]))) * e["dt"]
    Qv, QDv, QDDv = si.sample_fourier(fv, tv)
    Yv = np.asarray(si.regressors(true, Qv, QDv, QDDv, terms))
    tv_true = np.einsum("nip,p->ni", Yv, pi_true)
    res_c = np.einsum("nip,p->ni", Yv, pi_c) - tv_true
    res_ls = base.columns(Yv) @ pib_ls - tv_true
    res_0 = np.einsum("nip,p->ni", Yv, pi_start) - tv_true
    rms = lambda r: np.sqrt(np.mean(r ** 2, 0))  # noqa: E731
    cons = si.consistency_report(true, pi_c[lay.inertial])
    cf = cons[~fixed]                           # the fitted bodies
    physical = bool(np.all(cf[:, 0] > 0) and np.all(cf[:, 1] >= -1e-12) and np.all(cf[:, 2] >= -1e-12))
    kept = (f"{int(fixed.sum())} bodies without a positive-definite pseudo-inertia kept at the start: "
            f"{[true.body_names[i] for i in np.flatnonzero(fixed)]}")
    if len(cf):
        consistency = (f"physical consistency of the identified bodies: {'all valid' if physical else 'VIOLATED'} "
                       f"(min mass {cf[:, 0].min():.4g}, min principal moment {cf[:, 1].min():.3g}, "
                       f"min triangle margin {cf[:, 2].min():.3g})" + (f"; {kept}" if fixed.any() else ""))
    else:
        consistency = f"physical consistency: no body was fitted with a consistency constraint ({kept})"
    wall = time.time() - t_wall
    from ..output import wall_time_line
    lines = [f"config: {name}", f"robot: {true.name} (nb={true.nb}, {10 * true.nb} inertial parameters"
             + (f" + {', '.join(terms)} per joint: {lay.p}" if terms else "") + ")",
             f"data: {source}",
             f"excitation: {e['harmonics']} harmonics, period {e['period']} s; condition number of the base regressor "
             f"{cond0:.4g}" + (f" -> {float(cond_hist[-1]):.4g} after optimization" if cond_hist is not None else "")
             + f"; on the measured data {cond:.4g}",
             f"base parameters: rank {base.rank} of {lay.p}",
             f"signal-to-noise per joint ({snr_how}): {np.round(snr, 3 if np.all(snr < 1e3) else 1).tolist()}"
             + (f"; warning: below {SNR_LOW} on {', '.join(low)}" if low else ""),
             f"base-parameter relative error: start {rel(pib_start):.3e}, least squares {rel(pib_ls):.3e}, "
             f"consistent {rel(pib_c):.3e}",
             f"held-out torque RMS error per joint (vs noise-free torques; noise std {nz['torque_std']}):",
             f"  start       {np.round(rms(res_0), 4).tolist()}",
             f"  least sq.   {np.round(rms(res_ls), 4).tolist()}",
             f"  consistent  {np.round(rms(res_c), 4).tolist()}",
             *joint_term_lines(true, lay, base, pi_true, pib_ls, pi_c),
             consistency,
             NO_POSITION_LIMITS if not has_position_limits(true) else
             "joint limits: " + ('; '.join(lim_lines) if lim_lines else "respected by the excitation"),
             wall_time_line(wall, getattr(args, "started", None), "identification")]
    write_outputs(out, name, true, lay, base, pi_true, pi_start, pi_c, pib_true, pib_ls, pib_c, np.asarray(tv), res_c,
                  res_ls, np.asarray(fit.history), lines, np.asarray(Qm), e["dt"], model_file(cfg["robot"]["name"]))
    print("\n".join(lines))
    return 0


def joint_term_lines(model, lay, base, x_true, pib_ls, x_c):
    """Summary lines of the identified joint terms (one per term): per joint the true, least-
    squares (None where the base parameters do not determine it alone, e.g. the armature of a
    first joint, folded into its body's inertia) and consistent values, the worst relative
    error of each estimate, and a warning naming joints with a negative consistent estimate
    (joint terms are fitted linearly, unconstrained)."""
    import numpy as np
    ls = base.alone(pib_ls)
    units = {"armature": "kg m^2 or kg", "viscous": "N m s/rad or N s/m", "coulomb": "N m or N"}
    out = []
    for k, term in enumerate(lay.terms):
        idx = lay.joint.reshape(model.nv, len(lay.terms))[:, k]
        t, a, c = x_true[idx], ls[idx], x_c[idx]

        def worst(e, t=t):
            ok = np.isfinite(e) & (t != 0)
            return f"{np.max(np.abs(e[ok] - t[ok]) / np.abs(t[ok])):.2e}" if ok.any() else "n/a"

        neg = [model.joint_names[int(model.topology.dof_body[j])] for j in np.flatnonzero(c < 0)]
        out.append(f"{term} ({units[term]}) per joint: true {np.round(t, 6).tolist()}; least squares "
                   f"{[None if not np.isfinite(v) else round(float(v), 6) for v in a]}; consistent "
                   f"{np.round(c, 6).tolist()}; worst relative error: least squares {worst(a)}, consistent {worst(c)}"
                   + (f"; warning: negative (non-physical) on {neg}: the data do not determine them" if neg else ""))
    return out


SNR_LOW = 3.0
"""Joints whose torque signal-to-noise ratio is below this are named in a warning."""


def signal_to_noise(tau, fitted, noise_std):
    """Per-joint signal-to-noise of measured torques tau (N, nv): sqrt(var(tau) - s^2) / s with
    s the noise, ``noise_std`` (simulated data, ``fitted`` None) or the RMS residual of the
    least-squares fit ``fitted`` (N, nv) (recorded data).  Returns ((nv,), how it was measured)."""
    import numpy as np
    var = np.var(tau, 0)
    if fitted is None:
        if noise_std <= 0:
            return np.full(var.shape, np.inf), "no torque noise"
        s, how = np.full(var.shape, float(noise_std)), "torque signal std / noise std"
    else:
        s, how = np.sqrt(np.mean((tau - fitted) ** 2, 0)), "torque signal std / RMS least-squares residual"
    return np.sqrt(np.maximum(var - s ** 2, 0.0)) / np.maximum(s, 1e-300), how
