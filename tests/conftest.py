"""Strict test config: float64 on, rank promotion raises, and dtype promotion is strict (no
implicit int/bool/float mixing; jaxdyn casts explicitly, its optax calls run under "standard")."""
import gc
import os

# Test-only XLA:CPU compile flags, set before JAX starts its backend.  The suite is dominated
# by compiling many small programs that then run on a few states, so it trades generated-code
# speed for compile speed: no fusion emitters, LLVM at -O0 without its expensive passes.  This
# halves the suite's wall time; results are IEEE-identical up to rounding (no fast-math), far
# below every tolerance.  The suite runs in two xdist workers, one core each, so XLA's codegen
# and Eigen thread pools stay single-threaded.  Benchmarks and users keep XLA's defaults.
TEST_XLA_FLAGS = ("--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=0 "
                  "--xla_llvm_disable_expensive_passes=true --xla_cpu_parallel_codegen_split_count=1 "
                  "--xla_cpu_multi_thread_eigen=false")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + TEST_XLA_FLAGS).strip()
# The jaxdyn command keeps a persistent compilation cache (jaxdyn.cli.use_compilation_cache); the
# tests that run it in-process leave it off (tests/test_apps_cli.py runs it twice in subprocesses on a
# temporary cache folder).
os.environ["JAXDYN_CACHE_DIR"] = ""

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_numpy_dtype_promotion", "strict")
# MLIR locations carry one source line per op instead of a 100-frame Python traceback: lowering
# and XLA compile are ~10-20 % faster (the suite is compile-bound); Python tracebacks of test
# failures are unchanged.
jax.config.update("jax_include_full_tracebacks_in_locations", False)

# The jaxdyn command's GC thresholds (jaxdyn.cli.GC_THRESHOLDS): collections at the defaults took
# ~5 % of the suite's CPU time; with these test_derivatives ran in 119 s instead of 130 s,
# test_multichain + test_trajopt 168 s instead of 177 s, peak memory unchanged (1.6 GB).
from jaxdyn.cli import GC_THRESHOLDS  # noqa: E402

gc.set_threshold(*GC_THRESHOLDS)

import pytest  # noqa: E402


from helpers import URDFS, urdf_path  # noqa: E402


@pytest.fixture(scope="session")
def robot_pair():
    """(jaxdyn model, pinocchio model) by name, cached (tests that use it skip without Pinocchio)."""
    pin = pytest.importorskip("pinocchio")
    import jaxdyn
    cache = {}

    def get(name):
        if name not in cache:
            path = urdf_path(name)
            fb = URDFS[name][1]
            m = jaxdyn.load_urdf(path, floating_base=fb)
            pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if fb else pin.buildModelFromUrdf(path)
            cache[name] = (m, pm)
        return cache[name]

    return get


try:  # Pinocchio's numpy views alias C++ memory; copies keep JAX away from freed buffers
    import eigenpy
    eigenpy.sharedMemory(False)
except Exception:  # pragma: no cover
    pass


@pytest.fixture(autouse=True)
def _named_errors(request):
    """Tests marked ``named_errors`` check the ShapeError / ArgumentError that a user sees, who
    runs without the test run's jaxtyping checks (which would raise first): turn them off."""
    if request.node.get_closest_marker("named_errors") is None:
        yield
        return
    import jaxtyping
    jaxtyping.config.update("jaxtyping_disable", True)
    try:
        yield
    finally:
        jaxtyping.config.update("jaxtyping_disable", False)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Release each test module's compiled programs after it.  A worker runs ~170 tests and
    compiles thousands of programs; each loaded XLA:CPU executable holds a few memory mappings
    (5600 after three modules here), and the kernel's map limit (vm.max_map_count, 65530) or
    the memory they pin is the suspected cause of the rare segfaults inside XLA's compile seen
    late in CI workers.  Tests within a module still share their programs."""
    yield
    jax.clear_caches()
    gc.collect()
