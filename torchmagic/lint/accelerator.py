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
  values that were `.cpu()`-ed, `.numpy()`-ed or built by a factory without a device, for a
  function's argument that it combines with a CPU tensor literal (mixing devices raises), and
  for what a helper of this source that moves nothing returns from CPU arguments, and for a
  parameter that every call of its function (or module) in this source passes from the host.
"""

from __future__ import annotations

import ast
import re
import sys
from typing import TYPE_CHECKING, Any

from .cuda_only import parsed_document
from .kinds import LOADER, MODULE, NEW_TENSOR_FUNCS, NUMBER, PARAMETER, TENSOR, TENSOR_METADATA
from .nodes import (
    assignments_by_name,
    constant_or_len,
    device_type_of_literal,
    enclosing_branches,
    has_kwargs_splat,
    keyword,
    move_target,
    own_nodes,
    parameter_default,
    parameters,
    parents_of,
    per_node,
    remember,
    self_attr_name,
    sole_bindings,
    terminal_name,
    unwrapped_iterable,
)

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
_FACTORIES = NEW_TENSOR_FUNCS | {"logspace", "as_tensor", "from_numpy", "Tensor"}
# the legacy typed constructors: CPU tensor types (`torch.cuda.FloatTensor` is the GPU one),
# whatever the default device
_CPU_TYPES = frozenset(
    f"{t}Tensor"
    for t in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")
)
_DEVICE_WORDS = ("cuda", "gpu", "device", "accel")


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
    return _device_name(text)


def _device_name(text: str) -> bool:
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
            # `torch.device("cuda:0")`, or a device named on the command line (`torch.device(args.device)`)
            return _mentions_accelerator(target) or any(
                isinstance(a, (ast.Name, ast.Attribute)) and _device_like(a) for a in target.args[:1]
            )
        return _device_like(target.func) if isinstance(target.func, (ast.Name, ast.Attribute)) else False
    if isinstance(target, ast.Name):
        origin = ctx.origin(target)
        if origin is not None:
            return (
                _mentions_accelerator(origin)
                or (isinstance(origin, (ast.Name, ast.Attribute, ast.Subscript)) and _device_like(target))
                or (
                    isinstance(origin, ast.Call)
                    and (ctx.qualname(origin.func) or "") == "torch.device"
                    and is_accelerator_target(ctx, origin)
                )
            )
        live = live_device_type(ctx, target.id)
        if live is not None:
            return live != CPU
        carried = (
            ctx.carried_devices.get(target.id)
            if target.id in ctx.frames[0].names
            and (ctx.frame is ctx.frames[0] or target.id not in ctx.frame.names)
            else None
        )
        if carried is not None:
            return carried in ACCELERATORS  # `DEVICE = "cpu"` in an earlier cell of the notebook
        if _cpu_parameter(ctx, target.id):
            return False
        return _device_like(target)
    if isinstance(target, ast.Attribute):
        return target.attr not in ("dtype",) and (_device_like(target) or target.attr == "device")
    if isinstance(target, ast.IfExp):
        return is_accelerator_target(ctx, target.body) or is_accelerator_target(ctx, target.orelse)
    return False


def _cpu_parameter(ctx: Context, name: str) -> bool:
    """`def make_data(n, device="cpu")`, every call of which in this source leaves the default
    or passes a CPU device (a literal, or a name only ever bound to one: `device = "cpu"`)."""
    fn = ctx.enclosing_function()
    if fn is None or ctx.stack[0] is fn:
        return False
    return remember(fn, f"cpu_parameter:{name}", lambda: _cpu_parameter_of(ctx.stack[0], fn, name))


def _cpu_parameter_of(tree: ast.AST, fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    if device_type_of_literal(parameter_default(fn, name)) != CPU:
        return False
    args = [*fn.args.posonlyargs, *fn.args.args]
    position = next((i for i, a in enumerate(args) if a.arg == name), None)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and terminal_name(n.func) == fn.name]
    if not calls:
        return False
    for call in calls:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return False
        given = keyword(call, name) or (
            call.args[position] if position is not None and position < len(call.args) else None
        )
        if given is not None and not _only_cpu(tree, given):
            return False
    return True


def _only_cpu(tree: ast.AST, value: ast.AST) -> bool:
    """A CPU literal, or a name every assignment in `tree` binds to one."""
    if device_type_of_literal(value) == CPU:
        return True
    if not isinstance(value, ast.Name):
        return False
    bound = [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)
    ]
    return bool(bound) and all(device_type_of_literal(b) == CPU for b in bound)


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
            if target is not None and is_accelerator_target(ctx, target) and not _follows(ctx, target):
                return True
    for kw in call.keywords:
        if kw.arg == "device" and is_accelerator_target(ctx, kw.value) and not _follows(ctx, kw.value):
            return True
        if kw.arg == "non_blocking" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
            return True
    return False


_SETTINGS = re.compile(r"^(self|args?|opts?|cfg|config|conf|hparams|params|settings|flags|FLAGS)$")


def _follows(ctx: Context, target: ast.AST) -> bool:
    """`_follows_a_value`, or `args.device` where `args` is a tensor whose shape the function
    reads (`args.shape[0]`), not the settings that the name usually holds."""
    if _follows_a_value(target):
        return True
    if not (
        isinstance(target, ast.Attribute) and target.attr == "device" and isinstance(target.value, ast.Name)
    ):
        return False
    scope = ctx.frame.node
    return scope is not None and target.value.id in _used_as_tensors(scope)


@per_node
def _used_as_tensors(scope: ast.AST) -> frozenset[str]:
    """Names of a function that it asks a tensor's shape of."""
    out = set()
    for n in own_nodes(scope):
        if isinstance(n, ast.Attribute) and n.attr in ("shape", "ndim") and isinstance(n.value, ast.Name):
            out.add(n.value.id)
    return frozenset(out)


def _follows_a_value(target: ast.AST) -> bool:
    """`device=values.device`, `.to(x.device)`: the device of another tensor or module, which
    puts nothing on an accelerator that was not there already (unlike `self.device` or
    `args.device`, a device chosen once and kept in an object or the settings)."""
    return (
        isinstance(target, ast.Attribute)
        and target.attr == "device"
        and not (isinstance(target.value, ast.Name) and _SETTINGS.match(target.value.id))
    )


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


_ITERATION_WRAPPERS = frozenset({"zip", "reversed", "enumerate", "iter", "list", "tuple", "sorted"})


def where(ctx: Context, node: ast.AST, depth: int = 0) -> str | None:
    """ "cpu", "accelerator" or None (unknown) for the value of `node`, following method
    chains (`out.detach().cpu()`), torch functions (`F.relu(x)` is where `x` is), module calls
    (`model(x)` is where `model` is), names (live, assigned, or the loop they iterate)."""
    n = node
    read_line = getattr(node, "lineno", None) if depth == 0 else None
    steps = 0
    # `depth` counts hops from a name to where it was bound (and calls into helpers); moves
    # inside one expression (`pred[:, :, 4].unsqueeze(2)`) only take steps
    while depth <= 8 and steps < 48:
        steps += 1
        if isinstance(n, ast.Call):
            func = n.func
            q = ctx.qualname(func) or ""
            if q.startswith("numpy.") or q.startswith("np."):
                return CPU
            if q.endswith("DataLoader"):
                return CPU  # batches come out of a loader on the CPU (pinned or not)
            if q.startswith("torch.") and q.count(".") == 1 and q[6:] in _CPU_TYPES:
                return CPU
            if q.startswith("torch.") and q.count(".") == 1 and q[6:] in _FACTORIES:
                dev = keyword(n, "device")
                if dev is None:
                    return None if ctx.default_device_set else CPU
                return ACCELERATOR if is_accelerator_target(ctx, dev) else CPU
            if _reads_a_file(ctx, n):
                return CPU
            if isinstance(func, ast.Attribute) and not q.startswith("torch."):
                if func.attr in _TO_HOST or func.attr in TENSOR_METADATA:
                    return CPU  # `x.size(0)`: a Python number, on the host
                if func.attr == "cuda":
                    return ACCELERATOR
                if func.attr == "to":
                    target = move_target(n)
                    if _cpu_target(ctx, target):
                        return CPU
                    if target is not None and is_accelerator_target(ctx, target):
                        return ACCELERATOR
                if n.args and _computes_on_host_copies(ctx, n, depth):
                    return CPU
                if _own_method_returns_host_copies(ctx, func):
                    return CPU  # `self.predict(x)` whose every `return` gives a copy it made on the host
                n = func.value  # a tensor method: the result stays where its receiver is
                continue
            if q.startswith("torch.") and n.args:
                # a torch function: where its first tensor input is (`torch.pow(2, x)` is where x is)
                n = next((a for a in n.args if not isinstance(a, ast.Constant)), n.args[0])
                continue
            if isinstance(func, ast.Name) and ctx.kind(func) == MODULE:
                n = func  # calling a module: its output is where the module is
                continue
            if _next_batch(ctx, n):
                return CPU
            if isinstance(func, ast.Name) and func.id == "abs" and len(n.args) == 1 and q in ("", "abs"):
                n = n.args[0]  # `abs(t)` is `t.abs()`
                continue
            if isinstance(func, ast.Name) and q == func.id and func.id in _ITERATION_WRAPPERS and n.args:
                # `zip(reversed(boxes), coords)`: the items are where the sequences are, when all agree
                places = {where(ctx, a, depth + 1) for a in n.args}
                return places.pop() if len(places) == 1 else None
            return CPU if _host_helper_call(ctx, n, depth) else None
        if isinstance(n, ast.Attribute) and (n.attr in ("shape", "ndim") or plain_cpu_attribute(ctx, n)):
            return CPU
        if isinstance(n, ast.Attribute) and ctx.stack and _host_built_property(ctx, ctx.stack[0], n.attr):
            return CPU  # `traj.distances`, a property that joins a CPU-made tensor: a CPU result
        if isinstance(n, (ast.Attribute, ast.Subscript)):
            n = n.value
            continue
        if isinstance(n, ast.Compare):
            # `contain > 0.9`: the right side is often a threshold or a 0-dim tensor; but a
            # whole tensor there (`ranking == torch.arange(n).view(-1, 1)`) shares the left's
            # device, as in arithmetic
            others = [c for c in n.comparators if _whole_tensor(ctx, c)]
            if others:
                return _shared_place(ctx, [n.left, *others], depth)
            n = n.left
            continue
        if isinstance(n, ast.BinOp):
            # both operands sit on one device (mixing raises), so either one tells; except a
            # 0-dim CPU tensor (`torch.tensor(0.5)`), which mixes with tensors of any device
            return _shared_place(
                ctx, [side for side in (n.left, n.right) if not scalar_tensor(ctx, side)], depth
            )
        if isinstance(n, ast.IfExp):
            places = {where(ctx, side, depth + 1) for side in (n.body, n.orelse)}
            return ACCELERATOR if ACCELERATOR in places else CPU if places == {CPU} else None
        if isinstance(n, (ast.ListComp, ast.GeneratorExp)):
            n = n.elt
            continue
        if isinstance(n, ast.DictComp):
            n = n.value  # `{k: v.cpu() for k, v in sd.items()}`: where its values are
            continue
        if isinstance(n, (ast.List, ast.Tuple)) and n.elts:
            n = n.elts[0]
            continue
        if isinstance(n, ast.Dict) and n.values:
            # `{"boxes": out["boxes"].cpu(), "scores": out["scores"].cpu()}`: where its values all are
            places = {where(ctx, v, depth + 1) for v in n.values}
            return places.pop() if len(places) == 1 else None
        if isinstance(n, ast.Name):
            live = live_device_type(ctx, n.id)
            if live is not None:
                return live
            scope = ctx.frame.node
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                direct, moved = _numpy_roots(scope)
                if n.id in direct and n.id not in moved:
                    return CPU  # `torch.where(score > t)[0].numpy()` later: a GPU `score` would raise
                # `model(lens.to(self.device))` before the next binding: the caller's data, on the host
                line = read_line if read_line is not None else _line_within(scope, n)
                if line is not None and _moved_while_bound(ctx, scope, n.id, line):
                    return CPU
            if ctx.lookup(n.id) == LOADER:
                return CPU
            origin = ctx.origin(n)
            earlier = ctx.earlier_origin(n.id)
            if (
                origin is not None
                and earlier is not None
                and getattr(earlier, "lineno", 0) < getattr(n, "lineno", 0) < getattr(origin, "lineno", 0)
            ):
                # `m = torch.tensor(k)`, then `torch.log2(m)`, then `m = ... * v`: a read between
                # two bindings sees the earlier one
                origin = earlier
            if (
                isinstance(origin, ast.Call)
                and getattr(n, "lineno", 0) > (origin.end_lineno or origin.lineno)  # read after the move
                and _host_copy(ctx, origin, _TO_HOST)
            ):
                return CPU  # `keep = keep.cpu()`: moved to the host, wherever it was before
            if (
                isinstance(origin, ast.Call)
                and isinstance(origin.func, ast.Attribute)
                and origin.func.attr in ("cuda", "to")
                and moves_to_accelerator(ctx, origin)
            ):
                return ACCELERATOR  # `x = x.cuda()`: moved to the accelerator, wherever it was before
            if origin is not None and any(isinstance(x, ast.Name) and x.id == n.id for x in ast.walk(origin)):
                if _host_copy_through_updates(ctx, n):
                    return CPU  # `sim = sim.cpu()`, `sim = sim[1:-1]`, `sim = (sim - b) / s`: still the host copy
                # `x = x * scale`: where x was before is where it is now (`earlier`, above)
                if (
                    _self_derived(origin, n.id)
                    and (earlier is None or _self_derived(earlier, n.id))
                    and _host_argument(ctx, n)
                ):
                    return CPU  # `pred = pred.data; pred = pred.squeeze(0)` on a parameter from the host
                if earlier is None:
                    return _where_update(ctx, origin, n.id, depth)
                origin = earlier
            if origin is None and _left_on_host_by_its_loop(ctx, n.id, getattr(n, "lineno", None)):
                return CPU  # `for x, y in loader:` moves `x` and never `y`
            if origin is None:
                origin = ctx.loop_source(n.id)
            if origin is None and _unpacked_from_host_copies(ctx, n):
                return CPU
            if isinstance(origin, ast.List) and not origin.elts:
                return _where_appended(ctx, n.id, depth)  # `preds = []`, then `preds.append(p.cpu())`
            if origin is None or (isinstance(origin, ast.Constant) and type(origin.value) in (int, float)):
                accumulated = _where_accumulated(ctx, n.id, depth)
                if accumulated is not None or origin is not None:
                    return accumulated
                return CPU if _mixed_with_host_rows(ctx, n) or _host_argument(ctx, n) else None
            n = origin
            depth += 1
            continue
        return None
    return None


def _line_within(scope: ast.AST, node: ast.AST) -> int | None:
    """The line of `node` when it lies in the lines of `scope`, a name reached by following
    bindings; None for one from elsewhere."""
    line = getattr(node, "lineno", None)
    if line is None or not scope.lineno <= line <= (scope.end_lineno or 0):  # type: ignore[attr-defined]
        return None
    return line


def _shared_place(ctx: Context, operands: list[ast.AST], depth: int) -> str | None:
    """Where tensors that one operation mixes are: on one device (mixing raises), so any operand
    whose place is known tells."""
    places = {where(ctx, side, depth) for side in operands}
    return ACCELERATOR if ACCELERATOR in places else CPU if CPU in places else None


def _host_copy_through_updates(ctx: Context, name: ast.Name) -> bool:
    """`sim = sim.squeeze(0).cpu()`, then `sim = sim[1:-1, 1:-1]` and `sim = (sim - b) / (1 - b)`
    before the read: walking back over the updates of the name by itself (each keeps the
    device of what it updates), the first move met is a copy to the host."""
    scope = ctx.frame.node
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    line = getattr(name, "lineno", 0)
    binds = [
        a for a in assignments_by_name(scope).get(name.id, ()) if a.lineno < line and len(a.targets) == 1
    ]
    for a in sorted(binds, key=lambda a: a.lineno, reverse=True):
        value = a.value
        if isinstance(value, ast.Call) and _host_copy(ctx, value, _TO_HOST):
            return True
        if not any(isinstance(x, ast.Name) and x.id == name.id for x in ast.walk(value)):
            return False  # a fresh value: where it is, `where` follows
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in ("cuda", "to")
        ):
            return False
    return False


def _reads_a_file(ctx: Context, call: ast.Call) -> bool:
    """`read_xyz(path)`, `io.read_image(path)`, `pd.read_csv(path)`, safetensors'
    `load_file(path)`: a reader function, given no device, returns what it read in host
    memory."""
    name = terminal_name(call.func) or ""
    if (
        not (name.startswith("read_") or name == "load_file")
        or keyword(call, "device") is not None
        or has_kwargs_splat(call)
    ):
        return False
    return not (isinstance(call.func, ast.Attribute) and ctx.is_tensor(call.func.value))


def batches_stay_on_host(ctx: Context, loop: ast.AST, roots: set[str]) -> bool:
    """A loop over batches that moves nothing, in code whose other batch loops move their batches
    to a device (`X = X.to(device)`): the author moves batches where the model is on a GPU, so
    this loop feeds its unmoved batches to a model on the CPU, and what it computes stays there
    (a GPU model would raise on them)."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or ctx.in_module_method:
        return False  # a module's inputs arrive already placed
    if not _over_a_batch_source(loop) or not _derived_from_batches(loop, roots):
        return False
    tree = ctx.stack[0] if ctx.stack else None
    if ctx.wider_document:
        tree = parsed_document(ctx.document)  # a notebook: its other cells' loops and helpers too
    if tree is None or _may_move(tree, loop):
        return False
    return remember(tree, "batch_loops_move", lambda: _some_loop_moves_its_batches(tree))


def _over_a_batch_source(loop: ast.For | ast.AsyncFor) -> bool:
    """`for X, y in train_iter`, `for i, (x, y) in enumerate(tqdm(loader))`: batches unpacked
    from an iterable that is a plain name, not a model's parameters or a range."""
    it = unwrapped_iterable(loop.iter)
    if not isinstance(it, (ast.Name, ast.Attribute)):
        return False
    target = loop.target
    if (
        isinstance(loop.iter, ast.Call)
        and terminal_name(loop.iter.func) == "enumerate"
        and isinstance(target, ast.Tuple)
        and len(target.elts) == 2
    ):
        target = target.elts[1]  # `for i, (x, y) in enumerate(loader)`
    return isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) >= 2


def _derived_from_batches(loop: ast.For | ast.AsyncFor, roots: set[str]) -> bool:
    """Every name the read hangs from is a batch variable or computed from one in the loop."""
    derived = _batch_targets(loop)
    assigns = [n for n in ast.walk(loop) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))]
    changed = True
    while changed:
        changed = False
        for a in assigns:
            if a.value is None or not any(
                isinstance(n, ast.Name) and n.id in derived for n in ast.walk(a.value)
            ):
                continue
            targets = a.targets if isinstance(a, ast.Assign) else [a.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and n.id not in derived:
                        derived.add(n.id)
                        changed = True
    return bool(roots) and roots <= derived


def _left_on_host_by_its_loop(ctx: Context, name: str, line: int | None = None) -> bool:
    """`for x, y in loader:` whose body moves `x` to the accelerator (`x[k].to(device)`) and
    never `y`, nor hands `y` to a call that is given a device: the batches come out on the host
    (else `x` would need no move), and `y` stays there. The items an inner loop walks
    (`for p, m in zip(points, masks)`) belong to their batch; and a batch read at `line`, before
    the body moves it, is still the loader's host copy."""
    for info in ctx.loops:
        loop = info.node
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or not _over_a_batch_source(loop):
            continue
        items = _batch_items(loop)
        if name not in items:
            continue
        mine = {name} | {k for k, v in items.items() if v == name}  # the batch and its items
        moved = False
        for node in ast.walk(loop):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in ("to", "cuda"):
                roots = {r.id for r in ast.walk(f.value) if isinstance(r, ast.Name)}
                if roots & mine and (line is None or node.lineno < line):
                    return False
                target = move_target(node)
                if roots & items.keys() and (
                    f.attr == "cuda"
                    or (target is not None and (_device_like(target) or is_accelerator_target(ctx, target)))
                ):
                    moved = True  # to a device, whichever (a dtype cast moves nothing)
            elif (
                any(isinstance(a, ast.Name) and a.id in mine for a in node.args)
                and any(_places(sub) for sub in ast.walk(node) if sub is not node)
                and (line is None or node.lineno < line)
            ):
                return False  # `prepare(x, y, device)`: the helper may move it
        return moved
    return False


def _batch_items(loop: ast.For | ast.AsyncFor) -> dict[str, str]:
    """The batch variables of `loop`, each mapped to itself, and the names inner loops and
    comprehensions bind to their items (`for p, m in zip(points, masks)`: p -> points)."""
    items = {t: t for t in _batch_targets(loop)}
    walks: list[tuple[ast.AST, ast.AST]] = []
    for n in ast.walk(loop):
        if isinstance(n, (ast.For, ast.AsyncFor)) and n is not loop:
            walks.append((n.target, n.iter))
        elif isinstance(n, ast.comprehension):
            walks.append((n.target, n.iter))
    changed = True
    while changed:
        changed = False
        for target, it in walks:
            if isinstance(it, ast.Call) and terminal_name(it.func) == "enumerate" and it.args:
                it = it.args[0]
                if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                    target = target.elts[1]
            pairs: list[tuple[ast.AST, ast.AST]] = []
            if isinstance(it, ast.Name):
                pairs = [(target, it)]
            elif (
                isinstance(it, ast.Call)
                and terminal_name(it.func) == "zip"
                and isinstance(target, ast.Tuple)
                and len(target.elts) == len(it.args)
            ):
                pairs = list(zip(target.elts, it.args))
            for t, source in pairs:
                if isinstance(t, ast.Name) and isinstance(source, ast.Name) and source.id in items:
                    if t.id not in items:
                        items[t.id] = items[source.id]
                        changed = True
    return items


def _batch_targets(loop: ast.For | ast.AsyncFor) -> set[str]:
    return {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}


def _may_move(tree: ast.AST, loop: ast.AST) -> bool:
    """Something in the loop can place a tensor on a device: a move, a `device=` argument, a
    device-like name, or a call of a function of this code that does any of that."""
    movers = remember(tree, "functions_that_may_move", lambda: _functions_that_may_move(tree))
    for node in ast.walk(loop):
        if isinstance(node, ast.Call) and terminal_name(node.func) in movers:
            return True
        if _places(node):
            return True
    return False


def _places(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in ("cuda", "to", "to_device", "pin_memory", "set_device"):
            return True
    if isinstance(node, ast.keyword) and node.arg == "device":
        return True
    return isinstance(node, (ast.Name, ast.Attribute)) and _device_like(node)


def _functions_that_may_move(tree: ast.AST) -> frozenset[str]:
    return frozenset(
        f.name
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(_places(n) for n in ast.walk(f))
    )


def _some_loop_moves_its_batches(tree: ast.AST) -> bool:
    for loop in ast.walk(tree):
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        targets = _batch_targets(loop)
        for node in ast.walk(loop):
            if (
                _moved_name(node) in targets
                and (
                    node.func.attr == "cuda"  # type: ignore[attr-defined]
                    or any(_device_like(a) for a in node.args[:1])  # type: ignore[attr-defined]
                )
            ):
                return True
    return False


def _moved_name(node: ast.AST) -> str | None:
    """`x` for `x.to(...)` or `x.cuda()`: the plain name a call moves; None for anything else."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("to", "cuda")
        and isinstance(node.func.value, ast.Name)
    ):
        return node.func.value.id
    return None


def _cpu_target(ctx: Context, target: ast.AST | None) -> bool:
    """`"cpu"`, `torch.device("cpu")`, or a name bound to one (`loss_device =
    torch.device("cpu")`): a device argument that is the CPU."""
    if isinstance(target, ast.Name):
        target = ctx.origin(target) or target
    return target is not None and spelled_device_type(ctx, target) == "cpu"


def spelled_device_type(ctx: Context, value: ast.AST) -> str | None:
    """ "cpu" for `"cpu"` or `torch.device("cpu")`, "cuda" for `"cuda:0"`: a device spelled out
    (a device index alone, `0`, is not)."""
    if isinstance(value, ast.Call) and ctx.qualname(value.func) == "torch.device" and value.args:
        value = value.args[0]
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return device_type_of_literal(value)
    return None


def _host_copy(ctx: Context, call: ast.Call, methods: frozenset[str] = frozenset({"cpu"})) -> bool:
    """`x.cpu()` (or another of `methods`, called without arguments) or `x.to(<the CPU>)`."""
    if not isinstance(call.func, ast.Attribute):
        return False
    if call.func.attr in methods and not call.args:
        return True
    return call.func.attr == "to" and _cpu_target(ctx, move_target(call))


def _copied_to_host(ctx: Context, node: ast.AST) -> bool:
    """`embeds.view(n, m, -1).to(loss_device)` (a CPU device) or `x.cpu()`, or a name bound to
    one: a value this code copied to the host on purpose."""
    if isinstance(node, ast.Name):
        node = ctx.origin(node) or node
    return isinstance(node, ast.Call) and _host_copy(ctx, node)


def _computes_on_host_copies(ctx: Context, call: ast.Call, depth: int) -> bool:
    """`model.loss(embeds_loss)` where every tensor it is handed was copied to the CPU just
    before: the author moved the inputs there to compute this on the CPU (PyTorch ops need
    their inputs on one device), so its result is a CPU tensor too."""
    tensors = [a for a in call.args if not isinstance(a, ast.Constant)]
    return bool(tensors) and all(_copied_to_host(ctx, a) for a in tensors)


def _own_method_returns_host_copies(ctx: Context, func: ast.Attribute) -> bool:
    """`self.predict(x)` with a method of the current class (or a base in this source) whose
    every `return` gives a name it binds only to copies it makes on the host (`p = net(x).to("cpu")`,
    `p += net(x).to("cpu")`, `p /= n`), or such a copy itself: wherever the inputs are, the
    result is on the CPU."""
    if self_attr_name(func) is None or ctx.cls is None:
        return False
    method = next((m for m in ctx.class_methods() if m.name == func.attr), None)
    if method is None:
        return False
    returns = [r for r in own_nodes(method) if isinstance(r, ast.Return)]
    return bool(returns) and all(r.value is not None and _host_copy_in(ctx, method, r.value) for r in returns)


def _host_copy_in(ctx: Context, scope: ast.AST, value: ast.AST) -> bool:
    """`value`, returned by `scope`, is a copy `scope` made on the host, or a name whose every
    binding there is one (or `None` before it, or an in-place update by a host copy or a number)."""
    if isinstance(value, ast.Call):
        return _host_copy(ctx, value)
    if not isinstance(value, ast.Name):
        return False
    assigned = _plain_assignments(scope)
    updates = {id(a.target): a for a in own_nodes(scope) if isinstance(a, ast.AugAssign)}
    copies = 0
    for n in own_nodes(scope):
        if not (isinstance(n, ast.Name) and n.id == value.id and isinstance(n.ctx, ast.Store)):
            continue
        if id(n) in updates:
            update = updates[id(n)]
            by = update.value
            if not (
                (isinstance(by, ast.Call) and _host_copy(ctx, by))
                or (isinstance(update.op, (ast.Div, ast.Mult)) and constant_or_len(by))
            ):
                return False
            continue
        stmt = assigned.get(id(n))
        if stmt is None:
            return False  # a loop target, a `with`, an unpacking: not followed
        bound = stmt.value
        if isinstance(bound, ast.Call) and _host_copy(ctx, bound):
            copies += 1
        elif not (isinstance(bound, ast.Constant) and bound.value is None):
            return False
    return copies > 0


# tensor methods that return a tuple of tensors on the receiver's device
_SPLITTING = frozenset(
    {"max", "min", "sort", "topk", "kthvalue", "median", "mode", "chunk", "split", "unbind"}
)


def _unpacked_from_host_copies(ctx: Context, node: ast.Name) -> bool:
    """`loss, eer = model.loss(embeds_loss)` (the last unpacking of the name before the read)
    where the call computes on values copied to the CPU (`_computes_on_host_copies`),
    `species, coords, cell = read_xyz(path)`: what a reader returns, or `x, y =
    next(iter(loader))`: a batch."""
    last = ctx.last_unpacking(node)
    if last is not None and isinstance(last.value, ast.Name) and last.value.id != node.id:
        return where(ctx, last.value, 1) == CPU  # `x, y = data` where `data` is a batch of a loader
    if (
        last is not None
        and isinstance(last.value, ast.Call)
        and isinstance(last.value.func, ast.Attribute)
        and last.value.func.attr in _SPLITTING
        and not (ctx.qualname(last.value.func) or "").startswith("torch.")
    ):
        # `best, i = ious[0].max(dim=0)`: the parts are where the tensor was
        return where(ctx, last.value.func.value, 1) == CPU
    return (
        last is not None
        and isinstance(last.value, ast.Call)
        and (
            _computes_on_host_copies(ctx, last.value, 0)
            or _reads_a_file(ctx, last.value)
            or _next_batch(ctx, last.value)
        )
    )


def _next_batch(ctx: Context, call: ast.Call) -> bool:
    """`next(iter(loader))`: one batch of a DataLoader, which comes out on the host."""
    if not (isinstance(call.func, ast.Name) and call.func.id == "next" and call.args):
        return False
    if ctx.qualname(call.func) not in (None, "", "next"):
        return False  # a `next` of the code's own
    source = call.args[0]
    if isinstance(source, ast.Call) and terminal_name(source.func) == "iter" and source.args:
        source = source.args[0]
    return ctx.kind(source) == LOADER


def _where_appended(ctx: Context, name: str, depth: int) -> str | None:
    """`preds = []`, then `preds.append(pred)` of host copies in the scope: where every item
    appended is, when they all agree; None when nothing is appended."""
    scope = ctx.frame.node or (ctx.stack[0] if ctx.stack else None)
    if scope is None or depth > 6:
        return None
    items = [
        c.args[0]
        for c in own_nodes(scope)
        if isinstance(c, ast.Call)
        and isinstance(c.func, ast.Attribute)
        and c.func.attr == "append"
        and len(c.args) == 1
        and isinstance(c.func.value, ast.Name)
        and c.func.value.id == name
    ]
    bound = assignments_by_name(scope)
    places = set()
    for item in items:
        if isinstance(item, ast.Name):
            # `pred = {...}` just before `preds.append(pred)`: the name may be rebound elsewhere
            before = [a for a in bound.get(item.id, ()) if a.lineno < item.lineno]
            if before:
                item = max(before, key=lambda a: a.lineno).value
        places.add(where(ctx, item, depth + 1))
    return places.pop() if len(places) == 1 else None


def _where_accumulated(ctx: Context, name: str, depth: int) -> str | None:
    """`correct = 0` then `correct += pred.eq(y).cpu().sum()` in the loop: a Python number
    that becomes a tensor where what is added to it lives (a number added to a tensor takes the
    tensor's device); None when nothing is added, or the additions disagree."""
    scope = ctx.frame.node or (ctx.stack[0] if ctx.stack else None)
    if scope is None:
        return None
    places = {where(ctx, value, depth) for value in _augmented(scope).get(name, ())}
    return places.pop() if len(places) == 1 else None


@per_node
def _augmented(scope: ast.AST) -> dict[str, list[ast.expr]]:
    """What each plain name of a scope has added to it (`total += x`), indexed once per scope:
    `where` asks it for every accumulated name it meets."""
    out: dict[str, list[ast.expr]] = {}
    for n in ast.walk(scope):
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            out.setdefault(n.target.id, []).append(n.value)
    return out


# methods of a module class that could move plain tensor attributes along with the module
# overriding one of these lets a class move whatever it keeps, plain tensor attributes included
MOVES_ITSELF = frozenset({"_apply", "to", "cuda", "cpu"})


def plain_cpu_attribute(ctx: Context, node: ast.Attribute) -> bool:
    """`self.bins` in a method of a class of this source, where the source stores into `.bins`
    once, as `self.bins = ...` in a method of that class, from a tensor factory without a device
    (`torch.linspace(0, 1, n + 1)`, a slice or view of one): a plain tensor attribute, which
    `module.to(device)` / `.cuda()` does not move (only parameters and buffers go along), so it
    stays on the CPU. Not when the class defines its own `_apply`, `to` or `cuda`."""
    cls = ctx.cls
    if not (isinstance(node.value, ast.Name) and node.value.id == "self") or cls is None or not ctx.stack:
        return False
    methods = {s.name: s for s in cls.node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if MOVES_ITSELF & methods.keys():
        return False
    found = attribute_store(ctx.stack[0], cls.node, node.attr)
    return found is not None and _cpu_built(ctx, found[0], found[1], 0)


def _host_built_property(ctx: Context, tree: ast.AST, attr: str) -> bool:
    """`obj.<attr>` where the source defines `<attr>` once, as a property of one class, and
    stores into no attribute of that name, and every `return` of the property is built on the
    host: a tensor factory without a device (or a name bound once to one), or a `torch.cat` /
    `torch.stack` that joins one (joining tensors of two devices raises, so it runs on CPU
    tensors only)."""
    found = _class_members(tree).get(attr, [])
    if len(found) != 1 or attr in _attribute_stores(tree):
        return False
    prop = found[0]
    if not (
        isinstance(prop, _FuncDef)
        and any(terminal_name(d) in ("property", "cached_property") for d in prop.decorator_list)
    ):
        return False
    returns = [r for r in own_nodes(prop) if isinstance(r, ast.Return)]
    return bool(returns) and all(
        r.value is not None and _joins_host_built(ctx, prop, r.value) for r in returns
    )


def _joins_host_built(ctx: Context, scope: ast.AST, value: ast.AST) -> bool:
    if _cpu_built(ctx, value, scope, 0):
        return True
    if not (
        isinstance(value, ast.Call)
        and ctx.qualname(value.func) in ("torch.cat", "torch.stack", "torch.concat")
        and value.args
        and isinstance(value.args[0], (ast.Tuple, ast.List))
    ):
        return False
    return any(
        _cpu_built(ctx, part, scope, 0) and not scalar_tensor(ctx, part) for part in value.args[0].elts
    )


@per_node
def _class_members(tree: ast.AST) -> dict[str, list[ast.AST]]:
    """The methods and class-level assignments of every class in `tree`, by name."""
    out: dict[str, list[ast.AST]] = {}
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        for member in cls.body:
            if isinstance(member, _FuncDef):
                out.setdefault(member.name, []).append(member)
            elif isinstance(member, (ast.Assign, ast.AnnAssign)):
                targets = member.targets if isinstance(member, ast.Assign) else [member.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            out.setdefault(n.id, []).append(member)
    return out


def attribute_store(tree: ast.AST, cls: ast.ClassDef, attr: str) -> tuple[ast.AST, ast.AST] | None:
    """The value of the only store into an attribute named `attr` anywhere in `tree`, when it
    is a plain `self.<attr> = value` in a method of `cls`, and that method (to read the value's
    names in); None otherwise."""
    # `self.probs, self.alias = None, None` before the method that builds them: no value yet
    mine = _node_ids(cls)
    stores = [
        (t, st)
        for t, st in _attribute_stores(tree).get(attr, [])
        if not _stores_none(t, st)
        # `self.codes = ...` in another class's method stores into that class's objects
        and not (self_attr_name(t) is not None and id(st) not in mine)
    ]
    if len(stores) != 1:
        return None
    target, stmt = stores[0]
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.targets[0] is target):
        return None
    if not (isinstance(target.value, ast.Name) and target.value.id == "self"):
        return None
    method = next(
        (
            m
            for m in cls.body
            if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(x is stmt for x in ast.walk(m))
        ),
        None,
    )
    return (stmt.value, method) if method is not None else None


@per_node
def _node_ids(tree: ast.AST) -> frozenset[int]:
    return frozenset(id(n) for n in ast.walk(tree))


def _stores_none(target: ast.Attribute, stmt: ast.AST) -> bool:
    """`self.x = None` or `self.x, self.y = None, None`."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return False
    t, v = stmt.targets[0], stmt.value
    if t is target:
        return isinstance(v, ast.Constant) and v.value is None
    if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) and len(t.elts) == len(v.elts):
        return any(
            e is target and isinstance(x, ast.Constant) and x.value is None for e, x in zip(t.elts, v.elts)
        )
    return False


_MOVES = frozenset({"cpu", "to", "cuda", "numpy"})


@per_node
def _numpy_roots(scope: ast.AST) -> tuple[frozenset[str], frozenset[str]]:
    """Names that a `.numpy()` of the function reads straight, with no `.cpu()`/`.to()` in
    between (through tensor methods, indexing, comparisons, arithmetic and torch functions),
    and names the function moves anywhere (`x.cpu()`, `x.to(...)`, `x.cuda()`)."""
    direct: set[str] = set()
    moved: set[str] = set()
    for n in ast.walk(scope):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
            continue
        if n.func.attr in ("cpu", "to", "cuda"):
            moved.update(x.id for x in ast.walk(n.func.value) if isinstance(x, ast.Name))
        if n.func.attr != "numpy" or n.args:
            continue
        todo: list[ast.AST] = [n.func.value]
        while todo:
            e = todo.pop()
            if isinstance(e, ast.Name):
                direct.add(e.id)
            elif isinstance(e, (ast.Attribute, ast.Subscript)):
                todo.append(e.value)
            elif isinstance(e, ast.Compare):
                todo.extend([e.left, *e.comparators])
            elif isinstance(e, ast.BinOp):
                todo.extend([e.left, e.right])
            elif isinstance(e, ast.Call):
                f = e.func
                if isinstance(f, ast.Attribute) and f.attr in _MOVES:
                    continue
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "torch":
                    todo.extend(e.args)
                elif isinstance(f, ast.Attribute):
                    todo.append(f.value)
    return frozenset(direct), frozenset(moved)


def _moved_while_bound(ctx: Context, scope: ast.AST, name: str, line: int) -> bool:
    """The value `name` holds at `line` is moved to the accelerator by the function while the
    name still holds it: later (`labels = labels.to(dev)` after the read), or earlier as a copy
    handed on (`model(batch.to(self.device))`, `cur = x.clone()` then `cur.cuda()`). The
    author moves it because it is on the host, so it is there at the read."""
    if ctx.lookup(name) == MODULE:
        return False  # `model.to(dev)` moves the module itself
    moves, stores = _moves_and_stores(scope)
    own = stores.get(name, ())
    start = max((s for s in own if s < line), default=0)  # the binding the read sees
    end = min((s for s in own if s >= line), default=sys.maxsize)
    rebound = _rebinding_moves(scope)
    alone = _moves_on_their_own(scope)  # `net.to(dev)` as a statement: a module, moved in place
    calls = [c for c in moves.get(name, ()) if id(c) not in alone and moves_to_accelerator(ctx, c)]
    calls += [
        c for copy in _copies_of(scope, name) for c in moves.get(copy, ()) if moves_to_accelerator(ctx, c)
    ]
    # `x = x.to(dev)` on several lines is the store's statement: it moves the binding before it
    if not any(start < rebound.get(id(c), c.lineno) <= end for c in calls):
        return False
    for loop in ast.walk(scope):
        if (
            isinstance(loop, (ast.For, ast.AsyncFor, ast.While))
            and start < loop.lineno <= line <= (loop.end_lineno or 0)
            and any(line <= s <= (loop.end_lineno or 0) for s in own)
        ):
            return False  # bound before the loop and again later in it: the read may see that
    return True


@per_node
def _moves_on_their_own(scope: ast.AST) -> frozenset[int]:
    return frozenset(id(e.value) for e in ast.walk(scope) if isinstance(e, ast.Expr) and _moved_name(e.value))


@per_node
def _rebinding_moves(scope: ast.AST) -> dict[int, int]:
    """`x = x.to(dev)`: the move calls whose result is stored back into the name they move, with
    the line of the store."""
    out: dict[int, int] = {}
    for a in ast.walk(scope):
        if isinstance(a, ast.Assign) and (moved := _moved_name(a.value)) is not None:
            if any(isinstance(t, ast.Name) and t.id == moved for t in a.targets):
                out[id(a.value)] = a.lineno
    return out


def _copies_of(scope: ast.AST, name: str) -> list[str]:
    """Names every binding of which in `scope`, up to their first move, is a `.clone()` of
    `name` or of a plain alias of it (`org = x`, `cur = x.clone()`, `cur = org.clone()`, then
    `cur = cur.cuda()`): moving such a copy to the accelerator says the original is on the host."""
    aliases, clones = _aliases_and_clones(scope)
    mine = {name} | {alias for alias, source in aliases.items() if source == name}
    return [copy for copy, sources in clones.items() if sources <= mine]


@per_node
def _aliases_and_clones(scope: ast.AST) -> tuple[dict[str, str], dict[str, frozenset[str]]]:
    """Names bound only as plain aliases (`org = x`: `{"org": "x"}`), and names bound before
    their first move only as `.clone()`s of names (`cur = x.clone()`: `{"cur": {"x"}}`)."""
    moves, _ = _moves_and_stores(scope)
    aliases: dict[str, str] = {}
    clones: dict[str, frozenset[str]] = {}
    for bound, assigns in assignments_by_name(scope).items():
        sources = {a.value.id if isinstance(a.value, ast.Name) else None for a in assigns}
        if len(sources) == 1 and None not in sources:
            aliases[bound] = sources.pop()  # type: ignore[assignment]
            continue
        if bound not in moves:
            continue
        first = min(c.lineno for c in moves[bound])
        held = [a.value for a in assigns if a.lineno < first]
        cloned = [
            v.func.value.id
            for v in held
            if isinstance(v, ast.Call)
            and isinstance(v.func, ast.Attribute)
            and v.func.attr == "clone"
            and isinstance(v.func.value, ast.Name)
        ]
        if held and len(cloned) == len(held):
            clones[bound] = frozenset(cloned)
    return aliases, clones


@per_node
def _moves_and_stores(scope: ast.AST) -> tuple[dict[str, list[ast.Call]], dict[str, list[int]]]:
    """`name.to(...)`/`name.cuda()` calls, and the lines that bind each name, in `scope`."""
    moves: dict[str, list[ast.Call]] = {}
    stores: dict[str, list[int]] = {}
    for n in ast.walk(scope):
        if (moved := _moved_name(n)) is not None:
            moves.setdefault(moved, []).append(n)  # type: ignore[arg-type]
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            stores.setdefault(n.id, []).append(n.lineno)
    return moves, stores


@per_node
def _attribute_stores(tree: ast.AST) -> dict[str, list[tuple[ast.Attribute, ast.AST]]]:
    """Every store into an attribute in `tree`, by attribute name: the target and its statement
    (`setattr` and `del` count as stores of unknown value)."""
    out: dict[str, list[tuple[ast.Attribute, ast.AST]]] = {}
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.Call) and isinstance(stmt.func, ast.Name) and stmt.func.id == "setattr":
            name = stmt.args[1] if len(stmt.args) > 1 else None
            key = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else "*"
            # a stand-in target on no object: what `setattr` sets is unknown
            stand_in = ast.Attribute(
                value=ast.Name(id="<setattr>", ctx=ast.Load()), attr=key, ctx=ast.Store()
            )
            out.setdefault(key, []).append((stand_in, stmt))
            continue
        if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete, ast.For, ast.With)):
            continue
        targets = (
            stmt.targets
            if isinstance(stmt, (ast.Assign, ast.Delete))
            else [item.optional_vars for item in stmt.items if item.optional_vars is not None]
            if isinstance(stmt, ast.With)
            else [stmt.target]
        )
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load):
                    out.setdefault(n.attr, []).append((n, stmt))
    if "*" in out:  # `setattr(obj, name, value)` with a computed name: any attribute
        return {k: v + out["*"] for k, v in out.items()}
    return out


def _cpu_built(ctx: Context, node: ast.AST, scope: ast.AST, depth: int) -> bool:
    """`torch.linspace(0, 1, n)` (a factory without a device), a slice, view or `.cpu()` of one,
    or a name of `scope` bound once to one."""
    if depth > 4:
        return False
    if isinstance(node, ast.Name):
        bound = sole_bindings(scope).get(node.id)
        return bound is not None and bound[1] is None and _cpu_built(ctx, bound[0], scope, depth + 1)
    if isinstance(node, ast.Subscript):
        return _cpu_built(ctx, node.value, scope, depth + 1)
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "cpu" and not node.args:
        return True
    if isinstance(func, ast.Attribute) and func.attr in _SAME_DEVICE:
        return _cpu_built(ctx, func.value, scope, depth + 1)
    q = ctx.qualname(func) or ""
    if not (q.startswith("torch.") and q.count(".") == 1 and q[6:] in _FACTORIES):
        return False
    if q[6:] in ("tensor", "as_tensor", "from_numpy", "Tensor"):  # a copy of a tensor keeps its device
        if not (node.args and isinstance(node.args[0], (ast.List, ast.Tuple, ast.Constant))):
            return False
    return keyword(node, "device") is None and not ctx.default_device_set


_SCALAR_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor", "torch.scalar_tensor"})


def _whole_tensor(ctx: Context, node: ast.AST) -> bool:
    """A tensor that is not 0-dim for all the code shows: built by a call, or a name bound to one
    (not a loop variable, nor an element `t[i]`, which may be 0-dim and mix with any device)."""
    if ctx.kind(node) not in (TENSOR, PARAMETER) or scalar_tensor(ctx, node):
        return False
    if isinstance(node, ast.Name):
        node = ctx.origin(node)  # type: ignore[assignment]
    return isinstance(node, ast.Call)


def scalar_tensor(ctx: Context, node: ast.AST, depth: int = 0) -> bool:
    """`torch.tensor(0.5)` (or a name bound to one): a 0-dim tensor built from a number, which
    an operation accepts next to a tensor of any device."""
    if isinstance(node, ast.Name) and depth < 2:
        origin = ctx.origin(node)
        return origin is not None and scalar_tensor(ctx, origin, depth + 1)
    if not (
        isinstance(node, ast.Call)
        and (ctx.qualname(node.func) or "") in _SCALAR_FACTORIES
        and bool(node.args)
    ):
        return False
    arg = node.args[0]
    if isinstance(arg, (ast.Constant, ast.UnaryOp)):
        return True
    if isinstance(arg, ast.BinOp):  # `torch.tensor(cfg.n_embd**0.5)`: arithmetic on a number
        parts = (arg.left, arg.right)
        return not any(ctx.is_tensor(p) for p in parts) and any(
            isinstance(p, ast.Constant)
            and isinstance(p.value, (int, float))
            and not isinstance(p.value, bool)
            for p in parts
        )
    return isinstance(arg, ast.Name) and ctx.kind(arg) == NUMBER  # `torch.tensor(y_th)`, y_th=10.0


# ---- a tensor that only the CPU can hold --------------------------------------------------------
#
# Operations on tensors of two devices raise ("Expected all tensors to be on the same device"),
# with one exception: a 0-dim CPU tensor mixes with tensors of any device. So a tensor that an
# operation combines with a CPU tensor of one dimension or more is on the CPU, wherever in the
# function that operation stands, as long as the code runs at all.

# functions that combine their tensor arguments elementwise (or join them): all on one device
_MIXING_FUNCS = frozenset(
    {"max", "min", "maximum", "minimum", "add", "sub", "mul", "div", "cat", "stack", "matmul", "mm", "bmm"}
    | {"eq", "ne", "lt", "le", "gt", "ge"}
)
# torch functions whose result is where their first input is
_HOST_KEEPING = frozenset(
    {"cumsum", "cumprod", "cat", "stack", "sort", "argsort", "flip", "clamp", "abs", "exp", "log"}
)
# tensor methods whose result is on the receiver's device
_SAME_DEVICE = frozenset(
    {"unsqueeze", "squeeze", "view", "view_as", "reshape", "float", "long", "int", "double", "half"}
    | {"bool", "clone", "detach", "contiguous", "t", "permute", "transpose", "flatten", "expand"}
)
# methods that keep a tensor's dimensions (or add one)
_KEEPS_DIMS = _SAME_DEVICE - {"squeeze", "view", "view_as", "reshape"}
_MIXING_COMPARE = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_DEVICE_ATTRS = frozenset({"device", "is_cuda", "is_mps", "is_xpu", "get_device"})
_MAX_HOST_DEPTH = 4


@per_node
def _looks_at_devices(func: ast.AST) -> bool:
    """The function tests or names a device (`x.is_cuda`, `x.device`, a `device` argument,
    "cuda"): its tensors may be on either, depending on the branch."""
    if _mentions_accelerator(func):
        return True
    for n in ast.walk(func):
        if isinstance(n, ast.Attribute) and n.attr in _DEVICE_ATTRS:
            return True
        if (isinstance(n, ast.Name) and _device_name(n.id)) or (
            isinstance(n, ast.arg) and _device_name(n.arg)
        ):
            return True
        if isinstance(n, ast.keyword) and n.arg in ("device", "map_location"):
            return True
    return False


Bindings = dict[str, tuple[ast.AST, int | None]]  # `nodes.sole_bindings` of one function


def _host_rows(ctx: Context, node: ast.AST, bound: Bindings, depth: int = 0) -> bool:
    """A CPU tensor of one dimension or more: `torch.FloatTensor([l, t, r, b])` or
    `torch.tensor([...])` built from a list without a device, a slice, a cast or an
    `unsqueeze` of one, or a name whose only binding in the function is one (never moved)."""
    if depth > _MAX_HOST_DEPTH:
        return False
    if isinstance(node, ast.Name):
        binding = bound.get(node.id)
        return binding is not None and binding[1] is None and _host_rows(ctx, binding[0], bound, depth + 1)
    if isinstance(node, ast.Subscript):
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        keeps = all(
            isinstance(p, ast.Slice) or (isinstance(p, ast.Constant) and p.value in (None, ...))
            for p in parts
        )  # `crop[:2]` keeps its dimension, `crop[0]` would not
        return keeps and _host_rows(ctx, node.value, bound, depth + 1)
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr in _KEEPS_DIMS:
        return _host_rows(ctx, f.value, bound, depth + 1)
    q = ctx.qualname(f) or ""
    if not (q.startswith("torch.") and q.count(".") == 1) or not node.args:
        return False
    if q[6:] not in _CPU_TYPES and (
        q[6:] not in ("tensor", "as_tensor")
        or ctx.default_device_set
        or keyword(node, "device") is not None
        or has_kwargs_splat(node)
    ):
        return False
    return isinstance(node.args[0], (ast.List, ast.Tuple))


def _derived_from(node: ast.AST, name: str, bound: Bindings, depth: int = 0) -> bool:
    """`boxes`, `boxes[keep, :]`, `new_boxes[:, :2]` with `new_boxes = boxes[keep]`: a value on
    the device of `name`, or computed from it (a result is on the device of its accelerator
    operand, so a result on the CPU means `name` is there too)."""
    if depth > _MAX_HOST_DEPTH:
        return False
    if isinstance(node, ast.Name):
        if node.id == name:
            return True
        binding = bound.get(node.id)
        return (
            binding is not None and binding[1] is None and _derived_from(binding[0], name, bound, depth + 1)
        )
    if isinstance(node, ast.Subscript):
        return _derived_from(node.value, name, bound, depth + 1)
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT", "data"):
        return _derived_from(node.value, name, bound, depth + 1)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SAME_DEVICE:
        return _derived_from(node.func.value, name, bound, depth + 1)
    if isinstance(node, ast.BinOp):
        return any(_derived_from(side, name, bound, depth + 1) for side in (node.left, node.right))
    return False


def _operand_pairs(ctx: Context, node: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """The pairs of tensors an operation requires on one device: `a + b`, `a < b`, `a -= b`,
    `torch.max(a, b)`, `torch.cat([a, b])`."""
    if isinstance(node, ast.BinOp):
        return [(node.left, node.right)]
    if isinstance(node, ast.AugAssign):
        return [(node.target, node.value)]
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], _MIXING_COMPARE):
        return [(node.left, node.comparators[0])]
    if isinstance(node, ast.Call) and node.args:
        q = ctx.qualname(node.func) or ""
        if not (q.startswith("torch.") and q.count(".") == 1 and q[6:] in _MIXING_FUNCS):
            return []
        items = node.args[0].elts if isinstance(node.args[0], (ast.List, ast.Tuple)) else node.args[:2]
        return [(a, b) for i, a in enumerate(items) for b in items[i + 1 :]]
    return []


def _mixed_with_host_rows(ctx: Context, node: ast.Name) -> bool:
    """A parameter the function never rebinds, which one of its operations combines (itself or
    a value computed from it) with a CPU tensor of one dimension or more (`torch.max(boxes[:,
    :2], crop[:2])`, `crop = torch.FloatTensor([...])`): were it on a GPU, that operation would
    raise. A CPU helper (data augmentation called from a Dataset) says so only this way. Not
    for a function that looks at devices (`if x.is_cuda:`), where a branch may tell otherwise,
    nor for operations under a `try` that may catch the error."""
    func = ctx.frame.node
    name = node.id
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or name not in parameters(func):
        return False
    if not (func.lineno <= getattr(node, "lineno", 0) <= (func.end_lineno or 0)):
        return False  # a name read in another scope's expression
    nodes = own_nodes(func)
    bound: Bindings = {}
    if not any(isinstance(n, ast.Call) and _host_rows(ctx, n, bound) for n in nodes):
        return False  # no CPU tensor of its own to tell (most functions)
    if any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for n in nodes):
        return False
    if _looks_at_devices(func):
        return False
    bound = sole_bindings(func)
    guarded = {
        id(sub) for t in nodes if isinstance(t, ast.Try) and t.handlers for s in t.body for sub in ast.walk(s)
    }
    for op in nodes:
        if id(op) in guarded:
            continue
        for a, b in _operand_pairs(ctx, op):
            if (_derived_from(a, name, bound) and _host_rows(ctx, b, bound)) or (
                _derived_from(b, name, bound) and _host_rows(ctx, a, bound)
            ):
                return True
    return False


# builtins that cannot fetch an object from elsewhere
_PLAIN_BUILTINS = frozenset(
    {"len", "range", "min", "max", "abs", "int", "float", "bool", "round", "sum", "zip", "enumerate"}
    | {"list", "tuple", "dict", "set", "sorted", "reversed", "isinstance", "print", "any", "all", "str"}
)
# modules a helper may call without leaving the host (moves are ruled out by name and keyword)
_PLAIN_MODULES = frozenset({"torch", "math", "random", "numpy", "itertools", "functools", "operator"})
_MOVES = frozenset({"to", "cuda", "type", "load", "set_default_device", "set_default_tensor_type"})


def _host_helper_call(ctx: Context, call: ast.Call, depth: int) -> bool:
    """`find_overlap(crop.unsqueeze(0), boxes)` where every argument is on the CPU (or a
    constant) and the function, of this source, stays on the host: its result is on the CPU
    too."""
    if not isinstance(call.func, ast.Name) or not (call.args or call.keywords):
        return False
    func = ctx.origin(call.func)
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if any(isinstance(a, ast.Starred) for a in call.args) or has_kwargs_splat(call):
        return False
    if not _stays_on_host(ctx, func, set()):
        return False
    args = [a for a in [*call.args, *(k.value for k in call.keywords)] if not isinstance(a, ast.Constant)]
    return bool(args) and all(where(ctx, a, depth) == CPU for a in args)


def _stays_on_host(ctx: Context, func: ast.FunctionDef | ast.AsyncFunctionDef, seen: set[str]) -> bool:
    """A function whose only data are its arguments: it reads no global other than plain
    modules (`torch`, `math`) and functions of this source that stay on the host too, moves
    nothing (`.to`, `.cuda`, `device=`, `torch.load`), looks at no device, and has no
    decorator that could. Its tensors are then its arguments', or new ones on the CPU."""
    if func.name in seen:
        return True  # a recursive call: decided by the check already under way
    if len(seen) > _MAX_HOST_DEPTH or func.decorator_list:
        return False
    seen.add(func.name)
    defaults = [*func.args.defaults, *(d for d in func.args.kw_defaults if d is not None)]
    if not all(isinstance(d, ast.Constant) for d in defaults) or _looks_at_devices(func):
        return False
    if ctx.default_device_set:
        return False  # new tensors may not be on the CPU
    nodes = own_nodes(func)
    local = parameters(func) | {
        n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    for n in nodes:
        if isinstance(
            n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Global, ast.Nonlocal)
        ):
            return False
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _MOVES:
            return False
        if not isinstance(n, ast.Name) or not isinstance(n.ctx, ast.Load) or n.id in local:
            continue
        if n.id in _PLAIN_BUILTINS and not ctx.defined(n.id):
            continue
        imported = ctx.imports.get(n.id)
        if imported is not None:
            if imported.split(".", 1)[0] not in _PLAIN_MODULES or imported.split(".")[-1] in _MOVES:
                return False
            continue
        other = ctx.frames[0].values.get(n.id)
        if not isinstance(other, (ast.FunctionDef, ast.AsyncFunctionDef)) or not _stays_on_host(
            ctx, other, seen
        ):
            return False
    return True


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
    for test, _, other, in_else in enclosing_branches([*ctx.stack, node]):
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            # `x.numpy() if not on_gpu else x.cpu().numpy()`: the branches trade places
            test, in_else = test.operand, not in_else
        if in_else and (_asks_for_accelerator(test) or any(_moves_to_host(b) for b in other)):
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


# ---- an argument every caller passes from the host ----------------------------------------------
#
# `lengths = lengths.cpu().int(); out = self.get_seq_lens(lengths); self.conv(x, out)`: when every
# call of a module's `forward` (or of a function) in this source passes a value the source copied
# to the host, the parameter holds a CPU tensor, whatever the function does with other tensors.

_FuncDef = (ast.FunctionDef, ast.AsyncFunctionDef)
_MAX_CALLERS = 3


def _host_argument(ctx: Context, node: ast.Name) -> bool:
    """`lengths` in `MaskConv.forward(self, x, lengths)`, a parameter the function never rebinds,
    where each call of it in this source (at least one; the module built once as `self.conv =
    MaskConv(...)` and called as `self.conv(x, out)`, or a function called by name) passes a
    value copied to the host: `.cpu()`-ed, or computed from one by tensor methods, arithmetic
    or a method of this source that returns such a value."""
    func = ctx.frame.node
    if not isinstance(func, _FuncDef) or not ctx.stack:
        return False
    if not (func.lineno <= getattr(node, "lineno", 0) <= (func.end_lineno or 0)):
        return False
    return _param_from_host(ctx, ctx.stack[0], func, node.id, 0)


def _self_derived(node: ast.AST, name: str) -> bool:
    """`pred.data`, `pred.squeeze(0)`, `pred[0]`: a view or method result of `name` itself that
    stays where `name` is (no `.to(...)`, `.cuda()`, no other operand)."""
    while True:
        if isinstance(node, ast.Name):
            return node.id == name
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr not in _MOVES
            and not any(isinstance(x, ast.Name) and x.id == name for a in node.args for x in ast.walk(a))
        ):
            node = node.func.value
        else:
            return False


_MOVES = frozenset({"to", "cuda", "cpu", "type", "new", "pin_memory"})


def _param_from_host(ctx: Context, tree: ast.AST, func: ast.AST, name: str, depth: int) -> bool:
    if depth > _MAX_CALLERS or not isinstance(func, _FuncDef):
        return False
    parents = parents_of(tree)
    for n in own_nodes(func):
        if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load):
            stmt = parents.get(id(n))
            if not (isinstance(stmt, ast.Assign) and stmt.targets == [n] and _self_derived(stmt.value, name)):
                return False  # rebound to something else than a view of itself
    positional = [a.arg for a in [*func.args.posonlyargs, *func.args.args]]
    if name not in positional:
        return False
    sites = _call_sites(ctx, tree, func)
    if not sites:
        return False
    index = positional.index(name) - (1 if _enclosing(parents, func, ast.ClassDef) is not None else 0)
    for call in sites:
        if any(isinstance(a, ast.Starred) for a in call.args) or has_kwargs_splat(call):
            return False
        arg = call.args[index] if 0 <= index < len(call.args) else keyword(call, name)
        caller = _enclosing(parents, call, _FuncDef)
        if arg is None or caller is None or not _from_host(ctx, tree, arg, caller, {}, set(), depth + 1):
            return False
    return True


def _enclosing(parents: dict[int, ast.AST], node: ast.AST, kind: Any) -> Any:
    """The nearest enclosing node of `kind` (stopping at another function or class)."""
    up = parents.get(id(node))
    while up is not None:
        if isinstance(up, kind):
            return up
        if isinstance(up, (*_FuncDef, ast.ClassDef, ast.Lambda)):
            return None
        up = parents.get(id(up))
    return None


def _call_sites(ctx: Context, tree: ast.AST, func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Call]:
    """Every call of `func` in `tree`, when they can all be seen: a module-level function whose
    name is only ever called, or the `forward` of a class whose instances are only built into a
    name or `self.<attr>` and then only called (or asked for another method); empty otherwise.
    Worked out once per function: each read of a parameter asks, and each answer walks the
    whole tree."""
    return remember(func, "call_sites", lambda: _find_call_sites(ctx, tree, func))


def _find_call_sites(
    ctx: Context, tree: ast.AST, func: ast.FunctionDef | ast.AsyncFunctionDef
) -> list[ast.Call]:
    parents = parents_of(tree)
    cls = _enclosing(parents, func, ast.ClassDef)
    if cls is None:
        outer = _enclosing(parents, func, _FuncDef)
        if outer is not None and any(s is func for s in outer.body):
            # a helper defined in a function's body: it is called there, or handed out
            binds = [
                n
                for n in own_nodes(outer)
                if (isinstance(n, ast.Name) and n.id == func.name and not isinstance(n.ctx, ast.Load))
                or (isinstance(n, _FuncDef) and n.name == func.name)
            ]
            if len(binds) != 1:
                return []
            return _only_called(outer, parents, lambda n: isinstance(n, ast.Name) and n.id == func.name) or []
        if not any(s is func for s in getattr(tree, "body", [])):
            return []
        return _only_called(tree, parents, lambda n: isinstance(n, ast.Name) and n.id == func.name)
    if func.name != "forward" or not any(s is cls for s in getattr(tree, "body", [])):
        return []
    holders: list[ast.AST] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == cls.name for b in n.bases):
            return []  # a subclass inherits `forward`: its calls would count too
        if not (isinstance(n, ast.Name) and n.id == cls.name and isinstance(n.ctx, ast.Load)):
            continue
        call, stmt = parents.get(id(n)), None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "super":
            continue  # `super(MaskConv, self).__init__()`
        if isinstance(call, ast.Call) and call.func is n:
            stmt = parents.get(id(call))
        if not (isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1):
            return []  # the class passed around, or an instance not kept under one name
        holders.append(stmt.targets[0])
    sites: list[ast.Call] = []
    for target in holders:
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            found = _attribute_calls(ctx, tree, parents, target)
        elif isinstance(target, ast.Name):
            scope = _enclosing(parents, target, _FuncDef) or tree
            if (
                sum(
                    isinstance(n, ast.Name) and n.id == target.id and not isinstance(n.ctx, ast.Load)
                    for n in own_nodes(scope)
                )
                != 1
            ):
                return []
            found = _only_called(scope, parents, lambda n, a=target.id: isinstance(n, ast.Name) and n.id == a)
        else:
            return []
        if found is None:
            return []
        sites.extend(found)
    return sites


def _own_stores(cls: ast.ClassDef, attr: str) -> int:
    """How many times the methods of `cls` store into `self.<attr>`."""
    return sum(
        isinstance(n, ast.Attribute)
        and n.attr == attr
        and not isinstance(n.ctx, ast.Load)
        and isinstance(n.value, ast.Name)
        and n.value.id == "self"
        for n in ast.walk(cls)
    )


def _attribute_calls(
    ctx: Context, tree: ast.AST, parents: dict[int, ast.AST], target: ast.Attribute
) -> list[ast.Call] | None:
    """The calls of `self.<attr>`, stored once in its class as the instance: the reads of
    `.<attr>` anywhere, except `self.<attr>` in another class that stores its own and a
    module path (`nn.modules.conv.Conv2d`)."""
    attr = target.attr
    holder = _enclosing(parents, _enclosing(parents, target, _FuncDef) or target, ast.ClassDef)
    if holder is None or _own_stores(holder, attr) != 1:
        return None

    def matches(n: ast.AST) -> bool:
        if not (isinstance(n, ast.Attribute) and n.attr == attr):
            return False
        root = n.value
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in ctx.imports:
            return False
        if isinstance(n.value, ast.Name) and n.value.id == "self":
            method = _enclosing(parents, n, _FuncDef)
            cls = _enclosing(parents, method, ast.ClassDef) if method is not None else None
            if cls is not None and cls is not holder and _own_stores(cls, attr):
                return False  # another class's own attribute of that name
        return True

    return _only_called(tree, parents, matches)


def _only_called(scope: ast.AST, parents: dict[int, ast.AST], matches: Any) -> list[ast.Call] | None:
    """The calls of the reads in `scope` that `matches` picks, when each such read is called
    (`f(x)`, `self.conv(x)`) or only asked for a method other than a call (`self.conv.modules()`);
    None when one is passed anywhere else, where it could be called unseen."""
    calls: list[ast.Call] = []
    for n in ast.walk(scope):
        if not matches(n) or not isinstance(getattr(n, "ctx", None), ast.Load):
            continue
        up = parents.get(id(n))
        if isinstance(up, ast.Call) and up.func is n:
            calls.append(up)
        elif not (isinstance(up, ast.Attribute) and up.attr not in ("forward", "__call__", "_call_impl")):
            return None
        elif not (isinstance(parents.get(id(up)), ast.Call) and parents[id(up)].func is up):
            return None
    return calls


def _from_host(
    ctx: Context,
    tree: ast.AST,
    node: ast.AST,
    scope: ast.AST,
    env: dict[str, bool],
    seen: set[str],
    depth: int,
) -> bool:
    """`node`, read in function `scope`, is a tensor the source copied to the host: `x.cpu()`
    (or `.numpy()`), a same-device method or slice of one, arithmetic with one, a name whose
    every binding in `scope` is one, or what a method of this source returns from such
    arguments. `env`: parameters of `scope` known to be such values; `seen`: names being
    decided (a name updated from itself, `n = (n + 2) // 2`, is what its other bindings are)."""
    if depth > 8:
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        f = node.func
        if f.attr in ("cpu", "numpy") and not node.args:
            return True
        q = ctx.qualname(f) or ""
        if q.startswith("torch.") and q.count(".") == 1 and node.args:
            if q[6:] in _FACTORIES or q[6:] in _CPU_TYPES:
                # `torch.tensor([...])` without `device=`: built on the host
                return keyword(node, "device") is None and not ctx.default_device_set
            if q[6:] in _HOST_KEEPING:
                # `torch.cumsum(tp, dim=0)`: where its input is
                return _from_host(ctx, tree, node.args[0], scope, env, seen, depth)
        if f.attr in _SAME_DEVICE:
            return _from_host(ctx, tree, f.value, scope, env, seen, depth)
        return _method_returns_host(ctx, tree, node, scope, env, seen, depth)
    if isinstance(node, ast.Subscript) or (isinstance(node, ast.Attribute) and node.attr in ("data", "T")):
        return _from_host(ctx, tree, node.value, scope, env, seen, depth)
    if isinstance(node, ast.BinOp):
        # a 1-dim or larger CPU operand keeps the result on the CPU (mixing devices raises)
        return any(_from_host(ctx, tree, s, scope, env, seen, depth) for s in (node.left, node.right))
    if not isinstance(node, ast.Name):
        return False
    if node.id in seen:
        return True
    values = _bindings_before(scope, node)
    if values is None:
        return env.get(node.id, False) or _param_from_host(ctx, tree, scope, node.id, depth)
    # the first value is what the name's earlier value became (`lengths = lengths.cpu()`); the
    # later ones may update it from itself, which is decided by the others
    inner = seen | {node.id}
    return bool(values) and all(
        _from_host(ctx, tree, v, scope, env, seen if i == 0 else inner, depth + 1)
        for i, v in enumerate(values)
    )


@per_node
def _plain_assignments(scope: ast.AST) -> dict[int, ast.Assign]:
    """`id(target)` -> the `target = value` statement, for the targets of the scope's own
    assignments."""
    return {id(t): stmt for stmt in own_nodes(scope) if isinstance(stmt, ast.Assign) for t in stmt.targets}


def _bindings_before(scope: ast.AST, node: ast.Name) -> list[ast.AST] | None:
    """The values `node` may hold where it is read: every plain assignment of it in `scope` from
    the last one before the read in a block around it on (the function body, or the loop body
    where both sit); None when no such assignment comes first (a parameter's own value may reach
    the read); empty when it is bound in another way too (a loop target, `+=`, a `with`), which
    this does not follow."""
    first = _last_assignment_before(getattr(scope, "body", []), node.id, getattr(node, "lineno", 0))
    if first is None:
        return None
    assigned = _plain_assignments(scope)
    values: list[ast.AST] = []
    for n in own_nodes(scope):
        if isinstance(n, ast.Name) and n.id == node.id and not isinstance(n.ctx, ast.Load):
            stmt = assigned.get(id(n))
            if stmt is None:
                return []
            if stmt.lineno >= first:
                values.append(stmt)
    return [stmt.value for stmt in sorted(values, key=lambda st: (st.lineno, st.col_offset))]


def _last_assignment_before(block: list[ast.stmt], name: str, line: int) -> int | None:
    """The line of the last `name = ...` before `line` in `block`, or in the innermost block
    within it that holds `line` (which runs after whatever came before it in `block`)."""
    first = None
    for stmt in block:
        if stmt.lineno >= line:
            break
        if line <= (stmt.end_lineno or stmt.lineno):
            if not isinstance(stmt, (*_FuncDef, ast.ClassDef)):
                for field in ("body", "orelse", "finalbody"):
                    inner = _last_assignment_before(getattr(stmt, field, []), name, line)
                    if inner is not None:
                        return inner
            break
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id == name
        ):
            first = stmt.lineno
    return first


def _method_returns_host(
    ctx: Context,
    tree: ast.AST,
    call: ast.Call,
    scope: ast.AST,
    env: dict[str, bool],
    seen: set[str],
    depth: int,
) -> bool:
    """`self.get_seq_lens(lengths)` with a method of the caller's class whose every `return`
    gives a host value, its parameters holding what this call passes."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self"):
        return False
    cls = _enclosing(parents_of(tree), scope, ast.ClassDef)
    method = next((m for m in getattr(cls, "body", []) if isinstance(m, _FuncDef) and m.name == f.attr), None)
    if method is None or method.decorator_list or has_kwargs_splat(call) or call.keywords:
        return False
    names = [a.arg for a in method.args.args[1:]]
    if len(call.args) > len(names) or any(isinstance(a, ast.Starred) for a in call.args):
        return False
    inner = {n: _from_host(ctx, tree, a, scope, env, seen, depth + 1) for n, a in zip(names, call.args)}
    returns = [n for n in own_nodes(method) if isinstance(n, ast.Return)]
    return bool(returns) and all(
        r.value is not None and _from_host(ctx, tree, r.value, method, inner, set(), depth + 1)
        for r in returns
    )
