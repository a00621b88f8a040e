"""Static analysis of cell/file source. Imports neither torch nor IPython."""

from .engine import check_source
from .registry import RULES, Rule, all_rules, get_rule

__all__ = ["RULES", "Rule", "all_rules", "check_source", "get_rule"]
