"""Where the latency of one call goes: for ``jax.jit(f)`` of one state (f = aba, rnea, crba, and
a no-op with the same arguments), the time of a call with synchronous CPU dispatch and the
number of XLA:CPU kernels it runs (each fusion, copy or other instruction that the runtime
executes, counted over every iteration of the sweeps' loops), on panda, anymal_c,
talos_reduced and g1.  The no-op's time is the dispatch of a call with these arguments.

``textbook``: a floor for an articulated-body algorithm that sweeps body by body with
``lax.scan``: Featherstone (2008) Table 7.1 for a chain of revolute joints with the robot's
number of bodies, dense 6 x 6 products (``@``), five array arguments (:func:`textbook_aba`).
A sweep body by body runs nb steps on any tree, and a chain needs the least bookkeeping (each
body's parent is the scan's carry).  With ``--before DIR``, the same cases of an earlier
checkout of jaxdyn in the same run (commit e0b6c61 answered ``aba`` of one state by CRBA and
Cholesky).

The kernels are counted from a ``jax.profiler`` trace of a few calls: an event whose name is
an instruction of the compiled program (``compiled.as_text()``), not a ``while``.  A least-
squares line latency = a + b * kernels over every robot and aba, rnea, crba of this checkout
gives the fixed cost of a call (a) and the cost of a kernel (b).

Each round runs in a fresh process pinned to core 0 (``--rounds`` of them, and one more that
counts the kernels); a latency is the least over the rounds of the 10th percentile of 3000
calls.  Writes JSON and a PNG plot.

Usage: python benchmarks/bench_latency.py [--rounds 3] [--robots panda,anymal_c,talos_reduced,g1]
         [--before /path/to/old/checkout] [--out benchmarks/results/latency.json]
"""
from __future__ import annotations

import argparse
import json
import os
import re

import numpy as np

from bench_engine import pin_model  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from timing import alternate  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CALLS = 3000


def kernels_per_call(compiled, call, n=20):
    """XLA:CPU instructions run per call of ``call()``, from a profiler trace of n calls."""
    import glob
    import gzip
    import tempfile
    import jax
    names = set()
    for line in compiled.as_text().splitlines():
        m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = ", line)
        op = m and re.search(r"\b([a-z][\w\-]*)\(", line[m.end():])
        if op and op.group(1) != "while":
            names.add(m.group(1))
    with tempfile.TemporaryDirectory() as d:
        with jax.profiler.trace(d, create_perfetto_trace=True):
            for _ in range(n):
                call()
        events = json.load(gzip.open(glob.glob(os.path.join(d, "**", "*.trace.json.gz"), recursive=True)[0]))
    return sum(e.get("ph") == "X" and e["name"] in names for e in events["traceEvents"]) / n


def textbook_aba(Xtree, I, q, qd, tau):
    """qdd (n,) of a chain of n revolute joints about their z axes (Featherstone 2008, Table 7.1,
    parent i - 1): Xtree (n, 6, 6) the tree transforms, I (n, 6, 6) the spatial inertias (both
    angular-first), gravity 9.81 along -z of the base."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def joint(Xt, qi):
        c, s = jnp.cos(qi), jnp.sin(qi)
        R = jnp.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
        Z = jnp.zeros((3, 3))
        return jnp.block([[R, Z], [Z, R]]) @ Xt

    def crm(v):
        def sk(a):
            return jnp.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
        return jnp.block([[sk(v[:3]), jnp.zeros((3, 3))], [sk(v[3:]), sk(v[:3])]])

    X = jax.vmap(joint)(Xtree, q)
    s = jnp.zeros(6).at[2].set(1.0)

    def velocities(v, x):
        Xi, qdi, Ii = x
        v = Xi @ v + s * qdi
        return v, (crm(v) @ (s * qdi), -crm(v).T @ (Ii @ v))
    _, (c, pA) = lax.scan(velocities, jnp.zeros(6), (X, qd, I))

    def inertias(acc, x):
        Xi, Ii, ci, pi, ti = x
        IA, pA = Ii + acc[0], pi + acc[1]
        U = IA @ s
        D = U[2]
        u = ti - pA[2]
        Ia = IA - jnp.outer(U, U) / D
        return (Xi.T @ Ia @ Xi, Xi.T @ (pA + Ia @ ci + U * u / D)), (U, D, u)
    _, (U, D, u) = lax.scan(inertias, (jnp.zeros((6, 6)), jnp.zeros(6)), (X, I, c, pA, tau), reverse=True)

    def accelerations(a, x):
        Xi, Ui, Di, ui, ci = x
        a = Xi @ a + ci
        qdd = (ui - Ui @ a) / Di
        return a + s * qdd, qdd
    _, qdd = lax.scan(accelerations, jnp.array([0.0, 0.0, 0.0, 0.0, 0.0, 9.81]), (X, U, D, u, c))
    return qdd


def textbook_arguments(n, seed=0):
    """Xtree, I (n, 6, 6): unit-mass links up to 0.1 m apart, centres of mass off the joint axes."""
    import jax.numpy as jnp
    rng = np.random.default_rng(seed)
    Xs, Is = [], []
    for _ in range(n):
        p, c = rng.uniform(-0.1, 0.1, 3), rng.uniform(-0.05, 0.05, 3)
        px, cx = (np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]]) for a in (p, c))
        Xs.append(np.block([[np.eye(3), np.zeros((3, 3))], [-px, np.eye(3)]]))
        Is.append(np.block([[0.01 * np.eye(3) + cx @ cx.T, cx], [cx.T, np.eye(3)]]))
    return jnp.asarray(np.array(Xs)), jnp.asarray(np.array(Is))


def worker(args):
    """{robot/function: p10 latency (µs)} of this process, or with ``--count`` {robot/function:
    kernels per call} (a profiler session slows the calls timed after it, so a process does one
    or the other)."""
    import warnings
    import jax
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    import jax.numpy as jnp
    import jaxdyn
    warnings.simplefilter("ignore")
    fs = {"noop": lambda m, q, v, t: v + t, "aba": jaxdyn.aba, "rnea": jaxdyn.rnea,
          "crba": lambda m, q, v, t: jaxdyn.crba(m, q)}
    out = {}
    for name in args.robots.split(","):
        path, fb, _ = pin_model(name)
        m = jaxdyn.load_urdf(path, floating_base=fb)
        q = jaxdyn.neutral(m)
        v, t = jnp.ones(m.nv), jnp.ones(m.nv)
        for fn, f in fs.items():
            g = jax.jit(f)
            call = lambda: g(m, q, v, t).block_until_ready()      # noqa: E731
            call()
            if args.count:
                out[f"{name}/{fn}"] = kernels_per_call(g.lower(m, q, v, t).compile(), call)
                continue
            out[f"{name}/{fn}"] = float(np.percentile([timed(call) for _ in range(CALLS)], 10) * 1e6)
        Xt, I = textbook_arguments(m.nb)
        xs = (Xt, I, 0.1 * jnp.arange(m.nb), jnp.ones(m.nb), jnp.ones(m.nb))
        g = jax.jit(textbook_aba)
        call = lambda: g(*xs).block_until_ready()      # noqa: E731
        assert bool(jnp.isfinite(call()).all())
        out[f"{name}/textbook"] = (kernels_per_call(g.lower(*xs).compile(), call) if args.count
                                   else float(np.percentile([timed(call) for _ in range(CALLS)], 10) * 1e6))
    print(json.dumps(out))


def timed(call):
    """Seconds of one ``call()``."""
    import time
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--robots", default="panda,anymal_c,talos_reduced,g1")
    ap.add_argument("--before", default=None, help="an earlier checkout of jaxdyn, run alternating")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "latency.json"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--count", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    os.sched_setaffinity(0, {0})            # the workers inherit core 0
    us = alternate(__file__, ["--robots", args.robots], args.before, rounds=args.rounds)
    kernels = alternate(__file__, ["--robots", args.robots, "--count"], args.before, rounds=1)
    res = {v: {k: {"us": us[v][k], "kernels": kernels[v][k]} for k in us[v]} for v in us}
    algs = [k for k in res["after"] if k.split("/")[1] in ("aba", "rnea", "crba")]
    x = np.array([res["after"][k]["kernels"] for k in algs])
    y = np.array([res["after"][k]["us"] for k in algs])
    b, a = np.polyfit(x, y, 1)
    import jax
    import datetime
    doc = {"date": datetime.date.today().isoformat(), "jax": jax.__version__, "cpus": os.cpu_count(),
           "rounds": args.rounds, "calls": CALLS, "results": res["after"],
           "fit": {"fixed_us": float(a), "per_kernel_ns": float(b * 1e3)}}
    if "before" in res:
        doc["before"] = {"checkout": os.path.abspath(args.before), "results": res["before"]}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    for v, rv in res.items():
        for k, r in rv.items():
            print(f"{v:6s} {k:24s} {r['us']:8.1f} us  {r['kernels']:7.0f} kernels")
    print(f"fit: {a:.1f} us + {b * 1e3:.0f} ns per kernel")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    marks = {"noop": "x", "aba": "o", "rnea": "s", "crba": "^", "textbook": "*"}
    names = {"noop": "no-op (dispatch)", "textbook": "textbook ABA, chain of nb bodies (floor)"}
    for v, rv in res.items():
        for fn, mk in marks.items():
            ks = [k for k in rv if k.endswith("/" + fn)]
            if v == "before" and fn in ("noop", "textbook"):
                continue
            label = (names.get(fn, fn) if v == "after" else f"before: {fn}")
            ax.scatter([rv[k]["kernels"] for k in ks], [rv[k]["us"] for k in ks], marker=mk, label=label,
                       s=80 if fn == "textbook" else 30,
                       **({"facecolors": "none", "edgecolors": "grey"} if v == "before" else {}))
            for k in ks if fn in ("aba", "textbook") else ():
                ax.annotate(k.split("/")[0], (rv[k]["kernels"], rv[k]["us"]), fontsize=7,
                            xytext=(3, 3), textcoords="offset points")
    xs = np.linspace(0, x.max() * 1.05, 2)
    ax.plot(xs, a + b * xs, "k--", lw=1, label=f"fit (aba, rnea, crba): {a:.0f} µs + {b * 1e3:.0f} ns x kernels")
    ax.set_xlabel("XLA:CPU kernels run per call")
    ax.set_ylabel("latency of one jax.jit(f) call (µs, p10)")
    ax.set_title("One-state latency against kernels per call (f64, one core)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out.replace(".json", ".png"), dpi=120)


if __name__ == "__main__":
    main()
