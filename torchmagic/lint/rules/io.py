"""TM6xx — saving and loading checkpoints."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ...report import Fix
from ..context import Context
from ..fixes import fix_of
from ..kinds import MODULE, TENSOR_KINDS
from ..nodes import keyword, own_nodes
from ..registry import check
from ._common import unparse, unparse_operand
from ._flow import module_node

# builders whose result is a module although the linter cannot see its class
_MODEL_BUILDERS = ("torchvision.models.", "timm.create_model", "torch.hub.load")
# methods only a module has: a name they are called on holds one
MODULE_ONLY = frozenset(
    {
        "parameters",
        "named_parameters",
        "modules",
        "named_modules",
        "children",
        "named_children",
        "train",
        "eval",
        "apply",
    }
)
_MODEL_NAME = re.compile(
    r"^(?:[a-z0-9]+_)*(?:model|net|network|encoder|decoder|generator|discriminator|classifier|backbone)"
    r"(?:_[a-z0-9]+)*$|^net[A-Z0-9_]\w*$|^\w*(?:Net|Model)$",
    re.IGNORECASE,
)
_NOT_A_MODEL = (
    "state",
    "dict",
    "weight",
    "param",
    "path",
    "file",
    "ckpt",
    "checkpoint",
    "name",
    "dir",
    "cfg",
    "config",
)


def used_as_module(ctx: Context, name: str) -> bool:
    """`name.parameters()`, `name.train()`, ... in the function that binds it, or anywhere in
    the file for a module-level name."""
    fn = ctx.frame.node
    local = fn is not None and name in ctx.frame.names
    scope = fn if local else module_node(ctx)
    if scope is None:
        return False
    for sub in ast.walk(scope):
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in MODULE_ONLY
            and isinstance(sub.func.value, ast.Name)
            and sub.func.value.id == name
        ):
            return True
    return False


def _named_like_a_model(name: str) -> bool:
    """`model`, `netG`, `resnet`: not `model_state`, `model_path`."""
    return bool(_MODEL_NAME.match(name)) and not any(w in name.lower() for w in _NOT_A_MODEL)


def _model_parameter(ctx: Context, name: str) -> bool:
    """A parameter of the current function named like a model (`model`, `netG`, `resnet`)
    that no call in the file passes a state dict or tensor for."""
    fn = ctx.frame.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    if name not in params or not _named_like_a_model(name):
        return False
    index = params.index(name) - (1 if params and params[0] in ("self", "cls") else 0)
    mod = module_node(ctx)
    for sub in ast.walk(mod) if mod is not None else ():
        if not isinstance(sub, ast.Call):
            continue
        f = sub.func
        if (f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None) != fn.name:
            continue
        arg = keyword(sub, name) or (sub.args[index] if 0 <= index < len(sub.args) else None)
        if arg is not None and not _is_module(ctx, arg, depth=1):
            return False
    return True


def _is_module(ctx: Context, obj: ast.AST, depth: int = 0) -> bool:
    if isinstance(obj, ast.Name) and depth < 2 and _module_alias(ctx, obj, depth):
        return True  # `m.cpu()` may read as a tensor: the alias check comes first
    if isinstance(obj, ast.Name) and depth < 2 and _built_and_loaded(ctx, obj, depth):
        return True  # `m = Net().cuda()` reads as a tensor too
    kind = ctx.kind(obj)
    if kind == MODULE:
        return True
    if kind is not None:
        return False  # a tensor, a state dict, a number...
    built = ctx.built_by(obj) or ""
    if built.startswith(_MODEL_BUILDERS):
        return True
    if isinstance(obj, ast.Call) and isinstance(obj.func, ast.Attribute) and obj.func.attr == "state_dict":
        return False
    if not isinstance(obj, ast.Name):
        return False
    origin = ctx.origin(obj)
    if (
        isinstance(origin, ast.Call)
        and isinstance(origin.func, ast.Attribute)
        and origin.func.attr == "state_dict"
    ):
        return False
    return used_as_module(ctx, obj.id) or (depth == 0 and _model_parameter(ctx, obj.id))


# class names of objects that have `load_state_dict` and are not modules
_NOT_MODULE_CLASS = re.compile(
    r"optim|adam|sgd|prop|lamb|lars|sched|lr$|lr[A-Z_]|scaler|ema|meter", re.IGNORECASE
)


def _built_and_loaded(ctx: Context, name: ast.Name, depth: int) -> bool:
    """`m = WaveGlow(**cfg).cuda()` (an imported class, or one of this source) and then
    `m.load_state_dict(net.state_dict())` in the same scope: an object built from a class that
    loads another model's weights is a module, even where the linter cannot see the class."""
    value = ctx.origin(name)
    for _ in range(4):
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in _RETURNS_MODULE
        ):
            value = value.func.value
        else:
            break
    if not isinstance(value, ast.Call):
        return False
    cls = value.func.id if isinstance(value.func, ast.Name) else getattr(value.func, "attr", "")
    if not cls[:1].isupper() or _NOT_MODULE_CLASS.search(cls):
        return False
    if any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "parameters"
        for a in [*value.args, *(k.value for k in value.keywords)]
        for n in ast.walk(a)
    ):
        return False  # built over a model's parameters: an optimizer
    fn = ctx.frame.node
    scope = fn if fn is not None and name.id in ctx.frame.names else module_node(ctx)
    for sub in ast.walk(scope) if scope is not None else ():
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr == "load_state_dict"
            and isinstance(sub.func.value, ast.Name)
            and sub.func.value.id == name.id
            and sub.args
            and isinstance(arg := sub.args[0], ast.Call)
            and isinstance(arg.func, ast.Attribute)
            and arg.func.attr == "state_dict"
            and (
                _is_module(ctx, source := arg.func.value, depth + 1)
                or (isinstance(source, ast.Name) and _named_like_a_model(source.id))
            )
        ):
            return True
    return False


# module methods that return the module itself
_RETURNS_MODULE = frozenset(
    {"cpu", "cuda", "to", "eval", "train", "half", "float", "double", "bfloat16", "requires_grad_"}
)


def _module_alias(ctx: Context, name: ast.Name, depth: int) -> bool:
    """`save_model = model`, or `copy.deepcopy(model).cpu()`: every binding of the name seen
    so far (the last one and the one before) is a module, reached through an alias, a copy or a
    method that returns the module itself."""
    values = [v for v in (ctx.origin(name), ctx.earlier_origin(name.id)) if v is not None]
    return bool(values) and all(_names_a_module(ctx, v, name.id, depth) for v in values)


def _names_a_module(ctx: Context, value: ast.AST, alias: str, depth: int) -> bool:
    for _ in range(4):
        if not isinstance(value, ast.Call):
            break
        if ctx.qualname(value.func) in ("copy.deepcopy", "copy.copy"):
            if not value.args:
                return False
            value = value.args[0]
        elif isinstance(value.func, ast.Attribute) and value.func.attr in _RETURNS_MODULE:
            if value.args and value.func.attr not in ("to", "cuda", "train", "requires_grad_"):
                break  # `m.to(device)`, `m.train(False)` return the module; `m.half(x)` is no module call
            value = value.func.value  # `m.cpu()`, `m.eval()`: the module itself
        else:
            break
    if not isinstance(value, ast.Name) or value.id == alias:
        return False
    return _is_module(ctx, value, depth + 1)


def _dict_items(ctx: Context, obj: ast.AST) -> list[tuple[str, ast.AST]]:
    """`(key, value)` pairs of a checkpoint dict written inline or bound to a name."""
    value = ctx.origin(obj) if isinstance(obj, ast.Name) else obj
    if isinstance(value, ast.Dict):
        return [
            (k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else "...", v)
            for k, v in zip(value.keys, value.values)
            if k is not None
        ]
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
        return [(kw.arg, kw.value) for kw in value.keywords if kw.arg]
    if isinstance(value, (ast.List, ast.Tuple)):
        return [(str(i), v) for i, v in enumerate(value.elts)]
    return []


WHOLE_SAVES = "TM601.whole_saves"  # ctx.notes key: file expressions a whole module is saved to -> line


@check("TM601", calls={"save"})
def save_whole_model(call: ast.Call, ctx: Context) -> None:
    if not call.args or ctx.qualname(call.func) != "torch.save":
        return
    obj = call.args[0]
    if ctx.kind(obj) in TENSOR_KINDS and not (isinstance(obj, ast.Name) and _module_alias(ctx, obj, 0)):
        return
    if _is_module(ctx, obj):
        reload = _whole_reload(ctx, obj, call)
        if reload is None and _weights_saved_beside(ctx, obj, call):
            return  # the weights are saved too, and nothing here reloads the module whole
        target = _saved_to(call)
        if target is not None:
            ctx.notes.setdefault(WHOLE_SAVES, {})[ast.unparse(target)] = call.lineno
        name = unparse_operand(obj, 30)
        hint = f"Save the weights: `torch.save({name}.state_dict(), f)`."
        if reload is not None:
            hint = f"{hint[:-1]}, and {_reload_advice(ctx, obj, reload)}"
        ctx.flag(
            call,
            f"`{unparse(call, 50)}` pickles the whole module, tied to its class path.",
            hint,
            fix=_state_dict_fix(ctx, obj, call),
        )
        return
    is_dict = not isinstance(ctx.origin(obj) if isinstance(obj, ast.Name) else obj, (ast.List, ast.Tuple))
    for k, v in _dict_items(ctx, obj):
        if _is_module(ctx, v):
            name = unparse_operand(v, 20)
            where = "checkpoint dict" if is_dict else "list"
            store = f"'{k}': {name}.state_dict()" if is_dict else f"{name}.state_dict()"
            ctx.flag(
                call,
                f"`{unparse(call, 50)}` pickles the whole module `{name}` inside the {where},"
                " tied to its class path.",
                f"Store its weights: `{store}` (and `optimizer.state_dict()` for an"
                " optimizer); rebuild the model and `load_state_dict` them.",
                fix=_state_dict_fix(ctx, v, call, key=k if is_dict else None),
            )
            return


def _weights_saved_beside(ctx: Context, obj: ast.AST, save: ast.Call) -> bool:
    """Another `torch.save` of the same function (or of the script's top level) writes
    `<obj>.state_dict()`, alone or in a checkpoint dict: the weights are kept the portable way,
    and the pickled module beside them is a convenience copy (elektronn3's `model.pt`) when
    nothing in this source loads it back whole."""
    weights = f"{unparse(obj)}.state_dict()"
    for n in _saves_in(ctx, _scope_around(ctx)):
        if n is save or not n.args:
            continue
        saved = n.args[0]
        if isinstance(saved, ast.Name):  # `save_dict = {"model_state_dict": model.state_dict(), ...}`
            saved = ctx.origin(saved) or saved
        if any(isinstance(m, ast.Call) and unparse(m) == weights for m in ast.walk(saved)):
            return True
    return False


def _whole_reload(ctx: Context, obj: ast.AST, save: ast.Call) -> ast.Assign | None:
    """The first `x = torch.load(...)` of this source that loads the saved module back whole:
    into the same name (`model = torch.load(f)`), or from the same file expression
    (`restored = torch.load("model.pt")` after `torch.save(model, "model.pt")`)."""
    tree = module_node(ctx)
    if tree is None:
        return None
    saved = obj.id if isinstance(obj, ast.Name) else None
    target = _saved_to(save)
    dest = unparse(target) if target is not None else None
    found = []
    for n in ast.walk(tree):
        if not (
            isinstance(n, ast.Assign)
            and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name)
            and isinstance(n.value, ast.Call)
            and ctx.qualname(n.value.func) == "torch.load"
        ):
            continue
        source = _loaded_from(n.value)
        if n.targets[0].id == saved or (dest is not None and source is not None and unparse(source) == dest):
            found.append(n)
    return min(found, key=lambda n: n.lineno) if found else None


def _reload_advice(ctx: Context, obj: ast.AST, reload: ast.Assign) -> str:
    """How the code's own reload of the whole module changes with the save: the module is
    still there when it is reloaded into the same name in the same scope (`model =
    torch.load(f)` after training `model`); elsewhere it is built from its class first."""
    target = reload.targets[0].id  # type: ignore[attr-defined]
    scope = ctx.frame.node if ctx.frame.node is not None else module_node(ctx)
    same = (
        isinstance(obj, ast.Name)
        and obj.id == target
        and scope is not None
        and any(n is reload for n in own_nodes(scope))
    )
    into = (
        f"load them into the model: `{target}.load_state_dict({unparse(reload.value, 40)})`"
        if same
        else f"build `{target}` from its class and load them into it:"
        f" `{target}.load_state_dict({unparse(reload.value, 40)})`"
    )
    return (
        f"change the reload on line {reload.lineno} (`{unparse(reload, 40)}`) to {into}; saving the"
        " weights alone would break that reload."
    )


def _state_dict_fix(ctx: Context, module: ast.AST, call: ast.Call, key: str | None = None) -> Fix | None:
    # unsafe: the file then holds weights, and the code that loads it must change with it
    if not _inside(module, call):
        return None  # a dict built elsewhere, which other code may also use
    document = ctx.document
    if "torch.load(" in document and "load_state_dict" not in document:
        return None  # this code loads whole models back: the edit alone would break it
    if key and "torch.load(" in document and re.search(rf"""\[\s*['"]{re.escape(key)}['"]\s*\]""", document):
        return None  # this code reads the entry back (`ckpt["model"].state_dict()`): it expects a module
    return (
        fix_of("Save the `state_dict()`", [ctx.edits.insert_after(module, ".state_dict()")], "unsafe")
        if isinstance(module, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
        else None
    )


def _inside(node: ast.AST, outer: ast.AST) -> bool:
    return any(sub is node for sub in ast.walk(outer))


@check("TM602", calls={"load"})
def unsafe_load(call: ast.Call, ctx: Context) -> None:
    if ctx.qualname(call.func) != "torch.load":
        return
    wo = keyword(call, "weights_only")
    if not (isinstance(wo, ast.Constant) and wo.value is False):
        return
    if _written_here(ctx, call):
        return  # a cache this code writes itself: nobody else's pickle
    if keyword(call, "pickle_module") is not None:
        return  # the author's own unpickler decides what loads (a restricted `find_class`)
    if _lightning_checkpoint(ctx):
        return  # Lightning pickles the hyper-parameters: its own loader unpickles them in full
    ctx.flag(
        call,
        f"`{unparse(call, 60)}` unpickles arbitrary code from the file.",
        "Load only files you trust this way. Where the file holds just tensors and plain containers,"
        " drop `weights_only=False`; where it also holds Python objects you trust, allow exactly those:"
        " `with torch.serialization.safe_globals([datetime.datetime]): torch.load(f)`.",
        fix=_drop_weights_only(ctx, call),
    )


# what only a Lightning checkpoint holds: its hyper-parameters, pickled as Python objects
_LIGHTNING_KEYS = frozenset({"hyper_parameters", "pytorch-lightning_version", "hparams_name"})


def _scope_around(ctx: Context) -> ast.AST | None:
    """The function around the save or load, or the whole source at its top level."""
    return ctx.enclosing_function() or (ctx.stack[0] if ctx.stack else None)


def _saves_in(ctx: Context, scope: ast.AST | None) -> Iterator[ast.Call]:
    """The `torch.save(...)` calls anywhere under `scope`."""
    for n in ast.walk(scope) if scope is not None else ():
        if isinstance(n, ast.Call) and ctx.qualname(n.func) == "torch.save":
            yield n


def _saved_to(save: ast.Call) -> ast.AST | None:
    """The file argument of `torch.save(obj, f)`."""
    return keyword(save, "f") or (save.args[1] if len(save.args) > 1 else None)


def _loaded_from(load: ast.Call) -> ast.AST | None:
    """The file argument of `torch.load(f, ...)`."""
    return keyword(load, "f") or (load.args[0] if load.args else None)


def _lightning_checkpoint(ctx: Context) -> bool:
    """`ckpt = torch.load(path, weights_only=False)` and then `ckpt["hyper_parameters"]` in the
    same function: a Lightning checkpoint, whose hyper-parameters (config objects, classes)
    the weights-only unpickler refuses, and which Lightning itself loads in full."""
    scope = _scope_around(ctx)
    return scope is not None and any(
        isinstance(sub, ast.Constant) and sub.value in _LIGHTNING_KEYS for sub in ast.walk(scope)
    )


def _written_here(ctx: Context, load: ast.Call) -> bool:
    """`torch.save(dataset, pkl_file)` in the same function (or at the top level) as
    `torch.load(pkl_file, weights_only=False)`: the file is this code's own cache. Also a file
    an earlier line of this source saves a whole module to (`torch.save(model, name + ".pth")`):
    only `weights_only=False` loads it, and TM601's finding on that save changes this load too."""
    f = _loaded_from(load)
    if f is None:
        return False
    path = ast.unparse(f)
    if path in ctx.notes.get(WHOLE_SAVES, {}):
        return True  # a whole module this source saves: TM601 reports the save and names this load
    for save in _saves_in(ctx, _scope_around(ctx)):
        target = _saved_to(save)
        if target is not None and ast.unparse(target) == path:
            return True
    return False


def _drop_weights_only(ctx: Context, call: ast.Call) -> Fix | None:
    # unsafe: a file that pickles more than tensors and containers no longer loads
    kw = next(k for k in call.keywords if k.arg == "weights_only")
    edit = ctx.edits.remove_argument(call, kw)
    return fix_of("Drop `weights_only=False`", [edit], "unsafe") if edit is not None else None
