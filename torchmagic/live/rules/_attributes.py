"""What TM105 and TM106 share: one finding per (class, attribute), placed where it is fixed."""

from __future__ import annotations

from typing import Any

from ...catalog import Rule
from ..registry import LiveFinding, LiveView


def attribute_finding(
    rule: Rule,
    cls: type,
    attr: str,
    hits: list[tuple[str, Any, Any]],
    view: LiveView,
    what: str,
    why: str,
    hint: str,
) -> LiveFinding:
    """Names the first instance (`net.layers`) and counts the others of the same class. The
    line is the `self.<attr> = ...` assignment when the cell defines the class (where the fix
    goes), else the line that built the instance."""
    qual, root, _ = hits[0]
    more = f" (and {len(hits) - 1} more `{cls.__name__}` instances)" if len(hits) > 1 else ""
    name = f"{qual}.{attr}"
    f = rule.finding(
        f"`{name}` {what}{more}: {why}",
        hint,
        line=view.cell.attribute_line(cls.__name__, attr, qual),
        object=name,
        source="live",
    )
    return f, root
