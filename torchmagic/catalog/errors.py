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
            `%magics` and `!shell` lines, is taken into account), once, at the first line that
            does not parse; the lines that do parse are still checked. Old PyTorch code's
            `x.cuda(async=True)` (a syntax error since Python 3.7 made `async` a keyword) gets
            its replacement, `non_blocking=True`. An exercise blank of a course notebook
            (`< YOUR CODE HERE >`, `lr = `) is named as one, as info: it is there on purpose.
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
    Rule(
        "TM001",
        "tensor-error",
        "error",
        evidence=("runtime",),
        what="""
            Explains a PyTorch shape, dtype or device error raised by the cell, under its normal
            traceback: which layer it was (the module chain from the shape trace of this very
            run, `net.2 (Linear 64→10)`), the tensors involved with their shapes, dtypes and
            devices (read from the failing frames without running anything again), what the
            layer expected, and one likely fix.
            """,
        why="""
            The traceback ends in `torch/nn/modules/linear.py` with
            `mat1 and mat2 shapes cannot be multiplied (32x128 and 64x10)`: which of your layers,
            fed by which other one, is left for you to work out.
            """,
        example="""
            net = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.Linear(64, 10))
            net(torch.randn(32, 1, 28, 28))
            # RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x128 and 64x10)
            """,
        fix="""
            net = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.Linear(128, 10))
            # `net.2` (Linear 64→10) got input [32, 128] from `net.1`: build it as nn.Linear(128, 10)
            """,
        not_flagged="""
            errors that are not about tensors (and exceptions of user-defined types, whose message
            could run user code); anything that would need re-running user code to explain
            """,
    ),
]
