"""Small AST helpers shared by the walker and the rules."""

from __future__ import annotations

import ast


def terminal_name(func: ast.AST) -> str | None:
    """`a.b.c` -> "c", `f` -> "f"."""
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def keyword(call: ast.Call, name: str) -> ast.AST | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def has_kwargs_splat(call: ast.Call) -> bool:
    return any(kw.arg is None for kw in call.keywords)


# Expressions that take a trailing `.attr` / `(...)` without parentheses around them.
_ATOMS = (
    ast.Name,
    ast.Attribute,
    ast.Call,
    ast.Subscript,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.JoinedStr,
)


def is_atom(node: ast.AST) -> bool:
    """`x.attr` written after `node`'s text binds to all of it: a name, call, subscript, display
    or string; not `a + b` or `-x`."""
    return isinstance(node, _ATOMS) or (isinstance(node, ast.Constant) and isinstance(node.value, str))
