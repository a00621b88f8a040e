"""TM1xx — model definitions: what belongs inside an `nn.Module` and what does not."""

from __future__ import annotations

import ast

from ..context import Context, grad_context
from ..kinds import DTYPE, MODULE, PARAMETER, TENSOR, TENSOR_KINDS
from ..nodes import has_kwargs_splat, keyword
from ..registry import check

FACTORIES = frozenset(
    {
        "zeros",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "randint",
        "arange",
        "eye",
        "linspace",
        "logspace",
        "tensor",
        "as_tensor",
        "randperm",
        "normal",
    }
)


def _unparse(node: ast.AST, limit: int = 60) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _call_label(call: ast.Call) -> str:
    return f"{_unparse(call.func)}(...)"


@check("TM101", calls=FACTORIES)
def tensor_created_in_forward(call: ast.Call, ctx: Context) -> None:
    if not ctx.in_forward:
        return
    q = ctx.qualname(call.func)
    if q is None or not q.startswith("torch.") or q.count(".") != 1:
        return
    if keyword(call, "device") is not None or has_kwargs_splat(call):
        return
    name = q.split(".", 1)[1]
    ctx.flag(
        call,
        f"`{_call_label(call)}` in `{ctx.method}` builds a new CPU tensor on every forward call.",
        f"Build it on the input's device: `torch.{name}(..., device=x.device)`, `x.new_{name}(...)`"
        f" or `torch.{name}_like(x)`; for a constant, `self.register_buffer(...)` in `__init__`.",
    )


_DEVICE_STRINGS = ("cuda", "cpu", "mps", "xpu", "meta")


def _is_device_literal(ctx: Context, arg: ast.AST) -> bool:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value.split(":", 1)[0] in _DEVICE_STRINGS
    if isinstance(arg, ast.Call) and ctx.qualname(arg.func) == "torch.device":
        return True
    return False


def _is_global_device(ctx: Context, arg: ast.AST) -> bool:
    """A module-level name (not a local, not a parameter) used as the target device."""
    if isinstance(arg, ast.Name):
        if arg.id in ctx.frame.names:
            return False
        kind = ctx.lookup(arg.id)
        return kind not in TENSOR_KINDS and kind != DTYPE and kind != MODULE
    if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "self":
        # `self.device` fixed at construction time is still the model choosing its device.
        return "device" in arg.attr.lower()
    return False


def _device_target(ctx: Context, call: ast.Call) -> ast.AST | None:
    dev = keyword(call, "device")
    if dev is not None:
        return dev
    if call.args:
        return call.args[0]
    return None


@check("TM102", calls={"cuda", "cpu", "to"})
def device_move_inside_module(call: ast.Call, ctx: Context) -> None:
    if not ctx.in_module_method or not isinstance(call.func, ast.Attribute):
        return
    method = call.func.attr
    if method == "to":
        target = _device_target(ctx, call)
        if target is None or not (_is_device_literal(ctx, target) or _is_global_device(ctx, target)):
            return
        label = f".to({_unparse(target, 30)})"
    else:
        label = f".{method}()"
    ctx.flag(
        call,
        f"`{_unparse(call.func.value, 40)}{label}` inside `{ctx.cls.name}.{ctx.method}` moves data to a device the module chose itself.",  # type: ignore[union-attr]
        "Let the caller move the model once (`model.to(device)`) and follow the input inside"
        " the module: `.to(x.device)`.",
    )


@check("TM103", calls={"train", "eval"})
def mode_switch_inside_module(call: ast.Call, ctx: Context) -> None:
    if not ctx.in_module_method or not isinstance(call.func, ast.Attribute):
        return
    if ctx.method in ("train", "eval", "training"):
        # overriding train()/eval() (e.g. to freeze BatchNorm) or a `training` property
        # setter that forwards the mode is the sanctioned place
        return
    recv = call.func.value
    is_self = isinstance(recv, ast.Name) and recv.id == "self"
    is_sub = isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) and recv.value.id == "self"
    if not (is_self or is_sub):
        return
    ctx.flag(
        call,
        f"`{_unparse(call.func)}()` inside `{ctx.cls.name}.{ctx.method}` switches the mode the caller set.",  # type: ignore[union-attr]
        "Remove it and let the caller call `model.train()` / `model.eval()`.",
    )


@check(
    "TM104",
    nodes=(ast.With, ast.AsyncWith, ast.FunctionDef, ast.AsyncFunctionDef),
    calls={"set_grad_enabled"},
)
def no_grad_inside_module(node: ast.AST, ctx: Context) -> None:
    hint = "Remove it from the module; the caller wraps inference in `torch.inference_mode()` (or `no_grad`)."
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        parent = ctx.parent
        if not isinstance(parent, ast.ClassDef):
            return
        info = ctx.classes.get(parent.name)
        if info is None or info.kind != MODULE:
            return
        for d in node.decorator_list:
            mode = grad_context(ctx, d)
            if mode in ("no_grad", "inference_mode"):
                ctx.flag(
                    d,
                    f"`@{_unparse(d)}` on `{parent.name}.{node.name}` disables gradients inside the module.",
                    hint,
                )
        return
    if not ctx.in_module_method:
        return
    if isinstance(node, ast.Call):
        if grad_context(ctx, node) == "no_grad" and not isinstance(ctx.parent, ast.withitem):
            ctx.flag(
                node,
                f"`{_unparse(node)}` inside `{ctx.cls.name}.{ctx.method}` disables gradients inside the module.",
                hint,
            )  # type: ignore[union-attr]
        return
    for item in node.items:  # type: ignore[attr-defined]
        if grad_context(ctx, item.context_expr) in ("no_grad", "inference_mode"):
            ctx.flag(
                node,
                f"`with {_unparse(item.context_expr)}` inside `{ctx.cls.name}.{ctx.method}` disables gradients inside the module.",
                hint,
            )  # type: ignore[union-attr]


def _self_attr_target(node: ast.Assign | ast.AnnAssign) -> ast.Attribute | None:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for t in targets:
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
            return t
    return None


def _holds_modules(ctx: Context, value: ast.AST) -> bool:
    """A list/tuple/dict display or comprehension whose items are modules or Parameters."""
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        items = [e.value if isinstance(e, ast.Starred) else e for e in value.elts]
    elif isinstance(value, ast.Dict):
        items = [v for v in value.values if v is not None]
    elif isinstance(value, (ast.ListComp, ast.GeneratorExp)):
        items = [value.elt]
    elif isinstance(value, ast.DictComp):
        items = [value.value]
    elif isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Mult)):
        return _holds_modules(ctx, value.left) or _holds_modules(ctx, value.right)
    else:
        return False
    return any(
        (ctx.kind(i) in (MODULE, PARAMETER) and not _registered_alias(i)) or _holds_modules(ctx, i)
        for i in items
    )


def _registered_alias(item: ast.AST) -> bool:
    """`self.encoder`: a module assigned to an attribute is registered already, so a list of
    them (an iteration order, `self.order = [self.a, self.b]`) hides nothing from PyTorch."""
    return isinstance(item, ast.Attribute) and isinstance(item.value, ast.Name) and item.value.id == "self"


@check("TM105", nodes=(ast.Assign, ast.AnnAssign), calls={"append", "extend", "insert"})
def unregistered_submodules(node: ast.AST, ctx: Context) -> None:
    if not ctx.in_module_method or ctx.method != "__init__":
        return
    if isinstance(node, ast.Call):
        # self.layers = [] ... self.layers.append(nn.Linear(...))
        f = node.func
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute)):
            return
        owner = f.value
        if not (isinstance(owner.value, ast.Name) and owner.value.id == "self"):
            return
        if ctx.cls is None or ctx.cls.attrs.get(owner.attr) not in ("list", "dict"):
            return
        args = node.args[-1:] if f.attr == "insert" else node.args[:1]
        if not any(ctx.kind(a) in (MODULE, PARAMETER) or _holds_modules(ctx, a) for a in args):
            return
        if owner.attr in ctx.cls.flagged:  # one finding per attribute
            return
        ctx.cls.flagged.add(owner.attr)
        container = "dict" if ctx.cls.attrs.get(owner.attr) == "dict" else "list"
        _flag_container(ctx, node, owner.attr, container)
        return
    value = node.value  # type: ignore[attr-defined]
    target = _self_attr_target(node)  # type: ignore[arg-type]
    if target is None or value is None or not _holds_modules(ctx, value):
        return
    container = (
        "dict"
        if isinstance(value, (ast.Dict, ast.DictComp))
        else "tuple"
        if isinstance(value, ast.Tuple)
        else "list"
    )
    _flag_container(ctx, node, target.attr, container)


def _flag_container(ctx: Context, node: ast.AST, attr: str, container: str) -> None:
    fix = "nn.ModuleDict" if container == "dict" else "nn.ModuleList"
    ctx.flag(
        node,
        f"`self.{attr}` is a plain {container} of modules: its layers are invisible to `.parameters()`, `.to()` and `state_dict()`.",
        f"Wrap it: `self.{attr} = {fix}(...)` (`nn.ParameterList`/`nn.ParameterDict` for parameters).",
    )


@check("TM106", nodes=(ast.Assign, ast.AnnAssign))
def tensor_attribute_not_buffer(node: ast.Assign | ast.AnnAssign, ctx: Context) -> None:
    if not ctx.in_module_method or ctx.method != "__init__" or node.value is None:
        return
    target = _self_attr_target(node)
    if target is None or ctx.kind(node.value) != TENSOR:
        return
    ctx.flag(
        node,
        f"`self.{target.attr}` holds a plain tensor: it will not follow `model.to(device)` and is missing from `state_dict()`.",
        f'`self.register_buffer("{target.attr}", {_unparse(node.value, 40)})`, or `nn.Parameter(...)` if it should be trained.',
    )


@check("TM107", calls={"detach"}, attrs={"data"})
def detach_in_forward(node: ast.AST, ctx: Context) -> None:
    if not ctx.in_forward or ctx.grad_mode is not None:
        return
    if isinstance(node, ast.Call):
        expr, what = node.func.value, ".detach()"  # type: ignore[attr-defined]
    else:
        if isinstance(ctx.parent, ast.Call) and ctx.parent.func is node:
            return  # `x.data(...)` is a method, not the tensor attribute
        if isinstance(getattr(node, "ctx", None), ast.Store):
            return
        expr, what = node.value, ".data"  # type: ignore[attr-defined]
        if ctx.kind(expr) not in TENSOR_KINDS:
            return
    ctx.flag(
        node,
        f"`{_unparse(expr, 40)}{what}` in `forward` stops gradients from reaching earlier layers.",
        "Remove it unless a stop-gradient is intended (then say so with a comment and"
        " `# torchcheck: ignore[TM107]`).",
    )
