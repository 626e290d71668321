"""Rodriguez and Kreutz's (1988) spatial operators: the innovations factorization and inverse
of M, FD1-FD4 (:mod:`jaxdyn.dynamics.operator`); ``forward_dynamics(method="operator_fd1")``
etc. and ``minv(method="operator")`` run them; the operational-space inverse inertia
J M^-1 J^T by the O(N) recursion (6.10)."""
from .dynamics.operator import (innovations_factors as innovations_factors,
                                innovations_operators as innovations_operators, minv_operator as minv_operator,
                                operator_fd1 as operator_fd1, operator_fd2 as operator_fd2,
                                operator_fd3 as operator_fd3, operator_fd4 as operator_fd4,
                                InnovationsFactors as InnovationsFactors)
from .dynamics.opspace import (opspace_inverse_inertia as opspace_inverse_inertia,
                               opspace_inertia as opspace_inertia)
