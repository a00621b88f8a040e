"""A dry run (`%torchshape`, `torchmagic.dry_run`) as notebook output: the same per-layer shape
table as a checked cell's trace, and where and why the meta forward stopped."""

from __future__ import annotations

from html import escape
from typing import Any

from ..explain import DryRun, format_dry_run
from .html import inline_code, shape_text, shapes_table, wrap


def dry_run_html(result: DryRun) -> str:
    head = (
        f"<div class='tm-summary'>dry run of <code>{escape(result.model)}</code> on the meta device: "
        f"{len(result.records)} modules, {result.elapsed_s * 1e3:.0f} ms</div>"
    )
    parts = [head, shapes_table(result.records, limit=None)]
    failure = result.failure
    if failure is not None:
        explanation = failure.explanation
        message = explanation.message if explanation is not None else failure.reason
        hint = explanation.hint if explanation is not None and explanation.hint else ""
        parts.append(f"<div><b style='color:#d32f2f'>stopped:</b> {inline_code(message)}</div>")
        if hint:
            parts.append(f"<div class='tm-muted'>fix: {inline_code(hint)}</div>")
    elif result.outputs:
        parts.append(f"<div>output: {escape(', '.join(shape_text(s) for s in result.outputs))}</div>")
    return wrap("".join(parts))


class DryRunView:
    """A dry run's result that displays itself: HTML in notebooks, the text table elsewhere.
    Its data (`.records`, `.outputs`, `.failure`, `.ok`) reads through to the `DryRun`."""

    def __init__(self, result: DryRun) -> None:
        self.result = result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.result, name)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {
            "text/plain": format_dry_run(self.result),
            "text/html": dry_run_html(self.result),
            "application/vnd.torchmagic.dryrun+json": self.result.to_dict(),
        }

    def __repr__(self) -> str:
        return format_dry_run(self.result)
