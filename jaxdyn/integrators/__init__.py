"""Steppers (one scheme per file) and rollouts."""
from .euler import semi_implicit_euler
from .rk4 import rk4
from .rkf45 import rkf45_step, rkf45_interval, rkf45_stats, RKFStats
from .abm import abm4, abm_init, history_at
from .controllers import HeldLaw, zero_torque, pd, feedforward, computed_torque, cycloidal
from .steppers import STEPPERS, Stepper, StepOptions
from .rollout import rollout, first_nonfinite, Trajectory

__all__ = [
    "semi_implicit_euler",
    "rk4",
    "rkf45_step",
    "rkf45_interval",
    "rkf45_stats",
    "RKFStats",
    "abm4",
    "abm_init",
    "history_at",
    "rollout",
    "first_nonfinite",
    "Trajectory",
    "HeldLaw",
    "zero_torque",
    "pd",
    "feedforward",
    "computed_torque",
    "cycloidal",
    "STEPPERS",
    "Stepper",
    "StepOptions",
]
