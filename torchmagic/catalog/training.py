"""TM5xx — the training loop."""

from .model import Rule

RULES = [
    Rule(
        "TM501",
        "missing-zero-grad",
        "error",
        evidence=("static",),
        what="""
            Flags a loop that calls `.backward()` and `<optimizer>.step()` but never
            `<optimizer>.zero_grad()` (or `model.zero_grad()`). Reported at the `step()` call.
            """,
        why="""
            `.backward()` adds into `.grad`; without clearing, every step uses the sum of all past
            gradients and training diverges or stalls — silently.
            """,
        example="""
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            """,
        fix="""
            for x, y in loader:
                optimizer.zero_grad(set_to_none=True)
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            """,
        not_flagged="""
            gradient accumulation written on purpose (`zero_grad` under `if (i+1) % k == 0`); distributed autograd (`DistributedOptimizer`, also its old `step()` without argument, and loops that open a `dist_autograd.context()`): gradients live in a per-iteration context and there is no `zero_grad`; `zero_grad` called through a helper of the same file (`def reset_grad(): d_opt.zero_grad(); g_opt.zero_grad()`, or a method of the same class); a library's own zeroing call in the loop (moolib's `accumulator.zero_gradients()`, `clear_grad()`)
            """,
    ),
    Rule(
        "TM502",
        "scheduler-before-optimizer",
        "warning",
        evidence=("static",),
        what="""
            Flags `<scheduler>.step()` called before `<optimizer>.step()` in the same loop body.
            Reported at the early scheduler call.
            """,
        why="""
            Since PyTorch 1.1 the scheduler must step after the optimizer; stepping it first skips
            the first value of the learning-rate schedule (PyTorch warns once, easy to miss).
            """,
        example="""
            for x, y in loader:
                scheduler.step()
                loss.backward()
                optimizer.step()
            """,
        fix="""
            for x, y in loader:
                loss.backward()
                optimizer.step()
                scheduler.step()
            """,
        not_flagged="schedulers stepped once per epoch after the inner loop",
    ),
    Rule(
        "TM503",
        "scheduler-epoch-arg",
        "info",
        evidence=("static",),
        what="Flags `scheduler.step(epoch)`: a learning-rate scheduler stepped with an argument.",
        why="""
            The `epoch` argument is deprecated: it bypasses the scheduler's own counter, recomputes
            the rate in closed form (not every scheduler has one) and warns.
            """,
        example="""
            for epoch in range(epochs):
                scheduler.step(epoch)
                train_one_epoch()
            """,
        fix="""
            for epoch in range(epochs):
                train_one_epoch()
                scheduler.step()   # the same schedule: stepped `epoch` times before each epoch
            """,
        not_flagged="""
            `ReduceLROnPlateau.step(metric)`, also on a name that one branch binds to a
            `ReduceLROnPlateau` and another to a schedule by step (`if kind == "plateau": sched =
            ReduceLROnPlateau(opt)`, `else: sched = CosineAnnealingLR(opt, T)`), where the call with an
            argument is the plateau's
            """,
        autofix="""
            Unsafe, and only where dropping the argument keeps the schedule: the last statement of
            a `for e in range(N)` loop calling `scheduler.step(e + 1)` becomes `scheduler.step()`
            (the scheduler has then been stepped `e` times before epoch `e`, as before; the rate is
            updated step by step rather than in closed form). Elsewhere the hint says where the
            argument-free call goes (`step(e)` at the start of epoch `e` is `step()` at its end) and
            no edit is offered, since dropping the argument in place would shift the schedule.
            """,
    ),
    Rule(
        "TM504",
        "scheduler-get-lr",
        "info",
        evidence=("static",),
        what="Flags `scheduler.get_lr()`.",
        why="""
            `get_lr()` computes the value for the scheduler's *current internal step* (and warns
            when called outside `step()`); for many schedulers it is not the rate the optimizer used.
            """,
        not_flagged="""
            `self.get_lr()` / `super().get_lr()` inside a scheduler class; a scheduler built from a
            class this source defines with its own `get_lr` (`sched = GeometricSweep(opt, ...)` with
            `def get_lr(self): return [base * r ** self.last_epoch ...]`): a closed form of the step
            count, whose `get_lr()` is the rate in use; a `get_lr()` in the branch whose other
            branch reads `get_last_lr()` (`s.get_last_lr()[0] if new_torch else s.get_lr()[0]`):
            the fallback for a PyTorch older than 1.4, which has no `get_last_lr`.
            """,
        example="print(scheduler.get_lr())",
        fix="print(scheduler.get_last_lr())",
        autofix="""
            Unsafe. `scheduler.get_lr()` becomes `scheduler.get_last_lr()`: the value read
            changes, to the rate the optimizer is actually using.
            """,
    ),
    Rule(
        "TM505",
        "inference-in-train-mode",
        "warning",
        evidence=("runtime",),
        what="""
            Flags a module containing Dropout or BatchNorm layers that ran forward in training mode
            while gradients were disabled (`no_grad`/`inference_mode`): evaluation without
            `model.eval()`.
            """,
        why="""
            Dropout keeps dropping units, so predictions are noisy and worse, and BatchNorm updates
            its running statistics with evaluation data.
            """,
        example="""
            with torch.inference_mode():
                preds = model(x_val)
            """,
        fix="""
            model.eval()
            with torch.inference_mode():
                preds = model(x_val)
            """,
        not_flagged="""
            modules without such layers; Monte-Carlo dropout: a model in eval mode whose dropout
            layers were switched back on, or a cell that calls `model.train()` itself and then
            runs `model` more than once with grad disabled, with no `.backward()` or optimizer
            step in between (other MC-dropout code can suppress the rule); dropout with `p=0`;
            BatchNorm with `momentum=None` (statistics recalibration)
            """,
    ),
    Rule(
        "TM506",
        "train-in-eval-mode",
        "warning",
        evidence=("runtime",),
        what="""
            Flags `.backward()` through a module containing Dropout or BatchNorm layers that ran
            forward with `training=False`: training after validation without `model.train()`.
            """,
        why="""
            The model trains without dropout and with frozen batch statistics: it overfits or
            converges to something else, without any error.
            """,
        example="""
            for epoch in range(10):
                for x, y in train_loader:
                    loss = criterion(model(x), y); loss.backward(); opt.step()
                model.eval(); validate(model)
            """,
        fix="""
            for epoch in range(10):
                model.train()
                ...
            """,
    ),
]
