"""TM0xx — the cell itself failed."""

from .model import Rule

RULES = [
    Rule(
        "TM000",
        "syntax-error",
        "error",
        evidence=("static",),
        what="""
            Reports a cell or file that does not parse as Python (after IPython's own syntax,
            `%magics` and `!shell` lines, is taken into account).
            """,
        why="""
            No rule can look at code that does not parse, and the cell will fail when run.
            """,
        example="""
            lr =
            """,
        fix="""
            lr = 1e-3
            """,
        not_flagged="cells that IPython runs (magics, shell escapes, `%` continuation lines)",
    ),
]
