"""Method registries: forward-dynamics methods (``forward_dynamics(method=...)``) and M^-1
methods (``minv(method=...)``).  A method is a one-state function; "aba" runs
:func:`jaxdyn.aba`'s batchable form.  The seed methods register themselves when their
modules are imported."""
from __future__ import annotations

from .forward import crba_forward_dynamics
from .minv import minv_cholesky

FD_METHODS = {"aba": None, "crba": crba_forward_dynamics}
"""name -> fn(model, q, qd, tau, f_ext, gravity, f_ext_frame) -> qdd."""
MINV_METHODS = {"aba": None, "cholesky": minv_cholesky}
"""name -> fn(model, q) -> M^-1."""


def register_method(name):
    """Decorator: a forward-dynamics method ``fn(model, q, qd, tau, f_ext, gravity, f_ext_frame)``."""
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
