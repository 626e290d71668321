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

Some batch-last kernels have two formulations, one for each set of XLA:CPU fusion
emitters, chosen at trace time by :func:`for_cpu_options`: a program traced by a jaxdyn entry
point's top-level call is compiled with :data:`CPU_OPTIONS` (the legacy emitters); one
traced inside a caller's own ``jax.jit`` is compiled with that jit's options, by default
XLA's newer fusion emitters (see :func:`jaxdyn.dynamics.common.slice_barrier`).  To get the
first inside your own function, compile it with :func:`jit` (``jaxdyn.jit``) instead of
``jax.jit``.

The test suite sets the same flag process-wide (``tests/conftest.py``), so this module
changes nothing there but which formulation is traced.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import os

import jax

from .errors import ArgumentError
from .packing import packed

CPU_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_cpu_prefer_vector_width": 256,
               "xla_cpu_experimental_ynn_fusion_type": "", "xla_cpu_copy_insertion_use_region_analysis": True}
"""XLA:CPU compiler options of jaxdyn's top-level calls.  For the same compile and run times in
your own function around jaxdyn calls, compile it with :func:`jit` (``jaxdyn.jit``), which
passes them and traces jaxdyn's kernels for them.  The empty YNN fusion list keeps every
fusion in XLA's own loop emitters: by default XLA:CPU hands small reductions and dots
(e.g. the products with a constant ancestry matrix) to YNNPACK, one library call each,
which made ``aba_batch`` 5-12 % slower and a one-state ``aba`` 2-4 µs slower
(``benchmarks/results/design_measurements.md``).  Copy insertion with region analysis lets
a ``lax.cond`` branch that returns its operand (the fusion barrier
:func:`jaxdyn.dynamics.common.materialize`) alias it instead of copying it, so a barrier
costs no pass over its array: ``vmap(rnea)`` on talos_reduced 6.8-6.9 -> 4.6-4.8 µs/state,
``rnea`` derivatives 46-54 -> 37-46."""

DOT_OPTIONS = {**CPU_OPTIONS, "xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}
""":data:`CPU_OPTIONS` with dot products handed to YNNPACK: the analytical derivatives
(``aba_derivatives``, ``rnea_derivatives``, ``derivatives_batch``), whose (nv, nv) matrix
products and ancestry products are dots, ran as fast as with XLA's defaults with these and
4-12 % slower with :data:`CPU_OPTIONS`."""

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


_FOR_CPU_OPTIONS = contextvars.ContextVar("jaxdyn_for_cpu_options", default=False)


MATMUL_PRECISION = "highest"
"""The precision of the matrix products that jaxdyn traces (``jax.default_matmul_precision``
while its entry points, ``custom_vmap`` rules and derivative rules trace): full f32 products.
On a GPU, JAX's default runs f32 products in TF32 (a 10-bit mantissa; bf16 passes on a TPU):
``jax.vmap(jaxdyn.rnea)`` in f32 on an H100 was 1e-2 (panda) to 1e-1 (g1) off (relative to
the largest torque) against the CPU's f32 with it, 4e-6 (panda) and 8e-5 (talos_reduced)
with this, f32 round-off (``benchmarks/results/gpu.json``).  No
effect on the CPU or in f64.  Your own products (``jaxdyn.jit`` of your function included)
keep your setting."""


@contextlib.contextmanager
def exact_products():
    """Trace the block with :data:`MATMUL_PRECISION` (entered by :func:`cpu_jit`'s functions,
    :func:`tracing_for` and :func:`exact_rule`)."""
    with jax.default_matmul_precision(MATMUL_PRECISION):
        yield


def exact_rule(fun):
    """``fun`` (a ``custom_jvp`` / ``custom_vjp`` rule, which JAX traces when it differentiates,
    outside the entry point's trace) traced under :func:`exact_products`."""
    @functools.wraps(fun)
    def run(*args, **kwargs):
        with exact_products():
            return fun(*args, **kwargs)
    return run


CPU_XLA_FLAGS = " ".join(f"--{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in CPU_OPTIONS.items())
""":data:`CPU_OPTIONS` as ``XLA_FLAGS`` for the whole process, for code compiled by a plain
``jax.jit``: ``XLA_FLAGS="$(python -c 'import jaxdyn; print(jaxdyn.CPU_XLA_FLAGS)')" python
run.py``.  XLA reads them when JAX starts its CPU backend, so they must be in the environment
before the first computation.  jaxdyn then also traces a plain ``jax.jit``'s programs for the
legacy emitters (:func:`for_cpu_options`): ``jax.jit(jax.vmap(jaxdyn.aba))`` on
talos_reduced ran 5.19 µs/state with XLA's defaults against ``aba_batch`` at 4.30, and
4.50 against 4.35 with these flags (``benchmarks/results/grad.json``, key
``cpu_xla_flags``).  They apply to every program of the process, yours included."""


def _process_flags_give_cpu_options(flags):
    """Whether ``XLA_FLAGS`` (a string) selects the legacy emitters and copy insertion with
    region analysis, as :data:`CPU_XLA_FLAGS` does (the test suite's flags select the first
    only, so its plain-jit programs keep the fusion-emitter formulation)."""
    val = {}
    for tok in flags.split():
        name, _, v = tok.lstrip("-").partition("=")
        val[name] = v.lower()
    return (val.get("xla_cpu_use_fusion_emitters") in ("false", "0")
            and val.get("xla_cpu_copy_insertion_use_region_analysis") in ("true", "1"))


_PROCESS = functools.lru_cache(maxsize=4)(_process_flags_give_cpu_options)


def for_cpu_options():
    """Whether the program being traced will be compiled with :data:`CPU_OPTIONS`: True while
    a :func:`cpu_jit` function traces its top-level call (or a call nested in one), False in a
    caller's own ``jax.jit`` (whose options jaxdyn cannot see; XLA's default emitters) and
    outside any trace, unless the process runs with :data:`CPU_XLA_FLAGS` (then always
    True).  Kernels read it at trace time to pick the formulation that suits the emitters
    (:func:`jaxdyn.dynamics.common.slice_barrier`); the results are the same."""
    return _FOR_CPU_OPTIONS.get() or _PROCESS(os.environ.get("XLA_FLAGS", ""))


@contextlib.contextmanager
def tracing_for(cpu_options, exact=True):
    """Trace the block for :func:`for_cpu_options` = ``cpu_options``, and with jaxdyn's
    :data:`MATMUL_PRECISION` if ``exact``.  For code that JAX traces
    outside the call that chose the options, e.g. a ``custom_vmap`` rule (run when the
    caller's vmap batches the traced program): make one rule per value and enter this in it."""
    token = _FOR_CPU_OPTIONS.set(cpu_options)
    try:
        with exact_products() if exact else contextlib.nullcontext():
            yield
    finally:
        _FOR_CPU_OPTIONS.reset(token)


def _traced_for(fun, cpu_options, exact=True):
    """``fun`` that traces with :func:`for_cpu_options` = ``cpu_options`` (and, if ``exact``,
    :data:`MATMUL_PRECISION`).  A distinct function object per value, so JAX's trace caches
    (keyed by the function) keep the two formulations apart."""
    @functools.wraps(fun)
    def run(*args, **kwargs):
        with tracing_for(cpu_options, exact):
            return fun(*args, **kwargs)
    return run


PACKED_TYPES: tuple = ()
"""Argument types that a top-level :func:`cpu_jit` call passes packed (:mod:`jaxdyn.packing`):
:class:`jaxdyn.Model` (registered by :mod:`jaxdyn.model.model`)."""


def pack_at_top_level(cls):
    """Register ``cls`` in :data:`PACKED_TYPES`."""
    global PACKED_TYPES
    PACKED_TYPES = PACKED_TYPES + (cls,)


def _unpacking(fun, layout):
    """``fun`` whose first argument arrives as the buffers of a :class:`jaxdyn.packing.Packed`
    of ``layout`` (same signature otherwise, for ``static_argnames``)."""
    @functools.wraps(fun)
    def run(buffers, *args, **kwargs):
        return fun(layout.unpack(buffers), *args, **kwargs)
    return run


def cpu_jit(fun=None, *, static_argnames=(), options=None, donate_argnums=(), exact=True):
    """``jax.jit(fun, static_argnames=...)`` whose top-level calls on the CPU backend, and
    calls under eager ``jax.vmap`` only (:func:`_vmap_only`), are compiled with
    :data:`CPU_OPTIONS` (or ``options``, e.g. :data:`DOT_OPTIONS`); usable as ``@cpu_jit`` or
    ``@cpu_jit(static_argnames=(...))``.  Both option sets use the legacy emitters, so the
    kernels are traced for them alike (:func:`for_cpu_options`).
    Nested in a caller's jit, grad or shard_map it is the plain jit (``compiler_options``
    are only accepted on a top-level jit), traced for the options of the outermost jaxdyn
    call around it if there is one, else for XLA's defaults (:func:`for_cpu_options`).
    A top-level call whose first argument is a :class:`jaxdyn.Model` passes it as one buffer
    per dtype (:mod:`jaxdyn.packing`: 2 arguments instead of 20, about 5 µs less per call).
    Public as :func:`jit` (``jaxdyn.jit``).  The result is a plain
    function (no ``.lower``: an attribute would be copied by ``functools.wraps`` onto
    ``jax.vmap`` of it, whose ``jax.jit(...).lower`` then calls it); to lower, use
    ``jax.jit(f, compiler_options=jaxdyn.CPU_OPTIONS).lower(...)``.  ``donate_argnums``
    (positions, as ``jax.jit``'s) apply to the top-level calls only.  ``exact``: trace with
    :data:`MATMUL_PRECISION` (jaxdyn's functions; not a user's function given to :func:`jit`)."""
    if fun is None:
        return functools.partial(cpu_jit, static_argnames=static_argnames, options=options,
                                 donate_argnums=donate_argnums, exact=exact)
    if not callable(fun):
        raise ArgumentError(f"jaxdyn.jit needs a function to compile, got {type(fun).__name__}")
    for_options, for_default = _traced_for(fun, True, exact), _traced_for(fun, False, exact)
    cpu = jax.jit(for_options, static_argnames=static_argnames, donate_argnums=donate_argnums,
                  compiler_options=CPU_OPTIONS if options is None else options)
    nested = {True: jax.jit(for_options, static_argnames=static_argnames),
              False: jax.jit(for_default, static_argnames=static_argnames)}
    by_layout = {}                          # Layout -> the cpu jit of its buffers

    def top_level(args, kwargs):
        """The top-level call: a first argument of a :data:`PACKED_TYPES` type goes as its
        packed buffers (:mod:`jaxdyn.packing`) where it can."""
        if args and isinstance(args[0], PACKED_TYPES):
            p = packed(args[0])
            if p is not None:
                f = by_layout.get(p.layout)
                if f is None:
                    f = by_layout[p.layout] = jax.jit(_unpacking(for_options, p.layout), static_argnames=static_argnames,
                                                      donate_argnums=donate_argnums,
                                                      compiler_options=CPU_OPTIONS if options is None else options)
                return f(p.buffers, *args[1:], **kwargs)
        return cpu(*args, **kwargs)

    if _trace_state_clean is not None:
        @functools.wraps(fun)
        def call(*args, **kwargs):          # per call: a trace-state test and a cached backend test
            if _trace_state_clean() and on_cpu():
                return top_level(args, kwargs)
            if _vmap_only() and on_cpu():
                return cpu(*args, **kwargs)
            return nested[_FOR_CPU_OPTIONS.get()](*args, **kwargs)
    else:                                   # pragma: no cover - other jax versions: no argument is
        @functools.wraps(fun)               # a tracer (misses only a caller's jit over constants)
        def call(*args, **kwargs):
            if traced((args, kwargs)) or not on_cpu():
                return nested[_FOR_CPU_OPTIONS.get()](*args, **kwargs)
            return top_level(args, kwargs)
    return call


def jit(fun=None, *, static_argnames=()):
    """``jax.jit`` for your own functions that call jaxdyn (``jaxdyn.jit``; usable as a decorator,
    ``@jaxdyn.jit`` or ``@jaxdyn.jit(static_argnames=(...))``): a top-level call on the CPU is
    compiled with :data:`CPU_OPTIONS` and jaxdyn's kernels inside are traced for them, e.g.
    ``jaxdyn.jit(jax.vmap(jaxdyn.aba, (None, 0, 0, 0)))`` runs at ``aba_batch``'s speed.
    Inside a plain ``jax.jit`` the kernels are traced for XLA's default options instead
    (:func:`for_cpu_options`), so prefer this to ``jax.jit(..., compiler_options=CPU_OPTIONS)``.
    Your function's own matrix products keep your ``jax_default_matmul_precision``; jaxdyn's
    inside it use :data:`MATMUL_PRECISION`.  Otherwise as ``jax.jit`` (:func:`cpu_jit`)."""
    if fun is None:
        return functools.partial(jit, static_argnames=static_argnames)
    return cpu_jit(fun, static_argnames=static_argnames, exact=False)


@functools.cache
def on_cpu():
    """Whether the default backend is the CPU (fixed once JAX has initialized its backends).
    The batch entry points' default chunk sizes depend on it
    (:func:`jaxdyn.dynamics.chunks.default_chunk`)."""
    return jax.default_backend() == "cpu"
