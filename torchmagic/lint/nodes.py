"""Small AST helpers shared by the walker and the rules."""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from typing import TypeVar
from weakref import WeakKeyDictionary

N = TypeVar("N", bound=ast.AST)
T = TypeVar("T")


def per_node(fn: Callable[[N], T]) -> Callable[[N], T]:
    """Cache a pure function of one AST node for as long as its tree lives: rules ask the same
    question of a loop or a function once per read inside it."""
    answers: WeakKeyDictionary[N, T] = WeakKeyDictionary()

    @functools.wraps(fn)
    def cached(node: N) -> T:
        try:
            return answers[node]
        except KeyError:
            value = answers[node] = fn(node)
            return value

    return cached


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


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of a function's (or module's) own body: not those inside the functions,
    classes and lambdas it defines, whose names live in scopes of their own."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        n = todo.pop()
        out.append(n)
        if not isinstance(n, _SCOPES):
            todo.extend(ast.iter_child_nodes(n))
    return out


def parameters(func: ast.AST) -> set[str]:
    """The names a function (or lambda) takes as arguments."""
    args = getattr(func, "args", None)
    if not isinstance(args, ast.arguments):
        return set()
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def sole_bindings(scope: ast.AST) -> dict[str, tuple[ast.AST, int | None]]:
    """What each name holds wherever it is read in `scope`, for the names one plain assignment
    binds there and nothing else: `(value, None)` for `name = value`, `(value, i)` for
    `a, name = value` (the i-th item of the value). Not parameters, nor names bound in any
    other way (a loop target, an import, a `global`) or more than once: one binding cannot be
    overtaken."""
    stores: dict[str, list[ast.AST]] = {}
    other: set[str] = set(parameters(scope))
    assigns: list[ast.Assign] = []
    for n in own_nodes(scope):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            stores.setdefault(n.id, []).append(n)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            other.update(n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            other.add(n.name)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            other.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            other.update(a.asname or a.name.split(".", 1)[0] for a in n.names)
        elif isinstance(n, ast.Assign) and len(n.targets) == 1:
            assigns.append(n)
    out: dict[str, tuple[ast.AST, int | None]] = {}
    for a in assigns:
        target = a.targets[0]
        if isinstance(target, ast.Name):
            items: list[tuple[ast.AST, int | None]] = [(target, None)]
        elif isinstance(target, (ast.Tuple, ast.List)) and not any(
            isinstance(e, ast.Starred) for e in target.elts
        ):
            items = [(e, i) for i, e in enumerate(target.elts)]
        else:
            continue
        for elt, index in items:
            if isinstance(elt, ast.Name) and elt.id not in other and len(stores.get(elt.id, [])) == 1:
                out[elt.id] = (a.value, index)
    return out


def sole_binding(scope: ast.AST, name: str) -> tuple[ast.AST, int | None] | None:
    """`sole_bindings(scope)` for one name."""
    return sole_bindings(scope).get(name)
