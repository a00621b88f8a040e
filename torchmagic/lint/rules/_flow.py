"""Where values go in one scope (a function, or the top level of a file or cell): which names
reach a `backward()`, which are returned, and which functions run with gradients disabled.
TM401 and TM408 ask it; each scope is analysed once and the result kept on its node."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..context import Context, grad_context
from ..nodes import per_node, remember

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
# container methods that put a value into their receiver (`losses.append(loss)`)
_PUTS = frozenset({"append", "extend", "insert", "add", "update", "appendleft", "put"})
# calls that consume a graph: `x.backward()`, `scaler.scale(x).backward()`,
# `accelerator.backward(x)`, `self.manual_backward(x)`, `torch.autograd.grad(x, ...)`
_BACKWARD = frozenset({"backward", "manual_backward"})


def key(node: ast.AST | None) -> str | None:
    """A name for what an assignment target or receiver denotes: `x`, `self.total`, and the
    container for `history["loss"]`."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Name):
            parts.append(node.id)
            return ".".join(reversed(parts))
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            parts.clear()
            node = node.value
        elif isinstance(node, ast.Starred):
            node = node.value
        else:
            return None


def names_in(expr: ast.AST | None) -> set[str]:
    """Every name (and dotted attribute path rooted at a name) an expression reads."""
    out: set[str] = set()
    if expr is None:
        return out
    for sub in ast.walk(expr):
        if isinstance(sub, (ast.Name, ast.Attribute)):
            k = key(sub)
            if k is not None:
                out.add(k)
    return out


def is_backward(ctx: Context, call: ast.Call) -> bool:
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr in _BACKWARD:
        return True
    q = ctx.qualname(f) or ""
    return q in ("torch.autograd.grad", "torch.autograd.backward") or q.startswith(
        "torch.autograd.functional."
    )


def backward_roots(call: ast.Call) -> set[str]:
    f = call.func
    roots = names_in(f.value) if isinstance(f, ast.Attribute) else set()
    for a in call.args:
        roots |= names_in(a)
    for kw in call.keywords:
        if kw.arg in (None, "outputs", "tensors", "loss"):
            roots |= names_in(kw.value)
    return roots


@dataclass
class Flow:
    """What one scope does with its values."""

    edges: dict[str, set[str]] = field(default_factory=dict)  # target -> names it was built from
    backward_calls: list[ast.Call] = field(default_factory=list)
    direct: set[str] = field(default_factory=set)  # names `backward()` is called on
    feeds: set[str] = field(default_factory=set)  # names whose value reaches a backward
    returned: set[str] = field(default_factory=set)  # names whose value leaves by return/yield

    def closure(self, seeds: set[str]) -> set[str]:
        """`seeds` and every name whose value flows into one of them."""
        out = set(seeds)
        work = list(seeds)
        while work:
            for n in self.edges.get(work.pop(), ()):
                if n not in out:
                    out.add(n)
                    work.append(n)
        return out


def _scope_statements(scope: ast.AST) -> list[ast.AST]:
    """What belongs to the scope: a function's body with its nested functions (closures share
    its names); a module's top level without function and class bodies."""
    if isinstance(scope, ast.Lambda):
        return [scope.body]
    body = list(getattr(scope, "body", []))
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return body
    out: list[ast.AST] = []
    work = body
    while work:
        node = work.pop()
        if isinstance(node, _SCOPES):
            continue
        out.append(node)
        work.extend(ast.iter_child_nodes(node))
    return out


@per_node
def walk_scope(scope: ast.AST) -> list[ast.AST]:
    """Every node of the scope (see `_scope_statements`); callers must not change the list."""
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return [n for stmt in _scope_statements(scope) for n in ast.walk(stmt)]
    return _scope_statements(scope)


def flow_of(ctx: Context, scope: ast.AST) -> Flow:
    return remember(scope, "flow", lambda: _build_flow(ctx, scope))


def _build_flow(ctx: Context, scope: ast.AST) -> Flow:
    flow = Flow()
    edges = flow.edges

    def add(target: ast.AST, sources: set[str]) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                add(elt, sources)
            return
        k = key(target)
        if k is not None:
            edges.setdefault(k, set()).update(sources - {k})

    for node in walk_scope(scope):
        t = type(node)
        if t is ast.Assign:
            src = names_in(node.value)  # type: ignore[attr-defined]
            for target in node.targets:  # type: ignore[attr-defined]
                add(target, src)
        elif t is ast.AugAssign or t is ast.AnnAssign or t is ast.NamedExpr:
            value = node.value  # type: ignore[attr-defined]
            if value is not None:
                add(node.target, names_in(value))  # type: ignore[attr-defined]
        elif t is ast.For or t is ast.AsyncFor or t is ast.comprehension:
            add(node.target, names_in(node.iter))  # type: ignore[attr-defined]
        elif t is ast.withitem and node.optional_vars is not None:  # type: ignore[attr-defined]
            add(node.optional_vars, names_in(node.context_expr))  # type: ignore[attr-defined]
        elif t is ast.Call:
            f = node.func  # type: ignore[attr-defined]
            if isinstance(f, ast.Attribute) and f.attr in _PUTS:
                src: set[str] = set()
                for a in node.args:  # type: ignore[attr-defined]
                    src |= names_in(a)
                add(f.value, src)
            if is_backward(ctx, node):  # type: ignore[arg-type]
                flow.backward_calls.append(node)  # type: ignore[arg-type]
                flow.direct |= backward_roots(node)  # type: ignore[arg-type]
        elif (t is ast.Return or t is ast.Yield or t is ast.YieldFrom) and node.value is not None:  # type: ignore[attr-defined]
            flow.returned |= names_in(node.value)  # type: ignore[attr-defined]
    flow.feeds = flow.closure(flow.direct)
    flow.returned = flow.closure(flow.returned)
    return flow


def scope_node(ctx: Context) -> ast.AST:
    """The function the walker stands in, or the module (file or cell) at the top level."""
    node = ctx.frame.node
    if node is not None:
        return node
    return ctx.stack[0] if ctx.stack else ast.Module(body=[], type_ignores=[])


def module_node(ctx: Context) -> ast.AST | None:
    return ctx.stack[0] if ctx.stack and isinstance(ctx.stack[0], ast.Module) else None


def disables_grad(ctx: Context, expr: ast.AST) -> bool:
    """`torch.no_grad()`, `torch.inference_mode()`, and `torch.set_grad_enabled(x)` with any
    argument but a literal True (`set_grad_enabled(phase == "train")` turns it off for eval)."""
    if isinstance(expr, ast.Call) and ctx.qualname(expr.func) in (
        "torch.set_grad_enabled",
        "torch.autograd.set_grad_enabled",
    ):
        a = expr.args[0] if expr.args else None
        return not (isinstance(a, ast.Constant) and a.value is True)
    return grad_off(ctx, expr)


def grad_off(ctx: Context, expr: ast.AST) -> bool:
    """`torch.no_grad()` / `torch.inference_mode()`, as a decorator or a `with` item: no graph is
    recorded inside, whatever the program's state."""
    return grad_context(ctx, expr) in ("no_grad", "inference_mode")


def grad_off_calls(ctx: Context) -> set[str]:
    """Names of the functions (and methods) the module calls with gradients disabled:
    `with torch.no_grad(): evaluate(model)` makes `evaluate` an inference function."""
    mod = module_node(ctx)
    if mod is None:
        return set()
    return remember(mod, "grad_off_calls", lambda: _grad_off_calls(ctx, mod))


def _grad_off_calls(ctx: Context, mod: ast.AST) -> set[str]:
    out: set[str] = set()

    def visit(node: ast.AST, off: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            off = off or any(disables_grad(ctx, d) for d in node.decorator_list)
            for stmt in node.body:
                visit(stmt, off)
            return
        if isinstance(node, (ast.With, ast.AsyncWith)):
            inner = off or any(disables_grad(ctx, i.context_expr) for i in node.items)
            for stmt in node.body:
                visit(stmt, inner)
            return
        if off and isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                out.add(f.id)
            elif isinstance(f, ast.Attribute):
                out.add(f.attr)
        for child in ast.iter_child_nodes(node):
            visit(child, off)

    if any(w in line for line in ctx.lines for w in ("no_grad", "inference_mode", "set_grad_enabled")):
        visit(mod, False)
    return out


def _switched_off_before(ctx: Context, scope: ast.AST | None, line: int) -> bool:
    """A statement `torch.set_grad_enabled(False)` (or `torch.no_grad().__enter__()`) earlier in
    the scope: gradients stay off from there on."""
    if scope is None:
        return False
    lines = remember(scope, "grad_off_lines", lambda: _grad_off_lines(ctx, scope))
    return any(n < line for n in lines)


def _grad_off_lines(ctx: Context, scope: ast.AST) -> list[int]:
    lines = []
    for node in walk_scope(scope):
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
            continue
        call = node.value
        q = ctx.qualname(call.func) or ""
        off = False
        if q in ("torch.set_grad_enabled", "torch.autograd.set_grad_enabled"):
            a = call.args[0] if call.args else None
            off = isinstance(a, ast.Constant) and a.value is False
        elif isinstance(call.func, ast.Attribute) and call.func.attr == "__enter__":
            off = disables_grad(ctx, call.func.value)
        if off:
            lines.append(node.lineno)
    return lines


def grad_disabled_here(ctx: Context, line: int | None = None) -> bool:
    """The code runs with gradients off: a `no_grad`/`inference_mode` block or decorator
    (`ctx.grad_mode`), `set_grad_enabled(<not True>)`, or an enclosing function that the module
    only calls under one of them."""
    if ctx.grad_mode is not None:
        return True
    for node in ctx.stack:
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(
            disables_grad(ctx, i.context_expr) for i in node.items
        ):
            return True
    if line is None:
        line = next((getattr(n, "lineno", 0) for n in reversed(ctx.stack) if hasattr(n, "lineno")), 0)
    if _switched_off_before(ctx, module_node(ctx), line) or (
        ctx.frame.node is not None and _switched_off_before(ctx, ctx.frame.node, line)
    ):
        return True
    off = grad_off_calls(ctx)
    for frame in ctx.frames:
        fn = frame.node
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name in off:
            return True
    return False
