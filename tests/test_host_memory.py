"""jaxdyn.tune_host_allocator: after it, a freed large block's pages are reused (no page
faults when the next block of that size is written); before it, glibc maps fresh pages.
Checked in a subprocess (the setting is process-wide), with the minor page-fault count of
the process, on a numpy block and on jaxdyn's derivative batch, whose values do not change."""
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import resource, sys
    import numpy as np
    import jax
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_enable_async_dispatch", False)   # allocations on this thread
    import jaxdyn

    def faults(f, warm=3, calls=4):                             # minor faults of `calls` calls
        for _ in range(warm):
            f()
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(calls):
            f()
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0

    block = lambda: np.ones(64 << 17).sum()                     # 64 MiB, written, freed
    m = jaxdyn.robots.puma560()
    r = np.random.default_rng(0)
    Q, V, T = (jax.numpy.asarray(r.uniform(-1, 1, (8192, m.nv))) for _ in range(3))
    deriv = lambda: jax.block_until_ready(jaxdyn.derivatives_batch(m, Q, V, T, devices=1))
    ref = [np.asarray(a) for a in deriv()]
    before = faults(block), faults(deriv)
    if not jaxdyn.tune_host_allocator():
        print("SKIP")
        sys.exit(0)
    after = faults(block), faults(deriv)
    assert all(np.array_equal(np.asarray(a), b) for a, b in zip(deriv(), ref))
    print(*before, *after)
""")


def test_tuned_allocator_reuses_freed_pages():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    last = out.stdout.split()
    if last == ["SKIP"]:
        pytest.skip("the C library has no mallopt")
    block0, deriv0, block1, deriv1 = map(int, last[-4:])
    assert block0 >= 64 and block1 == 0, last          # 4 x 64 MiB: at least 16 huge pages each before
    assert deriv0 >= 1000 and deriv1 * 10 < deriv0, last    # 4 calls, each with 3 outputs of 2.4 MB
