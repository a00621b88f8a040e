"""TM4xx — autograd: graphs kept alive, checks bypassed, gradients where there are none."""

from __future__ import annotations

import ast

from ..context import Context
from ..kinds import MODULE, NUMBER
from ..registry import check
from ._common import call_chain, chain_root, name_like, receiver, unparse
from ._flow import Flow, flow_of, grad_disabled_here, key, scope_node

# Tensor methods whose result still carries the receiver's autograd graph.
_KEEPS_GRAPH = frozenset(
    {"sum", "mean", "float", "double", "half", "clone", "squeeze", "view", "reshape", "abs", "to"}
)


def _graph_names(ctx: Context, value: ast.AST, flow: Flow) -> set[str]:
    """The loss-like names whose graph `value` carries: a name that is back-propagated in this
    scope or a tensor named like a loss, through arithmetic and graph-keeping methods
    (`loss * x.size(0)`, `loss.mean()`), never through `.item()`. Empty: not a graph tensor."""
    if isinstance(value, ast.BinOp):
        return _graph_names(ctx, value.left, flow) | _graph_names(ctx, value.right, flow)
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        return _graph_names(ctx, value.operand, flow)
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in _KEEPS_GRAPH
    ):
        return _graph_names(ctx, value.func.value, flow)
    if not isinstance(value, ast.Name):
        return set()
    if value.id in flow.direct or (ctx.is_tensor(value) and "loss" in value.id.lower()):
        return {value.id}
    return set()


def _graph_still_needed(acc: str | None, graphs: set[str], flow: Flow) -> bool:
    """Accumulating into `acc` is how the program builds what it back-propagates: a sum of loss
    terms (`style_loss += layer_loss` ... `(a * content + b * style_loss).backward()`), a list
    of losses stacked into one, or a sum the function returns to a caller that may."""
    if acc is None:
        return True
    if acc in flow.feeds:
        return True
    used = bool(graphs & flow.feeds)  # the values are back-propagated on their own
    if acc in flow.returned and not used:
        return True
    # an attribute (`self.total += loss`) may be back-propagated by another method
    return "." in acc and not used


_TM401_HINT = "Accumulate a number: `total += loss.item()` (or `loss.detach()` to stay on the device)."


@check("TM401", nodes=(ast.AugAssign, ast.Assign), calls={"append"})
def graph_kept_alive(node: ast.AST, ctx: Context) -> None:
    if not ctx.in_loop or grad_disabled_here(ctx):
        return
    flow = flow_of(ctx, scope_node(ctx))
    if isinstance(node, ast.AugAssign):
        if not isinstance(node.op, ast.Add):
            return
        graphs = _graph_names(ctx, node.value, flow)
        acc = key(node.target)
        label = f"{unparse(node.target, 20)} += {unparse(node.value, 30)}"
    elif isinstance(node, ast.Assign):
        # total = total + loss
        v = node.value
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return
        if not (isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add) and isinstance(v.left, ast.Name)):
            return
        if v.left.id != node.targets[0].id:
            return
        graphs = _graph_names(ctx, v.right, flow)
        acc = node.targets[0].id
        label = unparse(node, 50)
    else:
        call: ast.Call = node  # type: ignore[assignment]
        if len(call.args) != 1 or ctx.is_tensor(receiver(call)):  # type: ignore[arg-type]
            return
        graphs = _graph_names(ctx, call.args[0], flow)
        if not graphs or _graph_still_needed(key(receiver(call)), graphs, flow):
            return
        ctx.flag(
            call,
            f"`{unparse(call, 50)}` keeps the autograd graph of every iteration alive.",
            "Store a number: `"
            + unparse(call.func, 30)
            + f"({unparse(call.args[0], 20)}.item())` (or `.detach()` to stay on the device).",
        )
        return
    if not graphs or _graph_still_needed(acc, graphs, flow):
        return
    ctx.flag(
        node,
        f"`{label}` keeps the autograd graph of every iteration alive.",
        _TM401_HINT,
    )


# In-place methods and writes that need `no_grad` (and would fail under inference_mode's
# rules for tensors created outside it): parameter updates and initialisation.
def _mutates(ctx: Context, stmt: ast.AST) -> bool:
    for sub in ast.walk(stmt):
        t = type(sub)
        if t is ast.AugAssign:
            target = sub.target  # type: ignore[attr-defined]
            if not (isinstance(target, ast.Name) and ctx.kind(target) == NUMBER):
                return True  # `p -= lr * p.grad`; a Python counter (`total += n`) is fine
        if t is ast.Assign or t is ast.AnnAssign:
            targets = sub.targets if t is ast.Assign else [sub.target]  # type: ignore[attr-defined]
            if any(isinstance(x, (ast.Attribute, ast.Subscript)) for x in targets):
                return True
        if t is ast.Call:
            func = sub.func  # type: ignore[attr-defined]
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name.endswith("_") and not name.endswith("__"):
                return True
            if name in ("backward", "step", "load_state_dict", "grad"):
                return True
    return False


@check("TM402", nodes=(ast.With,))
def prefer_inference_mode(node: ast.With, ctx: Context) -> None:
    item = next((i for i in node.items if ctx.qualname(_func(i.context_expr)) == "torch.no_grad"), None)
    if item is None or ctx.in_module_method:
        return
    if any(_mutates(ctx, stmt) for stmt in node.body) or not _runs_a_model(ctx, node.body):
        return
    # Tensors made under inference_mode cannot be saved for backward later: a no_grad target
    # (DQN, distillation) computed in a loop that backpropagates must stay no_grad.
    for loop in ctx.loops:
        if any(_is_backward(c) for c in ast.walk(loop.node) if isinstance(c, ast.Call)):
            return
    if ctx.loops == [] and isinstance(ctx.frame.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if any(_is_backward(c) for c in ast.walk(ctx.frame.node) if isinstance(c, ast.Call)):
            return
    ctx.flag(
        node,
        f"`with {unparse(item.context_expr, 40)}` wraps pure inference; `torch.inference_mode()` is faster.",
        "Use `with torch.inference_mode():` (keep `no_grad` where the results feed a later backward).",
    )


def _runs_a_model(ctx: Context, body: list[ast.stmt]) -> bool:
    """Inference means a forward pass: a call of a module (`model(x)`, `self.net(x)`)."""
    for stmt in body:
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Call):
                f = sub.func
                if isinstance(f, ast.Attribute) and f.attr in ("forward", "generate", "predict"):
                    f = f.value
                if ctx.kind(f) == MODULE or name_like(f, "model", "net"):
                    return True
    return False


def _func(expr: ast.AST) -> ast.AST:
    return expr.func if isinstance(expr, ast.Call) else expr


def _is_backward(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr == "backward"


@check("TM403", attrs={"data"})
def data_attribute(node: ast.Attribute, ctx: Context) -> None:
    parent = ctx.parent
    if isinstance(parent, ast.Call) and parent.func is node:
        return  # `obj.data(...)` is a method, not the tensor attribute
    if not ctx.is_tensor(node.value):
        return
    write = isinstance(node.ctx, ast.Store) or (isinstance(parent, ast.AugAssign) and parent.target is node)
    owner = unparse(node.value, 40)
    ctx.flag(
        node,
        f"`{owner}.data` {'writes' if write else 'reads'} the tensor behind autograd's back.",
        f"Write with `with torch.no_grad(): {owner}.copy_(...)`."
        if write
        else f"Read with `{owner}.detach()`.",
    )


@check("TM404", calls={"Variable"})
def variable_deprecated(call: ast.Call, ctx: Context) -> None:
    q = ctx.qualname(call.func) or ""
    if q not in ("torch.autograd.Variable", "torch.autograd.variable.Variable"):
        return
    ctx.flag(
        call,
        f"`{unparse(call, 50)}` uses the deprecated `Variable` wrapper.",
        "Use the tensor itself; pass `requires_grad=True` to the factory or call `.requires_grad_()`.",
    )


def _is_model_output(ctx: Context, node: ast.AST) -> bool:
    """A module call (`model(x)`, `self.net(x)`), a loss, or a name assigned from one."""
    seen = 0
    while isinstance(node, ast.Name) and seen < 4:
        if "loss" in node.id.lower() and ctx.is_tensor(node):
            return True
        origin = ctx.origin(node)
        if origin is None:
            return False
        node = (
            chain_root(origin) if not isinstance(origin, ast.Call) or _is_module_call(ctx, origin) else origin
        )
        seen += 1
    return isinstance(node, ast.Call) and _is_module_call(ctx, node)


def _is_module_call(ctx: Context, call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "forward":
        return ctx.kind(func.value) == MODULE
    return ctx.kind(func) == MODULE


@check("TM405", calls={"numpy"})
def numpy_without_detach(call: ast.Call, ctx: Context) -> None:
    if ctx.grad_mode is not None or not isinstance(call.func, ast.Attribute):
        return
    value = call.func.value
    chain = call_chain(value)
    if "detach" in chain or "data" in chain or "item" in chain:
        return
    root = chain_root(value)
    if any(c not in ("cpu", "to", "float", "double", "squeeze", "view", "reshape", "flatten") for c in chain):
        return  # other ops (argmax, softmax(...).max) — too far from the output to be sure
    if not _is_model_output(ctx, root):
        return
    origin = ctx.origin(root)
    if origin is not None and "detach" in call_chain(origin):
        return
    ctx.flag(
        call,
        f"`{unparse(call, 50)}` fails on a tensor that requires grad.",
        f"Detach first: `{unparse(root, 30)}.detach().cpu().numpy()`.",
    )


@check("TM406", calls={"backward"})
def backward_under_no_grad(call: ast.Call, ctx: Context) -> None:
    if ctx.grad_mode is None:
        return
    if not isinstance(call.func, ast.Attribute) and ctx.qualname(call.func) != "torch.autograd.backward":
        return
    ctx.flag(
        call,
        f"`{unparse(call, 50)}` runs under `{ctx.grad_mode}`, where no graph is recorded.",
        f"Move the forward pass and `.backward()` out of the `{ctx.grad_mode}` block.",
    )
