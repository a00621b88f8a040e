"""Where tensors live, as far as the source and the live namespace tell.

Rules whose message speaks of the GPU (TM301, TM302) need it: a `.item()` in a plotting loop
over CPU tensors waits for nothing. Two questions:

- does this code ever put anything on an accelerator? (`.cuda()`, `.to(device)` with a device
  that is not a CPU literal, `device=` arguments, `torch.device("cuda" if ... else "cpu")`,
  `torch.accelerator`, CUDA streams and memory calls, `DataParallel`, `non_blocking=True`).
  The walker notes every such call; a file, a notebook (all its cells) or a kernel with none
  gets no GPU-wait findings.
- where does this particular tensor live? The live namespace answers for names (lint runs
  after the cell, so the cell's own names hold their last values); the source answers for
  values that were `.cpu()`-ed, `.numpy()`-ed or built by a factory without a device.
"""

from __future__ import annotations

import ast
import sys
from typing import TYPE_CHECKING, Any

from .kinds import LOADER, MODULE, NEW_TENSOR_FUNCS
from .nodes import keyword

if TYPE_CHECKING:
    from .context import Context

ACCELERATORS = frozenset({"cuda", "mps", "xpu", "hip", "npu", "xla", "hpu", "privateuseone"})
CPU, ACCELERATOR = "cpu", "accelerator"

# torch.cuda calls that only make sense with work on a GPU (seeding and `is_available` are
# boilerplate that CPU-only scripts carry too)
_CUDA_WORK = frozenset(
    {
        "synchronize",
        "empty_cache",
        "set_device",
        "Stream",
        "Event",
        "stream",
        "current_stream",
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "reset_peak_memory_stats",
        "current_device",
        "device",
        "graph",
        "CUDAGraph",
    }
)
_PARALLEL = frozenset({"DataParallel", "DistributedDataParallel"})
# methods whose result is on the host
_TO_HOST = frozenset({"cpu", "numpy", "tolist", "item"})
_FACTORIES = NEW_TENSOR_FUNCS | {"logspace", "as_tensor", "from_numpy"}
_DEVICE_WORDS = ("cuda", "gpu", "device", "accel")


def device_type_of_literal(node: ast.AST | None) -> str | None:
    """ "cuda", "cpu", ... for a string literal or an int device index (`.to(0)` is CUDA)."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return node.value.split(":", 1)[0].strip().lower() or None
        if isinstance(node.value, int) and not isinstance(node.value, bool):
            return "cuda"
    return None


def _mentions_accelerator(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if device_type_of_literal(sub) in ACCELERATORS and isinstance(sub.value, str):  # type: ignore[attr-defined]
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in ("cuda", "accelerator", "mps"):
            return True
    return False


def _device_like(node: ast.AST) -> bool:
    """`device`, `self.device`, `args.gpu`, `cfg.dev`: a name that holds a chosen device."""
    text = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    low = text.lower()
    return any(w in low for w in _DEVICE_WORDS) or low in ("dev", "rank", "local_rank")


def is_accelerator_target(ctx: Context, target: ast.AST | None) -> bool:
    """A device argument that can be an accelerator: a literal, `torch.device(...)` naming one,
    a device index, or a device chosen elsewhere (never one bound to a CPU literal)."""
    if target is None:
        return False
    literal = device_type_of_literal(target)
    if literal is not None:
        return literal in ACCELERATORS
    if isinstance(target, ast.Call):
        q = ctx.qualname(target.func) or ""
        if q == "torch.device" or q.endswith(".device"):
            return _mentions_accelerator(target)
        return _device_like(target.func) if isinstance(target.func, (ast.Name, ast.Attribute)) else False
    if isinstance(target, ast.Name):
        origin = ctx.origin(target)
        if origin is not None:
            return _mentions_accelerator(origin) or (
                isinstance(origin, (ast.Name, ast.Attribute, ast.Subscript)) and _device_like(target)
            )
        live = live_device_type(ctx, target.id)
        if live is not None:
            return live != CPU
        return _device_like(target)
    if isinstance(target, ast.Attribute):
        return target.attr not in ("dtype",) and (_device_like(target) or target.attr == "device")
    if isinstance(target, ast.IfExp):
        return is_accelerator_target(ctx, target.body) or is_accelerator_target(ctx, target.orelse)
    return False


def moves_to_accelerator(ctx: Context, call: ast.Call) -> bool:
    """This call puts something on an accelerator, or chooses one (noted by the walker)."""
    func = call.func
    q = ctx.qualname(func) or ""
    if q.startswith("torch.accelerator") or q.startswith("torch.cuda.amp"):
        return True
    if q.startswith("torch.cuda."):
        return q.rsplit(".", 1)[1] in _CUDA_WORK
    if q in ("torch.device", "torch.set_default_device"):
        return any(_mentions_accelerator(a) for a in call.args)
    if q in ("torch.autocast", "torch.amp.autocast"):
        dev = call.args[0] if call.args else keyword(call, "device_type")
        return device_type_of_literal(dev) in ACCELERATORS
    if q.rsplit(".", 1)[-1] in _PARALLEL:
        return True
    if isinstance(func, ast.Attribute):
        if func.attr == "cuda" and q != "torch.cuda":
            return True
        if func.attr == "to":
            target = keyword(call, "device") or (call.args[0] if call.args else None)
            if target is not None and is_accelerator_target(ctx, target):
                return True
    for kw in call.keywords:
        if kw.arg == "device" and is_accelerator_target(ctx, kw.value):
            return True
        if kw.arg == "non_blocking" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
            return True
    return False


# ---- where one value lives ---------------------------------------------------------------------


def _torch_device_type(obj: Any) -> str | None:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        tp = type(obj)
        if issubclass(tp, torch.Tensor):
            return torch._C.TensorBase.__dict__["device"].__get__(obj).type
        if issubclass(tp, torch.nn.Module):
            # the first parameter or buffer, read through instance dicts only
            stack = [obj]
            seen = 0
            while stack and seen < 64:
                m = stack.pop()
                seen += 1
                d = object.__getattribute__(m, "__dict__")
                for key in ("_parameters", "_buffers"):
                    store = d.get(key)
                    if type(store) is dict:
                        for t in dict.values(store):
                            if t is not None and issubclass(type(t), torch.Tensor):
                                return torch._C.TensorBase.__dict__["device"].__get__(t).type
                subs = d.get("_modules")
                if type(subs) is dict:
                    stack.extend(c for c in dict.values(subs) if c is not None)
    except Exception:
        return None
    return None


def live_device_type(ctx: Context, name: str) -> str | None:
    """ "cpu" or "accelerator" for a live tensor or module (meta counts as neither)."""
    if ctx.namespace is None or name not in ctx.namespace or ctx._bound(name) and not ctx.post_run:
        return None
    dev = _torch_device_type(ctx.namespace.get(name))
    if dev is None or dev == "meta":
        return None
    return CPU if dev == "cpu" else ACCELERATOR


def where(ctx: Context, node: ast.AST, depth: int = 0) -> str | None:
    """ "cpu", "accelerator" or None (unknown) for the value of `node`, following method
    chains (`out.detach().cpu()`), torch functions (`F.relu(x)` is where `x` is), module calls
    (`model(x)` is where `model` is), names (live, assigned, or the loop they iterate)."""
    n = node
    while depth <= 8:
        depth += 1
        if isinstance(n, ast.Call):
            func = n.func
            q = ctx.qualname(func) or ""
            if q.startswith("numpy.") or q.startswith("np."):
                return CPU
            if q.endswith("DataLoader"):
                return CPU  # batches come out of a loader on the CPU (pinned or not)
            if q.startswith("torch.") and q.count(".") == 1 and q[6:] in _FACTORIES:
                dev = keyword(n, "device")
                if dev is None:
                    return None if ctx.default_device_set else CPU
                return ACCELERATOR if is_accelerator_target(ctx, dev) else CPU
            if isinstance(func, ast.Attribute) and not q.startswith("torch."):
                if func.attr in _TO_HOST:
                    return CPU
                if func.attr == "cuda":
                    return ACCELERATOR
                if func.attr == "to":
                    target = keyword(n, "device") or (n.args[0] if n.args else None)
                    literal = device_type_of_literal(target) if target is not None else None
                    if literal == "cpu":
                        return CPU
                    if target is not None and is_accelerator_target(ctx, target):
                        return ACCELERATOR
                n = func.value  # a tensor method: the result stays where its receiver is
                continue
            if q.startswith("torch.") and n.args:
                n = n.args[0]  # a torch function: where its (first) input is
                continue
            if isinstance(func, ast.Name) and ctx.kind(func) == MODULE:
                n = func  # calling a module: its output is where the module is
                continue
            return None
        if isinstance(n, (ast.Attribute, ast.Subscript)):
            n = n.value
            continue
        if isinstance(n, ast.BinOp):
            # both operands sit on one device (mixing raises), so either one tells
            places = {where(ctx, n.left, depth), where(ctx, n.right, depth)}
            return ACCELERATOR if ACCELERATOR in places else CPU if CPU in places else None
        if isinstance(n, (ast.ListComp, ast.GeneratorExp)):
            n = n.elt
            continue
        if isinstance(n, (ast.List, ast.Tuple)) and n.elts:
            n = n.elts[0]
            continue
        if isinstance(n, ast.Name):
            live = live_device_type(ctx, n.id)
            if live is not None:
                return live
            if ctx.lookup(n.id) == LOADER:
                return CPU
            origin = ctx.origin(n)
            if origin is not None and any(isinstance(x, ast.Name) and x.id == n.id for x in ast.walk(origin)):
                # `x = x * scale`: where x was before is where it is now
                earlier = ctx.earlier_origin(n.id)
                if earlier is None:
                    return _where_update(ctx, origin, n.id, depth)
                origin = earlier
            if origin is None:
                origin = ctx.loop_source(n.id)
            if origin is None:
                return None
            n = origin
            continue
        return None
    return None


def _where_update(ctx: Context, update: ast.AST, name: str, depth: int) -> str | None:
    """`x = x.to(device)` with nothing known of x before: what the update says, ignoring x."""
    if isinstance(update, ast.BinOp):
        others = [
            side
            for side in (update.left, update.right)
            if not (isinstance(side, ast.Name) and side.id == name)
        ]
        return where(ctx, others[0], depth + 1) if others else None
    if isinstance(update, ast.Call) and isinstance(update.func, ast.Attribute):
        f = update.func
        if f.attr in _TO_HOST:
            return CPU
        if f.attr == "cuda":
            return ACCELERATOR
        if f.attr == "to":
            target = keyword(update, "device") or (update.args[0] if update.args else None)
            if device_type_of_literal(target) == "cpu":
                return CPU
            if target is not None and is_accelerator_target(ctx, target):
                return ACCELERATOR
    return None


def in_cpu_branch(ctx: Context, node: ast.AST) -> bool:
    """The else branch of `x.cpu().numpy() if x.is_cuda else x.numpy()` (or of an `if` whose
    test asks for an accelerator): code that only runs when the tensors are on the CPU."""
    stack = [*ctx.stack, node]
    for i in range(len(stack) - 2, -1, -1):
        parent, child = stack[i], stack[i + 1]
        if isinstance(parent, ast.IfExp):
            test, body, orelse = parent.test, [parent.body], [parent.orelse]
        elif isinstance(parent, ast.If):
            test, body, orelse = parent.test, parent.body, parent.orelse
        else:
            continue
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            # `x.numpy() if not on_gpu else x.cpu().numpy()`: the branches trade places
            test, body, orelse = test.operand, orelse, body
        if not any(child is s for s in orelse):
            continue
        if _asks_for_accelerator(test) or any(_moves_to_host(b) for b in body):
            return True
    return False


def _asks_for_accelerator(test: ast.AST) -> bool:
    for sub in ast.walk(test):
        if isinstance(sub, ast.Attribute) and sub.attr in ("is_cuda", "is_mps", "is_xpu", "cuda"):
            return True
        if isinstance(sub, ast.Name) and any(w in sub.id.lower() for w in ("gpu", "cuda")):
            return True
        if device_type_of_literal(sub) in ACCELERATORS and isinstance(sub.value, str):  # type: ignore[attr-defined]
            return True
    return False


def _moves_to_host(node: ast.AST) -> bool:
    return any(
        isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "cpu"
        for sub in ast.walk(node)
    )
