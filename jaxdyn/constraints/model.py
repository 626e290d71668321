"""Loop-closure constraints and closed models.

A :class:`Constraint` ties a *contact frame* on body A to one on body B (or to the world):

* ``"point"`` (3 rows): the two contact-frame origins coincide;
* ``"weld"`` (6 rows): the two contact frames coincide (position and orientation);
* ``"revolute"`` (5 rows): as weld, but free to rotate about the common z axis of the contact
  frames (a hinge closing a loop);
* ``"subspace"`` (r rows): a user-given constraint subspace ``subspace`` (6, r), columns in
  contact frame A's axes with rows [linear; angular] (Yamane and Nakamura's K, Lilly and
  Orin's phi^c): the components ``subspace^T [v_rel; omega_rel]`` of the relative motion of
  frame A with respect to frame B vanish.

point and weld rows are in world axes (Pinocchio's LOCAL_WORLD_ALIGNED contact forces);
revolute and subspace rows are in contact frame A's axes.

``frame_a`` / ``frame_b`` are any names :func:`jaxdyn.frame_pose` accepts (``frame_b=None``
is the world); ``placement_a`` / ``placement_b`` = (R (3, 3), p (3,)) place the contact frame
in that frame's coordinates (None: identity).  :func:`close_loops` validates the constraints
and adds the contact frames to the model as named frames ``"<name>:a"`` / ``"<name>:b"``.
"""
from __future__ import annotations

import dataclasses
from typing import no_type_check

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError
from ..model.model import Model

KINDS = {"point": 3, "weld": 6, "revolute": 5, "subspace": None}
_REVOLUTE_PHI = np.concatenate([np.eye(6)[:, :3], np.eye(6)[:, 3:5]], 1)     # all but rotation about z


@dataclasses.dataclass(frozen=True)
class Constraint:
    """One loop closure (see the module docstring)."""
    kind: str
    frame_a: str
    frame_b: str | None = None
    placement_a: tuple | None = None
    placement_b: tuple | None = None
    name: str | None = None
    subspace: object = None

    @property
    def rows(self) -> int:
        """Number of constraint rows (raises ModelError for an unknown kind or a subspace that
        is not a (6, r) matrix)."""
        _check_kind(self.kind, self.name or "constraint")
        if self.kind != "subspace":
            return KINDS[self.kind]
        if np.ndim(self.subspace) != 2:
            raise ModelError(f"constraint {self.name!r}: kind 'subspace' needs subspace= a (6, r) matrix")
        return int(np.shape(self.subspace)[1])


def _check_kind(kind, nm):
    if not isinstance(kind, str) or kind not in KINDS:
        raise ModelError(f"constraint {nm!r}: unknown kind {kind!r}; kinds are {sorted(KINDS)}")


@no_type_check  # a pytree node: JAX rebuilds it with arbitrary leaves (tracers, None,
# sentinels) inside transformations, so the field annotations document, they are not checked
@dataclasses.dataclass(frozen=True)
class ClosedModel:
    """A Model with loop-closure constraints.  ``model`` carries the contact frames;
    ``frames_a`` / ``frames_b`` are their frame indices (-1 for a world-fixed b with pose
    ``world_R`` / ``world_p``); ``kinds`` and ``rows`` are static."""
    model: object
    kinds: tuple[str, ...]
    frames_a: tuple[int, ...]
    frames_b: tuple[int, ...]
    world_R: jax.Array      # (nc, 3, 3) pose of world-fixed contact frames b (identity otherwise)
    world_p: jax.Array      # (nc, 3)
    phis: tuple             # per constraint (6, r) subspace in frame-A axes (revolute, subspace)
    names: tuple[str, ...]
    rows: tuple[int, ...]

    @property
    def m(self) -> int:
        """Number of constraint rows."""
        return sum(self.rows)

    def replace(self, **kw):
        return dataclasses.replace(self, **kw)


jax.tree_util.register_dataclass(ClosedModel, data_fields=["model", "world_R", "world_p", "phis"],
                                 meta_fields=["kinds", "frames_a", "frames_b", "names", "rows"])


def _placement(pl, what):
    if pl is None:
        return np.eye(3), np.zeros(3)
    try:
        R, p = pl
        given = np.asarray(R).dtype               # R R^T = 1 is checked to the precision R was given in
        R, p = np.asarray(R, float), np.asarray(p, float)
    except (TypeError, ValueError):
        raise ModelError(f"{what} must be (R (3, 3), p (3,)), got {pl!r}") from None
    if R.shape != (3, 3) or p.shape != (3,) or not (np.all(np.isfinite(R)) and np.all(np.isfinite(p))):
        raise ModelError(f"{what} must be (R (3, 3), p (3,)) with finite entries, got shapes {R.shape}, {p.shape}")
    tol = max(1e-9, 100 * np.finfo(given if np.issubdtype(given, np.floating) else float).eps)
    if not np.allclose(R @ R.T, np.eye(3), atol=tol) or np.linalg.det(R) < 0:
        raise ModelError(f"{what}: R is not a rotation matrix (R R^T != 1 within {tol:.1e} or det R < 0)")
    return R, p


def close_loops(model, constraints) -> ClosedModel:
    """Validate ``constraints`` against ``model`` and return a :class:`ClosedModel`.

    Raises :class:`~jaxdyn.errors.ModelError` naming the constraint for an unknown kind, a
    missing frame, a placement that is not a rotation, or a constraint from a body to itself.
    """
    if not isinstance(model, Model):
        raise ModelError(f"close_loops needs a tree Model (e.g. jaxdyn.load_urdf), got {type(model).__name__}"
                         + (" (close_loops a ClosedModel's .model with all its constraints)"
                            if isinstance(model, ClosedModel) else ""))
    if isinstance(constraints, Constraint) or not isinstance(constraints, (list, tuple)):
        raise ModelError(f"close_loops: constraints must be a list of jaxdyn.Constraint, got "
                         f"{type(constraints).__name__}")
    constraints = list(constraints)
    if not constraints:
        raise ModelError("close_loops needs at least one Constraint")
    seen = [c.name for c in constraints if isinstance(c, Constraint) and c.name]
    dup = sorted({n for n in seen if seen.count(n) > 1})
    if dup:
        raise ModelError(f"close_loops: constraint names {dup} are repeated; names name the contact frames "
                         "'<name>:a' / '<name>:b' and must be unique")
    fnames = list(model.frame_names)
    fbody = [int(b) for b in np.asarray(model.frame_body)]
    fE, fr = list(np.asarray(model.frame_E)), list(np.asarray(model.frame_r))
    kinds, fa, fb, wR, wp, names, phis, rows = [], [], [], [], [], [], [], []
    for i, c in enumerate(constraints):
        if not isinstance(c, Constraint):
            raise ModelError(f"constraint {i}: expected jaxdyn.Constraint, got {type(c).__name__}")
        nm = c.name or f"c{i}"
        _check_kind(c.kind, nm)
        if c.kind == "subspace":
            try:
                phi = np.asarray(c.subspace, float) if c.subspace is not None else None
            except (TypeError, ValueError):
                raise ModelError(f"constraint {nm!r}: subspace= must be a (6, r) matrix of numbers, got "
                                 f"{c.subspace!r:.60}") from None
            if phi is None or phi.ndim != 2 or phi.shape[0] != 6 or not 1 <= phi.shape[1] <= 6 \
                    or not np.all(np.isfinite(phi)) or np.linalg.matrix_rank(phi) < phi.shape[1]:
                raise ModelError(f"constraint {nm!r}: kind 'subspace' needs subspace= a (6, r) matrix of rank r, "
                                 f"1 <= r <= 6, got {None if phi is None else phi.shape}")
        elif c.subspace is not None:
            raise ModelError(f"constraint {nm!r}: subspace= is only for kind 'subspace'")
        else:
            phi = _REVOLUTE_PHI if c.kind == "revolute" else np.eye(6)[:, :KINDS[c.kind]]
        bodies = []
        for side, frame, pl in (("a", c.frame_a, c.placement_a), ("b", c.frame_b, c.placement_b)):
            R, p = _placement(pl, f"constraint {nm!r}: placement_{side}")
            if frame is None:
                if side == "a":
                    raise ModelError(f"constraint {nm!r}: frame_a is required")
                bodies.append(-1)
                wR.append(R); wp.append(p); fb.append(-1)
                continue
            if frame not in model.frame_names:
                raise ModelError(f"constraint {nm!r}: model {model.name!r} has no frame {frame!r}")
            j = model.frame_names.index(frame)
            b = fbody[j]
            Rf = fE[j].T                                   # frame axes in body coordinates
            fnames.append(f"{nm}:{side}"); fbody.append(b)
            fE.append((Rf @ R).T); fr.append(fr[j] + Rf @ p)
            (fa if side == "a" else fb).append(len(fnames) - 1)
            if side == "b":
                wR.append(np.eye(3)); wp.append(np.zeros(3))
            bodies.append(b)
        if bodies[0] == bodies[1]:
            raise ModelError(f"constraint {nm!r}: frames {c.frame_a!r} and {c.frame_b!r} are on the same "
                             "body; a constraint must join two different bodies (or a body and the world)")
        kinds.append(c.kind); names.append(nm); phis.append(jnp.asarray(phi)); rows.append(phi.shape[1])
    m2 = model.replace(frame_body=fbody, frame_E=jnp.asarray(np.stack(fE)), frame_r=jnp.asarray(np.stack(fr)),
                       frame_names=tuple(fnames))
    return ClosedModel(m2, tuple(kinds), tuple(fa), tuple(fb), jnp.asarray(np.stack(wR)),
                       jnp.asarray(np.stack(wp)), tuple(phis), tuple(names), tuple(rows))
