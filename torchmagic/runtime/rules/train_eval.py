"""TM505 and TM506: a model evaluated in train mode, or trained in eval mode (mode records).

Both name the root module the user holds (`net`, not `net.block.3.drop`). A layer whose root
module is in the other mode is left alone: `model.eval()` followed by re-enabling dropout
layers (MC dropout) or freezing BatchNorm layers of a training model is deliberate.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...catalog import Rule
from ...report import Finding
from ..modes import LayerEvent, training
from ..registry import runtime_rule

if TYPE_CHECKING:
    from ...run import CellRun


def _per_root(
    run: CellRun, events: list[LayerEvent], want_root_training: bool
) -> Iterator[tuple[str, str, int | None]]:
    """(root name, layer name, line) for the first event of each root in the wanted mode."""
    if not events:
        return
    snapshot = run.snapshot()
    names = snapshot.module_names()
    roots = snapshot.roots()
    seen: set[str] = set()
    for event in events:
        layer = event.ref()
        if layer is None:
            continue
        qual, root_label = names.get(id(layer), (None, f"<{event.type}>"))
        root = roots.get(root_label)
        if root is not None and training(root) is not want_root_training:
            continue  # deliberate: MC dropout, frozen BatchNorm
        if root_label in seen:
            continue
        seen.add(root_label)
        yield root_label, qual or event.type, event.line


@runtime_rule("TM505")
def inference_in_train_mode(run: CellRun, rule: Rule) -> Iterator[Finding]:
    modes = run.records.modes
    if modes is None:
        return
    for root, layer, line in _per_root(run, modes.train_no_grad, True):
        yield rule.finding(
            f"`{root}` ran with grad disabled while `{layer}` was in training mode: dropout stays on and "
            "BatchNorm updates its running statistics during evaluation.",
            f"`{root}.eval()` before evaluating (and `{root}.train()` again before training).",
            line=line,
            object=root,
            source="runtime",
        )


@runtime_rule("TM506")
def train_in_eval_mode(run: CellRun, rule: Rule) -> Iterator[Finding]:
    modes = run.records.modes
    if modes is None:
        return
    for root, layer, line in _per_root(run, modes.eval_step, False):
        yield rule.finding(
            f"`.backward()` went through `{layer}` while it was in eval mode: `{root}` is training without "
            "dropout and with frozen BatchNorm statistics.",
            f"`{root}.train()` at the top of each training epoch (after validation).",
            line=line,
            object=root,
            source="runtime",
        )
