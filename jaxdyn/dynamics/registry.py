"""Method registries: forward-dynamics methods (``forward_dynamics(method=...)``) and M^-1
methods (``minv(method=...)``).  Algorithm modules register themselves here at import, so the
front doors never import the algorithms that register (no import cycles)."""
from __future__ import annotations

FD_METHODS = {}
MINV_METHODS = {}


def register_method(name):
    """Decorator: ``fn(model, q, qd, tau, f_ext=None, gravity=None) -> qdd`` as a forward-dynamics method."""
    def deco(fn):
        FD_METHODS[name] = fn
        return fn
    return deco


def register_minv(name):
    """Decorator: ``fn(model, q) -> M^-1 (nv, nv)`` as an M^-1 method."""
    def deco(fn):
        MINV_METHODS[name] = fn
        return fn
    return deco


def methods():
    """Names accepted by ``forward_dynamics(method=...)`` (the algorithm modules register theirs
    when ``jaxdyn.dynamics`` is imported)."""
    return tuple(sorted(FD_METHODS))


def minv_methods():
    """Names accepted by ``minv(method=...)``."""
    return tuple(sorted(MINV_METHODS))
