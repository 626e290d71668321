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
