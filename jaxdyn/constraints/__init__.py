"""Closed chains: loop-closure constraints and constrained forward dynamics."""
from .grasp import (GraspSystem as GraspSystem, grasp_system as grasp_system,
                    grasp_residual as grasp_residual, CONTACTS as CONTACTS)
from .legged import LeggedSystem as LeggedSystem, legged_system as legged_system
from .model import (Constraint as Constraint, ClosedModel as ClosedModel,
                    close_loops as close_loops, KINDS as KINDS)
from .dynamics import (constrained_forward_dynamics as constrained_forward_dynamics,
                       constraint_jacobian as constraint_jacobian,
                       constraint_residual as constraint_residual,
                       constraint_bias as constraint_bias,
                       project_constraints as project_constraints,
                       check_assembled as check_assembled,
                       ConstrainedResult as ConstrainedResult)

# Star-import and introspection list, derived from the explicit re-exports above.
__all__ = sorted(n for n in dir() if not n.startswith("_"))
