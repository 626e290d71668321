"""Where the test suite's time goes: a pytest plugin that sums, per test, JAX's tracing,
lowering (jaxpr to MLIR) and XLA compile seconds and counts the compiled programs.

    PYTHONPATH=benchmarks python -m pytest tests -p suite_profile -n 2 --dist worksteal

writes ``benchmarks/results/suite_profile.json`` ({test id: {"wall", "trace", "lower",
"compile", "programs"}}, the call phase only; xdist workers send theirs to the controller)
and prints the tests with the most compile seconds.  Many programs for a few compile seconds
are eager calls (one small program per primitive and shape); few programs for many seconds
are large programs (autodiff references, all methods in one program).
"""
from __future__ import annotations

import json
import os
import time
from collections import defaultdict

import jax
import pytest

OUT = os.path.join(os.path.dirname(__file__), "results", "suite_profile.json")
EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace",
          "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
          "/jax/core/compile/backend_compile_duration": "compile"}
_current = [None]
_sums = defaultdict(lambda: defaultdict(float))


def _listen(event, duration, **_):
    if _current[0] is not None and event in EVENTS:
        _sums[_current[0]][EVENTS[event]] += duration
        _sums[_current[0]]["programs"] += event.endswith("backend_compile_duration")


jax.monitoring.register_event_duration_secs_listener(_listen)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _current[0] = item.nodeid
    t = time.perf_counter()
    yield
    _sums[item.nodeid]["wall"] += time.perf_counter() - t
    _current[0] = None


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput"):      # an xdist worker: sent to the controller
        session.config.workeroutput["suite_profile"] = json.dumps(_sums)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """The controller receives a finished xdist worker's sums."""
    _sums.update(json.loads(node.workeroutput.get("suite_profile", "{}")))


def pytest_terminal_summary(terminalreporter):
    """Write the sums of every test (this process's, or the xdist workers') and print the top."""
    if hasattr(terminalreporter.config, "workeroutput"):
        return
    merged = dict(_sums)
    with open(OUT, "w") as f:
        json.dump(merged, f, indent=1, sort_keys=True)
    w = terminalreporter.write_line
    w(f"{'wall':>6} {'trace':>6} {'lower':>6} {'compile':>7} {'programs':>8}  test (by compile seconds)")
    for k, v in sorted(merged.items(), key=lambda kv: -kv[1].get("compile", 0))[:25]:
        w(f"{v.get('wall', 0):6.1f} {v.get('trace', 0):6.1f} {v.get('lower', 0):6.1f} "
          f"{v.get('compile', 0):7.1f} {int(v.get('programs', 0)):8d}  {k}")
    tot = {e: sum(v.get(e, 0) for v in merged.values()) for e in ("wall", "trace", "lower", "compile", "programs")}
    w("all tests: " + ", ".join(f"{k} {v:.0f}" for k, v in tot.items()) + f" -> {OUT}")
