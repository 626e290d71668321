"""Model pytree, joint models, configuration space, stacking."""
from .model import Model, build_model, check_state
from .joints import (FIXED, REVOLUTE, REVOLUTE_UB, PRISMATIC, HELICAL, SPHERICAL, FREE, PLANAR,
                     JOINT_NAMES, jcalc)
from .configuration import integrate, difference, neutral, random_configuration, normalize
from .stack import stack, pad, pad_state
from .validate import validate, check_inertia, nearest_valid_inertia, INERTIA_POLICIES
from .parameters import (parameters, with_parameters, log_cholesky_parameters,
                         with_log_cholesky_parameters, PARAMETERS)

__all__ = [
    "Model",
    "build_model",
    "check_state",
    "FIXED",
    "REVOLUTE",
    "REVOLUTE_UB",
    "PRISMATIC",
    "HELICAL",
    "SPHERICAL",
    "FREE",
    "PLANAR",
    "JOINT_NAMES",
    "jcalc",
    "integrate",
    "difference",
    "neutral",
    "random_configuration",
    "normalize",
    "stack",
    "pad",
    "pad_state",
    "validate",
    "check_inertia",
    "nearest_valid_inertia",
    "INERTIA_POLICIES",
    "parameters",
    "with_parameters",
    "log_cholesky_parameters",
    "with_log_cholesky_parameters",
    "PARAMETERS",
]
