"""Closed chains: loop-closure constraints and constrained forward dynamics."""
from .grasp import GraspSystem, grasp_system, grasp_residual, CONTACTS
from .legged import LeggedSystem, legged_system
from .model import Constraint, ClosedModel, close_loops, KINDS
from .dynamics import (constrained_forward_dynamics, constraint_jacobian, constraint_residual, constraint_bias,
                       project_constraints, ConstrainedResult)

__all__ = [
    "GraspSystem",
    "grasp_system",
    "grasp_residual",
    "CONTACTS",
    "LeggedSystem",
    "legged_system",
    "Constraint",
    "ClosedModel",
    "close_loops",
    "KINDS",
    "constrained_forward_dynamics",
    "constraint_jacobian",
    "constraint_residual",
    "constraint_bias",
    "project_constraints",
    "ConstrainedResult",
]
