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


def sole_binding(scope: ast.AST, name: str) -> tuple[ast.AST, int | None] | None:
    """What `name` holds wherever it is read in `scope`, when one plain assignment is its only
    binding there: `(value, None)` for `name = value`, `(value, i)` for `a, name = value` (the
    i-th item of the value). None for a parameter, or a name bound in any other way (a loop
    target, an import, a `global`) or more than once: one binding cannot be overtaken."""
    if name in parameters(scope):
        return None
    stores: list[ast.Name] = []
    assigns: list[ast.Assign] = []
    for n in own_nodes(scope):
        if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load):
            stores.append(n)
        elif isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
            return None
        elif isinstance(n, ast.ExceptHandler) and n.name == name:
            return None
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name:
            return None
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".", 1)[0]) == name for a in n.names):
                return None
        elif isinstance(n, ast.Assign) and len(n.targets) == 1:
            assigns.append(n)
    if len(stores) != 1:
        return None
    store = stores[0]
    for a in assigns:
        target = a.targets[0]
        if target is store:
            return a.value, None
        if isinstance(target, (ast.Tuple, ast.List)) and not any(
            isinstance(e, ast.Starred) for e in target.elts
        ):
            for i, e in enumerate(target.elts):
                if e is store:
                    return a.value, i
    return None
