"""6-D spatial algebra (Featherstone's Table 1), angular-first ordering."""
from .transforms import (Transform as Transform, skew as skew, rot_E as rot_E, rotx as rotx,
                         roty as roty, rotz as rotz, xlt as xlt, identity as identity,
                         compose as compose, inverse as inverse, apply_motion as apply_motion,
                         apply_motion_inv as apply_motion_inv, apply_force as apply_force,
                         apply_force_T as apply_force_T, congruence as congruence,
                         rotate_congruence as rotate_congruence,
                         translate_congruence as translate_congruence,
                         to_matrix as to_matrix, to_force_matrix as to_force_matrix,
                         from_matrix as from_matrix, XtoV as XtoV, placement as placement,
                         from_placement as from_placement)
from . import linalg as linalg
from .cross import cross_motion as cross_motion, cross_force as cross_force, crm as crm, crf as crf
from .inertia import Inertia as Inertia, mcI as mcI
from . import inertia as inertia
from .rotations import (quat_to_rot as quat_to_rot, rot_to_quat as rot_to_quat, exp3 as exp3,
                        log3 as log3, exp6 as exp6, log6 as log6)

# Star-import and introspection list, derived from the explicit re-exports above.
__all__ = sorted(n for n in dir() if not n.startswith("_"))
