"""Constrained forward dynamics: µs per state for jaxdyn's "schur" and "kkt" vs Pinocchio's
constraintDynamics, in the same run.

Usage: python benchmarks/bench_constraints.py [--batch 4096] [--arms 2,4,8,16] [--arm-batch 256]
         [--out benchmarks/results/constraints.json]

Cases: anymal_c standing on four point feet (floating base, 12 rows), talos_reduced in double
support (two welded feet, 12 rows), and ell PUMA arms holding a floating box
(``jaxdyn.mechanisms.arms_holding_box``, 6 ell rows) for the scaling in ell, where Rodriguez and
Kreutz's RCCFD 1 and Lilly and Orin's Type 0 algorithm (``method="rccfd"`` / ``"lilly_orin"``
on the GraspSystem form) are timed too; on anymal_c, Lilly and Orin's Type 1 and RCCFD on the
legs re-rooted at their feet (``jaxdyn.legged_system``; talos_reduced's torso and arms are on
no leg, so it has no Type 1 form).  jaxdyn is timed
as ``jit(vmap(constrained_forward_dynamics))`` over the batch (states satisfying the velocity
constraint), Pinocchio as a Python loop of ``constraintDynamics`` calls (per call, one core).
Writes JSON and a PNG plot.
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
from timing import timeit  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--arms", default="2,4,8,16")
    ap.add_argument("--arm-batch", type=int, default=256)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "constraints.json"))
    args = ap.parse_args()

    import jax
    jax.config.update("jax_enable_x64", True)
    import pinocchio as pin

    import jaxdyn
    from helpers import ROBOTS_DIR, URDFS
    from pinutil import to_pinocchio
    from pinutil import pin_twin_constraints
    from test_constraints import world_contacts

    def states(cm, q0, B, rng, spread=0.0):
        m = cm.model
        K = np.asarray(jaxdyn.constraint_jacobian(cm, q0))
        P = np.eye(m.nv) - np.linalg.pinv(K) @ K
        V = rng.normal(size=(B, m.nv)) @ P.T
        T = rng.normal(size=(B, m.nv)) * 5
        return np.tile(q0, (B, 1)), V, T

    def measure(label, cm, q0, B, pm=None, pin_models=None, gs=None):
        rng = np.random.default_rng(0)
        Q, V, T = states(cm, q0, B, rng)
        row = dict(case=label, nv=cm.model.nv, rows=cm.m, batch=B)
        for method in ("schur", "kkt"):
            f = jax.jit(jax.vmap(lambda q, v, t: jaxdyn.constrained_forward_dynamics(cm, q, v, t, method=method).qdd))
            t0 = time.perf_counter()
            f.lower(Q, V, T).compile()
            row[f"{method}_compile_s"] = round(time.perf_counter() - t0, 2)
            row[f"{method}_us"] = 1e6 * timeit(lambda: jax.block_until_ready(f(Q, V, T)), min_time=1.0) / B
        for method in (("rccfd", "lilly_orin") if gs is not None else ()):
            f = jax.jit(jax.vmap(lambda q, v, t: jaxdyn.constrained_forward_dynamics(gs, q, v, t, method=method).qdd))
            t0 = time.perf_counter()
            f.lower(Q, V, T).compile()
            row[f"{method}_compile_s"] = round(time.perf_counter() - t0, 2)
            row[f"{method}_us"] = 1e6 * timeit(lambda: jax.block_until_ready(f(Q, V, T)), min_time=1.0) / B
        if pm is not None:
            data = pm.createData()
            pcd = pin.StdVec_RigidConstraintData()
            for c in pin_models:
                pcd.append(c.createData())
            pin.initConstraintDynamics(pm, data, pin_models, pcd)
            prox = pin.ProximalSettings(1e-12, 1e-12, 1e-12, 20)
            n = min(B, 500)
            Qn, Vn, Tn = Q[:n].copy(), V[:n].copy(), (T[:n] - np.asarray(cm.model.damping) * V[:n]).copy()

            def loop():
                for i in range(n):
                    pin.constraintDynamics(pm, data, Qn[i], Vn[i], Tn[i], pin_models, pcd, prox)
            row["pinocchio_us"] = 1e6 * timeit(loop, min_time=1.0) / n
        print(json.dumps(row), flush=True)
        return row

    rows = []
    for name, kinds_frames in (("anymal_c", [("point", f) for f in ("LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT")]),
                               ("talos_reduced", [("weld", "left_sole_link"), ("weld", "right_sole_link")])):
        path = os.path.join(ROBOTS_DIR, URDFS[name][0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = jaxdyn.load_urdf(path, floating_base=True)
        q0 = np.array(jaxdyn.neutral(m))
        q0[7:] += 0.1 * np.random.default_rng(1).normal(size=m.nq - 7)
        cm = world_contacts(m, q0, kinds_frames)
        pm = to_pinocchio(cm.model)
        try:        # Lilly and Orin's Type 1: the legs re-rooted at their feet
            ls = jaxdyn.legged_system(m, q0, [f for _, f in kinds_frames], contact=kinds_frames[0][0])
            why = None
        except jaxdyn.errors.ModelError as e:
            ls, why = None, str(e)
        row = measure(name, cm, q0, args.batch, pm, pin_twin_constraints(cm, pm), ls)
        if why:
            row["structured_methods"] = f"not applicable: {why[:160]}"
        rows.append(row)
    for ell in [int(x) for x in args.arms.split(",")]:
        cm, q0 = jaxdyn.mechanisms.arms_holding_box(ell)
        gs, _ = jaxdyn.mechanisms.arms_holding_box(ell, form="grasp")
        pm = to_pinocchio(cm.model)
        rows.append(measure(f"{ell}_arms_box", cm, q0, args.arm_batch, pm, pin_twin_constraints(cm, pm), gs))
    meta = dict(jax=jax.__version__, pinocchio=pin.__version__, machine=platform.processor() or platform.machine(),
                cpus=os.cpu_count())
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(dict(meta=meta, rows=rows), fh, indent=1)
    plot(rows, args.out[:-5] + ".png")
    print(f"wrote {args.out}")


def plot(rows, path):
    """Left: µs per state per robot and method (log); right: the arms-holding-a-box scaling."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.4))
    robots = [r for r in rows if "arms" not in r["case"]]
    x = np.arange(len(robots))
    for k, (key, lab) in enumerate((("schur_us", "jaxdyn schur"), ("kkt_us", "jaxdyn kkt"),
                                    ("lilly_orin_us", "jaxdyn lilly_orin (Type 1)"), ("rccfd_us", "jaxdyn rccfd"),
                                    ("pinocchio_us", "Pinocchio constraintDynamics"))):
        a1.bar(x + 0.16 * (k - 2), [r.get(key, np.nan) for r in robots], 0.16, label=lab)
    a1.set_xticks(x, [f"{r['case']}\n(B = {r['batch']})" for r in robots])
    a1.set_ylabel("µs per state")
    a1.set_yscale("log")
    a1.legend(fontsize=8, ncol=2, loc="lower left", bbox_to_anchor=(0.0, 1.01))
    arms = [r for r in rows if "arms" in r["case"]]
    ells = [int(r["case"].split("_")[0]) for r in arms]
    for key, lab in (("schur_us", "jaxdyn schur"), ("kkt_us", "jaxdyn kkt"), ("rccfd_us", "jaxdyn rccfd"),
                     ("lilly_orin_us", "jaxdyn lilly_orin"), ("pinocchio_us", "Pinocchio")):
        a2.loglog(ells, [r.get(key, np.nan) for r in arms], "o-", label=lab)
    a2.set_xticks(ells, [str(e) for e in ells])
    a2.set_xticks([], minor=True)
    a2.set_xlabel(f"arms holding the box (ell), B = {arms[0]['batch'] if arms else ''}")
    a2.set_ylabel("µs per state")
    a2.legend(fontsize=8)
    a2.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
