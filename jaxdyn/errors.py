"""Exceptions raised by jaxdyn.  Every message names the offending item."""


class JaxdynError(ValueError):
    """Base class of jaxdyn's input errors."""


class ModelError(JaxdynError):
    """A model that is not physical or not a valid tree (names body / joint / field)."""


class URDFError(ModelError):
    """A malformed URDF (names file and element)."""


class MJCFError(ModelError):
    """An MJCF file that MuJoCo's compiler rejects or jaxdyn cannot represent (names the file)."""


class DHError(ModelError):
    """A malformed Denavit-Hartenberg table."""


class ShapeError(JaxdynError):
    """An argument of the wrong shape or dtype at call entry."""


class ConfigError(JaxdynError):
    """A malformed simulation config (names the key)."""


class ArgumentError(JaxdynError):
    """A runtime argument of the wrong value or type (names the argument)."""


class SimulationError(JaxdynError):
    """A simulation whose state became non-finite (names the time and the quantity)."""


class JaxdynWarning(UserWarning):
    """A warning of jaxdyn's (a robot file's feature that is dropped, an inertia accepted or
    repaired, a trajectory that is not finite): ``warnings.filterwarnings("ignore",
    category=jaxdyn.errors.JaxdynWarning)`` silences them all."""
