"""6-D spatial algebra (Featherstone's Table 1), angular-first ordering."""
from .transforms import (Transform, skew, rot_E, rotx, roty, rotz, xlt, identity, compose,
                         inverse, apply_motion, apply_motion_inv, apply_force, apply_force_T, congruence,
                         to_matrix, to_force_matrix, from_matrix, XtoV, placement, from_placement)
from . import linalg
from .cross import cross_motion, cross_force, crm, crf
from .inertia import Inertia, mcI
from . import inertia
from .rotations import quat_to_rot, rot_to_quat, exp3, log3, exp6, log6

__all__ = [
    "Transform", "skew", "rot_E", "rotx", "roty", "rotz", "xlt", "identity", "compose", "inverse",
    "apply_motion", "apply_motion_inv", "apply_force", "apply_force_T", "congruence", "linalg", "to_matrix",
    "to_force_matrix", "from_matrix", "XtoV", "placement", "from_placement", "cross_motion",
    "cross_force", "crm", "crf", "Inertia", "mcI", "inertia", "quat_to_rot", "rot_to_quat",
    "exp3", "log3", "exp6", "log6",
]
