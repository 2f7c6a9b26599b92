"""steerable: language annotations, recipes and steering for LeRobot v3 datasets."""

from steerable.errors import SteerableError

__version__ = "0.1.0"
__all__ = ["SteerableError", "__version__"]
