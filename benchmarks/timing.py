"""Shared timing helper for the benchmark scripts."""
import time

import numpy as np


def timeit(fn, min_time=0.5, min_reps=3, max_reps=200):
    """Median wall time (s) of ``fn()`` after one warm-up call: at least ``min_reps`` calls and
    ``min_time`` seconds, at most ``max_reps`` calls."""
    fn()
    times = []
    t_start = time.perf_counter()
    while len(times) < min_reps or time.perf_counter() - t_start < min_time:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= max_reps:
            break
    return float(np.median(times))


def alternate(script, worker_args, before=None, rounds=2, xla_flags=None):
    """Run ``script --worker *worker_args`` (which prints one JSON line {case: time}) for this
    checkout ("after") and, with ``before``, an earlier checkout, and with ``xla_flags``, this
    checkout again with those ``XLA_FLAGS`` ("flags"), ``rounds`` times alternating between
    them (timings on a shared machine drift), each in a fresh process with that checkout first
    on PYTHONPATH.  Returns {version: {case: least time over the rounds}}."""
    import json
    import os
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    versions = {"after": (os.path.dirname(here), {})}
    if before:
        versions["before"] = (before, {})
    if xla_flags:
        versions["flags"] = (os.path.dirname(here), {"XLA_FLAGS": xla_flags})
    runs = {v: [] for v in versions}
    for r in range(rounds):
        for v, (root, extra) in versions.items():
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, here]), **extra}
            p = subprocess.run([sys.executable, os.path.abspath(script), "--worker", *worker_args],
                               capture_output=True, text=True, env=env, cwd="/")
            if p.returncode:
                raise SystemExit(f"{v} worker failed:\n{p.stderr[-3000:]}")
            runs[v].append(json.loads(p.stdout.strip().splitlines()[-1]))
            print(f"round {r} {v} done", flush=True)
    return {v: {k: min(run[k] for run in rs) for k in rs[0]} for v, rs in runs.items()}
