"""TM9xx — configuration, deprecated APIs and easy-to-miss typos."""

from __future__ import annotations

import ast

from ...report import Fix
from ..context import Context
from ..fixes import fix_of
from ..registry import check
from ._common import call_chain, unparse, unparse_operand

_OLD_INIT = frozenset(
    {"xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal", "normal", "uniform", "constant"}
)


@check("TM902", calls=_OLD_INIT)
def deprecated_init(call: ast.Call, ctx: Context) -> None:
    q = ctx.qualname(call.func) or ""
    if not q.startswith("torch.nn.init."):
        return
    name = q.rsplit(".", 1)[1]
    fix = None
    if isinstance(call.func, ast.Attribute):  # `from torch.nn.init import normal` would need a new import
        fix = fix_of(f"Call `{name}_`", [ctx.edits.attribute_name(call.func, f"{name}_")])
    ctx.flag(
        call,
        f"`{unparse(call.func, 40)}(...)` is a deprecated initialiser alias.",
        f"Use the in-place `nn.init.{name}_(...)`.",
        fix=fix,
    )


_TYPOS = frozenset({"require_grad", "requires_grads", "require_grads", "requires_gradient", "requiresgrad"})


@check("TM903", nodes=(ast.Assign, ast.AnnAssign, ast.AugAssign))
def requires_grad_typo(node: ast.Assign | ast.AnnAssign | ast.AugAssign, ctx: Context) -> None:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for t in targets:
        for sub in ast.walk(t):
            if isinstance(sub, ast.Attribute) and sub.attr in _TYPOS and isinstance(sub.ctx, ast.Store):
                ctx.flag(
                    node,
                    f"`{unparse(sub, 40)}` is a typo of `requires_grad` and sets an unrelated attribute.",
                    f"Write `{unparse_operand(sub.value, 30)}.requires_grad = ...`.",
                    fix=_typo_fix(sub, ctx) if not isinstance(node, ast.AugAssign) else None,
                )


def _typo_fix(attr: ast.Attribute, ctx: Context) -> Fix:
    # Unsafe: the line then does what it was written to do, which changes what the program
    # computes, and can make it raise where it ran (an in-place write into a tensor that now
    # requires grad; `requires_grad` on a non-leaf or an integer tensor).
    return fix_of("Set `requires_grad`", [ctx.edits.attribute_name(attr, "requires_grad")], "unsafe")


_NORMALISERS = {"softmax": "softmax", "log_softmax": "log_softmax", "sigmoid": "sigmoid"}
_MODULE_NORMALISERS = {"Softmax": "softmax", "LogSoftmax": "log_softmax", "Sigmoid": "sigmoid"}
_LOSS_FUNCS = {
    "torch.nn.functional.cross_entropy": "cross_entropy",
    "torch.nn.functional.nll_loss": "nll_loss",
    "torch.nn.functional.binary_cross_entropy": "bce",
}
_LOSS_MODULES = {
    "torch.nn.CrossEntropyLoss": "cross_entropy",
    "torch.nn.NLLLoss": "nll_loss",
    "torch.nn.BCELoss": "bce",
}
_BAD = {
    "cross_entropy": {"softmax", "log_softmax", "sigmoid"},
    "nll_loss": {"softmax", "sigmoid"},
    "bce": {"sigmoid"},
}


def _normaliser(ctx: Context, node: ast.AST, depth: int = 0) -> str | None:
    """softmax/log_softmax/sigmoid when `node` is (a name assigned from) such a result."""
    if depth > 4:
        return None
    if isinstance(node, ast.NamedExpr):
        return _normaliser(ctx, node.value, depth + 1)
    if isinstance(node, ast.Name):
        origin = ctx.origin(node)
        return _normaliser(ctx, origin, depth + 1) if origin is not None else None
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    q = ctx.qualname(func) or ""
    last = q.rsplit(".", 1)[-1] if q else ""
    if q.startswith("torch.") and last in _NORMALISERS and q.count(".") in (1, 3):
        return _NORMALISERS[last]
    if isinstance(func, ast.Attribute) and func.attr in _NORMALISERS and not q.startswith("torch."):
        # x.softmax(dim=1) on a tensor; `self.softmax(x)` / `model.sigmoid` may be modules
        if ctx.is_tensor(func.value) or call_chain(func.value):
            return _NORMALISERS[func.attr]
        return None
    # nn.Softmax(dim=1)(x), or a name built from nn.Softmax
    built = ctx.qualname(func.func) if isinstance(func, ast.Call) else ctx.built_by(func)
    if built:
        tail = built.rsplit(".", 1)[-1]
        if built.startswith("torch.nn.") and tail in _MODULE_NORMALISERS:
            return _MODULE_NORMALISERS[tail]
    return None


def _loss_kind(ctx: Context, call: ast.Call) -> str | None:
    func = call.func
    q = ctx.qualname(func)
    if q in _LOSS_FUNCS:
        return _LOSS_FUNCS[q]
    if isinstance(func, ast.Call):
        return _LOSS_MODULES.get(ctx.qualname(func.func) or "")
    if isinstance(func, ast.Name):  # criterion = nn.CrossEntropyLoss(); criterion(...)
        return _LOSS_MODULES.get(ctx.built_by(func) or "")
    return None


_FIX = {
    "cross_entropy": "pass the raw logits: `cross_entropy` applies `log_softmax` itself",
    "nll_loss": "`nll_loss` expects `log_softmax(...)` output; better, pass raw logits to `cross_entropy`",
    "bce": "pass raw logits to `F.binary_cross_entropy_with_logits` / `nn.BCEWithLogitsLoss()`",
}


@check("TM904", nodes=(ast.Call,))
def softmax_into_cross_entropy(call: ast.Call, ctx: Context) -> None:
    if not call.args:
        return
    kind = _loss_kind(ctx, call)
    if kind is None:
        return
    norm = _normaliser(ctx, call.args[0])
    if norm is None or norm not in _BAD[kind]:
        return
    if kind == "bce":
        message = (
            f"`{unparse(call, 60)}` receives a `sigmoid` output instead of raw logits: where |logits|"
            " is large the sigmoid rounds to exactly 0 or 1, so a confidently wrong prediction gets"
            " log(0), a loss capped at 100 and no gradient; it also raises under CUDA autocast."
        )
        hint = (
            f"Pass the logits: `{_with_logits_text(ctx, call)}` computes the same loss from them,"
            " without the rounding."
        )
    else:
        message = f"`{unparse(call, 60)}` receives a `{norm}` output instead of raw logits."
        hint = _FIX[kind][0].upper() + _FIX[kind][1:] + "."
    # a sigmoid into BCE computes the right loss wherever the logits are moderate: unstable, not
    # wrong, so a warning; normalising twice into cross_entropy computes another loss: an error
    severity = "warning" if kind == "bce" else None
    ctx.flag(call, message, hint, fix=_logits_fix(ctx, call, kind, norm), severity=severity)


def _with_logits_text(ctx: Context, call: ast.Call) -> str:
    """`F.binary_cross_entropy_with_logits(z, y)` for `F.binary_cross_entropy(torch.sigmoid(z), y)`
    (also through a name: `p = torch.sigmoid(z)`), `nn.BCEWithLogitsLoss()(z, y)` for `BCELoss`."""
    arg: ast.AST | None = call.args[0]
    for _ in range(4):
        if isinstance(arg, ast.NamedExpr):
            arg = arg.value
        elif isinstance(arg, ast.Name) and ctx.origin(arg) is not None:
            arg = ctx.origin(arg)
        else:
            break
    inner = _normalised(ctx, arg) if isinstance(arg, ast.Call) else None
    logits = unparse(inner, 30) if inner is not None else "logits"
    rest = [unparse(a, 30) for a in call.args[1:]] + [
        f"{k.arg}={unparse(k.value, 20)}" if k.arg else f"**{unparse(k.value, 20)}" for k in call.keywords
    ]
    args = ", ".join([logits, *rest])
    if len(args) > 60:
        args = f"{logits}, ..."
    if ctx.qualname(call.func) == "torch.nn.functional.binary_cross_entropy" and isinstance(
        call.func, (ast.Attribute, ast.Name)
    ):
        return f"{unparse(call.func, 40)}_with_logits({args})"
    return f"nn.BCEWithLogitsLoss()({args})"


def _normalised(ctx: Context, call: ast.Call) -> ast.AST | None:
    """What the softmax/sigmoid call `call` was applied to: `F.softmax(x, 1)`, `x.softmax(1)`,
    `nn.Softmax(dim=1)(x)` -> `x`."""
    func = call.func
    q = ctx.qualname(func) or ""
    if q.startswith("torch.") and q.rsplit(".", 1)[-1] in _NORMALISERS:
        inp = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "input"), None)
    elif isinstance(func, ast.Attribute) and func.attr in _NORMALISERS:
        inp = func.value
    elif isinstance(func, ast.Call) and len(call.args) == 1 and not call.keywords:
        inp = call.args[0]
    else:
        return None
    return None if inp is None or isinstance(inp, ast.Starred) else inp


def _logits_fix(ctx: Context, loss: ast.Call, kind: str, norm: str) -> Fix | None:
    # Only a normaliser written inline: through a name, the probabilities may be used elsewhere.
    arg = loss.args[0]
    if not isinstance(arg, ast.Call):
        return None
    inner = _normalised(ctx, arg)
    if inner is None:
        return None
    logits = ctx.edits.replace(arg, ctx.edits.source(inner))
    if kind == "cross_entropy":
        return fix_of(f"Pass the logits, not the `{norm}`", [logits], "unsafe")
    if kind == "nll_loss" and norm == "softmax" and isinstance(arg.func, ast.Attribute):
        return fix_of("Take `log_softmax`", [ctx.edits.attribute_name(arg.func, "log_softmax")], "unsafe")
    if (
        kind == "bce"
        and isinstance(loss.func, ast.Attribute)
        and ctx.qualname(loss.func) == "torch.nn.functional.binary_cross_entropy"
    ):
        rename = ctx.edits.attribute_name(loss.func, "binary_cross_entropy_with_logits")
        return fix_of("Use `binary_cross_entropy_with_logits` on the logits", [rename, logits], "unsafe")
    return None
