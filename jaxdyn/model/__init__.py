"""The Model (static topology, traced parameters), joint models, configuration space,
validation and parameters for optimizers."""
from .model import (Model as Model, Topology as Topology, build_model as build_model,
                    check_state as check_state)
from .joints import (FIXED as FIXED, REVOLUTE as REVOLUTE, REVOLUTE_UB as REVOLUTE_UB,
                     PRISMATIC as PRISMATIC, HELICAL as HELICAL, SPHERICAL as SPHERICAL,
                     FREE as FREE, PLANAR as PLANAR, JOINT_NAMES as JOINT_NAMES, jcalc as jcalc)
from .configuration import (integrate as integrate, difference as difference, neutral as neutral,
                            random_configuration as random_configuration, normalize as normalize)
from .validate import (validate as validate, check_inertia as check_inertia,
                       nearest_valid_inertia as nearest_valid_inertia,
                       INERTIA_POLICIES as INERTIA_POLICIES)
from .parameters import (parameters as parameters, with_parameters as with_parameters,
                         log_cholesky_parameters as log_cholesky_parameters,
                         with_log_cholesky_parameters as with_log_cholesky_parameters,
                         PARAMETERS as PARAMETERS)
