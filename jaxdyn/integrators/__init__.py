"""Steppers (one scheme per file) and rollouts."""
from .euler import semi_implicit_euler
from .rk4 import rk4
from .rkf45 import rkf45_step, rkf45_interval, RKFStats
from .abm import abm4, abm_init
from .rollout import (rollout, Trajectory, zero_torque, pd, feedforward, computed_torque, cycloidal,
                      STEPPERS)
