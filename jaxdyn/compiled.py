"""How jaxdyn's entry points are compiled: ``jax.jit`` with :data:`CPU_OPTIONS` on the CPU
backend when called at top level, or under eager ``jax.vmap`` only (the batched program is
then compiled at top level too, e.g. ``jax.vmap(jaxdyn.aba)(model, Q, QD, TAU)``).  Under a
caller's ``jit``, ``grad`` or ``shard_map`` the caller's own top-level ``jit`` decides the
options (JAX accepts ``compiler_options`` only there).

Why the options (measured with ``benchmarks/bench_core.py`` and ``bench_grad.py``, figures
in ``benchmarks/results/``):

* batch-last kernels (``aba_batch``, ``derivatives_batch``): the legacy loop emitters
  vectorize their fusions, the newer fusion emitters do not;
* one-state calls (``aba``, ``rnea``, ``crba``, ``aba_derivatives``, rollouts, the apps'
  solvers): about the same run time, and a third to half less compile time (the B = 1
  rows' ``compile_s`` in ``core.json``).

The test suite sets the same flag process-wide (``tests/conftest.py``), so this module
changes nothing there.
"""
from __future__ import annotations

import functools

import jax

CPU_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_cpu_prefer_vector_width": 256}
"""XLA:CPU compiler options of jaxdyn's top-level calls; pass them to your own top-level
``jax.jit(..., compiler_options=jaxdyn.CPU_OPTIONS)`` around jaxdyn calls for the same
compile and run times."""

try:                                    # the cheap test; a caller's jit may close over concrete arrays
    from jax._src.core import trace_state_clean as _trace_state_clean
except ImportError:                     # pragma: no cover - other jax versions
    _trace_state_clean = None


try:                                    # the trace stack, to recognize an eager vmap
    from jax._src.core import EvalTrace as _EvalTrace, trace_ctx as _trace_ctx
    from jax._src.interpreters.batching import BatchTrace as _BatchTrace
except ImportError:                     # pragma: no cover - other jax versions
    _trace_ctx, _BatchTrace, _EvalTrace = None, (), ()


def _vmap_only():
    """Whether the current trace is one or more eager ``jax.vmap`` directly over the top level
    (no jit, grad, jvp or shard_map in between): a jit with ``compiler_options`` may run
    there, JAX compiles its batched program as a top-level call.  False where the jax
    version's trace internals differ."""
    t = getattr(_trace_ctx, "trace", None)
    if not isinstance(t, _BatchTrace):
        return False
    while isinstance(t, _BatchTrace):
        t = getattr(t, "parent_trace", None)
    return isinstance(t, _EvalTrace)


def traced(tree):
    """Whether any leaf of ``tree`` is a tracer (it is being traced by a caller's transform)."""
    return any(isinstance(a, jax.core.Tracer) for a in jax.tree_util.tree_leaves(tree))


def cpu_jit(fun=None, *, static_argnames=()):
    """``jax.jit(fun, static_argnames=...)`` whose top-level calls on the CPU backend, and
    calls under eager ``jax.vmap`` only (:func:`_vmap_only`), are compiled with
    :data:`CPU_OPTIONS`; usable as ``@cpu_jit`` or ``@cpu_jit(static_argnames=(...))``.
    Nested in a caller's jit, grad or shard_map it is the plain jit (``compiler_options``
    are only accepted on a top-level jit).  The result is a plain
    function (no ``.lower``: an attribute would be copied by ``functools.wraps`` onto
    ``jax.vmap`` of it, whose ``jax.jit(...).lower`` then calls it); to lower, use
    ``jax.jit(f, compiler_options=jaxdyn.CPU_OPTIONS).lower(...)``."""
    if fun is None:
        return functools.partial(cpu_jit, static_argnames=static_argnames)
    default = jax.jit(fun, static_argnames=static_argnames)
    cpu = jax.jit(fun, static_argnames=static_argnames, compiler_options=CPU_OPTIONS)

    if _trace_state_clean is not None:
        @functools.wraps(fun)
        def call(*args, **kwargs):          # per call: a trace-state test and a cached backend test
            return (cpu if (_trace_state_clean() or _vmap_only()) and _on_cpu() else default)(*args, **kwargs)
    else:                                   # pragma: no cover - other jax versions: no argument is
        @functools.wraps(fun)               # a tracer (misses only a caller's jit over constants)
        def call(*args, **kwargs):
            return (default if traced((args, kwargs)) or not _on_cpu() else cpu)(*args, **kwargs)
    return call


@functools.cache
def _on_cpu():
    """Whether the default backend is the CPU (fixed once JAX has initialized its backends)."""
    return jax.default_backend() == "cpu"
