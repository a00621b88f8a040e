"""TM401 live: autograd graphs kept alive by tensors left in the namespace after the cell."""

from __future__ import annotations

from collections.abc import Iterator

from ...catalog import Rule
from .. import meta
from ..registry import LiveFinding, LiveView, live_check


def _has_graph(t: object) -> bool:
    try:
        return meta.grad_fn(t) is not None
    except Exception:
        return False


@live_check("TM401")
def graphs_kept_alive(view: LiveView, rule: Rule) -> Iterator[LiveFinding]:
    """Containers of tensors with `grad_fn` (warning); single outputs (info, one finding)."""
    objects = view.snapshot.objects
    cell = view.cell
    found = False
    for name, tensors in objects.containers.items():
        n = sum(1 for t in tensors if _has_graph(t))
        if n < 2:
            continue
        found = True
        # the line that filled it (`losses.append(loss)`) is where the static rule points too
        yield (
            rule.finding(
                f"`{name}` holds {n} tensors with `grad_fn`: each keeps its whole autograd graph "
                "(and the activations it saved) in memory.",
                f"Store `loss.item()` (or `loss.detach()`) in `{name}` instead of the tensor.",
                line=cell.mutated.get(name) or cell.assigned.get(name),
                object=name,
                source="live",
            ),
            objects.container_objects.get(name),
        )
    if found or any(f.rule == rule.id for f in view.static):
        return  # the single-output note adds nothing next to a real TM401
    # only names this cell bound (container items are handled above)
    singles = [name for name, t in objects.tensors if name in cell.assigned and _has_graph(t)]
    if singles:
        names = ", ".join(f"`{n}`" for n in singles[:4]) + (" ..." if len(singles) > 4 else "")
        yield (
            rule.finding(
                f"{names} still hold{'s' if len(singles) == 1 else ''} an autograd graph after the cell "
                "(fine for the last step's output; a leak if kept across steps).",
                "Keep `.detach()`ed tensors or `.item()` numbers in variables that outlive the step.",
                line=cell.line_of(singles[0]),
                object=singles[0],
                source="live",
                severity="info",
            ),
            None,
        )
