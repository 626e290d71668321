"""Model pytree, joint models, configuration space, stacking."""
from .model import Model as Model, build_model as build_model, check_state as check_state
from .joints import (FIXED as FIXED, REVOLUTE as REVOLUTE, REVOLUTE_UB as REVOLUTE_UB,
                     PRISMATIC as PRISMATIC, HELICAL as HELICAL, SPHERICAL as SPHERICAL,
                     FREE as FREE, PLANAR as PLANAR, JOINT_NAMES as JOINT_NAMES, jcalc as jcalc)
from .configuration import (integrate as integrate, difference as difference, neutral as neutral,
                            random_configuration as random_configuration, normalize as normalize)
from .stack import stack as stack, pad as pad, pad_state as pad_state
from .validate import (validate as validate, check_inertia as check_inertia,
                       nearest_valid_inertia as nearest_valid_inertia,
                       INERTIA_POLICIES as INERTIA_POLICIES)
from .parameters import (parameters as parameters, with_parameters as with_parameters,
                         log_cholesky_parameters as log_cholesky_parameters,
                         with_log_cholesky_parameters as with_log_cholesky_parameters,
                         PARAMETERS as PARAMETERS)

# Star-import and introspection list, derived from the explicit re-exports above.
__all__ = sorted(n for n in dir() if not n.startswith("_"))
