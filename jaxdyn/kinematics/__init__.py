"""Kinematics: joint transforms, forward kinematics, frames, Jacobians, accelerations, IK.

* :mod:`.bodies`: every body at once (joint and world transforms, ancestors, motion subspace
  columns, body velocities and accelerations, forward kinematics);
* :mod:`.frames`: named frames (poses, Jacobians, velocities, accelerations, point motion,
  :func:`frame_terms` for several frames from one pass);
* :mod:`.ik`: inverse kinematics of a frame.

Internal spatial vectors are angular-first (Featherstone).  Public frame velocities,
accelerations and Jacobians use Pinocchio's convention: rows ``[linear; angular]`` and
``reference`` = "world" (world axes, world origin), "local" (frame axes and origin) or
"local_world_aligned" (frame origin, world axes).
"""
from .bodies import (joint_transforms as joint_transforms, world_transforms as world_transforms,
                     root_transforms as root_transforms, forward_kinematics as forward_kinematics,
                     ancestors as ancestors, body_velocities as body_velocities, dof_columns as dof_columns)
from .frames import (REFERENCES as REFERENCES, frame_index as frame_index, frame_X0 as frame_X0,
                     frame_pose as frame_pose, frame_poses as frame_poses, to_pin_order as to_pin_order,
                     change_reference as change_reference, frame_jacobian as frame_jacobian,
                     FrameTerms as FrameTerms, frame_terms as frame_terms, frame_velocity as frame_velocity,
                     frame_acceleration as frame_acceleration,
                     frame_classical_acceleration as frame_classical_acceleration, jdot_qdot as jdot_qdot,
                     point_velocity as point_velocity, point_acceleration as point_acceleration)
from .ik import inverse_kinematics as inverse_kinematics
