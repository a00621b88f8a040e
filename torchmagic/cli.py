"""`torchmagic check | explain | rules`: the linter on files, notebooks and folders.

Reads files, hands their text to `check_source` and prints the findings. Never imports torch:
linting a project must not pay for (or depend on) a working PyTorch install.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from . import catalog
from .lint.context import Carry
from .lint.cuda_only import project_cuda_only, project_root
from .lint.engine import lint
from .lint.rules.compile import notebook_notes

EXIT_CLEAN, EXIT_FOUND, EXIT_USAGE = 0, 1, 2
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", ".venv", "venv", "node_modules", ".ipynb_checkpoints", "__pycache__", ".tox"}
)
# Parallel workers only pay off when there is enough to lint (process start-up is ~50 ms).
PARALLEL_MIN_FILES = 16


@dataclass(frozen=True)
class Unit:
    """One piece of source linted on its own: a file, or one notebook cell."""

    label: str  # `path` or `path#cell4`
    code: str


class InputError(Exception):
    """A file that cannot be linted (unreadable, not UTF-8, invalid notebook)."""


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # `torchmagic check . | head`: the reader left; exit quietly like other CLI tools.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FOUND
    except KeyboardInterrupt:
        return 130


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "check":
        return _check(args)
    if args.command == "explain":
        return _explain(args.rule)
    if args.command == "rules":
        return _rules(args.format)
    parser.print_help(sys.stderr)
    return EXIT_USAGE


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="torchmagic", description="Flag PyTorch anti-patterns.")
    sub = p.add_subparsers(dest="command")
    c = sub.add_parser("check", help="lint .py files, .ipynb notebooks and folders")
    c.add_argument("paths", nargs="+", metavar="PATH")
    c.add_argument("--format", choices=("text", "json"), default="text")
    c.add_argument("--select", default="", help="rule IDs or prefixes, comma-separated (TM3,TM101)")
    c.add_argument("--ignore", default="", help="rule IDs or prefixes to skip, comma-separated")
    c.add_argument("--jobs", "-j", type=int, default=0, help="worker processes (0: automatic)")
    c.add_argument("--fix", action="store_true", help="apply the safe fixes to the files in place")
    c.add_argument(
        "--unsafe-fixes",
        action="store_true",
        help="with --fix or --diff, also the fixes that may change behaviour",
    )
    c.add_argument("--diff", action="store_true", help="print the fixes as a unified diff; change nothing")
    e = sub.add_parser("explain", help="show a rule's documentation")
    e.add_argument("rule", metavar="RULE")
    r = sub.add_parser("rules", help="list every rule")
    r.add_argument("--format", choices=("text", "json"), default="text")
    return p


def _split(spec: str) -> list[str]:
    return [s.strip().upper() for s in spec.split(",") if s.strip()]


def _check(args: argparse.Namespace) -> int:
    select, ignore = _split(args.select), _split(args.ignore)
    known = set(catalog.RULES)
    for spec in (*select, *ignore):
        if not spec.startswith("TM") or not any(k.startswith(spec) for k in known):
            print(f"torchmagic: error: unknown rule or prefix {spec!r}", file=sys.stderr)
            return EXIT_USAGE
    started = time.perf_counter()
    files: list[str] = []
    problems = missing = 0
    for path in args.paths:
        # a stale path (a deleted file in a pre-commit list) must not hide the others' findings
        if not os.path.exists(path):
            print(f"{path}: error: no such file or directory", file=sys.stderr)
            missing += 1
            continue
        files.extend(_discover(path))
    fixing = args.fix or args.diff
    fixed = 0
    if fixing:
        fixed, problems = _fix(files, select, ignore, args.unsafe_fixes, write=not args.diff)
    with _progress(len(files)) as advance:
        results = _run(files, select, ignore, args.jobs, advance)
    found: list[dict[str, Any]] = []
    for _path, findings, errors in results:
        for message in errors:
            problems += 1
            print(message, file=sys.stderr)
        found.extend(findings)
    if args.diff:
        pass  # the diff is the output
    elif args.format == "json":
        json.dump(found, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        out = [
            f"{f['path']}:{f['line'] or 1}:{(f['col'] or 0) + 1}: {f['rule']} {f['message']}" for f in found
        ]
        if out:
            sys.stdout.write("\n".join(out) + "\n")
    summary = _summary(
        len(files),
        found,
        problems + missing,
        time.perf_counter() - started,
        fixed=fixed if fixing else None,
        would=args.diff,
        unsafe=args.unsafe_fixes,
    )
    print(summary, file=sys.stderr)
    if missing:
        return EXIT_USAGE  # the command named paths that do not exist: everything else was checked
    if found or problems:
        return EXIT_FOUND
    return EXIT_CLEAN


def _fix(
    files: list[str], select: list[str], ignore: list[str], unsafe: bool, *, write: bool
) -> tuple[int, int]:
    """Fix each file (or print the diff of the fixes when not `write`): (fixes, problems)."""
    from .autofix import fix_file

    fixes = problems = 0
    for path in files:
        try:
            text = _read_text(path)
            outcome = fix_file(path, text, select=select, ignore=ignore, unsafe=unsafe)
        except InputError:
            continue  # reported by the check that follows
        except Exception as e:  # a bug in torchmagic leaves the file as it was
            print(f"{path}: error: internal error while fixing ({type(e).__name__}: {e})", file=sys.stderr)
            problems += 1
            continue
        for label, f in outcome.dropped:
            print(
                f"{label}:{f.line or 1}: note: the {f.rule} fix was not applied: the result did not parse",
                file=sys.stderr,
            )
        for note in outcome.notes:
            print(note, file=sys.stderr)
        fixes += len(outcome.applied)
        if outcome.text is None:
            continue
        if not write:
            sys.stdout.write(outcome.diff)
            continue
        try:
            with open(path, "w", encoding="utf-8", newline="") as fh:
                fh.write(outcome.text)
        except OSError as e:
            print(f"{path}: error: cannot write the fixes ({e.strerror or e})", file=sys.stderr)
            problems += 1
            fixes -= len(outcome.applied)
    return fixes, problems


def _read_bytes(path: str) -> bytes:
    """A regular file's bytes (reading a FIFO that happens to end in .py would block)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise InputError("not a regular file")
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as e:
        raise InputError(f"cannot read file ({e.strerror or e})") from None


def _read_text(path: str) -> str:
    """The file's text as it is, a byte-order mark included (written back as it was read)."""
    raw = _read_bytes(path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"not valid UTF-8 (byte {e.start})") from None


def _summary(
    files: int,
    found: list[dict[str, Any]],
    problems: int,
    seconds: float,
    *,
    fixed: int | None = None,
    would: bool = False,
    unsafe: bool = False,
) -> str:
    """`torchmagic: 12 files · 5 findings (1 error, 3 warnings, 1 info) · 2 fixable with --fix
    · 1 could not be checked · 0.31 s`; with --fix, `3 fixes applied · 2 findings remaining`."""
    severities = Counter(f["severity"] for f in found)
    parts = [f"{files} file{'s' if files != 1 else ''}"]
    if fixed is not None:
        parts.append(f"{fixed} fix{'es' if fixed != 1 else ''} {'to apply' if would else 'applied'}")
    remaining = " remaining" if fixed is not None and not would else ""
    if found:
        detail = ", ".join(
            f"{severities[s]} {s}{'s' if severities[s] != 1 and s != 'info' else ''}"
            for s in ("error", "warning", "info")
            if severities[s]
        )
        parts.append(f"{len(found)} finding{'s' if len(found) != 1 else ''}{remaining} ({detail})")
    else:
        parts.append(f"no findings{remaining}")
    applicability = Counter((f.get("fix") or {}).get("applicability") for f in found)
    if fixed is None:
        n = applicability["safe"] + (applicability["unsafe"] if unsafe else 0)
        if n:
            parts.append(
                f"{n} fixable with --fix{' --unsafe-fixes' if unsafe and applicability['unsafe'] else ''}"
            )
    if applicability["unsafe"] and not unsafe and not would:
        parts.append(f"{applicability['unsafe']} more with --unsafe-fixes")
    if problems:
        parts.append(f"{problems} could not be checked")
    parts.append(f"{seconds:.2f} s")
    return "torchmagic: " + " · ".join(parts)


PROGRESS_MIN_FILES = 40  # a run shorter than this is over before a bar would help


@contextmanager
def _progress(total: int) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr for long runs on a terminal; elsewhere (pipes, CI, pre-commit
    logs, short runs) nothing, so the output stays the same."""
    if total < PROGRESS_MIN_FILES or not sys.stderr.isatty():
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("torchmagic check"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(file=sys.stderr),
        transient=True,
    ) as bar:
        task = bar.add_task("files", total=total)
        yield lambda: bar.advance(task)


def _discover(path: str) -> Iterator[str]:
    if not os.path.isdir(path):
        yield path
        return
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(
            d for d in dirs if d not in SKIP_DIRS and not os.path.exists(os.path.join(root, d, "pyvenv.cfg"))
        )
        for name in sorted(names):
            full = os.path.join(root, name)
            # regular files only: reading a FIFO or socket that happens to end in .py would block
            if name.endswith((".py", ".ipynb")) and os.path.isfile(full):
                yield os.path.normpath(full)


# (path, findings as JSON-ready dicts with a `path` key, error lines for stderr)
Result = tuple[str, list[dict[str, Any]], list[str]]


def _run(
    files: list[str],
    select: list[str],
    ignore: list[str],
    jobs: int,
    advance: Callable[[], None] = lambda: None,
) -> list[Result]:
    if jobs <= 0:
        jobs = min(os.cpu_count() or 1, 8) if len(files) >= PARALLEL_MIN_FILES else 1
    if jobs > 1 and len(files) > 1:
        # each project is read once, here, and the forked workers inherit what was found
        for root in {project_root(f) for f in files} - {None}:
            project_cuda_only(root)  # type: ignore[arg-type]
        try:
            import multiprocessing as mp

            # Largest files first, so no worker is left with a big one at the end.
            order = sorted(files, key=_size, reverse=True)
            done: dict[str, Result] = {}
            with mp.get_context("fork" if sys.platform == "linux" else "spawn").Pool(jobs) as pool:
                work = [(f, select, ignore) for f in order]
                for f, result in zip(order, pool.imap(_lint_file_star, work, chunksize=4)):
                    done[f] = result
                    advance()
            return [done[f] for f in files]
        except (OSError, ImportError):
            pass  # no process support here: lint in this process
    results = []
    for f in files:
        results.append(lint_file(f, select, ignore))
        advance()
    return results


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _lint_file_star(args: tuple[str, list[str], list[str]]) -> Result:
    return lint_file(*args)


def lint_file(path: str, select: list[str] | None = None, ignore: list[str] | None = None) -> Result:
    """Findings of one file, and what kept parts of it from being linted."""
    try:
        units = list(read_units(path))
    except InputError as e:
        return path, [], [f"{path}: error: {e}"]
    out: list[dict[str, Any]] = []
    errors: list[str] = []
    # A notebook's cells share one namespace: what cell 2 builds is known in cell 5, and a
    # model moved to the GPU in cell 9 makes the `.item()` loop of cell 4 a GPU wait.
    # ... and a function compiled in cell 7 runs compiled in the cell that defines it.
    carry = Carry(notes=notebook_notes(u.code for u in units)) if path.endswith(".ipynb") else None
    document = "\n".join(u.code for u in units) if carry is not None else None
    root = project_root(path)
    cuda_only = root is not None and project_cuda_only(root) is not None
    results = []
    for unit in units:
        try:
            result = lint(
                unit.code,
                path=unit.label,
                select=select,
                ignore=ignore,
                carry=carry,
                document=document,
                project_cuda_only=cuda_only,
            )
            carry = result.carry
        except Exception as e:  # a bug in torchmagic must not hide the other files' findings
            errors.append(f"{unit.label}: error: internal error ({type(e).__name__}: {e})")
            continue
        errors.extend(f"{unit.label}: error: internal error in {msg}" for msg in result.errors)
        results.append((unit, result))
    accelerator = any(r.accelerator for _, r in results)
    for unit, result in results:
        for f in result.resolved(accelerator):
            d = f.to_dict()
            d["path"] = unit.label
            out.append(d)
    return path, out, errors


def read_units(path: str) -> Iterator[Unit]:
    raw = _read_bytes(path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"not valid UTF-8 (byte {e.start})") from None
    if not path.endswith(".ipynb"):
        yield Unit(path, text)
        return
    try:
        nb = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise InputError(f"invalid notebook JSON ({e})") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if cells is None and isinstance(nb, dict) and isinstance(nb.get("worksheets"), list) and nb["worksheets"]:
        ws = nb["worksheets"][0]
        cells = ws.get("cells") if isinstance(ws, dict) else None  # nbformat 3
    if not isinstance(cells, list):
        raise InputError("invalid notebook: no list of cells")
    for i, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = cell.get("source", cell.get("input", ""))
        if isinstance(src, list):
            src = "".join(s for s in src if isinstance(s, str))
        if not isinstance(src, str) or not src.strip():
            continue
        yield Unit(f"{path}#cell{i}", src)


def _explain(rule_id: str) -> int:
    r = catalog.get(rule_id)
    if r is None:
        print(f"torchmagic: error: unknown rule {rule_id!r} (see `torchmagic rules`)", file=sys.stderr)
        return EXIT_USAGE
    print(f"{r.id} ({r.name}) — {r.severity}, evidence: {' + '.join(r.evidence)}\n")
    print(r.doc)
    return EXIT_CLEAN


def _rules(fmt: str) -> int:
    rules = catalog.all_rules()
    if fmt == "json":
        print(json.dumps([{**r.to_dict(), "summary": r.summary} for r in rules], indent=2))
        return EXIT_CLEAN
    width = max(len(r.name) for r in rules)
    for r in rules:
        print(f"{r.id}  {r.name:<{width}}  {r.severity:<7}  {' + '.join(r.evidence):<16}  {r.summary}")
    return EXIT_CLEAN


if __name__ == "__main__":
    sys.exit(main())
