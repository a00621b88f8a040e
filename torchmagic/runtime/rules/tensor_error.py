"""TM001: the cell raised a shape, dtype or device error; say which layer, which tensors, and
what to change (the explanation itself is `explain/`, from the error and the failing frames).

The module chain comes from the shape tracer's record of the forwards that were running when
the error was raised, named from the cell's one namespace walk; nothing is run again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...catalog import Rule
from ...report import Finding
from ..registry import runtime_rule

if TYPE_CHECKING:
    from ...explain import ModuleCall
    from ...run import CellRun

MAX_INPUTS = 8


def _module_calls(run: CellRun, exc: BaseException) -> list[ModuleCall]:
    from ...explain import ModuleCall
    from ...explain.records import tensor_info

    flight = run.records.inflight
    if flight is None or flight.exc is not exc:
        return []
    names = run.snapshot().module_names()

    def name(module_id: int | None) -> str | None:
        return names.get(module_id, (None, None))[0] if module_id is not None else None

    calls = []
    for module, args, previous in flight.stack:
        inputs = []
        for i, value in enumerate(args[:MAX_INPUTS] if type(args) is tuple else ()):
            info = tensor_info("input" if i == 0 else f"input[{i}]", value, "traced")
            if info is not None:
                inputs.append(info)
        calls.append(
            ModuleCall(
                module=module,
                name=name(id(module)),
                type=type(module).__name__,
                inputs=inputs,
                previous=name(previous),
                previous_outputs=flight.outputs_of(previous),
            )
        )
    return calls


def _where(run: CellRun, location: str | None, line: int | None) -> str | None:
    """`in cell [3], line 7, in forward` when the failing code is in an earlier cell."""
    if not location or " in " not in location:
        return None
    place, function = location.rsplit(" in ", 1)
    filename, _, lineno = place.rpartition(":")
    if filename == run.locator.cell_file:
        return None if lineno == str(line) else f"line {lineno}, in `{function}`"
    number = run.locator.cell_number(filename)
    if number is not None:
        return f"cell [{number}], line {lineno}, in `{function}`"
    return None


@runtime_rule("TM001")
def tensor_error(run: CellRun, rule: Rule) -> Iterator[Finding]:
    err = run.records.error
    if err is None or err.message is None:
        return  # not one of the builtin exception types PyTorch raises
    from ...explain import explain  # only a cell that raised pays for importing it

    explanation = explain(err.exc, None, _module_calls(run, err.exc), cell_line=err.line)
    if explanation is None:
        return
    notes: list[str] = []
    where = _where(run, explanation.location, err.line)
    if where and explanation.code:
        notes.append(f"Raised at `{explanation.code}`, {where}.")
    if len(explanation.chain) > 1:
        notes.append("Module chain: " + " → ".join(_chain_entry(c) for c in explanation.chain) + ".")
    if explanation.tensors:
        notes.append("Tensors: " + "; ".join(_tensor(t) for t in explanation.tensors[:6]) + ".")
    yield rule.finding(
        explanation.message,
        explanation.hint or "Check the shapes, dtypes and devices named above.",
        line=err.line,
        object=explanation.layer,
        source="runtime",
        notes=tuple(notes),
    )


def _chain_entry(entry: Any) -> str:
    d = entry.to_dict()
    label = d.get("name") or d.get("type") or "?"
    summary = d.get("summary")
    return f"`{label}` ({summary})" if summary else f"`{label}`"


def _tensor(t: Any) -> str:
    return f"`{t.name}` [{', '.join(str(d) for d in t.shape)}] {t.dtype} on {t.device}"
