"""Array type aliases with shapes (jaxtyping) for jaxdyn's public signatures.

Dimension names: ``nq`` configuration coordinates, ``nv`` velocity coordinates (tangent
dimension), ``nb`` bodies, ``B`` a batch of states.  Within one call every name binds to one
size, so e.g. ``qd`` and ``tau`` of different lengths are caught.  The names are not tied to
the model (``nq`` is not checked against ``model.nq`` here): that is the job of the named
:class:`jaxdyn.errors.ShapeError` at each entry point, which also names the model.

The annotations are checked at run time in the test suite (jaxtyping's import hook with
beartype, ``--jaxtyping-packages`` in ``pyproject.toml``); user code pays nothing for them.
Inside ``jit`` they are checked once, when the function is traced.
"""
from __future__ import annotations

from jaxtyping import Array, ArrayLike, Float

Configuration = Float[ArrayLike, "nq"]
"""q (nq,): Pinocchio's layout (quaternions x, y, z, w)."""
Tangent = Float[ArrayLike, "nv"]
"""A vector of the tangent space (nv,): velocities qd, accelerations qdd, torques tau."""
BodyWrenches = Float[ArrayLike, "nb 6"]
"""Per-body spatial forces (nb, 6), Pinocchio order [force; moment]."""
Gravity = Float[ArrayLike, "3"]
"""Gravity (3,) in world coordinates (m/s^2)."""
JointMatrix = Float[Array, "nv nv"]
"""An (nv, nv) joint-space matrix: M, M^-1, a derivative of tau or qdd."""
BatchConfiguration = Float[ArrayLike, "B nq"]
"""B configurations (B, nq)."""
BatchTangent = Float[ArrayLike, "B nv"]
"""B tangent vectors (B, nv)."""
BatchWrenches = Float[ArrayLike, "B nb 6"]
"""B sets of per-body spatial forces (B, nb, 6)."""

__all__ = ["Configuration", "Tangent", "BodyWrenches", "Gravity", "JointMatrix", "BatchConfiguration",
           "BatchTangent", "BatchWrenches"]
