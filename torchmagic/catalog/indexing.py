"""TM7xx — vectorisation and indexing."""

from .model import Rule

RULES = [
    Rule(
        "TM701",
        "python-loop-over-tensor",
        "warning",
        evidence=("static",),
        what="""
            Flags `for i in range(len(x))` (or `x.size(0)`, `x.shape[0]`) whose body indexes `x[i]`
            or writes `out[i] = ...` element by element, and `for v in x:` directly over a tensor.
            Reported at the `for` line.
            """,
        why="""
            Every iteration launches tiny kernels (and often syncs): a Python loop over a tensor's
            rows is orders of magnitude slower than the one vectorised operation.
            """,
        example="""
            for i in range(x.shape[0]):
                out[i] = x[i].max()
            """,
        fix="out = x.max(dim=1).values      # or broadcasting, gather, torch.where",
        not_flagged="loops over batches from a DataLoader, epochs, layers",
    ),
    Rule(
        "TM702",
        "arange-index-for-slice",
        "info",
        evidence=("static",),
        what="""
            Flags `x[torch.arange(x.shape[0]), k]` where `k` is a scalar (a literal, a name bound to
            a number, or live: an `int`).
            """,
        why="""
            It is `x[:, k]` written as an advanced-indexing gather: it allocates an index tensor and
            copies instead of returning a view.
            """,
        example="col = x[torch.arange(x.shape[0]), 3]",
        fix="""
            col = x[:, 3]
            # a per-row index tensor k is a real gather: x[torch.arange(len(x)), k] is right
            """,
        not_flagged="`k` a per-row index tensor/list (that is a gather, and `x[:, k]` would be wrong)",
    ),
    Rule(
        "TM703",
        "view-after-transpose",
        "error",
        evidence=("static",),
        what="""
            Flags `.view(...)` applied directly to the result of `.transpose()`, `.permute()`, `.t()`,
            `.T` or `.mT`.
            """,
        why="""
            A transposed tensor is not contiguous, so `.view` raises "view size is not compatible
            with input tensor's size and stride" (except in the rare shapes where it happens to work).
            """,
        example="y = x.transpose(1, 2).view(b, -1)",
        fix="y = x.transpose(1, 2).reshape(b, -1)    # or .contiguous().view(b, -1)",
        not_flagged="`.contiguous()` in between; `.view` on other results",
    ),
]
