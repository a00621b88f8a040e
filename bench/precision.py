"""Precision of `torchmagic check` on real code other people wrote, per rule, against labels.

    .venv/bin/python bench/precision.py [--corpus DIR] [--new new.json]

The corpus is public training scripts and notebooks (see `bench/precision/manifest.json` for
where each file comes from); it is third-party code, so it is not in this repository: point
`--corpus` (or `TORCHMAGIC_CORPUS`) at a folder with `files/` and the label files. Every
finding was labelled by hand as `right` (a real problem, and the advice is correct),
`wrong` (not a problem, or the advice would change what a correct program computes) or
`debatable`. Labels are matched by (file, rule, line); a finding now reported at the first
line of a multi-line statement still matches the label of its closing line.

Prints per rule: findings now, how many are right/wrong/debatable/not yet labelled, the
precision (right / labelled), and the right findings of the labelled set that are no longer
reported (recall lost). `--new` writes the unlabelled findings, ready to be labelled.
`--projects DIR` checks each file of a repository rebuilt under `DIR/owner__repo/` inside that
tree (what the project around a file tells, such as a CUDA-only library imported elsewhere).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from torchmagic.cli import lint_file  # noqa: E402

HERE = Path(__file__).resolve().parent / "precision"
Key = tuple[str, str, int]  # file (with #cellN), rule, line


def load_labels(corpus: Path) -> dict[Key, dict[str, Any]]:
    """Every `labels*.json` in the corpus folder (later files win), else the committed copy."""
    files = sorted(glob.glob(str(corpus / "labels*.json"))) or [str(HERE / "static_labels.json")]
    labels: dict[Key, dict[str, Any]] = {}
    for path in files:
        for item in json.load(open(path)):
            # the held-out sets say "label" and name files from the corpus folder
            item.setdefault("verdict", item.get("label"))
            item["file"] = item["file"].removeprefix("files/")
            if item.get("cell") and "#" not in item["file"]:
                item["file"] += "#" + item["cell"]
            labels[(item["file"], item["rule"], int(item["line"]))] = item
    return labels


def findings(corpus: Path, projects: Path | None = None) -> list[dict[str, Any]]:
    root = corpus / "files"
    out = []
    with tempfile.TemporaryDirectory() as scratch:
        for path in sorted(root.iterdir()):
            if path.suffix not in (".py", ".ipynb"):
                continue
            checked = in_project(path, projects, Path(scratch)) if projects else path
            _, found, errors = lint_file(str(checked))
            for e in errors:
                if "internal error" in e:  # a crashing rule would look like a precise one
                    raise SystemExit(f"torchmagic failed on {path.name}: {e}")
            for f in found:
                f["file"] = path.name + f["path"][len(str(checked)) :]  # keeps `#cellN`
                out.append(f)
    return out


def in_project(path: Path, projects: Path, scratch: Path) -> Path:
    """Where to check a corpus file `owner__repo__dir__name.py` as a user would, inside its
    repository: when `projects/owner__repo/` holds a rebuilt tree of that repository (its
    project markers and the files that matter to the checked one), a copy of that tree with the
    file put back at `dir/name.py`; else the file itself."""
    owner, _, rest = path.name.partition("__")
    repo, _, inner = rest.partition("__")
    tree = projects / f"{owner}__{repo}"
    if not inner or not tree.is_dir():
        return path
    copy = scratch / tree.name
    if not copy.exists():
        shutil.copytree(tree, copy)
    target = copy / inner.replace("__", os.sep)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, target)
    return target


def match(found: list[dict[str, Any]], labels: dict[Key, dict[str, Any]]) -> list[tuple[dict, dict | None]]:
    exact = {(f["file"], f["rule"], f["line"]) for f in found}
    used: set[Key] = set()
    pairs = []
    for f in found:
        key = (f["file"], f["rule"], f["line"])
        label = labels.get(key)
        if label is None:
            # reported at the first line of a multi-line statement now, at its last one before
            for later in range(f["line"] + 1, f["line"] + 16):
                k = (f["file"], f["rule"], later)
                if k in labels and k not in exact and k not in used:
                    label = labels[k]
                    key = k
                    break
        if label is not None:
            used.add(key)
        pairs.append((f, label))
    return pairs


def _lines_named(message: str) -> set[int]:
    """The lines a finding that covers several places names: `(lines 243, 265)`."""
    return {int(n) for m in re.finditer(r"\(lines? ([\d, ]+)\)", message) for n in m.group(1).split(", ")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=os.environ.get("TORCHMAGIC_CORPUS", "/work/corpus"))
    ap.add_argument("--new", help="write the findings that have no label yet to this JSON file")
    ap.add_argument("--rule", help="only this rule (or prefix)")
    ap.add_argument(
        "--projects",
        help="a folder of rebuilt repository trees (`owner__repo/`): a corpus file of such a repository"
        " is checked inside it, as a user who runs `torchmagic check` in their checkout would",
    )
    args = ap.parse_args()
    corpus = Path(args.corpus)
    if not (corpus / "files").is_dir():
        print(f"no corpus at {corpus} (a folder with files/ and labels*.json): nothing to measure")
        return 0
    labels = load_labels(corpus)
    pairs = [
        (f, lab)
        for f, lab in match(findings(corpus, Path(args.projects) if args.projects else None), labels)
        if not args.rule or f["rule"].startswith(args.rule)
    ]
    per_rule: dict[str, Counter[str]] = defaultdict(Counter)
    for f, label in pairs:
        per_rule[f["rule"]][label["verdict"] if label else "unlabelled"] += 1
    matched = {(lab["file"], lab["rule"], int(lab["line"])) for _, lab in pairs if lab}
    reported = {(f["file"], f["rule"], f["line"]) for f, _ in pairs}
    merged: list[dict[str, Any]] = []
    lost = []
    for key, lab in labels.items():
        if lab["verdict"] != "right" or key in matched or (args.rule and not key[1].startswith(args.rule)):
            continue
        # one statement, one finding: a right finding on a later line of the same statement is
        # now a note of the finding at the statement's first line
        if any((key[0], key[1], key[2] - d) in reported for d in range(1, 16)) or any(
            key[2] in _lines_named(f["message"]) for f, _ in pairs if (f["file"], f["rule"]) == key[:2]
        ):
            merged.append(lab)
        else:
            lost.append(lab)
    lost_by_rule = Counter(lab["rule"] for lab in lost)
    files = len([p for p in (corpus / "files").iterdir() if p.suffix in (".py", ".ipynb")])
    print(f"corpus: {files} files, {len(labels)} labels; {len(pairs)} findings now")
    print(
        f"{'rule':<6} {'now':>4} {'right':>5} {'wrong':>5} {'debat':>5} {'unlab':>5} {'prec':>6} {'lost right':>10}"
    )
    total: Counter[str] = Counter()
    for rule in sorted(set(per_rule) | set(lost_by_rule)):
        c = per_rule[rule]
        total.update(c)
        labelled = c["right"] + c["wrong"] + c["debatable"]
        prec = f"{c['right'] / labelled:.2f}" if labelled else "-"
        print(
            f"{rule:<6} {sum(c.values()):>4} {c['right']:>5} {c['wrong']:>5} {c['debatable']:>5}"
            f" {c['unlabelled']:>5} {prec:>6} {lost_by_rule[rule]:>10}"
        )
    labelled = total["right"] + total["wrong"] + total["debatable"]
    print(
        f"{'all':<6} {sum(total.values()):>4} {total['right']:>5} {total['wrong']:>5} {total['debatable']:>5}"
        f" {total['unlabelled']:>5} {total['right'] / max(labelled, 1):>6.2f} {len(lost):>10}"
    )
    if merged:
        print(
            f"\n{len(merged)} right findings are now part of another finding (on their statement's first"
            " line, or naming their line)"
        )
    if lost:
        print("\nright findings no longer reported:")
        for lab in sorted(lost, key=lambda x: (x["rule"], x["file"], x["line"])):
            print(f"  {lab['rule']} {lab['file']}:{lab['line']}  ({lab.get('pattern', '')})")
    wrong_now = [(f, lab) for f, lab in pairs if lab and lab["verdict"] != "right"]
    if wrong_now:
        print("\nwrong or debatable findings still reported:")
        for f, lab in sorted(wrong_now, key=lambda p: (p[0]["rule"], p[0]["file"], p[0]["line"])):
            print(f"  {f['rule']} {f['file']}:{f['line']} {lab['verdict']}  ({lab.get('pattern', '')})")
    if args.new:
        new = [
            {k: f[k] for k in ("file", "line", "rule", "severity", "message", "hint")}
            | {"verdict": "", "reason": "", "pattern": ""}
            for f, lab in pairs
            if lab is None
        ]
        json.dump(new, open(args.new, "w"), indent=1)
        print(f"\n{len(new)} unlabelled findings written to {args.new}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
