"""`docs/rules.md`, generated from the catalog: `python -m torchmagic.catalog.reference --write`.

A test fails when the committed file differs from what this prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import all_rules
from .model import Rule

FAMILIES = {
    "0": "Errors raised by the cell",
    "1": "Model definitions (inside `nn.Module` subclasses)",
    "2": "Devices and transfers",
    "3": "CPU-GPU synchronisation",
    "4": "Autograd",
    "5": "The training loop",
    "6": "Saving and loading",
    "7": "Vectorisation and indexing",
    "8": "Data loading",
    "9": "Configuration and deprecated APIs",
    "95": "torch.compile: graph breaks and recompilations",
}
EVIDENCE = {
    "static": "the cell's (or file's) source",
    "live": "objects in the kernel's namespace after the cell ran (metadata only)",
    "runtime": "hooks active while the cell runs",
}
DEFAULT_PATH = Path(__file__).resolve().parents[2] / "docs" / "rules.md"


def _row(r: Rule) -> str:
    return f"| [{r.id}](#{r.id.lower()}-{r.name}) | `{r.name}` | {r.severity} | {' + '.join(r.evidence)} | {r.summary} |"


def _section(r: Rule) -> str:
    parts = [
        f"### {r.id} {r.name}",
        "",
        f"**{r.severity}** · evidence: {' + '.join(r.evidence)}"
        + (f" · wins over {', '.join(r.overrides)} on the same line" if r.overrides else ""),
        "",
        r.doc.replace("## ", "#### "),
    ]
    return "\n".join(parts)


def _family(rule_id: str) -> str:
    """The longest family prefix of the ID's digits: "95" for TM950, "9" for TM901."""
    digits = rule_id[2:]
    return max((k for k in FAMILIES if digits.startswith(k)), key=len, default=digits[:1])


def markdown() -> str:
    rules = all_rules()
    out = [
        "# torchmagic rules",
        "",
        "<!-- generated from torchmagic/catalog by `python -m torchmagic.catalog.reference --write`;"
        " do not edit -->",
        "",
        f"{len(rules)} rules. Evidence: "
        + "; ".join(f"**{k}**, {v}" for k, v in EVIDENCE.items())
        + ". A finding backed by several kinds of evidence is shown once, with each kind listed;"
        " where two rules fit the same line, the more specific one wins.",
        "",
        "| ID | name | severity | evidence | flags |",
        "|---|---|---|---|---|",
        *(_row(r) for r in rules),
    ]
    family = None
    for r in rules:
        key = _family(r.id)
        if key != family:
            family = key
            out += ["", f"## TM{key}{'x' * (3 - len(key))} — {FAMILIES.get(key, '')}"]
        out += ["", _section(r)]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m torchmagic.catalog.reference")
    p.add_argument("--write", nargs="?", const=str(DEFAULT_PATH), metavar="PATH", help="write the file")
    args = p.parse_args(argv)
    text = markdown()
    if args.write:
        Path(args.write).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
