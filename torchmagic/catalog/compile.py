"""TM95x — torch.compile: graph breaks and recompilations, from Dynamo's own events."""

from .model import Rule

RULES = [
    Rule(
        "TM950",
        "graph-break",
        "warning",
        evidence=("static", "runtime"),
        what="""
            Reports a graph break inside a function compiled with `torch.compile`, at your line:
            in the checked cell, or (named by its cell) in a function or `forward` defined in an
            earlier cell and called from this one. It says why Dynamo broke there, in one
            sentence, how many breaks it met there in this cell, and the fix where one is clear.
            A break inside library code is reported once, as info, at your call into it. The
            static check flags `.item()` and `print(...)` inside a function that the same cell,
            file or notebook wraps in `torch.compile` (a decorator, `torch.compile(fn)`, or a
            model whose `forward` it is).
            """,
        why="""
            At a graph break Dynamo ends the graph, runs the code it cannot trace as plain Python,
            and starts a new graph after it: every call pays for the round trip, the compiler
            cannot fuse across the break, and nothing says so unless `TORCH_LOGS=graph_breaks` is
            set.
            """,
        example="""
            @torch.compile
            def loss_fn(x, y):
                loss = F.mse_loss(model(x), y)
                print("loss", loss.item())
                return loss
            """,
        fix="""
            @torch.compile
            def loss_fn(x, y):
                return F.mse_loss(model(x), y)

            loss = loss_fn(x, y)
            loss.backward()              # the backward pass is compiled too (AOTAutograd)
            print("loss", loss.item())   # outside the compiled function
            """,
        not_flagged="""
            functions compiled with `fullgraph=True` (they raise instead); breaks asked for with
            `torch._dynamo.graph_break()`; `.item()` when the code sets
            `torch._dynamo.config.capture_scalar_outputs = True`; code guarded by
            `torch.compiler.is_compiling()`; functions under `torch.compiler.disable`; `.numpy()`,
            which Dynamo traces through its NumPy support
            """,
        overrides=("TM302",),  # an `if` on a tensor inside compiled code: the break is the news
    ),
    Rule(
        "TM951",
        "recompile",
        "warning",
        evidence=("static", "runtime"),
        what="""
            Reports a compiled function that Dynamo compiled again in this cell: which one, how
            many times, and why in your terms, read from the guards that failed
            (`x.shape[0] changed 8 → 9`, `x` rank changed 1 → 2, `self.flag` changed), with the
            fix. An error when the function reached the recompile limit and Dynamo stopped
            compiling it: new inputs then run uncompiled. The static check flags
            `torch.compile(...)` called inside a loop, or inside a function that the code calls
            in a loop, on a model or function that does not change between iterations.
            """,
        why="""
            Each recompilation traces and compiles the function again (seconds with the default
            backend), and after `torch._dynamo.config.recompile_limit` (8) of them the function
            silently runs uncompiled: the speed-up is gone and only a log line says so.
            """,
        example="""
            step = torch.compile(train_step)
            for x, y in loader:            # the last batch is smaller: a new shape
                step(x, y)
            """,
        fix="""
            step = torch.compile(train_step, dynamic=True)   # or torch._dynamo.mark_dynamic(x, 0)
            for x, y in loader:
                step(x, y)
            """,
        not_flagged="""
            the first compilation of a function; the recompilations for train/eval and grad-mode
            switches (each combination is compiled once, then stays stable); a second model compiled
            with `torch.compile(module)`, which Dynamo counts as a recompilation of shared code; `torch.compile` of a different model on each
            iteration (`for m in models:`) or behind a cache check
            """,
    ),
]
