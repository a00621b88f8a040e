"""Run a notebook headless with a real kernel, save it as HTML and summarise its reports.

    python -m torchmagic.notebook_run demo.ipynb [--html demo.html] [--timeout 600]

Each `%%torchcheck` cell's display carries its report as JSON (see views/html.py), so the
summary below is read from what the kernel actually sent, not recomputed.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from .views.html import REPORT_MIMETYPE


def reports_in(nb: Any) -> list[tuple[int, dict[str, Any]]]:
    """(cell position, report dict) for every report output in an executed notebook."""
    found = []
    for i, cell in enumerate(nb.cells, start=1):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if REPORT_MIMETYPE in data:
                found.append((i, data[REPORT_MIMETYPE]))
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m torchmagic.notebook_run", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("notebook", type=Path)
    ap.add_argument("--html", type=Path, default=None, help="write the executed notebook as HTML here")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    ap.add_argument("--kernel", default="python3")
    args = ap.parse_args(argv)

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(args.notebook, as_version=4)
    # Without stored widget state, nbconvert falls back to each report's static HTML, so the
    # exported file is self-contained (rendering stored widgets would need unpkg.com).
    client = NotebookClient(
        nb,
        timeout=args.timeout,
        kernel_name=args.kernel,
        store_widget_state=False,
        resources={"metadata": {"path": str(args.notebook.parent.resolve())}},
    )
    status = 0
    try:
        client.execute()
    except CellExecutionError as e:
        print(f"{args.notebook}: a cell failed:\n{str(e)[:2000]}", file=sys.stderr)
        status = 1
    if args.html:
        from nbconvert import HTMLExporter

        body, _ = HTMLExporter().from_notebook_node(nb)
        args.html.write_text(body, encoding="utf-8")
    reports = reports_in(nb)
    rules: Counter[str] = Counter()
    for pos, rep in reports:
        findings = rep.get("findings", [])
        rules.update(f["rule"] for f in findings)
        head = f"{args.notebook.name}#cell{pos}: {len(findings)} finding(s)"
        extra = []
        if rep.get("syncs"):
            extra.append(f"{sum(s['count'] for s in rep['syncs'])} syncs")
        if rep.get("tensors"):
            extra.append(f"{len(rep['tensors'])} tensors")
        if rep.get("shape_trace"):
            extra.append(f"{len(rep['shape_trace'])} traced layers")
        print(head + (f" ({', '.join(extra)})" if extra else ""))
        for f in findings:
            where = f"line {f['line']}" if f.get("line") is not None else f.get("object") or "live"
            print(f"    {f['rule']} {where}: {f['message']}")
        for err in rep.get("errors", []):
            print(f"    internal error: {err}")
    total = sum(rules.values())
    by_rule = ", ".join(f"{r}×{n}" for r, n in sorted(rules.items()))
    print(f"{len(reports)} checked cells, {total} findings" + (f": {by_rule}" if by_rule else ""))
    if args.html:
        print(f"wrote {args.html}")
    if not reports:
        print("no torchmagic reports found: does the notebook run %load_ext torchmagic?", file=sys.stderr)
        status = status or 1
    return status


if __name__ == "__main__":
    sys.exit(main())
