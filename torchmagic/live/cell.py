"""Where in the cell a live object came from: the names the cell's source binds or fills.

Live findings are placed at these lines (the line that built `net`, the `self.<attr> = ...`
line of a class the cell defines); lines count as the editor shows them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from ..lint.nodes import COMPREHENSIONS, LOOPS, read_only_for_python
from ..lint.source import parse_cell

# Methods that grow or rebind the contents of a container named in the cell.
_MUTATORS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "__setitem__"})


@dataclass
class CellNames:
    """Top-level names the cell binds (`assigned`) or fills (`mutated`), with the last line."""

    assigned: dict[str, int] = field(default_factory=dict)
    mutated: dict[str, int] = field(default_factory=dict)
    parsed: bool = True
    # (class name, attribute) -> first line of `self.<attribute> = ...` in a class the cell defines
    self_attrs: dict[tuple[str, str], int] = field(default_factory=dict)
    # (class name, attribute) of a class the cell defines that reads the attribute only for
    # Python values (`.item()`, `.tolist()`): host data, not state to register (TM106)
    host_attrs: set[tuple[str, str]] = field(default_factory=set)
    # (dotted name, attribute) -> last line of `<name>.<attribute> = ...` at the top level
    attr_sets: dict[tuple[str, str], int] = field(default_factory=dict)
    # (first line, last line, is a loop) of each statement the cell's code runs itself; a
    # `def`/`class` counts as one statement over its whole extent
    statements: list[tuple[int, int, bool]] = field(default_factory=list)

    def attribute_line(self, class_name: str, attr: str, instance: str) -> int | None:
        """Where a live object's attribute problem is best fixed: the `self.<attr> = ...` line
        when the cell defines the class, the `<instance>.<attr> = ...` line when the cell sets
        it from outside, else the line that made the instance."""
        line = self.self_attrs.get((class_name, attr))
        if line is None:
            line = self.attr_sets.get((instance, attr))
        return line if line is not None else self.line_of(instance)

    def reached(self, line: int, stop: int) -> bool:
        """Whether the statement at `line` may have run to its end in a cell whose top-level
        code raised at line `stop`: it came before the statement that raised, encloses it (a
        loop or `with` header), or shares a loop with it (an earlier iteration). True when in
        doubt (the source did not parse)."""
        raised = _innermost(self.statements, lambda s: s[0] <= stop <= s[1])
        at = _innermost(self.statements, lambda s: s[0] == line) or _innermost(
            self.statements, lambda s: s[0] <= line <= s[1]
        )
        if raised is None or at is None or at[0] < raised[0]:
            return True
        if at != raised and at[0] <= stop <= at[1]:
            return True  # a compound statement around the one that raised: its header ran
        return any(
            s[2] and s[0] <= min(at[0], raised[0]) and max(at[1], raised[1]) <= s[1] for s in self.statements
        )

    def line_of(self, name: str) -> int | None:
        """The line that assigned `name` (a dotted/indexed name's root), else the line that filled it."""
        root = root_name(name)
        line = self.assigned.get(root)
        return line if line is not None else self.mutated.get(root)


def _innermost(
    statements: list[tuple[int, int, bool]], test: Callable[[tuple[int, int, bool]], bool]
) -> tuple[int, int, bool] | None:
    """The shortest statement that passes `test` (the innermost, for nested spans)."""
    best = None
    for s in statements:
        if test(s) and (best is None or s[1] - s[0] < best[1] - best[0]):
            best = s
    return best


def root_name(name: str) -> str:
    """`net` for `net.layers[0]`: the namespace name a dotted or indexed name starts with."""
    return name.partition(".")[0].partition("[")[0]


def cell_names(raw_cell: str) -> CellNames:
    """Names bound at the cell's top level (not inside functions or classes it defines)."""
    out = CellNames()
    tree = parse_cell(raw_cell)
    if tree is None:
        out.parsed = False
        return out
    stack: list[ast.AST] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.stmt):
            end = getattr(node, "end_lineno", None) or node.lineno
            out.statements.append((node.lineno, end, isinstance(node, LOOPS)))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.assigned[node.name] = node.lineno
            if isinstance(node, ast.ClassDef):
                _self_attributes(node, out)
            continue  # their bodies bind locals
        if isinstance(node, (ast.Lambda, *COMPREHENSIONS)):
            continue
        if isinstance(node, ast.Assign):
            for t in node.targets:
                _bind(t, node.lineno, out)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            _bind(node.target, node.lineno, out)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            _bind(node.target, node.lineno, out)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            _bind(node.optional_vars, node.optional_vars.lineno, out)
        elif isinstance(node, ast.NamedExpr):
            _bind(node.target, node.lineno, out)
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in _MUTATORS and isinstance(f.value, ast.Name):
                out.mutated[f.value.id] = max(out.mutated.get(f.value.id, 0), node.lineno)
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return out


def _self_attributes(cls: ast.ClassDef, out: CellNames) -> None:
    for node in ast.walk(cls):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                key = (cls.name, t.attr)
                if key not in out.self_attrs and read_only_for_python([cls], t.attr):
                    out.host_attrs.add(key)
                out.self_attrs[key] = min(out.self_attrs.get(key, node.lineno), node.lineno)


def _bind(target: ast.AST, line: int, out: CellNames) -> None:
    if isinstance(target, ast.Name):
        out.assigned[target.id] = line
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            _bind(elt, line, out)
    elif isinstance(target, ast.Starred):
        _bind(target.value, line, out)
    elif isinstance(target, (ast.Subscript, ast.Attribute)):
        if isinstance(target, ast.Attribute):
            owner = _dotted(target.value)
            if owner is not None:
                out.attr_sets[(owner, target.attr)] = line
        base = target.value
        while isinstance(base, (ast.Subscript, ast.Attribute)):
            base = base.value
        if isinstance(base, ast.Name):
            out.mutated[base.id] = max(out.mutated.get(base.id, 0), line)


def _dotted(node: ast.AST) -> str | None:
    """`net.encoder` for a chain of names and attributes, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))
