"""Operation counts: multiplications/divisions (M) and additions/subtractions (A).

``op_count(method, model)`` *instruments* the implementation: it traces the jitted algorithm
to a jaxpr and tallies every floating-point primitive, expanding ``dot_general`` into its
n*k multiplications and n*(k-1) additions and multiplying the body of each ``scan`` by its
length (a ``while`` body is counted once and every ``cond`` branch is counted, so loops of
unknown trip count are under-counted; the dynamics methods contain neither).  So it counts
what jaxdyn executes (dense 6x6 spatial algebra, no DH-specific
simplifications), not a hand count.

``saha_table1(n)`` is Saha's (2003) own tally: the per-step counts printed in Sec. 3 of Saha 2003
summed term by term (their sum is 192n - 284 M and 187n - 325 A; Table I prints 191n - 284 M,
one n fewer than its own steps add up to).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .batching import forward_dynamics
from .dynamics.udut import udut_forward
from .model.configuration import neutral

_MUL = {"mul", "div", "integer_pow", "rsqrt", "sqrt", "reciprocal"}
_ADD = {"add", "sub", "add_any", "neg"}
_OTHER = {"sin", "cos", "exp", "log", "tanh", "atan2", "pow", "cholesky", "triangular_solve",
          "lu", "custom_linear_solve"}


def _is_float(v):
    try:
        return jnp.issubdtype(v.aval.dtype, jnp.floating)
    except AttributeError:
        return False


def _size(v):
    return int(np.prod(v.aval.shape)) if v.aval.shape else 1


def _count_jaxpr(jaxpr, mult=1, out=None):
    out = out if out is not None else {"M": 0, "A": 0, "other": 0}
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        sub = [p for p in eqn.params.values() if hasattr(p, "jaxpr") or hasattr(p, "eqns")]
        if name == "scan":
            _count_jaxpr(eqn.params["jaxpr"].jaxpr, mult * eqn.params["length"], out)
            continue
        if name in ("while", "cond"):
            for key in ("body_jaxpr", "branches"):
                if key in eqn.params:
                    br = eqn.params[key]
                    for b in (br if isinstance(br, (tuple, list)) else [br]):
                        _count_jaxpr(b.jaxpr, mult, out)
            continue
        if sub:
            for p in sub:
                _count_jaxpr(p.jaxpr if hasattr(p, "jaxpr") else p, mult, out)
            continue
        if not eqn.outvars or not _is_float(eqn.outvars[0]):
            continue
        n = _size(eqn.outvars[0])
        if name == "dot_general":
            (lc, _), _ = eqn.params["dimension_numbers"]
            k = math.prod(eqn.invars[0].aval.shape[d] for d in lc) if lc else 1
            out["M"] += mult * n * k
            out["A"] += mult * n * (k - 1)
        elif name in _MUL:
            out["M"] += mult * n
        elif name in _ADD:
            out["A"] += mult * n
        elif name == "reduce_sum":
            out["A"] += mult * (_size(eqn.invars[0]) - n)
        elif name in _OTHER:
            out["other"] += mult * n
    return out


def count_ops(fn, *args):
    """Tally M / A / other float operations of ``fn(*args)`` (traced, not run)."""
    closed = jax.make_jaxpr(fn)(*args)
    return _count_jaxpr(closed.jaxpr)


def op_count(method, model, q=None):
    """Operations of one forward-dynamics call by ``method`` on ``model``.

    For ``method="udut"`` the count covers Saha's (2003) scope of Table I: the joint transforms,
    the UDU^T factorization and steps A, B, C given phi (phi = tau - C qd - g from an inverse
    dynamics call is an input there).  Other methods count the whole
    ``forward_dynamics(method=...)`` call.  Returns {"M", "A", "other"} (other = sin, cos,
    Cholesky, ...).
    """
    q = neutral(model) if q is None else q
    z = jnp.zeros(model.nv, q.dtype)
    if method == "udut":
        return count_ops(lambda qq, ph: udut_forward(model, qq, ph), q, z)
    return count_ops(lambda qq, v, t: forward_dynamics(model, qq, v, t, method=method), q, z, z)


# Saha 2003, Sec. 3: (step, M(n), A(n)) exactly as printed in the braces
SAHA_STEPS = (
    ("A1 d_i", lambda n: 4 * n, lambda n: 2 * n),
    ("A2 c_i,i-1", lambda n: 0, lambda n: 3 * (n - 1)),
    ("A3a M-hat_n", lambda n: 16, lambda n: 17),
    ("A3b M-hat_i", lambda n: 86 * n - 179, lambda n: 101 * n - 215),
    ("A4a psi-hat_n", lambda n: 2, lambda n: 0),
    ("A4b psi-hat_i", lambda n: 12 * (n - 3), lambda n: 12 * (n - 3)),
    ("A5 m-hat_i", lambda n: 2 * n, lambda n: 2 * n),
    ("A6 psi_i", lambda n: 6 * n - 7, lambda n: 0),
    ("A7a M-hat_nn", lambda n: 15, lambda n: 8),
    ("A7b M-hat_ii", lambda n: 21 * (n - 2), lambda n: 21 * (n - 2)),
    ("A8a eta_n", lambda n: 5, lambda n: 0),
    ("A8b eta_i", lambda n: 6 * (n - 2), lambda n: 6 * (n - 2)),
    ("A9 eta_i-1,i", lambda n: 22 * n - 26, lambda n: 14 * n - 18),
    ("A10 tau-hat_i", lambda n: 2 * (n - 1), lambda n: 3 * (n - 1)),
    ("B tau-tilde", lambda n: n, lambda n: 0),
    ("C1 thdd_i", lambda n: 6 * (n - 1), lambda n: 6 * (n - 1)),
    ("C2a mu_1", lambda n: 12, lambda n: 2),
    ("C2b mu_i", lambda n: 18 * (n - 1), lambda n: 11 * (n - 1)),
    ("C3 mu_i,i-1", lambda n: 6 * (n - 1), lambda n: 6 * (n - 1)),
)


def saha_table1(n):
    """(M, A) of Saha's implementation for n links: the sum of the Sec. 3 step counts."""
    return (sum(f(n) for _, f, _ in SAHA_STEPS), sum(g(n) for _, _, g in SAHA_STEPS))
