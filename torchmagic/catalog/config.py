"""TM9xx — configuration and deprecated APIs."""

from .model import Rule

RULES = [
    Rule(
        "TM901",
        "cudnn-benchmark-variable-shapes",
        "warning",
        evidence=("runtime",),
        what="""
            Flags `torch.backends.cudnn.benchmark = True` while convolution modules saw more than N
            (default 8) distinct input shapes in the cell.
            """,
        why="""
            The autotuner benchmarks every convolution algorithm again for each new input shape: with
            variable shapes it spends its time tuning instead of training.
            """,
        example="""
            torch.backends.cudnn.benchmark = True
            for img in images_of_many_sizes:
                out = conv_net(img)
            """,
        fix="""
            # pad or bucket inputs to a few fixed shapes, or
            torch.backends.cudnn.benchmark = False
            """,
        not_flagged="fixed-shape workloads",
    ),
    Rule(
        "TM902",
        "deprecated-init",
        "warning",
        evidence=("static",),
        what="""
            Flags `nn.init.xavier_uniform`, `xavier_normal`, `kaiming_uniform`, `kaiming_normal`,
            `normal`, `uniform` and `constant` without the trailing underscore.
            """,
        why="""
            These aliases are deprecated (they warn, and are being removed); the in-place names say
            what they do: they overwrite the tensor.
            """,
        example="nn.init.xavier_uniform(layer.weight)",
        fix="nn.init.xavier_uniform_(layer.weight)",
        not_flagged="the underscore versions",
        autofix="""
            Safe. `nn.init.xavier_uniform(w)` becomes `nn.init.xavier_uniform_(w)`: the
            deprecated alias only calls the underscore version. No fix when the alias was imported by name
            (the new name would need an import).
            """,
    ),
    Rule(
        "TM903",
        "requires-grad-typo",
        "error",
        evidence=("static",),
        what="Flags assignments to `.require_grad`, `.requires_grads` or `.require_grads`.",
        why="""
            Tensors accept arbitrary Python attributes: the typo silently creates a new attribute and
            the tensor keeps its old `requires_grad` — the layer is (or is not) trained by mistake.
            """,
        example="""
            for p in backbone.parameters():
                p.require_grad = False
            """,
        fix="""
            for p in backbone.parameters():
                p.requires_grad = False        # or backbone.requires_grad_(False)
            """,
        autofix="""
            Unsafe. `p.require_grad = False` becomes `p.requires_grad = False`. The line then does what
            it was written to do, which changes what the program computes (the point), and can make it
            raise where it ran: an in-place write into a tensor that now requires grad, or `requires_grad`
            set on a non-leaf or an integer tensor.
            """,
    ),
    Rule(
        "TM904",
        "softmax-into-cross-entropy",
        "error",
        evidence=("static",),
        what="""
            Flags `F.cross_entropy`/`nn.CrossEntropyLoss()(...)`/`F.nll_loss` whose input is a
            `softmax`/`log_softmax`/`sigmoid` result, and `BCELoss`/`binary_cross_entropy` on a
            `sigmoid` output. `nll_loss(log_softmax(x))` is correct and not flagged.
            """,
        why="""
            `cross_entropy` already applies `log_softmax`: normalising twice flattens the gradients
            and the model learns slowly or not at all. `BCELoss(sigmoid(x))` is numerically
            unstable where the logits-based loss is not: for large |x| the sigmoid rounds to exactly
            0 or 1, so a confidently wrong prediction gets log(0), a loss capped at 100 and no
            gradient to correct it; `binary_cross_entropy` also raises under CUDA autocast.
            `binary_cross_entropy_with_logits(x, y)` computes the same loss from the logits without
            the rounding. Normalising twice computes another loss (an error); the sigmoid case
            computes the right one wherever the logits are moderate, so it is reported as a warning.
            """,
        example="""
            loss = F.cross_entropy(F.softmax(logits, dim=1), y)
            loss = nn.BCELoss()(torch.sigmoid(logits), y)
            """,
        fix="""
            loss = F.cross_entropy(logits, y)
            loss = nn.BCEWithLogitsLoss()(logits, y)
            """,
        not_flagged="`nll_loss(log_softmax(x))`, which is correct",
        autofix="""
            Unsafe. Where the normaliser is written inside the loss call, `F.cross_entropy(F.softmax(z, 1), y)`
            becomes `F.cross_entropy(z, y)`; into `nll_loss`, `softmax` becomes `log_softmax`; into
            `F.binary_cross_entropy(torch.sigmoid(z), y)`, the call becomes
            `F.binary_cross_entropy_with_logits(z, y)`. Unsafe because the loss values change (to the right
            ones). Through a name (`probs = softmax(...)`) there is no edit: the probabilities may be used
            elsewhere.
            """,
    ),
]
