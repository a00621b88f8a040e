"""TM95x — torch.compile, from the source: what will break the graph, what compiles again.

TM950: `.item()` and `print(...)` inside a function the same code compiles (decorated with
`@torch.compile`, passed to `torch.compile(fn)`, or the `forward` of a model passed to it),
and inside the helpers of the same source that such a function calls. In a notebook the
functions compiled in any cell count (`notebook_notes`).

TM951: `torch.compile(...)` called on every iteration of a loop, or inside a function that a
loop of the same source calls, on a model or function that does not change between calls.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator

from ..context import Context, LoopInfo
from ..kinds import DICT, LIST, NDARRAY, NUMBER, STRING
from ..nodes import keyword
from ..registry import check
from ._common import unparse

NOTES = "TM950"  # ctx.notes key: {"compiled": names the notebook compiles, "instances": name -> class}
LOOP_CALLS = "TM951.loop_calls"  # names called inside loops (for per-step functions)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_NOT_TENSORS = frozenset({NDARRAY, NUMBER, STRING, DICT, LIST})
_COMPILE = ("torch.compile",)
_DISABLE = ("torch.compiler.disable", "torch._dynamo.disable")
_CACHES = ("functools.cache", "functools.lru_cache", "cache", "lru_cache")


# ---- what the source compiles ----------------------------------------------------------------------


def _is_compile(ctx: Context, func: ast.AST) -> bool:
    if isinstance(func, ast.Attribute) and func.attr != "compile":
        return False  # the common case, decided without resolving the chain
    return ctx.qualname(func) in _COMPILE


def _fullgraph(call: ast.Call) -> bool:
    value = keyword(call, "fullgraph")
    return isinstance(value, ast.Constant) and value.value is True


def _instances(tree: ast.Module) -> dict[str, str]:
    """name -> class for `name = Class(...)` at the top level."""
    out: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.func.id
    return out


def _target_names(ctx: Context, tree: ast.Module) -> tuple[set[str], set[str], set[ast.AST]]:
    """(functions compiled by name, classes whose instances are compiled, decorated defs)."""
    functions: set[str] = set()
    classes: set[str] = set()
    decorated: set[ast.AST] = set()
    instances = _instances(tree)
    for node in ast.walk(tree):
        if isinstance(node, _FUNCS):
            for d in node.decorator_list:
                call = d if isinstance(d, ast.Call) else None
                if _is_compile(ctx, call.func if call else d) and not (call and _fullgraph(call)):
                    decorated.add(node)
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if _is_compile(ctx, func):
            if _fullgraph(node):
                continue
            target = node.args[0] if node.args else keyword(node, "model")
        elif isinstance(func, ast.Attribute) and func.attr == "compile" and not node.args:
            if _fullgraph(node):
                continue
            target = func.value  # model.compile()
        else:
            continue
        if isinstance(target, ast.Name):
            functions.add(target.id)
            if target.id in instances:
                classes.add(instances[target.id])
        elif isinstance(target, ast.Call) and isinstance(target.func, ast.Name):
            classes.add(target.func.id)  # torch.compile(Net())
    return functions, classes, decorated


def notebook_notes(codes: Iterable[str]) -> dict[str, object]:
    """What a whole notebook compiles, for the lint of each of its cells (`Carry.notes`): a
    cell that defines `step` learns that a later cell runs `torch.compile(step)`."""
    functions: set[str] = set()
    instances: dict[str, str] = {}
    for code in codes:
        if "compile" not in code:
            for m in _ASSIGN.finditer(code):
                instances.setdefault(m["name"], m["cls"])
            continue
        for m in _ASSIGN.finditer(code):
            instances.setdefault(m["name"], m["cls"])
        functions.update(
            m["name"] for m in _COMPILED.finditer(code) if not m["rest"] or "fullgraph=True" not in m["rest"]
        )
        functions.update(m["name"] for m in _METHOD_COMPILE.finditer(code))
    classes = {instances[n] for n in functions if n in instances}
    return {NOTES: {"functions": sorted(functions), "classes": sorted(classes)}}


_COMPILED = re.compile(r"torch\.compile\(\s*(?P<name>\w+)\s*(?P<rest>[,)][^\n]*)?")
_METHOD_COMPILE = re.compile(r"\b(?P<name>\w+)\.compile\(\s*\)")
# `torch.compile`, `t.compile(...)`, `model.compile()`, `from torch import compile`: not `re.compile`
_MAY_COMPILE = re.compile(r"(?<!\bre)\.compile\b|\bimport\b[^\n]*\bcompile\b")
_ASSIGN = re.compile(r"^(?P<name>\w+)\s*=\s*(?P<cls>[A-Z]\w*)\(", re.M)


def _compiled_defs(ctx: Context, tree: ast.Module) -> tuple[dict[ast.AST, str], set[str]]:
    """Every def of this source that runs compiled -> the name of the compiled entry point;
    and the entry points that only other cells of the notebook compile."""
    functions, classes, decorated = _target_names(ctx, tree)
    local = functions | classes
    known = ctx.notes.get(NOTES)
    if isinstance(known, dict):
        functions |= set(known.get("functions", ()))
        classes |= set(known.get("classes", ()))
    elsewhere = (functions | classes) - local
    defs = {n.name: n for n in tree.body if isinstance(n, _FUNCS)}
    out: dict[ast.AST, str] = {}
    for node in decorated:
        out[node] = node.name
    for name in functions:
        if name in defs and not _disabled(ctx, defs[name]):
            out.setdefault(defs[name], name)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in classes:
            info = ctx.classes.get(node.name)
            wanted = {"forward"} | set(info.forward_helpers if info else ())
            for stmt in node.body:
                if isinstance(stmt, _FUNCS) and stmt.name in wanted and not _disabled(ctx, stmt):
                    out.setdefault(stmt, f"{node.name}.forward")
    # helpers of this source that compiled code calls are traced too
    frontier = list(out)
    for _ in range(3):
        nxt = []
        for fn in frontier:
            for name in _called_names(fn):
                helper = defs.get(name)
                if helper is not None and helper not in out and not _disabled(ctx, helper):
                    out[helper] = out[fn]
                    nxt.append(helper)
        frontier = nxt
    for node in [n for n in out if _disabled(ctx, n)]:
        del out[node]
    return out, elsewhere


def _disabled(ctx: Context, fn: ast.AST) -> bool:
    for d in getattr(fn, "decorator_list", ()):
        q = ctx.qualname(d.func if isinstance(d, ast.Call) else d) or ""
        if q in _DISABLE:
            return True
    return False


def _body(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes a call of `fn` runs: not nested defs, classes or lambdas, and not the code
    under `if torch.compiler.is_compiling()` tests (kept out of the graph on purpose)."""
    stack = list(getattr(fn, "body", []))
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, (ast.If, ast.IfExp)) and "is_compiling" in ast.unparse(node.test):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _called_names(fn: ast.AST) -> set[str]:
    return {n.func.id for n in _body(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def _source_sets(tree: ast.Module, text: str) -> tuple[bool, bool]:
    """(`capture_scalar_outputs = True` is set, `print` is a reorderable logging function)."""
    capture = bool(re.search(r"capture_scalar_outputs\s*=\s*True", text))
    reorder = "reorderable_logging_functions" in text and "print" in text
    return capture, reorder


@check("TM950", finish=True)
def item_or_print_in_compiled(tree: ast.Module, ctx: Context) -> None:
    text = "\n".join(ctx.lines)
    if not _MAY_COMPILE.search(text) and not ctx.notes.get(NOTES):
        return
    compiled, elsewhere = _compiled_defs(ctx, tree)
    if not compiled:
        return
    capture, reorder = _source_sets(tree, text)
    print_shadowed = "print" in ctx.imports or any(
        isinstance(n, _FUNCS) and n.name == "print" for n in tree.body
    )
    for fn, entry in sorted(compiled.items(), key=lambda kv: getattr(kv[0], "lineno", 0)):
        name = getattr(fn, "name", "?")
        who = "this notebook" if entry.split(".")[0] in elsewhere else "this code"
        if entry == name:
            what = f"`{name}`, which {who} compiles with `torch.compile`,"
        elif entry.endswith(".forward"):
            cls = entry.rsplit(".", 1)[0]
            what = f"`{cls}.{name}`, which runs compiled ({who} compiles a `{cls}`),"
        else:
            what = f"`{name}`, which compiled `{entry}` calls,"
        seen: set[int] = set()
        for node in sorted(_body(fn), key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))):
            if not isinstance(node, ast.Call) or node.lineno in seen:
                continue
            func = node.func
            if (
                not capture
                and isinstance(func, ast.Attribute)
                and func.attr == "item"
                and not node.args
                and ctx.kind(func.value) not in _NOT_TENSORS
            ):
                seen.add(node.lineno)
                ctx.flag(
                    node,
                    f"`{unparse(node, 40)}` inside {what} breaks the graph: Dynamo cannot put a Python number "
                    "read from a tensor in a graph.",
                    "Keep the value a tensor inside the compiled code and call `.item()` after the call returns, "
                    "or set `torch._dynamo.config.capture_scalar_outputs = True`.",
                )
            elif not reorder and not print_shadowed and isinstance(func, ast.Name) and func.id == "print":
                seen.add(node.lineno)
                ctx.flag(
                    node,
                    f"`{unparse(node, 40)}` inside {what} breaks the graph: Dynamo runs `print` as Python "
                    "between two graphs.",
                    "Move the `print` out of the compiled function (return the value and print it after the call), "
                    "or skip it while compiled: `if not torch.compiler.is_compiling(): print(...)`.",
                )


# ---- TM951: torch.compile on every iteration ------------------------------------------------------


def _compile_call(ctx: Context, call: ast.Call) -> ast.AST | None:
    """What `call` compiles when it is `torch.compile(x)` or `model.compile()`, else None."""
    func = call.func
    if _is_compile(ctx, func):
        return call.args[0] if call.args else keyword(call, "model")
    if (
        isinstance(func, ast.Attribute)
        and func.attr == "compile"
        and not call.args
        and ctx.qualname(func) != "re.compile"
    ):
        from ..kinds import MODULE

        if ctx.kind(func.value) == MODULE:
            return func.value
    return None


def _bound_in(node: ast.AST) -> set[str]:
    """Names a loop (its targets and its body) binds: what may differ between iterations."""
    names: set[str] = set()
    targets: list[ast.AST] = []
    if isinstance(node, (ast.For, ast.AsyncFor)):
        targets.append(node.target)
    for gen in getattr(node, "generators", []):
        targets.append(gen.target)
    for t in targets:
        names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            names.add(sub.id)
        elif isinstance(sub, _FUNCS):
            names.add(sub.name)
    return names


def _guarded(ctx: Context, stop: ast.AST | None) -> bool:
    """The node being checked sits under an `if` (or a conditional expression) inside `stop`:
    a compile behind a cache check."""
    for node in reversed(ctx.stack):
        if node is stop:
            return False
        if isinstance(node, (ast.If, ast.IfExp, ast.BoolOp, ast.Try)):
            return True
    return False


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


_MESSAGE = (
    "`{call}` runs on every {where}: it builds a new compiled wrapper each time (and compiles again "
    "whenever what it captures changed), for a `{target}` that does not change."
)
_HINT = "Compile once before the loop (`compiled = {call}`) and call `compiled(...)` inside it."


@check("TM951", calls=("compile",), loops=True, finish=True)
def compile_every_step(node: object, ctx: Context) -> None:
    if isinstance(node, ast.Call):
        _compile_call_site(node, ctx)
    elif isinstance(node, LoopInfo):
        called = ctx.notes.setdefault(LOOP_CALLS, {})
        for call in node.calls:
            if isinstance(call.func, ast.Name):
                called.setdefault(call.func.id, getattr(node.node, "lineno", None))
    else:
        _report_step_functions(ctx)


def _compile_call_site(call: ast.Call, ctx: Context) -> None:
    target = _compile_call(ctx, call)
    if target is None:
        return
    if ctx.in_loop:
        loop = ctx.loops[-1]
        if _guarded(ctx, loop.node) or _names(target) & _bound_in(loop.node):
            return  # a cache check, or a different model on each iteration
        text = unparse(call, 50)
        ctx.flag(
            call,
            _MESSAGE.format(call=text, where="iteration of this loop", target=unparse(target, 30)),
            _HINT.format(call=text),
        )
        return
    fn = ctx.frame.node
    if not isinstance(fn, _FUNCS) or _guarded(ctx, fn):
        return
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    if _names(target) & (params | _bound_in(fn)) or any(
        (ctx.qualname(d.func if isinstance(d, ast.Call) else d) or "") in _CACHES for d in fn.decorator_list
    ):
        return  # compiles what it is given (a builder), or caches what it compiled
    # reported at the end, if a loop of this source calls the function
    pending = ctx.notes.setdefault("TM951.pending", {})
    pending.setdefault(fn.name, []).append(
        (call.lineno, call.col_offset, unparse(call, 50), unparse(target, 30))
    )


def _report_step_functions(ctx: Context) -> None:
    pending = ctx.notes.pop("TM951.pending", {})
    called = ctx.notes.pop(LOOP_CALLS, {})
    for name, sites in pending.items():
        loop_line = called.get(name)
        if name not in called:
            continue
        for line, col, text, target in sites:
            where = f"call of `{name}`, which the loop at line {loop_line} calls on every iteration"
            f = ctx.check.rule.finding(  # type: ignore[union-attr]
                _MESSAGE.format(call=text, where=where, target=target),
                _HINT.format(call=text),
                line=line,
                col=col,
            )
            ctx.findings.append(f)
