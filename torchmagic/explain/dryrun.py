"""dry_run(): the forward pass on the meta device, layer by layer, without the user's data.

The model is copied with every tensor replaced by a meta twin (`metacopy`), the example
inputs likewise, and the copy runs under `torch.no_grad()` with `torch.device("meta")` as the
default device (so factories in `forward` land on meta too). Global module hooks, installed
for the run only, record per-module shapes as `ShapeRecord`s named as the user would type
them (`net.0`). When the forward fails, the failure says which module and which line could
not run, and why, in one sentence: values a meta tensor does not have (`.item()`, `if
x.sum() > 0`), an op without a meta kernel, a tensor on a fixed device, or a genuine shape
error (then explained like TM001).
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ..report import ShapeRecord
from ..runtime.hooks import pause_hooks
from ..runtime.shapes import tensor_shapes
from . import frames as fr
from . import messages as msg
from . import metacopy, safe
from .explainer import Explanation, _traceback, explain
from .inflight import InFlight
from .records import ModuleCall, summary


@dataclass
class DryRunFailure:
    """Where and why the meta forward stopped."""

    module: str | None  # the innermost module in flight, as the user names it
    type: str | None
    code: str | None  # the line or expression that could not run
    reason: str  # one sentence
    error: str  # "RuntimeError: Tensor.item() cannot be called on meta tensors"
    location: str | None = None
    kind: str | None = None  # TensorError.kind when the message is a known one
    explanation: Explanation | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "type": self.type,
            "code": self.code,
            "reason": self.reason,
            "error": self.error,
            "location": self.location,
            "kind": self.kind,
        }


@dataclass
class DryRun:
    """Per-layer shapes of a meta forward, in first-call order, and the failure if any."""

    model: str
    records: list[ShapeRecord] = field(default_factory=list)
    outputs: list[list[int]] = field(default_factory=list)
    failure: DryRunFailure | None = None
    elapsed_s: float = 0.0
    copy: str = "deepcopy"  # or "structural" when deepcopy could not copy the model

    @property
    def ok(self) -> bool:
        return self.failure is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "records": [r.to_dict() for r in self.records],
            "outputs": self.outputs,
            "failure": self.failure.to_dict() if self.failure else None,
            "elapsed_s": self.elapsed_s,
            "copy": self.copy,
        }


def dry_run(model: nn.Module, *example_inputs: Any, **kwargs: Any) -> DryRun:
    """Run `model(*example_inputs, **kwargs)` on meta copies; the user's model, parameters and
    inputs are never touched. Records are named after the caller's global variable for
    `model` (a notebook's), else "model"; `dry_run_as` takes the name."""
    return dry_run_as(_caller_name(model, sys._getframe(1)), model, *example_inputs, **kwargs)


def dry_run_as(name: str, model: nn.Module, *example_inputs: Any, **kwargs: Any) -> DryRun:
    """`dry_run` with the model's name given (`%torchshape net(x)` passes "net")."""
    if not safe.is_module(model):
        raise TypeError(f"dry_run expects an nn.Module, not {type(model).__name__}")
    start = time.perf_counter()
    result = DryRun(model=name)
    names = _user_names(name, model)
    memo: dict[int, Any] = metacopy.MetaMemo()
    try:
        twin = metacopy.deep_meta_copy(model, memo)  # type: ignore[arg-type]
        args, kw = metacopy.deep_meta_copy((example_inputs, kwargs), memo)  # type: ignore[arg-type]
    except Exception:
        result.copy = "structural"
        memo = {}
        twin = metacopy.structural_copy(model, memo)
        args, kw = metacopy._rebuild((example_inputs, kwargs), memo, 0)
    copy_names = {id(memo[k]): v for k, v in names.items() if k in memo}
    del memo  # it holds the user's objects by id only, but twins of all of them: drop early

    trace = _Trace(copy_names)
    exc_info: BaseException | None = None
    # The fused attention fast path goes through nested tensors, which have no meta kernels;
    # the Python path computes the same shapes.
    fastpath = torch.backends.mha.get_fastpath_enabled()
    try:
        # a checked cell's own hooks must not record the meta copy's modules
        with torch.no_grad(), torch.device("meta"), pause_hooks():
            torch.backends.mha.set_fastpath_enabled(False)
            trace.start()
            try:
                out = twin(*args, **kw)
            finally:
                trace.stop()
                torch.backends.mha.set_fastpath_enabled(fastpath)
        result.outputs = tensor_shapes(out)[0]
    except Exception as e:
        exc_info = e
    try:
        result.records = trace.records()
        if exc_info is not None:
            result.failure = _failure(exc_info, trace, copy_names)
    finally:
        trace.clear()
        exc_info = None
    result.elapsed_s = time.perf_counter() - start
    return result


# ---- naming ------------------------------------------------------------------------------------


def _caller_name(model: Any, frame: Any) -> str:
    """The caller's variable bound to `model`, else "model". Module-level frames (a notebook
    cell) only: a function frame's `f_locals` would snapshot its locals into a dict the frame
    keeps, a new reference to the user's model and inputs."""
    scopes = (frame.f_globals,) if frame.f_code.co_name != "<module>" else (frame.f_locals, frame.f_globals)
    for scope in scopes:
        if type(scope) is not dict:
            continue
        for k, v in dict.items(scope):
            if v is model and type(k) is str and k.isidentifier() and not k.startswith("_"):
                return k
    return "model"


def _user_names(name: str, model: Any) -> dict[int, str]:
    from .names import module_names

    return module_names({name: model})


# ---- the per-layer trace -----------------------------------------------------------------------


class _Row:
    __slots__ = ("calls", "depth", "dtype", "inputs", "module", "outputs")

    def __init__(self, module: Any, inputs: list[list[int]], depth: int) -> None:
        self.module = module
        self.inputs = inputs
        self.outputs: list[list[int]] | None = None
        self.calls = 1
        self.depth = depth
        self.dtype: str | None = None


class _Trace(InFlight):
    """InFlight (the stack at a failure) plus per-module shapes, on this thread only."""

    def __init__(self, names: dict[int, str]) -> None:
        super().__init__()
        self.names = names
        self.rows: dict[int, _Row] = {}

    def _pre(self, module: Any, args: Any) -> None:
        if threading.get_ident() != self._thread:
            return None
        depth = len(self._stack)
        super()._pre(module, args)
        row = self.rows.get(id(module))
        if row is not None:
            row.calls += 1
        else:
            self.rows[id(module)] = _Row(module, tensor_shapes(args)[0], depth)
        return None

    def _post(self, module: Any, args: Any, *rest: Any) -> None:
        if threading.get_ident() != self._thread:
            return None
        super()._post(module, args, *rest)
        row = self.rows.get(id(module))
        if row is not None and row.outputs is None and len(rest) == 2:
            if not row.inputs and rest[0]:
                row.inputs = tensor_shapes(rest[0])[0]  # keyword-only inputs
            row.outputs, first = tensor_shapes(rest[1])
            if first is not None:
                row.dtype = safe.dtype(first)
        return None

    def records(self) -> list[ShapeRecord]:
        return [
            ShapeRecord(
                module=self.names.get(mid) or f"<{type(row.module).__name__}>",
                type=type(row.module).__name__,
                calls=row.calls,
                inputs=row.inputs,
                outputs=row.outputs or [],
                device="meta",
                dtype=row.dtype,
                depth=row.depth,
            )
            for mid, row in self.rows.items()
        ]

    def clear(self) -> None:
        super().clear()
        self.rows = {}


# ---- why it stopped ----------------------------------------------------------------------------


def _failure(exc: BaseException, trace: _Trace, names: dict[int, str]) -> DryRunFailure:
    calls = trace.calls(exc, names)
    err = msg.classify(exc)
    sites = fr.sites(_traceback(exc))
    user = next((s for s in reversed(sites) if s.kind == fr.USER), None)
    layer = calls[0] if calls else None
    text = msg.message_text(exc)
    error = type(exc).__name__ + (f": {text.strip().splitlines()[0]}" if text else "")
    code = _statement(user) if user is not None else None
    who = _who(layer)
    quoted = f" (`{code}`)" if code else ""
    explanation = None
    if err is None:
        reason = f"{who} raised {error}{quoted}: shapes after this layer are unknown."
    elif err.kind == msg.META_VALUES and err.detail == "data-dependent-size":
        reason = (
            f"{who} calls an op whose output shape depends on the tensor's values{quoted}, which the meta "
            "device cannot compute: shapes after this layer are unknown."
        )
    elif err.kind == msg.META_VALUES and err.detail == "no-meta-kernel":
        reason = (
            f"{who} calls `{err.argument}`, which has no meta implementation{quoted}: shapes after this layer "
            "are unknown."
        )
    elif err.kind == msg.META_VALUES:
        reason = (
            f"{who} uses the tensor's values{quoted}, which the meta device cannot compute: shapes after this "
            "layer are unknown."
        )
    elif err.kind == msg.DEVICE and "meta" in err.devices:
        other = next((d for d in err.devices if d != "meta"), "another device")
        reason = (
            f"{who} combines a meta tensor with a tensor on {other}{quoted}: a tensor placed on a fixed device "
            "in forward cannot be followed on meta (build it with `device=x.device`)."
        )
    else:
        explanation = explain(exc, _traceback(exc), calls, None)
        reason = (
            f"The forward fails for these shapes: {explanation.message}"
            if explanation
            else f"{who} raised {error}."
        )
    return DryRunFailure(
        module=layer.name if layer else None,
        type=layer.type if layer else None,
        code=code,
        reason=reason,
        error=error,
        location=f"{user.filename}:{user.lineno} in {user.function}" if user else None,
        kind=err.kind if err else None,
        explanation=explanation,
    )


def _who(layer: ModuleCall | None) -> str:
    if layer is None:
        return "The forward"
    return f"`{layer.name}` ({summary(layer.module, layer.type)})" if layer.name else f"A {layer.type}"


def _statement(site: fr.Site) -> str | None:
    """The failing line as written (`if x.sum() > 0`), or the failing expression when the
    line is long."""
    line = site.line_text().rstrip(":").strip()
    if line and len(line) <= 80:
        return line
    return site.code()


# ---- text --------------------------------------------------------------------------------------


def _shapes(shapes: list[list[int]]) -> str:
    return ", ".join("[" + ", ".join(str(d) for d in s) + "]" for s in shapes) or "-"


def format_dry_run(result: DryRun) -> str:
    """A plain-text table of the dry run, the failure (if any) under it."""
    head = ("module", "type", "calls", "inputs", "outputs", "dtype")
    rows = [
        (
            "  " * r.depth + r.module,
            r.type,
            str(r.calls),
            _shapes(r.inputs),
            _shapes(r.outputs),
            r.dtype or "-",
        )
        for r in result.records
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    lines = [
        f"dry run of `{result.model}` on meta: {len(result.records)} modules, {result.elapsed_s * 1000:.0f} ms"
    ]
    for row in (head, *rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    if result.failure is not None:
        lines.append(f"stopped: {result.failure.reason}")
    elif result.outputs:
        lines.append(f"output: {_shapes(result.outputs)}")
    return "\n".join(lines)
