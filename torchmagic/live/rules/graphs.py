"""TM401 live: a list/tuple/dict in the namespace whose tensors' autograd graphs still hold
saved activations: memory kept for graphs nobody will back-propagate through.

Only what really keeps memory is flagged. Not: graphs that `.backward()` already released
(a list of losses after the training loop holds small node objects, not activations); a
single tensor (`z = x @ w + b` that the next cell back-propagates through, the last step's
output: replaced on the next assignment, nothing grows); tensors that all belong to one
graph (the loss terms of one forward pass, the tuple a forward returns: one step's output,
which the next cell may back-propagate as one loss); a recurrent hidden state (its
truncation is another matter than its storage). Saved tensors that the namespace holds
anyway (the container's own tensors, which `sigmoid`/`softmax`/`relu` save as their
output, or the input batch bound to a name) are not memory the graphs keep.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ...catalog import Rule
from ...report import human_bytes
from .. import meta
from ..graphs import SavedState, saved_state, storage_key
from ..registry import LiveFinding, LiveView, live_check

MIN_TENSORS = 2
MIN_BYTES = 1 << 20  # below this, the memory a list of graphs keeps is not worth a warning
_HIDDEN = re.compile(r"(^|_)(hidden|hid|state|states|h|c|hx|cx|h0|c0|memory|mems)($|_|\d)", re.IGNORECASE)


def _grad_fn(t: object) -> Any:
    try:
        return meta.grad_fn(t)
    except Exception:
        return None


def _scalar(t: object) -> bool:
    try:
        return meta.numel(t) == 1
    except Exception:
        return False


def _kept(state: SavedState) -> bool:
    """Separate graphs keep at least MIN_BYTES beyond the biggest one (one step's graph)."""
    return len(state.graphs) >= MIN_TENSORS and state.beyond_largest >= MIN_BYTES


@live_check("TM401")
def graphs_kept_alive(view: LiveView, rule: Rule) -> Iterator[LiveFinding]:
    objects = view.snapshot.objects
    cell = view.cell
    held: set[int] | None = None  # storages of namespace tensors, read once when needed
    for name, tensors in objects.containers.items():
        if _HIDDEN.search(name):
            continue
        with_graph = [t for t in tensors if _grad_fn(t) is not None]
        if len(with_graph) < MIN_TENSORS:
            continue
        roots = [_grad_fn(t) for t in with_graph]
        state = saved_state(roots)
        if not _kept(state):
            # back-propagated already, one step's graph, or keeping too little to matter
            continue
        # Only then what the namespace holds anyway (it can only lower the count): a list of
        # losses that `.backward()` released, the usual case, costs one walk and no more.
        if held is None:
            held = {k for _, t in objects.tensors if (k := storage_key(t)) is not None}
        state = saved_state(roots, held=held)
        if not _kept(state):
            continue
        if all(_scalar(t) for t in with_graph):
            fix = f"Store `loss.item()` in `{name}` (or `loss.detach()` to stay on the device)."
        else:
            fix = f"Store `t.detach()` in `{name}` (or compute them under `torch.inference_mode()`)."
        yield (
            rule.finding(
                f"`{name}` holds {len(with_graph)} tensors from {len(state.graphs)} separate autograd "
                f"graphs that still keep {human_bytes(state.saved_bytes)} of saved activations in memory.",
                fix,
                # the line that filled it (`losses.append(loss)`) is where the static rule points too
                line=cell.mutated.get(name) or cell.assigned.get(name),
                object=name,
                source="live",
            ),
            objects.container_objects.get(name),
        )
