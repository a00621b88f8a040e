"""TM5xx — the training loop: optimizer, scheduler and mode bookkeeping."""

from __future__ import annotations

import ast

from ..registry import documented, rule
from ..scope import OPTIMIZER, SCHEDULER, Context, LoopInfo
from ._common import name_like, unparse


def _is_scheduler(ctx: Context, node: ast.AST | None) -> bool:
    if node is None:
        return False
    kind = ctx.kind(node)
    if kind == SCHEDULER:
        return True
    return kind is None and name_like(node, "sched", "lr_policy")


def _is_optimizer(ctx: Context, node: ast.AST | None) -> bool:
    if node is None:
        return False
    kind = ctx.kind(node)
    if kind == OPTIMIZER:
        return True
    return kind is None and name_like(node, "opt") and not name_like(node, "sched")


def _method(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _optimizer_step(ctx: Context, call: ast.Call) -> bool:
    """`opt.step()`, or `scaler.step(opt)` with AMP."""
    if _method(call) != "step":
        return False
    recv = call.func.value  # type: ignore[attr-defined]
    if _is_optimizer(ctx, recv):
        return True
    return bool(call.args) and name_like(recv, "scaler") and _is_optimizer(ctx, call.args[0])


def _scheduler_step(ctx: Context, call: ast.Call) -> bool:
    return _method(call) == "step" and _is_scheduler(ctx, call.func.value)  # type: ignore[attr-defined]


def _clears_grads_by_hand(loop: ast.AST) -> bool:
    """`p.grad = None` or `p.grad.zero_()` somewhere in the loop."""
    for sub in ast.walk(loop):
        if isinstance(sub, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == "grad" for t in sub.targets
        ):
            return True
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in ("zero_", "detach_")
            and isinstance(sub.func.value, ast.Attribute)
            and sub.func.value.attr == "grad"
        ):
            return True
    return False


@rule("TM501", "missing-zero-grad", "error", loops=True)
def missing_zero_grad(loop: LoopInfo, ctx: Context) -> None:
    """
    ## What it does
    Flags a loop that calls `.backward()` and `<optimizer>.step()` but never
    `<optimizer>.zero_grad()` (or `model.zero_grad()`). Reported at the `step()` call.

    ## Why is this bad?
    `.backward()` adds into `.grad`; without clearing, every step uses the sum of all past
    gradients and training diverges or stalls — silently.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```
    """
    backward = step = None
    for call in loop.calls:
        m = _method(call)
        if m == "zero_grad":
            return
        if m == "backward" and backward is None:
            backward = call
        elif step is None and _optimizer_step(ctx, call):
            step = call
    if backward is None or step is None or _clears_grads_by_hand(loop.node):
        return
    ctx.flag(
        step,
        f"`{unparse(step, 40)}` runs in a loop that never calls `zero_grad()`, so gradients accumulate across steps.",
        f"Call `{unparse(step.func.value, 30)}.zero_grad(set_to_none=True)` at the start of each step.",  # type: ignore[attr-defined]
    )


@rule("TM502", "scheduler-before-optimizer", "warning", loops=True)
def scheduler_before_optimizer(loop: LoopInfo, ctx: Context) -> None:
    """
    ## What it does
    Flags `<scheduler>.step()` called before `<optimizer>.step()` in the same loop body.
    Reported at the early scheduler call.

    ## Why is this bad?
    Since PyTorch 1.1 the scheduler must step after the optimizer; stepping it first skips
    the first value of the learning-rate schedule (PyTorch warns once, easy to miss).

    ## Example
    ```python
    for x, y in loader:
        scheduler.step()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        loss.backward()
        optimizer.step()
        scheduler.step()
    ```
    """
    sched = None
    for call in loop.calls:
        if _optimizer_step(ctx, call):
            break
        if sched is None and _scheduler_step(ctx, call):
            sched = call
    else:
        return
    if sched is None:
        return
    ctx.flag(
        sched,
        f"`{unparse(sched, 40)}` runs before the optimizer's `step()` in this loop, skipping the schedule's first value.",
        "Step the scheduler after the optimizer: `optimizer.step()` then `scheduler.step()`.",
    )


def _plateau(ctx: Context, recv: ast.AST) -> bool | None:
    """True for ReduceLROnPlateau (whose `step(metric)` is right), None when unknown."""
    built = ctx.built_by(recv)
    if built is None:
        return None
    return built.endswith("ReduceLROnPlateau")


@rule("TM503", "scheduler-epoch-arg", "info", calls={"step"})
def scheduler_epoch_arg(call: ast.Call, ctx: Context) -> None:
    """
    ## What it does
    Flags `scheduler.step(epoch)`: a learning-rate scheduler stepped with an argument.

    ## Why is this bad?
    The `epoch` argument is deprecated: it bypasses the scheduler's own counter, recomputes
    the rate in closed form (not every scheduler has one) and warns.

    ## Example
    ```python
    scheduler.step(epoch)
    ```

    ## Use instead
    ```python
    scheduler.step()
    ```
    """
    if not (call.args or any(kw.arg == "epoch" for kw in call.keywords)):
        return
    if not isinstance(call.func, ast.Attribute):
        return
    recv = call.func.value
    if ctx.kind(recv) != SCHEDULER:
        return
    if _plateau(ctx, recv) is not False:
        return  # ReduceLROnPlateau.step(metric) is correct; unknown classes are not flagged
    ctx.flag(
        call,
        f"`{unparse(call, 50)}` passes the deprecated epoch argument.",
        f"Call `{unparse(recv, 30)}.step()` once per epoch (or per step) without arguments.",
    )


@rule("TM504", "scheduler-get-lr", "info", calls={"get_lr"})
def scheduler_get_lr(call: ast.Call, ctx: Context) -> None:
    """
    ## What it does
    Flags `scheduler.get_lr()`.

    ## Why is this bad?
    `get_lr()` computes the value for the scheduler's *current internal step* (and warns
    when called outside `step()`); for many schedulers it is not the rate the optimizer used.

    ## Example
    ```python
    print(scheduler.get_lr())
    ```

    ## Use instead
    ```python
    print(scheduler.get_last_lr())
    ```
    """
    if not isinstance(call.func, ast.Attribute) or call.args:
        return
    recv = call.func.value
    if isinstance(recv, ast.Name) and recv.id == "self":
        return  # a scheduler subclass implementing get_lr
    if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and recv.func.id == "super":
        return
    if not _is_scheduler(ctx, recv):
        return
    ctx.flag(
        call,
        f"`{unparse(call, 50)}` returns the rate for the scheduler's internal state, not the last applied one.",
        f"Use `{unparse(recv, 30)}.get_last_lr()`.",
    )


documented(
    "TM505",
    "inference-in-train-mode",
    "warning",
    "runtime + live",
    """
    ## What it does
    Flags a module containing Dropout or BatchNorm layers that ran forward in training mode
    while gradients were disabled (`no_grad`/`inference_mode`): evaluation without
    `model.eval()`.

    ## Why is this bad?
    Dropout keeps dropping units, so predictions are noisy and worse, and BatchNorm updates
    its running statistics with evaluation data.

    ## Example
    ```python
    with torch.inference_mode():
        preds = model(x_val)
    ```

    ## Use instead
    ```python
    model.eval()
    with torch.inference_mode():
        preds = model(x_val)
    ```
    """,
)

documented(
    "TM506",
    "train-in-eval-mode",
    "warning",
    "runtime",
    """
    ## What it does
    Flags `.backward()` through a module containing Dropout or BatchNorm layers that ran
    forward with `training=False`: training after validation without `model.train()`.

    ## Why is this bad?
    The model trains without dropout and with frozen batch statistics: it overfits or
    converges to something else, without any error.

    ## Example
    ```python
    for epoch in range(10):
        for x, y in train_loader:
            loss = criterion(model(x), y); loss.backward(); opt.step()
        model.eval(); validate(model)
    ```

    ## Use instead
    ```python
    for epoch in range(10):
        model.train()
        ...
    ```
    """,
)
