"""The failing frames of a traceback: which are the user's, what expression failed, and the
tensors that expression names, read from the frame's locals without running anything.

Locals are read only from user code, from `torch.nn.modules` forwards and from
`torch.nn.functional` (where `F.cross_entropy(model(x), y)` keeps the logits no user frame
holds); other library frames are skipped. Names on the failing expression resolve through
plain dict lookups, instance dicts (`self.fc.weight` through `_modules`/`_parameters`) and
constant subscripts of plain lists/dicts.
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
import site
import sysconfig
from dataclasses import dataclass, field
from itertools import islice
from types import FrameType, TracebackType
from typing import Any

import torch

from ..lint.nodes import COMPREHENSIONS
from ..lint.source import parse_cell
from . import safe
from .records import TensorInfo, tensor_info

USER, NN, FUNCTIONAL, LIBRARY = "user", "nn", "functional", "library"

_tb_frame = TracebackType.__dict__["tb_frame"].__get__
_tb_next = TracebackType.__dict__["tb_next"].__get__
_tb_lineno = TracebackType.__dict__["tb_lineno"].__get__
_tb_lasti = TracebackType.__dict__["tb_lasti"].__get__

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_NN_MODULES = os.path.join(_TORCH_DIR, "nn", "modules") + os.sep
_FUNCTIONAL = os.path.join(_TORCH_DIR, "nn", "functional.py")
_COLLATE = os.path.join(_TORCH_DIR, "utils", "data", "_utils", "collate.py")
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # torchmagic/


def _library_dirs() -> tuple[str, ...]:
    dirs = {_TORCH_DIR, _HERE}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            dirs.add(os.path.abspath(p) + os.sep)
    try:
        dirs.update(os.path.abspath(p) + os.sep for p in site.getsitepackages())
    except Exception:
        pass
    return tuple(sorted(dirs))


_LIBRARY_DIRS = _library_dirs()


_PLUMBING = {"__torch_function__", "__torch_dispatch__"}  # a tensor subclass's dispatch, not the op


def frame_kind(frame: FrameType) -> str:
    code = frame.f_code
    filename = code.co_filename
    if code.co_name in _PLUMBING:
        return LIBRARY
    if filename.startswith("<"):
        return LIBRARY if filename.startswith("<frozen") else USER  # cells, exec'd strings
    path = os.path.abspath(filename)
    if path.startswith(_NN_MODULES):
        return NN if code.co_name == "forward" else LIBRARY
    if path == _FUNCTIONAL:
        return FUNCTIONAL
    if path.startswith(_LIBRARY_DIRS):
        return LIBRARY
    return USER


@dataclass
class Site:
    """One traceback entry."""

    frame: FrameType
    lineno: int
    lasti: int
    kind: str
    _code: str | None = field(default=None, repr=False)
    _code_done: bool = field(default=False, repr=False)

    @property
    def function(self) -> str:
        return self.frame.f_code.co_name

    @property
    def filename(self) -> str:
        return self.frame.f_code.co_filename

    def local(self, name: str) -> Any:
        scope = self.frame.f_locals
        return dict.get(scope, name, safe.MISSING) if type(scope) is dict else safe.MISSING

    def code(self) -> str | None:
        """The expression that was running (3.11+ column positions), else the line."""
        if not self._code_done:
            self._code_done = True
            self._code = failing_source(self.frame, self.lineno, self.lasti)
        return self._code

    def line_text(self) -> str:
        return linecache.getline(self.filename, self.lineno).strip()

    def is_collate(self) -> bool:
        return os.path.abspath(self.filename) == _COLLATE


def sites(tb: TracebackType | None) -> list[Site]:
    """Every traceback entry, outermost first."""
    out = []
    while tb is not None and len(out) < 500:
        frame = _tb_frame(tb)
        out.append(Site(frame, _tb_lineno(tb), _tb_lasti(tb), frame_kind(frame)))
        tb = _tb_next(tb)
    return out


_COMPOUND = {"for", "async", "while", "with", "if", "elif"}


def failing_source(frame: FrameType, lineno: int, lasti: int) -> str | None:
    code = frame.f_code
    lines = linecache.getlines(code.co_filename)
    if not lines or not 0 < lineno <= len(lines):
        return None
    positions = getattr(code, "co_positions", None)
    if positions is not None and lasti >= 0:
        try:
            pos = next(islice(positions(), lasti // 2, None))
        except StopIteration:
            pos = None
        if pos is not None and None not in pos:
            start, end, col, end_col = pos
            header = lines[start - 1].strip() if 0 < start <= len(lines) else ""
            if end != start and header.endswith(":") and header.split(" ", 1)[0] in _COMPOUND:
                return header.rstrip(":").strip()  # a `for`/`with`/`while` statement: its header
            if 0 < start <= end <= len(lines) and end - start < 20:
                chunk = [ln.encode("utf-8") for ln in lines[start - 1 : end]]
                if len(chunk) == 1:
                    text = chunk[0][col:end_col]
                else:
                    text = b"".join([chunk[0][col:], *chunk[1:-1], chunk[-1][:end_col]])
                seg = " ".join(text.decode("utf-8", "replace").split())
                if seg:
                    return seg
    return lines[lineno - 1].strip()


# ---- names on the failing expression -----------------------------------------------------------


def parse(code: str | None) -> ast.AST | None:
    if not code:
        return None
    text = code.strip()
    for candidate in (text, text.rstrip(":"), _strip_keyword(text)):
        for mode in ("eval", "exec"):
            try:
                return ast.parse(candidate, mode=mode)
            except SyntaxError:
                continue
    return None


def _strip_keyword(text: str) -> str:
    for kw in ("if ", "elif ", "while ", "assert ", "return ", "for "):
        if text.startswith(kw):
            text = text[len(kw) :]
    return text.rstrip(":")


def reference(node: ast.AST) -> list[Any] | None:
    """`self.fc.weight` -> ['self', 'fc', 'weight']; `xs[0]` -> ['xs', 0]; else None."""
    parts: list[Any] = []
    while True:
        if isinstance(node, ast.Name):
            parts.append(node.id)
            return parts[::-1]
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            key = node.slice
            if isinstance(key, ast.Index):  # Python 3.8 AST
                key = key.value  # type: ignore[attr-defined]
            if not isinstance(key, ast.Constant) or type(key.value) not in (int, str):
                return None
            parts.append(key.value)
            node = node.value
        else:
            return None


def spell(parts: list[Any]) -> str:
    out = str(parts[0])
    for p in parts[1:]:
        out += f"[{p!r}]" if type(p) is not str else f".{p}"
    return out


def references(tree: ast.AST | None) -> list[list[Any]]:
    """Every name/attribute/subscript chain in source order, longest chains only."""
    if tree is None:
        return []
    found: list[tuple[int, int, list[Any]]] = []
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and id(node) not in inner:
            parts = reference(node)
            if parts is None:
                continue
            sub = node
            while isinstance(sub, (ast.Attribute, ast.Subscript)):
                sub = sub.value
                inner.add(id(sub))
            found.append((getattr(node, "col_offset", 0), getattr(node, "lineno", 0), parts))
    found.sort(key=lambda f: (f[1], f[0]))
    return [p for _, _, p in found]


class Scopes:
    """Where a user frame's names live: its locals, the enclosing frame for comprehensions
    (Python 3.11 runs them in their own frame), then its globals. Dict lookups only."""

    def __init__(self, site: Site, outer: Site | None) -> None:
        self.dicts: list[dict[str, Any]] = []
        frame = site.frame
        for d in (frame.f_locals, outer.frame.f_locals if outer is not None else None, frame.f_globals):
            if type(d) is dict and all(d is not x for x in self.dicts):
                self.dicts.append(d)

    def lookup(self, name: str) -> Any:
        for d in self.dicts:
            if name in d:
                return dict.__getitem__(d, name)
        return safe.MISSING

    def resolve(self, parts: list[Any]) -> tuple[list[Any], Any]:
        """The longest prefix of `parts` that resolves without running code, and its value."""
        obj = self.lookup(parts[0])
        if obj is safe.MISSING:
            return [], safe.MISSING
        done = [parts[0]]
        for p in parts[1:]:
            nxt = safe.plain_attr(obj, p) if type(p) is str else safe.item(obj, p)
            if nxt is safe.MISSING:
                break
            obj = nxt
            done.append(p)
        return done, obj


COMPREHENSION_FRAMES = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"})


def comprehension_names(site: Site) -> frozenset[str]:
    """Names bound by the comprehensions around the site's line, when the frame is not the
    comprehension's own. Python 3.12 runs a comprehension inline (PEP 709): an error inside
    `[net(xb) for xb in batches]` is reported in the enclosing frame, where `xb` is unbound or
    is another object of the same name (a global from an earlier cell), not the failing item."""
    if site.function in COMPREHENSION_FRAMES:
        return frozenset()  # the comprehension's own frame (Python 3.11): its names are its own
    lines = linecache.getlines(site.filename)
    if not lines or not 0 < site.lineno <= len(lines) or len(lines) > 5000:
        return frozenset()
    return _comprehension_targets("".join(lines), site.lineno) or _comprehension_targets(
        lines[site.lineno - 1], 1
    )


@functools.lru_cache(maxsize=16)
def _comprehension_targets(source: str, lineno: int) -> frozenset[str]:
    tree = parse(source) if lineno == 1 else parse_cell(source)
    names: set[str] = set()
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, COMPREHENSIONS) and node.lineno <= lineno <= (node.end_lineno or 0):
            for gen in node.generators:
                names.update(n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name))
    return frozenset(names)


def expression_tensors(
    site: Site, outer: Site | None, role: str, tree: ast.AST | None = None, limit: int = 12
) -> list[TensorInfo]:
    """Tensors named on the failing expression of a user frame (or on `tree`, a part of
    it), in source order; a plain list/tuple/dict of tensors is listed item by item (`xs[0]`).
    A comprehension's variable is not looked up outside the comprehension's own frame."""
    scopes = Scopes(site, outer)
    out: list[TensorInfo] = []
    seen: set[int] = set()
    hidden = comprehension_names(site)
    for parts in references(tree if tree is not None else parse(site.code())):
        if len(out) >= limit:
            break
        if parts[0] in hidden:
            continue
        done, obj = scopes.resolve(parts)
        if not done:
            continue
        for name, value in _tensors_in(spell(done), obj):
            if id(value) in seen:
                continue
            seen.add(id(value))
            info = tensor_info(name, value, role)
            if info is not None:
                out.append(info)
    return out


def _tensors_in(name: str, obj: Any) -> list[tuple[str, Any]]:
    if safe.is_tensor(obj):
        return [(name, obj)]
    if type(obj) in (list, tuple, dict):
        return [(name + k, v) for k, v in safe.items(obj, 16) if safe.is_tensor(v)]
    return []


def local_tensors(site: Site, role: str, limit: int = 8) -> list[TensorInfo]:
    """Tensor locals of a torch.nn forward/functional frame (`input`, `target`, ...)."""
    scope = site.frame.f_locals
    if type(scope) is not dict:
        return []
    out = []
    for name, value in islice(dict.items(scope), 64):
        if len(out) >= limit:
            break
        if type(name) is str and safe.is_tensor(value):
            info = tensor_info(name, value, role)
            if info is not None:
                out.append(info)
    return out
