"""jaxdyn: rigid-body dynamics in JAX.

Spatial vectors inside algorithms are angular-first (Featherstone); public frame quantities
(Jacobians, frame velocities, external forces) use Pinocchio's [linear; angular] order.
"""
from . import spatial as spatial, errors as errors, robots as robots
from .compiled import jit as jit
from .host_memory import tune_host_allocator as tune_host_allocator
from .io import mechanisms as mechanisms
from .errors import (JaxdynError as JaxdynError, ModelError as ModelError, URDFError as URDFError,
                     DHError as DHError, ShapeError as ShapeError, ConfigError as ConfigError,
                     ArgumentError as ArgumentError, SimulationError as SimulationError)
from .model import (Model as Model, build_model as build_model, stack as stack, pad as pad,
                    pad_state as pad_state, neutral as neutral,
                    random_configuration as random_configuration, integrate as integrate,
                    difference as difference, normalize as normalize, validate as validate,
                    parameters as parameters, with_parameters as with_parameters,
                    log_cholesky_parameters as log_cholesky_parameters,
                    with_log_cholesky_parameters as with_log_cholesky_parameters)
from .io import from_dh as from_dh, load_urdf as load_urdf
from .kinematics import (forward_kinematics as forward_kinematics, frame_pose as frame_pose,
                         frame_poses as frame_poses, frame_jacobian as frame_jacobian,
                         frame_velocity as frame_velocity, frame_acceleration as frame_acceleration,
                         frame_classical_acceleration as frame_classical_acceleration,
                         jdot_qdot as jdot_qdot, point_velocity as point_velocity,
                         point_acceleration as point_acceleration,
                         inverse_kinematics as inverse_kinematics,
                         joint_transforms as joint_transforms)
from .dynamics import (rnea as rnea, bias_forces as bias_forces, gravity_torques as gravity_torques,
                       crba as crba, aba as aba, aba_batch as aba_batch, CPU_OPTIONS as CPU_OPTIONS,
                       CPU_XLA_FLAGS as CPU_XLA_FLAGS,
                       minv as minv, forward_dynamics as forward_dynamics, methods as methods,
                       minv_methods as minv_methods, kinetic_energy as kinetic_energy,
                       potential_energy as potential_energy, center_of_mass as center_of_mass,
                       spatial_momentum as spatial_momentum,
                       centroidal_momentum as centroidal_momentum, total_mass as total_mass,
                       joint_wrenches as joint_wrenches, udut as udut, udut_inverse as udut_inverse,
                       denoc as denoc, gim_denoc as gim_denoc,
                       innovations_factors as innovations_factors,
                       innovations_operators as innovations_operators, operator_fd2 as operator_fd2,
                       virtual_work as virtual_work,
                       opspace_inverse_inertia as opspace_inverse_inertia,
                       opspace_inertia as opspace_inertia, rnea_derivatives as rnea_derivatives,
                       aba_derivatives as aba_derivatives, derivatives_batch as derivatives_batch)

from .constraints import (Constraint as Constraint, ClosedModel as ClosedModel,
                          close_loops as close_loops,
                          constrained_forward_dynamics as constrained_forward_dynamics,
                          constraint_jacobian as constraint_jacobian,
                          constraint_residual as constraint_residual,
                          project_constraints as project_constraints, GraspSystem as GraspSystem,
                          grasp_system as grasp_system, LeggedSystem as LeggedSystem,
                          legged_system as legged_system)
from . import apps as apps
from .apps import (inertial_parameters as inertial_parameters,
                   with_inertial_parameters as with_inertial_parameters, regressor as regressor,
                   base_parameters as base_parameters,
                   identify_least_squares as identify_least_squares,
                   identify_consistent as identify_consistent,
                   fourier_excitation as fourier_excitation, trajopt as trajopt)
from . import integrators as integrators
from .integrators import (rollout as rollout, first_nonfinite as first_nonfinite,
                          Trajectory as Trajectory, HeldLaw as HeldLaw, cycloidal as cycloidal,
                          feedforward as feedforward, computed_torque as computed_torque, pd as pd,
                          zero_torque as zero_torque)

__version__ = "0.1.0"

# Star-import and introspection list, derived from the explicit re-exports above.
__all__ = sorted(n for n in dir() if not n.startswith("_"))
