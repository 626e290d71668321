"""Closed-chain methods at singular and near-singular stances: every method's qdd against
schur's on the equivalent ClosedModel, in float64 and float32.

Usage: python benchmarks/sweep_singular.py [--poses 1000] [--systems quadruped,anymal_c,...]
         [--out benchmarks/results/sweep_singular.json]

``--systems`` runs some of the systems and replaces their rows in an existing ``--out`` (the
plot shows every system in the file), so the sweep can run in pieces.

Systems: the quadruped of ``jaxdyn.mechanisms`` (point feet, and weld feet, whose two-joint
chains are singular at every stance), anymal_c and go1 from example-robot-data on point feet
(``jaxdyn.legged_system``, Lilly and Orin's Type 1), and three PUMA arms holding a box
(``jaxdyn.mechanisms.arms_holding_box``, Type 0 / RCCFD).  Each gets ``--poses`` stances, the
feet or grasps pinned where they are at the stance:

* random: joints uniform in their limits (in [-pi, pi] where unlimited), base tilted;
* straight: every knee at 0 (legs) / every wrist at q5 = 0 (arms);
* near: knees / wrists at +-10^U(-8, -2) rad;
* colinear (legs): knees at 0, hip flexion 0, abduction solved so that every foot is on the
  base's x axis (the feet on one line); zero (arms): all joints 0;
* one (arms): one arm at its wrist singularity, the others random.

The state: qd random and projected onto K qd = 0, tau random.  Per method: the worst relative
difference max|qdd - qdd_schur| / max(max|qdd_schur|, 1) (qdd in rad/s^2 and m/s^2; the
floor keeps a locked mechanism's qdd = 0 from dividing rounding by rounding), how many states the method flagged singular
(``res.singular``: rank short of its rows, or for rccfd / lilly_orin a singular chain), and how many disagreements above 1e-8 (float64;
1e-3 in float32, against float64 schur) it did not flag; the worst constraint residual
|K qdd + k| of the unflagged states, and how many flagged states have a residual above 1e-6
(a singular stance whose bias acceleration no force can produce: the exact solution does not
exist, every method returns its own least-squares one).  float32: the systems and states cast
to float32 (every result checked to be float32).  Writes JSON and a PNG of the differences.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
TOL = {"float64": 1e-8, "float32": 1e-3}
CALL = 250
SYSTEMS = ("quadruped", "quadruped_weld", "anymal_c", "go1", "three_arms_box")
"""Each system draws its stances from its own seed ([0, index]): a partial run repeats the full one."""
"""States per call (one compiled program per method and dtype, run on the poses in pieces)."""


def legged_poses(m, feet, n, rng, knee_idx, haa_idx, hfe_idx):
    """(kind, q) stances of a legged tree model (see the module docstring)."""
    import jax.numpy as jnp

    import jaxdyn
    lo, hi = np.asarray(m.q_lower)[7:], np.asarray(m.q_upper)[7:]
    lo, hi = np.where(np.isfinite(lo), lo, -np.pi), np.where(np.isfinite(hi), hi, np.pi)

    def base(q):
        q[:3] = rng.normal(size=3) * 0.1 + [0, 0, 0.5]
        ax = rng.normal(size=3)
        ang = rng.uniform(0, 0.3)
        q[3:6] = np.sin(ang / 2) * ax / np.linalg.norm(ax)
        q[6] = np.cos(ang / 2)
        return q

    def colinear(q):
        """Abduction such that each foot is at y = 0 in the base frame (Newton, numeric slope)."""
        for f, a in zip(feet, haa_idx):
            for _ in range(30):
                q0 = np.r_[0, 0, 0, 0, 0, 0, 1.0, q[7:]]
                y = lambda x, q0=q0: float(jaxdyn.frame_pose(m, jnp.asarray(np.r_[q0[:a], x, q0[a + 1:]]), f)[1][1])
                y0 = y(q[a])
                if abs(y0) < 1e-13:
                    break
                q[a] -= y0 / ((y(q[a] + 1e-7) - y0) / 1e-7)
        return q

    kinds = ["random"] * (n - 3 * (n // 6)) + ["straight"] * (n // 6) + ["near"] * (n // 6) + ["colinear"] * (n // 6)
    out = []
    for kind in kinds:
        q = np.zeros(m.nq)
        q[7:] = rng.uniform(lo, hi)
        q = base(q)
        if kind == "straight":
            q[knee_idx] = 0.0
        elif kind == "near":
            q[knee_idx] = rng.choice([-1, 1], len(knee_idx)) * 10.0 ** rng.uniform(-8, -2, len(knee_idx))
        elif kind == "colinear":
            q[knee_idx] = 0.0
            q[hfe_idx] = 0.0
            q[3:7] = [0, 0, 0, 1.0]
            q = colinear(q)
            q = base(q)
        out.append((kind, q))
    return out


def arm_poses(n, rng, n_arms=3):
    kinds = ["random"] * (n - 4 * (n // 8)) + ["straight"] * (n // 8) + ["near"] * (n // 8) + ["zero"] * (n // 8) + \
        ["one"] * (n // 8)
    out = []
    for kind in kinds:
        a = rng.uniform(-np.pi, np.pi, (n_arms, 6))
        if kind == "straight":
            a[:, 4] = 0.0
        elif kind == "near":
            a[:, 4] = rng.choice([-1, 1], n_arms) * 10.0 ** rng.uniform(-8, -2, n_arms)
        elif kind == "zero":
            a[:] = 0.0
        elif kind == "one":
            a[0, 4] = 0.0
        out.append((kind, a))
    return out


def stack(trees):
    import jax
    import jax.numpy as jnp
    return jax.tree.map(lambda *x: jnp.stack(x), *trees)


def cast(tree, dt):
    import jax
    import jax.numpy as jnp
    return jax.tree.map(lambda x: x.astype(dt) if jnp.issubdtype(jnp.result_type(x), jnp.floating) else x, tree)


def run_system(name, closed, structured, Q, rng):
    """Every method on the stacked systems in float64 and float32.  Returns the result rows."""
    import jax
    import jax.numpy as jnp

    import jaxdyn
    n = Q.shape[0]
    nv = int(np.asarray(jaxdyn.constraint_jacobian(jax.tree.map(lambda x: x[0], closed), Q[0])).shape[1])
    Q = jnp.asarray(Q)
    V = jnp.asarray(rng.normal(size=(n, nv)))
    T = jnp.asarray(rng.normal(size=(n, nv)) * 5)
    _, V = jax.jit(jax.vmap(lambda c, q, v: jaxdyn.project_constraints(c, q, v, iters=1)))(closed, Q, V)
    rows = []
    ref = None
    for dt in ("float64", "float32"):
        for method in ("schur", "kkt", "rccfd", "lilly_orin"):
            sys_ = closed if method in ("schur", "kkt") else structured
            args = (sys_, Q, V, T) if dt == "float64" else tuple(cast(x, jnp.float32) for x in (sys_, Q, V, T))
            f = jax.jit(jax.vmap(lambda s, q, v, t: jaxdyn.constrained_forward_dynamics(s, q, v, t, method=method)))
            t0 = time.perf_counter()
            parts = [jax.block_until_ready(f(*jax.tree.map(lambda x: x[i:i + CALL], args)))
                     for i in range(0, n, CALL)]
            r = jax.tree.map(lambda *x: jnp.concatenate(x), *parts)
            wall = time.perf_counter() - t0
            if str(r.qdd.dtype) != dt:
                raise RuntimeError(f"{name} {method}: {dt} inputs gave {r.qdd.dtype} results")
            qdd = np.asarray(r.qdd, np.float64)
            if ref is None:
                ref = qdd
            scale = np.maximum(np.max(np.abs(ref), 1), 1.0)
            rel = np.max(np.abs(qdd - ref), 1) / scale
            rel = np.where(np.isfinite(rel), rel, np.inf)
            flagged = np.asarray(r.singular)
            bad = (rel > TOL[dt]) & ~flagged
            resid = np.max(np.abs(np.asarray(r.residual, np.float64)), 1)
            rows.append(dict(system=name, dtype=dt, method=method, states=n, worst_rel=float(rel.max()),
                             worst_rel_unflagged=float(rel[~flagged].max()) if (~flagged).any() else 0.0,
                             flagged=int(flagged.sum()), unflagged_above_tol=int(bad.sum()), tol=TOL[dt],
                             nonfinite=int((~np.all(np.isfinite(qdd), 1)).sum()), seconds=round(wall, 2),
                             worst_residual_unflagged=float(resid[~flagged].max()) if (~flagged).any() else 0.0,
                             flagged_residual_above_1em6=int((flagged & ~(resid <= 1e-6)).sum()),
                             rel=rel.tolist(), cond=np.asarray(r.cond, np.float64).tolist()))
            print(f"{name:15s} {dt} {method:10s} worst {rel.max():.2e} (unflagged {rows[-1]['worst_rel_unflagged']:.2e}) "
                  f"flagged {flagged.sum():4d}/{n} unflagged>tol {bad.sum()} nonfinite {rows[-1]['nonfinite']} "
                  f"res {rows[-1]['worst_residual_unflagged']:.1e} flagged-res>1e-6 {rows[-1]['flagged_residual_above_1em6']} "
                  f"({wall:.1f} s)", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--poses", type=int, default=1000)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "sweep_singular.json"))
    args = ap.parse_args()
    chosen = args.systems.split(",")
    if set(chosen) - set(SYSTEMS):
        ap.error(f"--systems: unknown {sorted(set(chosen) - set(SYSTEMS))}; choose from {', '.join(SYSTEMS)}")
    import jax
    jax.config.update("jax_enable_x64", True)

    import jaxdyn
    from helpers import urdf_path
    rows = []
    quad = jaxdyn.mechanisms.quadruped()[0].model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        anymal = jaxdyn.load_urdf(urdf_path("anymal_c"), floating_base=True)
        go1 = jaxdyn.load_urdf(os.path.join(os.path.dirname(urdf_path("anymal_c")).split("anymal_c")[0],
                                            "go1_description", "urdf", "go1.urdf"), floating_base=True)
    legged = [("quadruped", quad, [f"{l}_foot" for l in ("LF", "RF", "LH", "RH")], "point"),
              ("quadruped_weld", quad, [f"{l}_foot" for l in ("LF", "RF", "LH", "RH")], "weld"),
              ("anymal_c", anymal, [f"{l}_FOOT" for l in ("LF", "RF", "LH", "RH")], "point"),
              ("go1", go1, [f"{l}_foot" for l in ("FL", "FR", "RL", "RR")], "point")]
    for name, m, feet, contact in (x for x in legged if x[0] in chosen):
        rng = np.random.default_rng([0, SYSTEMS.index(name)])
        t0 = time.perf_counter()
        P, qidx, fbody = np.asarray(m.parent), np.asarray(m.qidx), np.asarray(m.frame_body)
        legs = []                                     # per foot: the q indices of its joints, hip first
        for f in feet:
            b, path = int(fbody[m.frame_names.index(f)]), []
            while b > 0:
                path.append(int(qidx[b, 0]))
                b = int(P[b])
            legs.append(path[::-1])
        assert all(len(p) == 3 for p in legs), f"{name}: three joints per leg expected"
        haa, hfe, knee = ([p[i] for p in legs] for i in range(3))
        poses = legged_poses(m, feet, args.poses, rng, knee, haa, hfe)
        systems = [jaxdyn.legged_system(m, q, feet, contact=contact) for _, q in poses]
        print(f"{name}: {len(poses)} stances built in {time.perf_counter() - t0:.0f} s", flush=True)
        ls = stack(systems)
        rows += [dict(r, kinds=[k for k, _ in poses]) for r in
                 run_system(name, ls.closed, ls, np.stack([q for _, q in poses]), rng)]
    if "three_arms_box" in chosen:
        rows += arms_rows(args.poses, np.random.default_rng([0, SYSTEMS.index("three_arms_box")]))
    meta = dict(machine=platform.platform(), jax=jax.__version__, poses=args.poses)
    if os.path.exists(args.out):
        with open(args.out) as f:
            old = json.load(f)
        rows = [r for r in old["rows"] if r["system"] not in chosen] + rows
    with open(args.out, "w") as f:
        json.dump(dict(meta=meta, rows=rows), f)
    plot(rows, args.out[:-5] + ".png")
    print("wrote", args.out)


def arms_rows(n, rng):
    import jaxdyn
    t0 = time.perf_counter()
    poses = arm_poses(n, rng)
    closed, grasp, Q = [], [], []
    for _, a in poses:
        cm, q = jaxdyn.mechanisms.arms_holding_box(3, arm_q=a)
        gs, _ = jaxdyn.mechanisms.arms_holding_box(3, arm_q=a, form="grasp")
        closed.append(cm), grasp.append(gs), Q.append(q)
    print(f"three_arms_box: {len(poses)} stances built in {time.perf_counter() - t0:.0f} s", flush=True)
    return [dict(r, kinds=[k for k, _ in poses]) for r in
            run_system("three_arms_box", stack(closed), stack(grasp), np.stack(Q), rng)]


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    systems = list(dict.fromkeys(r["system"] for r in rows))
    fig, axes = plt.subplots(2, len(systems), figsize=(3.6 * len(systems), 6.4), sharey=True, squeeze=False)
    for j, s in enumerate(systems):
        for i, dt in enumerate(("float64", "float32")):
            ax = axes[i, j]
            for r in rows:
                if r["system"] != s or r["dtype"] != dt or (dt == "float64" and r["method"] == "schur"):
                    continue
                rel = np.clip(np.asarray(r["rel"]), 1e-18, 1e3)
                ax.hist(np.log10(rel), bins=np.linspace(-18, 3, 43), histtype="step", lw=1.5,
                        label=f"{r['method']} ({r['flagged']} flagged)")
            ax.axvline(np.log10(TOL[dt]), color="k", ls=":", lw=1)
            ax.set_title(f"{s}, {dt}", fontsize=9)
            ax.set_xlabel("log10 max|qdd - qdd_schur,f64| / max(max|qdd_schur|, 1)", fontsize=7)
            ax.legend(fontsize=6)
    axes[0, 0].set_ylabel("stances")
    axes[1, 0].set_ylabel("stances")
    fig.suptitle("Closed-chain methods vs schur at random, straight, near-singular and colinear stances", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
