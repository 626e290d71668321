"""jaxdyn: rigid-body dynamics in JAX.

Spatial vectors inside algorithms are angular-first (Featherstone); public frame quantities
(Jacobians, frame velocities, external forces) use Pinocchio's [linear; angular] order.
"""
from . import spatial as spatial, errors as errors, robots as robots
from .errors import (JaxdynError as JaxdynError, ModelError as ModelError, ShapeError as ShapeError,
                     ArgumentError as ArgumentError)
from .model import (Model as Model, build_model as build_model, neutral as neutral,
                    random_configuration as random_configuration, integrate as integrate,
                    difference as difference, normalize as normalize, validate as validate,
                    parameters as parameters, with_parameters as with_parameters,
                    log_cholesky_parameters as log_cholesky_parameters,
                    with_log_cholesky_parameters as with_log_cholesky_parameters)
from .io import (from_dh as from_dh, load_urdf as load_urdf, load_mjcf as load_mjcf, mjcf as mjcf,
                 save_urdf as save_urdf,
                 mechanisms as mechanisms)
from .kinematics import (forward_kinematics as forward_kinematics, frame_pose as frame_pose,
                         frame_poses as frame_poses, frame_jacobian as frame_jacobian,
                         frame_velocity as frame_velocity, frame_acceleration as frame_acceleration,
                         inverse_kinematics as inverse_kinematics)
from . import saha as saha, operators as operators, viewer as viewer
from .dynamics.virtual_work import virtual_work as virtual_work
from .dynamics.rnea import joint_wrenches as joint_wrenches
from .dynamics.energy import (kinetic_energy as kinetic_energy, potential_energy as potential_energy,
                              center_of_mass as center_of_mass, spatial_momentum as spatial_momentum,
                              centroidal_momentum as centroidal_momentum, total_mass as total_mass)
from .batching import (aba as aba, rnea as rnea, crba as crba, minv as minv, bias_forces as bias_forces,
                       gravity_torques as gravity_torques, forward_dynamics as forward_dynamics,
                       methods as methods, minv_methods as minv_methods, rnea_derivatives as rnea_derivatives,
                       aba_derivatives as aba_derivatives)
from .stack import stack as stack, Stack as Stack
from .constraints import (Constraint as Constraint, ClosedModel as ClosedModel,
                          close_loops as close_loops,
                          constrained_forward_dynamics as constrained_forward_dynamics,
                          constraint_jacobian as constraint_jacobian,
                          constraint_residual as constraint_residual,
                          project_constraints as project_constraints, GraspSystem as GraspSystem,
                          grasp_system as grasp_system, LeggedSystem as LeggedSystem,
                          legged_system as legged_system)
from . import integrators as integrators, kinematics as kinematics
from .apps import sysid as sysid, trajopt as trajopt
from .integrators import (rollout as rollout, first_nonfinite as first_nonfinite,
                          Trajectory as Trajectory, HeldLaw as HeldLaw)

__version__ = "0.2.0"

# The public names: the re-exports above and these namespaces (the package's other
# subpackages, e.g. jaxdyn.dynamics and jaxdyn.batching, are importable but not listed).
_NAMESPACES = {"spatial", "errors", "robots", "mechanisms", "integrators", "kinematics", "sysid", "trajopt", "saha",
               "operators", "mjcf", "viewer"}
__all__ = sorted(n for n, v in dict(globals()).items() if not n.startswith("_")
                 and (not hasattr(v, "__path__") and not hasattr(v, "__file__") or n in _NAMESPACES))
