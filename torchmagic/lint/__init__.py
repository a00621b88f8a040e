"""cell source -> Findings. Imports neither torch nor IPython."""

from .engine import check_source, lint

__all__ = ["check_source", "lint"]
