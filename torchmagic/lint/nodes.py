"""Small AST helpers shared by the walker and the rules."""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .kinds import HOST_VALUE_CALLS, HOST_VALUE_METHODS

N = TypeVar("N", bound=ast.AST)
T = TypeVar("T")


def remember(node: ast.AST, key: str, compute: Callable[[], T]) -> T:
    """A fact about `node` worked out once, kept on the node for as long as its tree lives:
    rules ask the same question of a loop, a function or the module once per read inside it.
    Each lint parses its own tree, so one context asks; `key` names the question."""
    facts: dict[str, Any] = node.__dict__.setdefault("_torchmagic_facts", {})
    if key not in facts:
        facts[key] = compute()
    return facts[key]


def per_node(fn: Callable[[N], T]) -> Callable[[N], T]:
    """`remember` for a pure function of one AST node."""
    key = f"{fn.__module__}.{fn.__qualname__}"

    @functools.wraps(fn)
    def cached(node: N) -> T:
        return remember(node, key, lambda: fn(node))

    return cached


def terminal_name(func: ast.AST) -> str | None:
    """`a.b.c` -> "c", `f` -> "f"."""
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


ITERATION_WRAPPERS = frozenset({"enumerate", "tqdm", "iter"})


def unwrapped_iterable(it: ast.AST | None, wrappers: frozenset[str] = ITERATION_WRAPPERS) -> ast.AST | None:
    """`loader` for `enumerate(tqdm(loader))`: what the wrapping calls walk."""
    while isinstance(it, ast.Call) and terminal_name(it.func) in wrappers and it.args:
        it = it.args[0]
    return it


def over_integers(it: ast.AST | None) -> bool:
    """`range(n)`, `trange(n)`, `tqdm(range(n))`: an iteration that counts, not one over data."""
    it = unwrapped_iterable(it, _PROGRESS_BARS)
    return isinstance(it, ast.Call) and terminal_name(it.func) in ("range", "trange")


_PROGRESS_BARS = frozenset({"tqdm"})


def node_text(node: ast.AST) -> str:
    """`ast.unparse(node)`, fast for what rules compare most (`model`, `self.net.encoder`:
    receivers of every method call in a loop) and worked out once for anything else."""
    parts: list[str] = []
    n = node
    while isinstance(n, ast.Attribute):
        parts.append(n.attr)
        n = n.value
    if isinstance(n, ast.Name):
        parts.append(n.id)
        return ".".join(reversed(parts))
    return remember(node, "text", lambda: ast.unparse(node))


def keyword(call: ast.Call, name: str) -> ast.AST | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def move_target(call: ast.Call) -> ast.AST | None:
    """The device argument of `.to(...)`: `device=` or the first positional argument."""
    for kw in call.keywords:
        if kw.arg == "device":
            return kw.value
    return call.args[0] if call.args else None


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


def device_type_of_literal(node: ast.AST | None) -> str | None:
    """ "cuda", "cpu", ... for a string literal or an int device index (`.to(0)` is CUDA)."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return node.value.split(":", 1)[0].strip().lower() or None
        if isinstance(node.value, int) and not isinstance(node.value, bool):
            return "cuda"
    return None


SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
LOOPS = (ast.For, ast.AsyncFor, ast.While)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


@per_node
def own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of a function's (or module's) own body: not those inside the functions,
    classes and lambdas it defines, whose names live in scopes of their own. Worked out once
    per scope; callers must not change the list."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        n = todo.pop()
        out.append(n)
        if not isinstance(n, SCOPES):
            todo.extend(ast.iter_child_nodes(n))
    return out


def is_name(node: ast.AST | None, name: str) -> bool:
    """`node` is the plain name `name`."""
    return isinstance(node, ast.Name) and node.id == name


def constant_or_len(node: ast.AST) -> bool:
    """A literal or `len(...)`: a value the host has without reading any tensor (`p /= 2`,
    `loss /= len(batch)`)."""
    return isinstance(node, ast.Constant) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len"
    )


def self_attr_name(node: ast.AST) -> str | None:
    """`X` for `self.X`; None for anything else."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def isinstance_test(test: ast.AST) -> tuple[str, list[ast.expr]] | None:
    """`isinstance(x, (A, B))` -> ("x", [A, B]): the plain name a type test asks about and the
    types it names; None for any other test."""
    if not (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "isinstance"
        and len(test.args) == 2
        and isinstance(test.args[0], ast.Name)
    ):
        return None
    types = test.args[1]
    return test.args[0].id, list(types.elts) if isinstance(types, ast.Tuple) else [types]


@per_node
def assignments_by_name(scope: ast.AST) -> dict[str, list[ast.Assign]]:
    """`name = value` statements of a function's own body, by each plain name they bind
    (`a = b = v` under both), indexed once per scope."""
    out: dict[str, list[ast.Assign]] = {}
    for n in own_nodes(scope):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append(n)
    return out


def names_bound_to(scope: ast.AST, matches: Callable[[ast.Call], bool]) -> set[str]:
    """The plain names that `name = <call>` statements anywhere under `scope` (nested functions
    too) bind to a call that `matches`."""
    return {
        t.id
        for n in ast.walk(scope)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and matches(n.value)
        for t in n.targets
        if isinstance(t, ast.Name)
    }


def parameters(func: ast.AST) -> set[str]:
    """The names a function (or lambda) takes as arguments."""
    args = getattr(func, "args", None)
    if not isinstance(args, ast.arguments):
        return set()
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def parameter_default(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> ast.AST | None:
    """The default value of a function's parameter (`n_bins` in `def f(x, n_bins=15)`), or None
    when it has none."""
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults) :]], args.defaults))
    defaults |= {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None}
    return defaults.get(name)


@per_node
def sole_bindings(scope: ast.AST) -> dict[str, tuple[ast.AST, int | None]]:
    """What each name holds wherever it is read in `scope`, for the names one plain assignment
    binds there and nothing else: `(value, None)` for `name = value`, `(value, i)` for
    `a, name = value` (the i-th item of the value). Not parameters, nor names bound in any
    other way (a loop target, an import, a `global`) or more than once: one binding cannot be
    overtaken. Worked out once per scope; callers must not change the dict."""
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


# Python conversions of a tensor (TM106: attributes read only this way stay on the host)


@per_node
def parents_of(tree: ast.AST) -> dict[int, ast.AST]:
    """`id(node)` -> the node it is a child of, for every node under `tree`; worked out once
    per tree (callers must not change it)."""
    return {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}


def ancestors(parents: dict[int, ast.AST], node: ast.AST) -> Iterator[ast.AST]:
    """The nodes `node` sits in, innermost first, up to (not including) the module."""
    up = parents.get(id(node))
    while up is not None and not isinstance(up, ast.Module):
        yield up
        up = parents.get(id(up))


_BLOCKS = ("body", "orelse", "finalbody")


def block_of(
    parent: ast.AST, stmt: ast.AST, fields: tuple[str, ...] = _BLOCKS
) -> tuple[list[ast.stmt], int] | None:
    """The list of statements of `parent` (its body, `else` or `finally` block, or the other
    `fields` named) that holds `stmt`, and the statement's index there; None elsewhere."""
    for field in fields:
        seq = getattr(parent, field, None)
        if isinstance(seq, list):
            for i, s in enumerate(seq):
                if s is stmt:
                    return seq, i
    return None


def enclosing_branches(path: list[ast.AST]) -> Iterator[tuple[ast.AST, list[ast.AST], list[ast.AST], bool]]:
    """For each `if` or conditional expression around the last node of `path` (innermost first)
    that holds it in a branch (not in its test): the test, the node's branch, the other branch,
    and whether the node's branch is the `else`."""
    for i in range(len(path) - 2, -1, -1):
        parent, child = path[i], path[i + 1]
        if isinstance(parent, ast.IfExp):
            body, orelse = [parent.body], [parent.orelse]
        elif isinstance(parent, ast.If):
            body, orelse = parent.body, parent.orelse
        else:
            continue
        if any(child is s for s in body):
            yield parent.test, body, orelse, False
        elif any(child is s for s in orelse):
            yield parent.test, orelse, body, True


def enclosing_blocks(path: list[ast.AST], stop: int = 0) -> Iterator[tuple[ast.AST, list[ast.stmt], int]]:
    """The statement blocks around the last node of `path` (root first), innermost first, up to
    `path[stop]`: each block's owner, its statements, and the index there of the statement on
    the path."""
    for i in range(len(path) - 1, stop, -1):
        node, parent = path[i], path[i - 1]
        if not isinstance(node, ast.stmt):
            continue
        found = block_of(parent, node)
        if found is not None:
            yield parent, found[0], found[1]


def top_level_calls(
    tree: ast.AST, func: ast.AST, starters: frozenset[str] = frozenset()
) -> list[ast.Call] | None:
    """Every call of `func`, a function defined at the top of `tree`; None when it is not
    defined there, never called, or its name is read other than to call it (handed to another
    function, stored) where it could be called unseen. `starters` name calls that run a
    function they are handed once (`mp.spawn(f)`, `Process(target=f)`): those count as calls."""
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    if not any(stmt is func for stmt in getattr(tree, "body", [])):
        return None
    parents = parents_of(tree)
    calls: list[ast.Call] = []
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Name) and n.id == func.name and isinstance(n.ctx, ast.Load)):
            continue
        call = parents.get(id(n))
        if isinstance(call, ast.keyword) and call.arg == "target":
            call = parents.get(id(call))  # `Process(target=main)`
        if not isinstance(call, ast.Call) or (
            call.func is not n and terminal_name(call.func) not in starters
        ):
            return None
        calls.append(call)
    return calls or None


@per_node
def _self_reads(cls: ast.AST) -> dict[str, list[ast.Attribute]]:
    """`self.<attr>` reads in a class, by attribute name."""
    out: dict[str, list[ast.Attribute]] = {}
    for n in ast.walk(cls):
        if (
            isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Load)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
        ):
            out.setdefault(n.attr, []).append(n)
    return out


def _host_read(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """`v.item()`, `v[i].tolist()`, `float(v)`: the read fetches a Python value."""
    parent = parents.get(id(node))
    while isinstance(parent, ast.Subscript) and parent.value is node:
        node, parent = parent, parents.get(id(parent))
    if isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in HOST_VALUE_METHODS:
        return isinstance(parents.get(id(parent)), ast.Call)
    return (
        isinstance(parent, ast.Call)
        and isinstance(parent.func, ast.Name)
        and parent.func.id in HOST_VALUE_CALLS
        and parent.args == [node]
    )


def _loop_target(node: ast.AST, parents: dict[int, ast.AST]) -> tuple[list[ast.AST], ast.Name] | None:
    """`for v in node`, `for a, b in zip(node, other)`, `for i, v in enumerate(node[1:])`,
    `[f(v) for v in node]`: where the loop reads its elements, and the name that takes them."""
    parent = parents.get(id(node))
    if isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.slice, ast.Slice):
        node, parent = parent, parents.get(id(parent))
    index = None
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and node in parent.args:
        if parent.func.id == "zip":
            index = parent.args.index(node)  # type: ignore[arg-type]
        elif parent.func.id == "enumerate" and parent.args[0] is node:
            index = 1
        else:
            return None
        node, parent = parent, parents.get(id(parent))
    if isinstance(parent, ast.For) and parent.iter is node:
        scope: list[ast.AST] = list(parent.body)
    elif isinstance(parent, ast.comprehension) and parent.iter is node and id(parent) in parents:
        scope = [parents[id(parent)]]
    else:
        return None
    target = parent.target
    if index is not None:
        if not isinstance(target, ast.Tuple) or len(target.elts) <= index:
            return None
        target = target.elts[index]
    return (scope, target) if isinstance(target, ast.Name) else None


def read_only_for_python(classes: list[ast.ClassDef], attr: str) -> bool:
    """The classes read `self.<attr>` only to fetch Python values: `self.edges[i].item()`,
    `self.edges.tolist()`, or a loop over it (`for lo, hi in zip(self.lows, self.highs)`)
    whose elements are read only with `.item()`/`float()`. Such a tensor (bin edges,
    thresholds) is host data: as a buffer it would follow the model to the GPU and each of
    those reads would wait for the device."""
    reads = 0
    for cls in classes:
        parents = parents_of(cls)
        for read in _self_reads(cls).get(attr, ()):
            reads += 1
            if _host_read(read, parents):
                continue
            loop = _loop_target(read, parents)
            if loop is None:
                return False
            scope, name = loop
            uses = [
                n
                for stmt in scope
                for n in ast.walk(stmt)
                if isinstance(n, ast.Name) and n.id == name.id and n is not name
            ]
            if not uses or not all(isinstance(n.ctx, ast.Load) and _host_read(n, parents) for n in uses):
                return False
    return reads > 0


@per_node
def unpackings(scope: ast.AST) -> dict[str, list[ast.Assign]]:
    """The assignments of a scope that unpack into each name (`loss, eer = ...`), indexed once
    per scope: asked for every name that cannot be traced."""
    out: dict[str, list[ast.Assign]] = {}
    for stmt in own_nodes(scope):
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, (ast.Tuple, ast.List)):
                    for e in t.elts:
                        if isinstance(e, ast.Name):
                            out.setdefault(e.id, []).append(stmt)
    return out
