"""TM505 and TM506: a model evaluated in train mode, or trained in eval mode (mode records).

Both name the root module the user holds (`net`, not `net.block.3.drop`). A layer whose root
module is in the other mode is left alone: `model.eval()` followed by re-enabling dropout
layers (MC dropout) or freezing BatchNorm layers of a training model is deliberate. So is
Monte-Carlo dropout written the other way round: the cell itself calls `net.train()` and
then samples `net` several times with grad disabled, with no backward pass or optimizer step
in between (`net.train()` before a training loop that validates without `net.eval()` is
still flagged: its `.backward()` comes between).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...catalog import Rule
from ...lint.nodes import own_nodes
from ...lint.source import parse_cell
from ...report import Finding
from ..modes import LayerEvent, training
from ..registry import runtime_rule

if TYPE_CHECKING:
    from ...run import CellRun

_TRAINING_CALLS = frozenset({"backward", "step"})


def _per_root(
    run: CellRun, events: list[LayerEvent], want_root_training: bool
) -> Iterator[tuple[str, str, int | None, int]]:
    """(root name, layer name, line, calls) for the first event of each root in the wanted
    mode; `calls` is the most forward passes one of the root's layers made in that state."""
    if not events:
        return
    snapshot = run.snapshot()
    names = snapshot.module_names()
    roots = snapshot.roots()
    first: dict[str, tuple[str, int | None]] = {}
    calls: dict[str, int] = {}
    for event in events:
        layer = event.ref()
        if layer is None:
            continue
        qual, root_label = names.get(id(layer), (None, f"<{event.type}>"))
        root = roots.get(root_label)
        if root is not None and training(root) is not want_root_training:
            continue  # deliberate: MC dropout, frozen BatchNorm
        calls[root_label] = max(calls.get(root_label, 0), event.calls)
        if root_label not in first:
            first[root_label] = (qual or event.type, event.line)
    for root_label, (layer_name, line) in first.items():
        yield root_label, layer_name, line, calls[root_label]


def _call_lines(raw_cell: str) -> tuple[dict[str, list[int]], list[int]]:
    """Lines of `<name>.train()` / `.train(True)` calls per name, and lines of `.backward()`
    and `.step()` calls, anywhere in the cell's own code (functions it defines aside)."""
    train: dict[str, list[int]] = {}
    training_steps: list[int] = []
    tree = parse_cell(raw_cell)
    if tree is None:
        return train, training_steps
    for node in own_nodes(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        attr = node.func.attr
        if attr in _TRAINING_CALLS:
            training_steps.append(node.lineno)
        elif attr == "train" and isinstance(node.func.value, ast.Name) and _mode_true(node):
            train.setdefault(node.func.value.id, []).append(node.lineno)
    return train, training_steps


def _mode_true(call: ast.Call) -> bool:
    args = [*call.args, *(k.value for k in call.keywords if k.arg == "mode")]
    if not args:
        return True
    return len(args) == 1 and isinstance(args[0], ast.Constant) and args[0].value is True


def _sampling_on_purpose(root: str, line: int | None, calls: int, lines: tuple) -> bool:
    """MC dropout: the cell switched `root` to train mode itself before the first forward with
    grad disabled, sampled it more than once, and no backward/optimizer step came between."""
    train, training_steps = lines
    if line is None or calls < 2:
        return False
    switched = [t for t in train.get(root, ()) if t <= line]
    if not switched:
        return False
    last = max(switched)
    return not any(last <= s <= line for s in training_steps)


@runtime_rule("TM505")
def inference_in_train_mode(run: CellRun, rule: Rule) -> Iterator[Finding]:
    modes = run.records.modes
    if modes is None:
        return
    lines: tuple | None = None
    for root, layer, line, calls in _per_root(run, modes.train_no_grad, True):
        if calls >= 2:
            if lines is None:
                lines = _call_lines(run.raw_cell)
            if _sampling_on_purpose(root, line, calls, lines):
                continue
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
    for root, layer, line, _ in _per_root(run, modes.eval_step, False):
        yield rule.finding(
            f"`.backward()` went through `{layer}` while it was in eval mode: `{root}` is training without "
            "dropout and with frozen BatchNorm statistics.",
            f"`{root}.train()` at the top of each training epoch (after validation).",
            line=line,
            object=root,
            source="runtime",
        )
