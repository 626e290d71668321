"""Steppers (one scheme per file) and rollouts."""
from .euler import semi_implicit_euler as semi_implicit_euler
from .rk4 import rk4 as rk4
from .rkf45 import (rkf45_step as rkf45_step, rkf45_interval as rkf45_interval,
                    rkf45_stats as rkf45_stats, RKFStats as RKFStats)
from .abm import abm4 as abm4, abm_init as abm_init, history_at as history_at
from .controllers import (HeldLaw as HeldLaw, zero_torque as zero_torque, pd as pd,
                          feedforward as feedforward, computed_torque as computed_torque,
                          cycloidal as cycloidal)
from .steppers import STEPPERS as STEPPERS, Stepper as Stepper, StepOptions as StepOptions
from .rollout import (rollout as rollout, first_nonfinite as first_nonfinite,
                      Trajectory as Trajectory)
from .stability import (STABLE_STEP as STABLE_STEP, damping_rate as damping_rate,
                        max_stable_step as max_stable_step)

# Star-import and introspection list, derived from the explicit re-exports above.
__all__ = sorted(n for n in dir() if not n.startswith("_"))
