"""jaxdyn: rigid-body dynamics in JAX.

Spatial vectors inside algorithms are angular-first (Featherstone); public frame quantities
(Jacobians, frame velocities, external forces) use Pinocchio's [linear; angular] order.
"""
from . import spatial, errors, robots
from .errors import (JaxdynError, ModelError, URDFError, DHError, ShapeError, ConfigError,
                     ArgumentError, SimulationError)
from .model import (Model, build_model, stack, pad, pad_state, neutral, random_configuration,
                    integrate, difference, normalize, validate, parameters, with_parameters,
                    log_cholesky_parameters, with_log_cholesky_parameters)
from .io import from_dh, load_urdf
from .kinematics import (forward_kinematics, frame_pose, frame_poses, frame_jacobian, frame_velocity,
                         frame_acceleration, frame_classical_acceleration, jdot_qdot, point_velocity,
                         point_acceleration, inverse_kinematics, joint_transforms)
from .dynamics import (rnea, bias_forces, gravity_torques, crba, aba, aba_batch, CPU_OPTIONS, minv,
                       forward_dynamics, methods,
                       kinetic_energy, potential_energy, center_of_mass, spatial_momentum,
                       centroidal_momentum, total_mass, joint_wrenches, udut, udut_inverse, denoc,
                       gim_denoc, innovations_factors, innovations_operators, operator_fd2,
                       virtual_work, opspace_inverse_inertia, opspace_inertia, rnea_derivatives,
                       aba_derivatives, derivatives_batch)

from .constraints import (Constraint, ClosedModel, close_loops, constrained_forward_dynamics,
                          constraint_jacobian, constraint_residual, project_constraints)
from . import integrators
from .integrators import rollout, first_nonfinite, Trajectory, cycloidal, feedforward, computed_torque, pd, zero_torque
from .model.configuration import integrate  # the function; steppers live in jaxdyn.integrators

__version__ = "0.1.0"
