"""The shared analysis pass: one walk of a cell's AST that keeps `Context` current.

Rules never walk the tree themselves. The walker tracks which names hold tensors, modules,
optimizers, schedulers or DataLoaders (from assignments, `import` aliases and, when given,
the live namespace), which statements sit inside loops, `no_grad`/`inference_mode` blocks,
and `nn.Module`/`Dataset` classes, and dispatches each node to the static checks that
subscribed to it (by callee name, attribute name or node type).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .accelerator import moves_to_accelerator
from .context import ClassInfo, Context, Frame, LoopInfo, grad_context
from .kinds import (
    BATCH,
    DATASET,
    LOADER,
    MODULE,
    NUMBER,
    PARAMETER,
    STRING,
    TENSOR,
    TENSOR_KINDS,
    TENSORS,
    classify_class,
    is_class,
)
from .nodes import COMPREHENSIONS, LOOPS, is_name, terminal_name, unwrapped_iterable

if TYPE_CHECKING:
    from .registry import StaticCheck


_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Node types with nothing below them that a rule could want (contexts and operators).
_LEAVES = frozenset(
    c
    for base in (ast.expr_context, ast.operator, ast.cmpop, ast.boolop, ast.unaryop)
    for c in base.__subclasses__()
)


# calls that may choose or move to an accelerator (checked further by `moves_to_accelerator`)
_ACCELERATOR_CALLS = frozenset(
    {"cuda", "to", "device", "set_default_device", "autocast", "DataParallel", "DistributedDataParallel"}
) | frozenset({"synchronize", "empty_cache", "set_device", "Stream", "Event", "current_accelerator"})
# what a loop inside a training step iterates without being the batch loop itself
_STEP_PARTS = frozenset(
    {
        "parameters",
        "named_parameters",
        "buffers",
        "named_buffers",
        "modules",
        "named_modules",
        "children",
        "named_children",
        "items",
        "keys",
        "values",
        "param_groups",
        "state_dict",
    }
)


_ORDERINGS = frozenset({"enumerate", "tqdm", "reversed", "list", "sorted"})


def is_step_loop(node: ast.AST) -> bool:
    """A nested loop that is the per-batch (per-step) loop of its outer loop: code after it in
    the outer loop runs once per epoch. Loops over a model's parameters, an optimizer's
    param groups or a dict's items are part of one step; comprehensions too."""
    if isinstance(node, COMPREHENSIONS):
        return False
    if isinstance(node, ast.While):
        return True
    it = unwrapped_iterable(getattr(node, "iter", None), _ORDERINGS)
    if isinstance(it, ast.Call) and terminal_name(it.func) in _STEP_PARTS:
        return False
    if isinstance(it, ast.Attribute) and it.attr in _STEP_PARTS:
        return False
    if isinstance(it, (ast.List, ast.Tuple, ast.Set)) and len(it.elts) <= 16:
        return False
    return True


def steps_itself(loop: ast.AST) -> bool:
    """The loop's own body, outside the loops nested in it, back-propagates or steps an
    optimizer (`for step in range(n): for s in range(k): out += model(xb)` then
    `loss.backward(); opt.step()`): it is the per-step loop, and a loop nested in it is part
    of one step (averaging samples, accumulating micro-batches), not the batch loop."""
    todo = list(getattr(loop, "body", []))
    while todo:
        node = todo.pop()
        if isinstance(node, (*LOOPS, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "backward":
                return True
            if node.func.attr == "step":
                owner = (terminal_name(node.func.value) or "").lower()
                if "opt" in owner or owner.endswith("scaler"):  # not `sched.step()`, `env.step(a)`
                    return True
        todo.extend(ast.iter_child_nodes(node))
    return False


_COUNT_CALLS = frozenset({"range", "arange"})


# a parameter named as a count or an index: `unet_number`, `num_steps`, `layer_idx`, `n_heads`
_COUNT_NAME = re.compile(r"(?:^|_)(?:num|number|idx|index|count)(?:_|$)|^n_")


def _counts(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """A parameter the function uses as a Python count and never as a tensor: a bound of
    `range()`/`torch.arange()` (`torch.arange(j - i, j)`) or compared with a `len()`
    (`assert 0 < unet_number <= len(self.unets)`), with no attribute, method or subscript
    of its own (`x.shape`, `x[0]`), or named as one (`unet_number`, `num_steps`, `layer_idx`,
    `n_heads`). Forward parameters are tensors unless the body or the name says so."""
    counted = _COUNT_NAME.search(name) is not None
    for sub in ast.walk(fn):
        if isinstance(sub, (ast.Attribute, ast.Subscript)) and is_name(sub.value, name):
            return False
        if counted:
            continue
        if isinstance(sub, ast.Call):
            f = sub.func
            callee = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if callee in _COUNT_CALLS and any(_mentions(arg, name) for arg in sub.args):
                counted = True
        elif isinstance(sub, ast.Compare):
            parts = [sub.left, *sub.comparators]
            if any(is_name(p, name) for p in parts) and any(
                isinstance(p, ast.Call) and isinstance(p.func, ast.Name) and p.func.id == "len" for p in parts
            ):
                counted = True
    return counted


def _mentions(expr: ast.AST, name: str) -> bool:
    """`name` itself or arithmetic on it (`j - i`)."""
    if isinstance(expr, ast.BinOp):
        return _mentions(expr.left, name) or _mentions(expr.right, name)
    if isinstance(expr, ast.UnaryOp):
        return _mentions(expr.operand, name)
    return is_name(expr, name)


class Walker:
    """Walks one tree once, keeping `Context` current and dispatching to subscribed rules."""

    def __init__(self, ctx: Context, checks: Iterable[StaticCheck]) -> None:
        self.ctx = ctx
        self.by_call: dict[str, list[StaticCheck]] = {}
        self.by_attr: dict[str, list[StaticCheck]] = {}
        self.by_node: dict[type, list[StaticCheck]] = {}
        self.on_loop: list[StaticCheck] = []
        self.on_finish: list[StaticCheck] = []
        for r in checks:
            for name in r.calls:
                self.by_call.setdefault(name, []).append(r)
            for name in r.attrs:
                self.by_attr.setdefault(name, []).append(r)
            for t in r.nodes:
                self.by_node.setdefault(t, []).append(r)
            if r.loops:
                self.on_loop.append(r)
            if r.finish:
                self.on_finish.append(r)

        self._special: dict[type, Callable[[Any], None]] = {
            ast.FunctionDef: self._visit_function,
            ast.AsyncFunctionDef: self._visit_function,
            ast.ClassDef: self._visit_class,
            ast.For: self._visit_for,
            ast.AsyncFor: self._visit_for,
            ast.While: self._visit_while,
            ast.With: self._visit_with,
            ast.AsyncWith: self._visit_with,
            ast.Lambda: self._visit_lambda,
            **{c: self._visit_comprehension for c in COMPREHENSIONS},
        }

    def run(self, tree: ast.Module) -> None:
        self._prescan_imports(tree)
        self._prescan_classes(tree)
        self.visit(tree)
        for r in self.on_finish:
            self._call(r, tree)

    def _call(self, r: StaticCheck, node: Any) -> None:
        ctx = self.ctx
        ctx.check = r
        try:
            r.fn(node, ctx)
        except RecursionError:
            raise
        except Exception as e:  # one broken rule must not take the others down
            line = getattr(node, "lineno", None) or getattr(getattr(node, "node", None), "lineno", None)
            ctx.errors.append(f"rule {r.id} failed at line {line}: {type(e).__name__}: {e}")
        finally:
            ctx.check = None

    def _prescan_imports(self, tree: ast.Module) -> None:
        # Imports bind for the whole file (they usually sit at the top anyway).
        for node in tree.body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.ctx.imports[a.asname] = a.name
                    else:
                        head = a.name.split(".", 1)[0]
                        self.ctx.imports[head] = head
            elif isinstance(node, ast.ImportFrom) and (node.module or node.level):
                # a relative import keeps its dots (`from ..utils import common_functions as c_f`
                # -> "..utils.common_functions"): a module of the package, never `torch`
                base = "." * node.level + (node.module or "")
                for a in node.names:
                    if a.name != "*":
                        self.ctx.imports[a.asname or a.name] = (
                            f"{base}.{a.name}" if node.module else f"{base}{a.name}"
                        )

    def _prescan_classes(self, tree: ast.Module) -> None:
        """Top-level classes are known before the walk: a model may use a layer class defined
        further down the file (`self.blocks = [Block() ...]` above `class Block(nn.Module)`)."""
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
        ctx = self.ctx
        for _ in range(2):  # a second round resolves bases defined below their subclasses
            for node in classes:
                known = ctx.classes.get(node.name)
                if known is None or known.kind is None:
                    ctx.classes[node.name] = ClassInfo(node.name, self._class_kind(node), node)

    def visit(self, node: ast.AST) -> None:
        t = type(node)
        rules = self.by_node.get(t)
        if rules:
            for r in rules:
                self._call(r, node)
        if t is ast.Name or t is ast.Constant:
            return  # leaves (their only child is the Load/Store context)
        if t is ast.Call:
            self._on_call(node)  # type: ignore[arg-type]
        elif t is ast.Attribute:
            rules = self.by_attr.get(node.attr)  # type: ignore[attr-defined]
            if rules:
                for r in rules:
                    self._call(r, node)
        special = self._special.get(t)
        if special is not None:
            special(node)
            return
        stack = self.ctx.stack
        stack.append(node)
        visit = self.visit
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if type(item) not in _LEAVES and isinstance(item, ast.AST):
                        visit(item)
            elif value is not None and type(value) not in _LEAVES and isinstance(value, ast.AST):
                visit(value)
        stack.pop()
        if t is ast.Assign or t is ast.AnnAssign or t is ast.AugAssign or t is ast.NamedExpr:
            self._bind_assignment(node)

    def _visit_while(self, node: ast.While) -> None:
        self._visit_loop(node, list(ast.iter_child_nodes(node)))

    def _visit_lambda(self, node: ast.Lambda) -> None:
        f = self.ctx.frame
        self._visit_in_frame(
            node, Frame(node, cls=f.cls, method=f.method, in_forward=f.in_forward), [node.body]
        )

    def _on_call(self, node: ast.Call) -> None:
        ctx = self.ctx
        for loop in ctx.frame.loops:
            loop.calls.append(node)
        func = node.func
        name = (
            func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        )
        if not ctx.accelerator_seen and (name in _ACCELERATOR_CALLS or node.keywords):
            ctx.accelerator_seen = moves_to_accelerator(ctx, node)
        if name == "set_default_device":
            ctx.default_device_set = True
        if name is not None:
            rules = self.by_call.get(name)
            if rules:
                for r in rules:
                    self._call(r, node)

    def _visit_children(self, node: ast.AST, children: Iterable[ast.AST]) -> None:
        self.ctx.stack.append(node)
        for child in children:
            self.visit(child)
        self.ctx.stack.pop()

    def _visit_in_frame(self, node: ast.AST, frame: Frame, children: Iterable[ast.AST]) -> None:
        ctx = self.ctx
        ctx.frames.append(frame)
        try:
            self._visit_children(node, children)
        finally:
            ctx.frames.pop()

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        ctx = self.ctx
        outer = ctx.frame
        parent = ctx.parent
        self._visit_children(
            node,
            [*node.decorator_list, *node.args.defaults, *[d for d in node.args.kw_defaults if d is not None]],
        )
        cls_info = None
        if isinstance(parent, ast.ClassDef):
            cls_info = ctx.classes.get(parent.name)
            method = node.name
            in_forward = cls_info is not None and (
                node.name == "forward" or node.name in cls_info.forward_helpers
            )
        else:
            cls_info, method, in_forward = outer.cls, outer.method, outer.in_forward
        frame = Frame(node, cls=cls_info, method=method, in_forward=in_forward)
        for d in node.decorator_list:
            g = grad_context(ctx, d)
            if g:
                frame.grad.append(g)
        self._bind_params(node, frame)
        ctx.bind(node.name, None, node)  # origin(name) -> the def, for rules that follow callbacks
        self._visit_in_frame(node, frame, node.body)

    def _bind_params(self, node: ast.FunctionDef | ast.AsyncFunctionDef, frame: Frame) -> None:
        args = node.args
        positional = [*args.posonlyargs, *args.args]
        defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        pairs = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
        for i, (a, default) in enumerate(pairs):
            kind: str | None = None
            if a.annotation is not None:
                ann = self.ctx.qualname(a.annotation) or ""
                if ann.endswith("Tensor"):
                    kind = TENSOR
                elif ann.endswith("Module"):
                    kind = MODULE
                elif ann.endswith("DataLoader"):
                    kind = LOADER
                elif ann in ("int", "float", "bool"):
                    kind = NUMBER
            elif (
                frame.in_forward
                and frame.cls is not None
                and frame.cls.kind == MODULE
                and not (i == 0 and a.arg == "self")
            ):
                if default is None or (isinstance(default, ast.Constant) and default.value is None):
                    kind = NUMBER if _counts(node, a.arg) else TENSOR
                else:
                    kind = self.ctx.kind(default)
            elif isinstance(default, ast.Constant) and self.ctx.kind(default) == NUMBER:
                kind = NUMBER  # `p=0.5`: a probability, a size, a threshold
            frame.names[a.arg] = kind
        for a in (args.vararg, args.kwarg):
            if a is not None:
                frame.names[a.arg] = None

    def _visit_class(self, node: ast.ClassDef) -> None:
        ctx = self.ctx
        kind = self._class_kind(node)
        helpers: set[str] = set()
        if kind == MODULE:
            for stmt in node.body:
                if isinstance(stmt, _FUNCS) and stmt.name == "forward":
                    for sub in ast.walk(stmt):
                        if (
                            isinstance(sub, ast.Call)
                            and isinstance(sub.func, ast.Attribute)
                            and isinstance(sub.func.value, ast.Name)
                            and sub.func.value.id == "self"
                        ):
                            helpers.add(sub.func.attr)
        ctx.classes[node.name] = ClassInfo(node.name, kind, node, forward_helpers=frozenset(helpers))
        ctx.bind(node.name, None)
        self._visit_children(node, [*node.decorator_list, *node.bases, *node.keywords, *node.body])

    def _class_kind(self, node: ast.ClassDef) -> str | None:
        ctx = self.ctx
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in ctx.classes:
                k = ctx.classes[base.id].kind
                if k:
                    return k
            q = ctx.qualname(base) or ""
            if q.startswith("torch.nn.") and q.count(".") == 2 and q.rsplit(".", 1)[1][:1].isupper():
                return MODULE
            if q.startswith("torch.utils.data.") and ("Dataset" in q or q.endswith("Sampler")):
                return DATASET
            if isinstance(base, ast.Name):
                live = ctx.live_object(base.id)
                if is_class(live):
                    k = classify_class(live)
                    if k in (MODULE, DATASET):
                        return k
        return None

    def _visit_for(self, node: ast.For | ast.AsyncFor) -> None:
        self._visit_children(node, [node.iter])
        self._bind_loop_target(node.target, node.iter)
        self._visit_children(node, [node.target])
        self._visit_loop(node, node.body)
        self._visit_children(node, node.orelse)

    def _bind_loop_target(self, target: ast.AST, it: ast.AST) -> None:
        """Bind a `for`/comprehension target from what iterating `it` yields."""
        if isinstance(it, ast.Call) and isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2:
            name = terminal_name(it.func)
            if name == "enumerate" and it.args:
                self._bind_target(target.elts[0], NUMBER)
                self._bind_loop_target(target.elts[1], it.args[0])
                return
            if name in ("named_parameters", "named_buffers"):
                self._bind_target(target.elts[0], STRING)
                self._bind_target(target.elts[1], PARAMETER if name == "named_parameters" else TENSOR)
                return
        self._bind_target(target, self._iter_item_kind(it))
        sources = self.ctx.frame.loop_sources
        if isinstance(target, ast.Name):
            sources[target.id] = it
        elif isinstance(target, (ast.Tuple, ast.List)):
            if (
                isinstance(it, ast.Call)
                and terminal_name(it.func) == "zip"
                and len(it.args) == len(target.elts)
            ):
                # `for x, y in zip(xs, ys)`: each name iterates its own argument
                for elt, arg in zip(target.elts, it.args):
                    if isinstance(elt, ast.Name):
                        sources[elt.id] = arg
            else:
                # `for x, y in loader`: each name is a part of what the loop yields
                for elt in target.elts:
                    if isinstance(elt, ast.Name):
                        sources[elt.id] = it

    def _iter_item_kind(self, it: ast.AST) -> str | None:
        if isinstance(it, ast.Call):
            name = terminal_name(it.func)
            if name in ("tqdm", "iter") and it.args:
                return self._iter_item_kind(it.args[0])
            if name == "parameters" and isinstance(it.func, ast.Attribute):
                return PARAMETER
        display = self.ctx.origin(it) if isinstance(it, ast.Name) else it
        if isinstance(display, (ast.List, ast.Tuple)) and display.elts:
            kinds = {self.ctx.kind(e) for e in display.elts}
            if len(kinds) == 1:
                return kinds.pop()
        elif isinstance(display, ast.ListComp) and isinstance(display.elt, ast.Call):
            k = self.ctx.kind(display.elt)
            if k in TENSOR_KINDS or k == MODULE:
                return k
        k = self.ctx.kind(it)
        if k == LOADER:
            return BATCH
        if k in TENSOR_KINDS or k == TENSORS:
            return TENSOR
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            return NUMBER
        return None

    def _walks_elements(self, node: ast.AST) -> bool:
        """`for d in done_flags:` over a tensor: its elements, part of one step, not a batch loop."""
        it = getattr(node, "iter", None)
        while isinstance(it, ast.Call) and terminal_name(it.func) in ("enumerate", "reversed") and it.args:
            it = it.args[0]
        return isinstance(it, (ast.Name, ast.Attribute, ast.Subscript)) and self.ctx.kind(it) in TENSOR_KINDS

    def _visit_loop(self, node: ast.AST, children: Iterable[ast.AST]) -> None:
        ctx = self.ctx
        info = LoopInfo(node)
        outer = ctx.frame.loops[-1] if ctx.frame.loops else None
        if (
            outer is not None
            and not outer.inner_loop_seen
            and is_step_loop(node)
            and not self._walks_elements(node)
        ):
            if outer.steps_itself is None:
                outer.steps_itself = steps_itself(outer.node)
            outer.inner_loop_seen = not outer.steps_itself
        ctx.frame.loops.append(info)
        try:
            self._visit_children(node, children)
        finally:
            ctx.frame.loops.pop()
        if self.on_loop:
            ctx.leaving = info
            for r in self.on_loop:
                self._call(r, info)
            ctx.leaving = None

    def _visit_comprehension(self, node: ast.AST) -> None:
        gens: list[ast.comprehension] = node.generators  # type: ignore[attr-defined]
        self._visit_children(node, [gens[0].iter])
        for g in gens:
            self._bind_loop_target(g.target, g.iter)
        rest: list[ast.AST] = [g.iter for g in gens[1:]] + [c for g in gens for c in g.ifs]
        if isinstance(node, ast.DictComp):
            rest += [node.key, node.value]
        else:
            rest.append(node.elt)  # type: ignore[attr-defined]
        self._visit_loop(node, rest)

    def _visit_with(self, node: ast.With | ast.AsyncWith) -> None:
        ctx = self.ctx
        modes = [g for item in node.items if (g := grad_context(ctx, item.context_expr))]
        self._visit_children(
            node, [c for item in node.items for c in (item.context_expr, item.optional_vars) if c is not None]
        )
        ctx.frame.grad.extend(modes)
        try:
            self._visit_children(node, node.body)
        finally:
            for _ in modes:
                ctx.frame.grad.pop()

    # ---- bindings -----------------------------------------------------------------------
    def _bind_assignment(self, node: ast.AST) -> None:
        ctx = self.ctx
        if isinstance(node, ast.Assign):
            kind = ctx.kind(node.value)
            for target in node.targets:
                self._bind_target(target, kind, node.value)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self._bind_target(node.target, ctx.kind(node.value), node.value)
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.target, ast.Name):
                old = ctx.lookup(node.target.id)
                new = ctx.kind(node.value)
                if new in TENSOR_KINDS or old in TENSOR_KINDS:
                    ctx.bind(node.target.id, TENSOR)
        elif isinstance(node, ast.NamedExpr):
            self._bind_target(node.target, ctx.kind(node.value), node.value)

    def _bind_target(self, target: ast.AST, kind: str | None, value: ast.AST | None = None) -> None:
        ctx = self.ctx
        if isinstance(target, ast.Name):
            ctx.bind(target.id, kind, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = (
                value.elts
                if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
                else None
            )
            for i, elt in enumerate(target.elts):
                if values is not None:
                    self._bind_target(elt, ctx.kind(values[i]), values[i])
                else:
                    item = TENSOR if kind in (BATCH, TENSOR, TENSORS) else None
                    self._bind_target(elt, item)
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, None)
        elif (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
            and ctx.frame.cls is not None
        ):
            ctx.frame.cls.attrs[target.attr] = kind
