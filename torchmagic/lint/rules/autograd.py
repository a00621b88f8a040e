"""TM4xx — autograd: graphs kept alive, checks bypassed, gradients where there are none."""

from __future__ import annotations

import ast
import copy
import re
import sys
from collections.abc import Iterable, Iterator

from ...report import Finding, Fix
from .. import libraries
from ..context import Context, LoopInfo
from ..fixes import fix_of
from ..kinds import (
    DEVICE,
    DTYPE,
    HOST_VALUE_METHODS,
    LIKE_FUNCS,
    MODULE,
    NDARRAY,
    NEW_TENSOR_FUNCS,
    NONE,
    NUMBER,
    PARAMETER,
    PARAMETERLESS_LAYERS,
    SHAPE,
    STRING,
    TENSOR,
    TENSOR_METADATA,
)
from ..nodes import (
    COMPREHENSIONS,
    LOOPS,
    block_of,
    is_name,
    isinstance_test,
    node_text,
    over_integers,
    own_nodes,
    parents_of,
    per_node,
    remember,
    terminal_name,
)
from ..registry import check
from ._common import (
    call_chain,
    chain_root,
    live_function,
    name_like,
    note_cell_functions,
    packed_sequence,
    receiver,
    root_name,
    switches_grad_off,
    unparse,
    unparse_operand,
    word_of,
)
from ._flow import (
    Flow,
    backward_roots,
    disables_grad,
    flow_of,
    grad_disabled_here,
    is_backward,
    key,
    module_node,
    scope_node,
    walk_scope,
)
from .modules import (
    INTEGER_NAME,
    KEEPS_DTYPE,
    bare_module_instance,
    built_without_grad,
    indices_of,
    joined_without_grad,
)

# Tensor methods whose result still carries the receiver's autograd graph.
_KEEPS_GRAPH = frozenset(
    {"sum", "mean", "float", "double", "half", "clone", "squeeze", "view", "reshape", "abs", "to"}
)


def _graph_names(ctx: Context, value: ast.AST, flow: Flow) -> set[str]:
    """The loss-like names whose graph `value` carries: a name that is back-propagated in this
    scope or a tensor named like a loss (unless it only ever sums numbers), through arithmetic
    and graph-keeping methods (`loss * x.size(0)`, `loss.mean()`), never through `.item()`.
    Empty: not a graph tensor."""
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
    if _rebound_off_the_graph(ctx.origin(value)):
        return set()  # `loss = loss.detach().cpu().numpy()` after the step: the name holds no graph
    if ctx.kind(value) == PARAMETER:
        return set()  # `for name, p in model.named_parameters()`: a leaf, which holds no graph
    if value.id in flow.direct and not _python_number(ctx, value.id):
        return {value.id}
    if ctx.is_tensor(value) and "loss" in value.id.lower() and not _summed_from_numbers(ctx, value.id, flow):
        return {value.id}
    return set()


def _counts(it: ast.AST, nodes: list[ast.AST]) -> bool:
    """`range(n)`, `trange(n)`, `tqdm(range(n))`, or a name a `with tqdm(range(n)) as bar:` binds:
    an iteration over integers."""
    if isinstance(it, ast.Name):
        it = next(
            (
                item.context_expr
                for w in nodes
                if isinstance(w, (ast.With, ast.AsyncWith))
                for item in w.items
                if is_name(item.optional_vars, it.id)
            ),
            it,
        )
    return over_integers(it)


def _python_number(ctx: Context, name: str, depth: int = 0) -> bool:
    """`current_weight = sparse_loss_weight` (a parameter declared `float`), then
    `current_weight *= fraction` with `fraction = 0.5 * (1 - math.cos(...))`: every binding in the
    scope is built from numbers, so the name is a weight of the loss, not a tensor of its graph."""
    fn = ctx.frame.node
    if depth > 3 or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    args = fn.args
    declared = {
        a.arg
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)
        if isinstance(a.annotation, ast.Name) and a.annotation.id in ("float", "int")
    }
    if name in declared:
        return True
    nodes = own_nodes(fn)
    counters = [
        n
        for n in nodes
        if isinstance(n, (ast.For, ast.AsyncFor)) and is_name(n.target, name) and _counts(n.iter, nodes)
    ]
    counted = {id(c.target) for c in counters}
    values = _assigned_values([n for n in nodes if id(n) not in counted], name)
    if counters and values == []:
        return True  # `for step in range(steps)`: a count

    def numeric(v: ast.AST) -> bool:
        if isinstance(v, ast.Constant):
            return isinstance(v.value, (int, float)) and not isinstance(v.value, bool)
        if isinstance(v, ast.BinOp):
            return numeric(v.left) and numeric(v.right)
        if isinstance(v, ast.UnaryOp):
            return numeric(v.operand)
        if isinstance(v, ast.Call):
            return (ctx.qualname(v.func) or "").startswith("math.") and all(numeric(a) for a in v.args)
        if isinstance(v, ast.Attribute):
            return (ctx.qualname(v) or "") in ("math.pi", "math.e", "math.tau")
        if isinstance(v, ast.Name):
            return v.id == name or _python_number(ctx, v.id, depth + 1)
        return False

    return bool(values) and all(numeric(v) for v in values or ())


def _summed_from_numbers(ctx: Context, name: str, flow: Flow) -> bool:
    """Every binding of `name` in the scope is a plain or augmented assignment of a value that
    plainly holds no graph (`subtrn_loss = 0`, `subtrn_loss += loss.item() * weights.sum()`,
    `subtrn_loss = subtrn_loss / total`): a total of numbers and data, named like a loss."""
    values = _assigned_values(own_nodes(scope_node(ctx)), name)
    return bool(values) and all(_plainly_graph_free(ctx, v, name, flow) for v in values or ())


def _assigned_values(nodes: Iterable[ast.AST], name: str) -> list[ast.AST] | None:
    """The values of every `name = v` and `name op= v` among `nodes`; None when `name` is also
    bound some other way (a loop target, an unpacking, `with ... as name`)."""
    values: list[ast.AST] = []
    stores = 0
    for n in nodes:
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store):
            stores += 1
        elif isinstance(n, ast.AugAssign) and is_name(n.target, name):
            values.append(n.value)
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and is_name(n.targets[0], name):
            values.append(n.value)
    return values if stores == len(values) else None


# methods that keep a graph-free value graph-free
_PLAIN_STEPS = frozenset({"sum", "mean", "float", "double", "to", "cuda", "cpu"})


def _plainly_graph_free(ctx: Context, value: ast.AST, name: str, flow: Flow) -> bool:
    """`0`, `loss.item() * w.sum()`, `total / seen`: numbers, Python reads of a tensor, and data
    the scope was given or drew from a loader (never a forward pass, never a loss)."""
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.BinOp):
        return _plainly_graph_free(ctx, value.left, name, flow) and _plainly_graph_free(
            ctx, value.right, name, flow
        )
    if isinstance(value, ast.UnaryOp):
        return _plainly_graph_free(ctx, value.operand, name, flow)
    if isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Name):
            return func.id in ("float", "int", "len")
        if isinstance(func, ast.Attribute):
            if func.attr in HOST_VALUE_METHODS:
                return True
            return func.attr in _PLAIN_STEPS and _plainly_graph_free(ctx, func.value, name, flow)
        return False
    if not isinstance(value, ast.Name):
        return False
    if value.id == name:
        return True
    if value.id in flow.direct or "loss" in value.id.lower():
        return False
    origin = ctx.origin(value)
    if origin is None or isinstance(origin, ast.Constant):
        return True  # a loop's batch or a parameter, a number
    # `w = w.to(device)`: the same data, moved
    return (
        isinstance(origin, ast.Call)
        and isinstance(origin.func, ast.Attribute)
        and origin.func.attr in ("to", "cuda", "float")
        and is_name(origin.func.value, value.id)
    )


_OFF_THE_GRAPH = HOST_VALUE_METHODS | {"detach"}


def _rebound_off_the_graph(origin: ast.AST | None) -> bool:
    """The name's last binding is a value cut from the graph: `x.detach()...`, `x.item()`,
    `x.cpu().numpy()`, `float(x)`, `-x.mean().item()`."""
    while isinstance(origin, ast.UnaryOp):
        origin = origin.operand
    if isinstance(origin, ast.Call) and isinstance(origin.func, ast.Name):
        return origin.func.id in ("float", "int")
    while isinstance(origin, ast.Call) and isinstance(origin.func, ast.Attribute):
        if origin.func.attr in _OFF_THE_GRAPH:
            return True
        origin = origin.func.value
    return False


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


def _mentions_backward(ctx: Context) -> bool:
    mod = module_node(ctx)

    def found() -> bool:
        return any("backward" in line or "autograd" in line for line in ctx.lines)

    return found() if mod is None else remember(mod, "mentions_backward", found)


def _within_one_step(ctx: Context, acc: str | None) -> bool:
    """The loop back-propagates each value but steps no optimizer, and the function does so
    after it (`for i in range(accum_steps): ...; loss.backward(); total = total + loss`, then
    `optimizer.step()`): gradient accumulation within one step. `acc`, a plain name the
    function binds before the loop, is dropped or reset at the next step, and the graphs it
    holds were back-propagated already (their saved tensors freed): nothing grows."""
    func = ctx.enclosing_function()
    if acc is None or "." in acc or func is None:
        return False
    loop = ctx.loops[-1].node
    if not isinstance(loop, (ast.For, ast.While)) or not any(
        isinstance(c, ast.Call) and is_backward(ctx, c) for c in ast.walk(loop)
    ):
        return False
    if any(_optimizer_step(c) for c in ast.walk(loop)):
        return False
    # the binding and the step must repeat with the loop: in the loop around it (a step loop),
    # or in the function when no loop of its own surrounds it
    around = ctx.loops[-2].node if len(ctx.loops) >= 2 else func
    after = [s for s in ast.walk(around) if getattr(s, "lineno", 0) > (loop.end_lineno or loop.lineno)]
    before = [
        n
        for n in ast.walk(around)
        if isinstance(n, ast.Name) and n.id == acc and isinstance(n.ctx, ast.Store) and n.lineno < loop.lineno
    ]
    return bool(before) and any(_optimizer_step(c) for c in after)


def _optimizer_step(node: ast.AST) -> bool:
    """`optimizer.step()`, `self.opt.step()`, `scaler.step(optimizer)`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "step"
        and name_like(node.func.value, "opt", "scaler")
    )


_TM401_HINT = "Accumulate a number: `total += loss.item()` (or `loss.detach()` to stay on the device)."


@check("TM401", nodes=(ast.AugAssign, ast.Assign), calls={"append"})
def graph_kept_alive(node: ast.AST, ctx: Context) -> None:
    if not ctx.in_loop:
        return
    # the accumulation's shape first (cheap), then what the scope does with it
    if isinstance(node, ast.AugAssign):
        if not isinstance(node.op, ast.Add):
            return
        value, acc = node.value, key(node.target)
    elif isinstance(node, ast.Assign):
        # total = total + loss
        v = node.value
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return
        if not (isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add) and isinstance(v.left, ast.Name)):
            return
        if v.left.id != node.targets[0].id:
            return
        value, acc = v.right, node.targets[0].id
    else:
        call: ast.Call = node  # type: ignore[assignment]
        if len(call.args) != 1 or ctx.is_tensor(receiver(call)):  # type: ignore[arg-type]
            return
        value, acc = call.args[0], key(receiver(call))
    names = [n.id for n in ast.walk(value) if isinstance(n, ast.Name)]
    if not names:
        return
    if not any("loss" in n.lower() for n in names) and not _mentions_backward(ctx):
        return  # nothing is back-propagated anywhere, and nothing is named like a loss
    flow = flow_of(ctx, scope_node(ctx))
    graphs = _graph_names(ctx, value, flow)
    if not graphs or _graph_still_needed(acc, graphs, flow):
        return
    if grad_disabled_here(ctx, getattr(node, "lineno", None)):
        return
    if _within_one_step(ctx, acc):
        return  # a gradient-accumulation loop: the sum lives for one optimizer step
    if isinstance(node, ast.Call):
        ctx.flag(
            node,
            f"`{unparse(node, 50)}` keeps the autograd graph of every iteration alive.",
            "Store a number: `"
            + unparse(node.func, 30)
            + f"({unparse_operand(node.args[0], 20)}.item())` (or `.detach()` to stay on the device).",
        )
        return
    label = (
        f"{unparse(node.target, 20)} += {unparse(node.value, 30)}"
        if isinstance(node, ast.AugAssign)
        else unparse(node, 50)
    )
    ctx.flag(node, f"`{label}` keeps the autograd graph of every iteration alive.", _TM401_HINT)


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


@check("TM402", nodes=(ast.With,), finish=True)
def prefer_inference_mode(node: ast.With | ast.Module, ctx: Context) -> None:
    if isinstance(node, ast.Module):
        note_cell_functions(ctx, node, IN_PLACE_NOTES, lambda fn: _params_changed_in_place(ctx, fn))
        return
    item = next((i for i in node.items if ctx.qualname(_func(i.context_expr)) == "torch.no_grad"), None)
    if item is None or ctx.in_module_method or _in_a_class_with_a_forward(ctx):
        return
    fn = ctx.enclosing_function()
    if fn is not None and fn.name == "forward":
        return  # a forward patched onto a model: a frozen trunk whose output the trained heads use
    if _runs_once(ctx, node):
        return  # one forward at the top of a script or cell: nothing a user could measure
    if libraries.imports_rpc(ctx):
        return  # the forward may run remotely: the local grad mode does not govern it
    if libraries.caches_predictions(ctx):
        return  # GPyTorch caches prediction tensors on the model: inference tensors there break later calls
    if libraries.shards_parameters(ctx):
        return  # FSDP gathers and frees parameters around each forward: inference_mode breaks it
    if libraries.quantizes_to_tensor_subclasses(ctx):
        return  # quantized weights are tensor subclasses: inference_mode breaks their views
    if any(_mutates(ctx, stmt) for stmt in node.body) or not _runs_a_model(ctx, node.body):
        return
    if _enters_a_model_context(ctx, node):
        return  # `with calibration_mode(model):` may write the model's parameters on exit
    if _calibration_pass(ctx, node):
        return  # observers or hooks record statistics on the model in each forward: not inference
    if _results_updated_in_place(ctx, node):
        return  # an inference tensor cannot be updated in place outside inference_mode
    # Tensors made under inference_mode cannot be saved for backward later: a no_grad target
    # (DQN, distillation) computed in a loop that backpropagates must stay no_grad.
    for loop in ctx.loops:
        if any(_is_backward(c) for c in ast.walk(loop.node) if isinstance(c, ast.Call)):
            return
    if ctx.loops == [] and isinstance(ctx.frame.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if any(_is_backward(c) for c in ast.walk(ctx.frame.node) if isinstance(c, ast.Call)):
            return
    if _trains_alongside(ctx, node):
        return  # a stop-gradient target next to a forward with grad: it may be saved for backward
    if _kept_for_the_class_loss(ctx, node):
        return  # reference log-probs a trainer returns for its loss: they may be saved for backward
    if _shape_probe(ctx, node):
        return  # a dry run on a dummy input to learn a size, while the model is being built
    if _materialises_lazy_layers(ctx, node):
        return  # a throw-away forward that creates lazy layers' weights before training
    ctx.flag(
        node,
        f"`with {unparse(item.context_expr, 40)}` wraps pure inference; `torch.inference_mode()` is faster.",
        "Use `with torch.inference_mode():` (keep `no_grad` where the results feed a later backward).",
        fix=_inference_mode_fix(item.context_expr, ctx),
    )


def _in_a_class_with_a_forward(ctx: Context) -> bool:
    """A method of a class that defines `forward`, whatever its base: one imported from a sibling
    module (`class Sampler(Reconstructor)`) is a module too, and its blocks are internals."""
    cls = ctx.frame.cls
    return cls is not None and any(
        isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "forward"
        for stmt in cls.node.body
    )


def _runs_once(ctx: Context, node: ast.With) -> bool:
    """The block is at the top level of a script or cell, outside any loop, and repeats nothing
    inside: it runs once, where `inference_mode` saves microseconds."""
    return ctx.at_top_level and not any(
        isinstance(n, LOOPS + COMPREHENSIONS) for stmt in node.body for n in ast.walk(stmt)
    )


_DUMMIES = frozenset({"rand", "randn", "zeros", "ones", "empty", "full", "randint"})
_SIZES = frozenset({"shape", "size", "numel", "dim", "ndim"})


def _shape_probe(ctx: Context, node: ast.With) -> bool:
    """`with torch.no_grad(): y = encoder(torch.rand(2, *shape))` then only `y.shape[1]`: a dry
    run on a dummy input to learn an output size while a model is being put together. Its first
    forward may create a lazy layer's parameters, which under `inference_mode` would be inference
    tensors that never train; and a probe gains nothing from being faster."""
    fn = ctx.frame.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    inside = [n for stmt in node.body for n in ast.walk(stmt)]
    if not any(
        isinstance(n, ast.Call)
        and (ctx.qualname(n.func) or "").split(".")[-1] in _DUMMIES
        and (ctx.qualname(n.func) or "").startswith("torch.")
        for n in inside
    ):
        return False
    outputs = {
        t.id
        for n in inside
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and _runs_a_model(ctx, [ast.Expr(n.value)])
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    if not outputs:
        return False
    parents = parents_of(fn)
    reads = [
        n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id in outputs and isinstance(n.ctx, ast.Load)
    ]
    return bool(reads) and all(
        isinstance(up := parents.get(id(r)), ast.Attribute) and up.attr in _SIZES for r in reads
    )


_LAZY_LAYER = re.compile(r"\bLazy(?:Linear|Conv|ConvTranspose|BatchNorm|InstanceNorm|ModuleMixin)")


def _materialises_lazy_layers(ctx: Context, node: ast.With) -> bool:
    """The program builds lazy layers (`nn.LazyLinear`) and every forward in the block is thrown
    away (`_ = model(batch)`, `model(dummy)`): a dry run whose point is to create their weights.
    Under `inference_mode` those would be inference tensors, and training them raises."""
    if not _LAZY_LAYER.search(ctx.document):
        return False
    forwards = [
        n for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.Call) and _a_forward(ctx, n)
    ]
    if not forwards:
        return False
    parents = parents_of(node)
    for call in forwards:
        up = parents.get(id(call))
        if isinstance(up, ast.Expr):
            continue
        if isinstance(up, ast.Assign) and all(
            isinstance(t, ast.Name) and t.id.startswith("_") for t in up.targets
        ):
            continue
        return False
    return True


def _trains_alongside(ctx: Context, node: ast.With) -> bool:
    """The function holding the block also runs a model with grad on, outside any block that
    switches grad off (`h1 = self.predictor(z1)` then `with torch.no_grad(): z2 =
    self.target(x)` and `cosine_similarity(h1, z2)`, a `compute_loss` that logs metrics from a
    second forward): a training step whose backward the framework calls. A tensor made under
    `inference_mode` there raises once autograd saves it for that backward."""
    fn = ctx.frame.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if any(disables_grad(ctx, d) for d in fn.decorator_list):
        return False
    todo: list[ast.AST] = list(fn.body)
    while todo:
        n = todo.pop()
        if n is node or isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, (ast.With, ast.AsyncWith)) and any(
            disables_grad(ctx, i.context_expr) for i in n.items
        ):
            continue
        if isinstance(n, ast.Call) and _is_forward_call(ctx, n):
            return True
        todo.extend(ast.iter_child_nodes(n))
    return False


_EVALUATION = re.compile(r"valid|eval|test|predict|metric|accuracy|score_model|inference", re.I)
# methods by which a class trains a model (HF Trainer and Lightning style)
_TRAINING_METHODS = frozenset({"compute_loss", "training_step", "train_step", "loss_fn", "backward"})


def _kept_for_the_class_loss(ctx: Context, node: ast.With) -> bool:
    """A method of a class that trains (it defines `compute_loss` or `training_step`, calls
    `.backward()`, or subclasses a library's `...Trainer`) keeps, collects or returns what the
    block computes (`return {"ref_logps": ref, ...}`, `self.targets = t`): a later loss of the
    class may use it with grad on, and an inference tensor saved for that backward raises."""
    cls = ctx.frame.cls
    fn = ctx.frame.node
    if cls is None or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if _EVALUATION.search(fn.name):
        return False  # `validation_error()`, `evaluate()`: what it returns is a score, not a loss input
    trains = any(
        isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in _TRAINING_METHODS
        for stmt in cls.node.body
    ) or any(isinstance(n, ast.Call) and _is_backward(n) for n in ast.walk(cls.node))
    # a subclass of a library's trainer (`class MyGRPOTrainer(GRPOTrainer)`) inherits its loss
    trains = trains or any((terminal_name(b) or "").endswith("Trainer") for b in cls.node.bases)
    if not trains:
        return False
    made = {
        t.id
        for stmt in ast.walk(node)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign))
        for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
        for t in ast.walk(target)
        if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)
    }
    if not made:
        return False
    end = node.end_lineno or node.lineno
    for stmt in ast.walk(fn):
        if getattr(stmt, "lineno", 0) <= end:
            continue
        kept = (
            isinstance(stmt, ast.Return)
            or (
                isinstance(stmt, ast.Assign)
                and any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in stmt.targets)
            )
            or (  # `batch.append({"ref_logps": ref_logps, ...})`: collected for the caller
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Call)
                and terminal_name(stmt.value.func) in ("append", "extend", "update", "put")
            )
        )
        value = getattr(stmt, "value", None)
        if (
            kept
            and value is not None
            and any(isinstance(n, ast.Name) and n.id in made for n in ast.walk(value))
        ):
            return True
    return False


def _is_forward_call(ctx: Context, call: ast.Call) -> bool:
    """`model(x)`, `self.predictor(z)`, `strategy.forward()`: a forward pass, not a module
    method such as `model.eval()` or `model.to(device)`."""
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr == "forward":
        return True
    if not isinstance(f, (ast.Attribute, ast.Name)):
        return False
    if ctx.kind(f) == MODULE:
        return True
    if isinstance(f, ast.Attribute) and not (isinstance(f.value, ast.Name) and f.value.id == "self"):
        return False  # `trainer.train_model()`: a method, named like a model or not
    # `model(x)`, `self.online_network(x)`, not `model_with_cfg(name)` nor `build_model(cfg)`
    text = f.attr if isinstance(f, ast.Attribute) else f.id
    return text.lower().endswith(("model", "net", "network")) and not text.lower().startswith(
        ("build", "get", "create", "make", "load", "init")
    )


def _enters_a_model_context(ctx: Context, node: ast.With) -> bool:
    """Another context manager, in this `with` or nested in its body, is handed a model
    (`with calibration_mode(model):`, `with swap_weights(net):`): what it does on entry or exit
    is not inference, and may write parameters."""
    withs = [
        node,
        *(w for stmt in node.body for w in ast.walk(stmt) if isinstance(w, (ast.With, ast.AsyncWith))),
    ]
    for w in withs:
        for item in w.items:
            expr = item.context_expr
            if not isinstance(expr, ast.Call) or (ctx.qualname(expr.func) or "").startswith("torch."):
                continue
            if any(ctx.kind(a) == MODULE or name_like(a, "model", "net") for a in expr.args):
                return True
    return False


# functions that insert quantization observers into a model (torch.ao's, or a model's own method)
_QUANT_PREPARE = frozenset(
    {"prepare_fx", "prepare_qat_fx", "prepare_pt2e", "prepare_qat_pt2e", "prepare_quantization"}
)


def _calibration_pass(ctx: Context, node: ast.With) -> bool:
    """A calibration pass: after the model was prepared for quantization earlier in the scope
    (`torch.ao.quantization.prepare(model)`, `prepare_fx`, `prepare_pt2e`, a model's own
    `prepare_quantization()`) and not converted since, or over data whose loop says so (`for x in calib_loader`,
    `tqdm(loader, desc="Running calibration")`). Its forwards exist to make observers or hooks
    record statistics on the model's state, which is not pure inference (and observer buffers
    made under `inference_mode` refuse the in-place updates of a later pass)."""
    scope = ctx.frame.node if ctx.frame.node is not None else ctx.stack[0]
    before = [n for n in own_nodes(scope) if isinstance(n, ast.Call) and n.lineno < node.lineno]
    prepared = max((c.lineno for c in before if _prepares_quantization(ctx, c)), default=None)
    converted = max((c.lineno for c in before if terminal_name(c.func) == "convert"), default=0)
    if prepared is not None and prepared >= converted:
        return True  # prepared, and not converted since
    loops = [
        *(info.node for info in ctx.loops),
        *(n for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.For, ast.AsyncFor))),
    ]
    for loop in loops:
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        for n in ast.walk(loop.iter):
            if "calib" in word_of(n, strings=True).lower():
                return True
    return False


def _prepares_quantization(ctx: Context, call: ast.Call) -> bool:
    name = terminal_name(call.func) or ""
    if name in _QUANT_PREPARE:
        return True
    qualname = ctx.qualname(call.func) or ""
    return name.startswith("prepare") and qualname.startswith(
        ("torch.ao.quantization.", "torch.quantization.")
    )


def _results_updated_in_place(ctx: Context, node: ast.With) -> bool:
    """A tensor bound in the block is changed in place after it, in the same body
    (`y_pred.clamp_(0, 1)`, `out[mask] = 0`, or through a function of this source that changes
    its argument in place, `normalize(y_pred[0])`): inference tensors refuse that."""
    bound = {
        t.id
        for stmt in node.body
        for a in ast.walk(stmt)
        if isinstance(a, (ast.Assign, ast.AnnAssign))
        for target in (a.targets if isinstance(a, ast.Assign) else [a.target])
        for t in ast.walk(target)
        if isinstance(t, ast.Name)
    }
    if not bound:
        return False
    found = block_of(ctx.stack[-1], node) if ctx.stack else None
    if found is None:
        return False
    body, at = found
    return any(_changes_in_place(ctx, stmt, bound, 0) for stmt in body[at + 1 :])


def _changes_in_place(ctx: Context, tree: ast.AST, names: set[str], depth: int) -> bool:
    for sub in ast.walk(tree):
        if isinstance(sub, ast.AugAssign) and root_name(sub.target) in names:
            return True
        if isinstance(sub, ast.Assign) and any(
            isinstance(t, (ast.Subscript, ast.Attribute)) and root_name(t) in names
            for target in sub.targets
            for t in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target])
        ):
            return True  # also `x[i], x[j] = x[j].clone(), x[i].clone()`
        if not isinstance(sub, ast.Call):
            continue
        func = sub.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr.endswith("_")
            and not func.attr.endswith("__")
            and root_name(func.value) in names
        ):
            return True
        if depth < 2 and isinstance(func, ast.Name):
            helper = ctx.origin(func)
            if helper is None and func.id not in ctx.notes.get(IN_PLACE_NOTES, {}):
                helper = live_function(ctx, func.id)  # a function of an earlier cell, in the kernel
            if isinstance(helper, (ast.FunctionDef, ast.AsyncFunctionDef)):
                changed = set(_params_changed_in_place(ctx, helper, depth + 1))
                params = [a.arg for a in helper.args.args]
            elif helper is None and func.id in ctx.notes.get(IN_PLACE_NOTES, {}):
                # a function of an earlier cell of the notebook
                changed, params = set(ctx.notes[IN_PLACE_NOTES][func.id]), []
            else:
                continue
            for i, a in enumerate(sub.args):
                if root_name(a) in names and ((params[i] if i < len(params) else str(i)) in changed):
                    return True
    return False


IN_PLACE_NOTES = "TM402.in_place"  # ctx.notes key: module-level function -> parameters it changes in place


def _params_changed_in_place(
    ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef, depth: int = 1
) -> list[str]:
    """The positional parameters a function changes in place (`x.clamp_(...)`, `x[i] = 0`),
    named, and also by position (`"0"`) for callers that only know the position."""
    params = [a.arg for a in fn.args.args]
    changed = [p for p in params if any(_changes_in_place(ctx, stmt, {p}, depth) for stmt in fn.body)]
    return changed + [str(params.index(p)) for p in changed]


def _inference_mode_fix(expr: ast.AST, ctx: Context) -> Fix | None:
    # unsafe: a tensor made under inference_mode cannot be saved for a backward later, or
    # updated in place outside it
    func = _func(expr)
    if isinstance(expr, ast.Call) and (expr.args or expr.keywords):
        return None
    if isinstance(func, ast.Attribute) and ctx.qualname(func.value) == "torch":
        edit = ctx.edits.attribute_name(func, "inference_mode")
    else:
        spelled = ctx.spelling("torch.inference_mode")
        if spelled is None:
            return None
        edit = ctx.edits.replace(func, spelled)
    return fix_of("Use `torch.inference_mode()`", [edit], "unsafe")


def _runs_a_model(ctx: Context, body: list[ast.stmt]) -> bool:
    """Inference means a forward pass: a call of a module (`model(x)`, `self.net(x)`)."""
    return any(isinstance(sub, ast.Call) and _a_forward(ctx, sub) for stmt in body for sub in ast.walk(stmt))


def _a_forward(ctx: Context, call: ast.Call) -> bool:
    """`model(x)`, `self.net(x)`, `model.generate(...)`: a call of a module."""
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr in ("forward", "generate", "predict"):
        f = f.value
    return ctx.kind(f) == MODULE or name_like(f, "model", "net")


def _func(expr: ast.AST) -> ast.AST:
    return expr.func if isinstance(expr, ast.Call) else expr


def _is_backward(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr == "backward"


# In-place methods that change a tensor's shape or storage: on `.data` they change a detached
# alias, and the tensor itself keeps its old shape (silently, on current PyTorch).
_RESHAPES = frozenset(
    {
        "resize_",
        "resize_as_",
        "set_",
        "t_",
        "transpose_",
        "squeeze_",
        "unsqueeze_",
        "as_strided_",
        "swapdims_",
        "swapaxes_",
    }
)
# tensor initialisers and their `nn.init` counterparts (same argument order)
_INIT = {"normal_": "normal_", "uniform_": "uniform_", "fill_": "constant_", "zero_": "zeros_"}
_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.MatMult: "@"}
_VARIABLE = ("torch.autograd.Variable", "torch.autograd.variable.Variable")
_PARAM_SOURCES = frozenset({"parameters", "buffers"})
_MODULE_SOURCES = frozenset({"modules", "children"})


def _loop_source_call(ctx: Context, name: ast.Name) -> str | None:
    """`parameters` for `for p in model.parameters()`, `params` for `for p in group["params"]`."""
    src = ctx.loop_source(name.id)
    while isinstance(src, ast.Call) and isinstance(src.func, ast.Name) and src.args:
        if src.func.id not in ("list", "tuple", "enumerate", "reversed", "sorted", "iter"):
            break
        src = src.args[0]
    if isinstance(src, ast.Call) and isinstance(src.func, ast.Attribute):
        return src.func.attr
    if isinstance(src, ast.Subscript) and isinstance(src.slice, ast.Constant):
        return str(src.slice.value)
    if isinstance(src, (ast.Name, ast.Attribute)) and name_like(src, "hidden"):
        return "hidden"
    if isinstance(src, (ast.Name, ast.Attribute)) and _PARAMS_NAME.match(
        src.id if isinstance(src, ast.Name) else src.attr
    ):
        return "params"  # `def sgd(params, lr): for p in params: p.data -= lr * p.grad`
    return None


# a list of parameters handed around by name (`params`, `net_params`, `self.parameters_`), not
# `hyperparams` or `param_names`
_PARAMS_NAME = re.compile(r"^(?:\w+_)?(?:params|parameters)_?$", re.IGNORECASE)


def _applied_functions(ctx: Context) -> set[str]:
    """Functions passed to `module.apply(...)`: their first argument is a module."""
    mod = module_node(ctx)
    if mod is None:
        return set()
    return remember(mod, "applied_functions", lambda: _find_applied(ctx, mod))


def _find_applied(ctx: Context, mod: ast.AST) -> set[str]:
    out: set[str] = set()
    for sub in ast.walk(mod) if any(".apply(" in line for line in ctx.lines) else ():
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr == "apply"
            and len(sub.args) == 1
        ):
            a = sub.args[0]
            if isinstance(a, (ast.Name, ast.Attribute)):
                out.add(a.id if isinstance(a, ast.Name) else a.attr)
    return out


def _module_argument(ctx: Context, name: ast.Name) -> bool:
    """`m` in `def weights_init(m): m.weight.data.normal_(...)`: the function is applied with
    `model.apply(weights_init)`, or checks the class of `m` (`isinstance(m, nn.Conv2d)`,
    `m.__class__.__name__`)."""
    if _loop_source_call(ctx, name) in _MODULE_SOURCES:
        return True
    src = ctx.loop_source(name.id)
    if isinstance(src, (ast.Name, ast.Attribute)) and ctx.kind(src) == MODULE:
        return True  # `for mod in self.features:` over an `nn.ModuleList`/`nn.Sequential`
    fn = ctx.frame.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if name.id not in {a.arg for a in (*fn.args.posonlyargs, *fn.args.args)}:
        return False
    if fn.name in _applied_functions(ctx):
        return True
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "isinstance":
            if len(sub.args) == 2 and isinstance(sub.args[0], ast.Name) and sub.args[0].id == name.id:
                if any((ctx.qualname(c) or "").startswith("torch.nn.") for c in ast.walk(sub.args[1])):
                    return True
        if (
            isinstance(sub, ast.Attribute)
            and sub.attr == "__class__"
            and isinstance(sub.value, ast.Name)
            and sub.value.id == name.id
        ):
            return True
    return False


def _guarded_as_tensor(ctx: Context, name: str) -> bool:
    """Inside `if isinstance(h, torch.Tensor):` or `if type(h) == Variable:`."""
    stack = ctx.stack
    for i, node in enumerate(stack[:-1]):
        if not (isinstance(node, ast.If) and any(stack[i + 1] is s for s in node.body)):
            continue
        for sub in ast.walk(node.test):
            if not isinstance(sub, ast.Call):
                continue
            q = ctx.qualname(sub.func) or ""
            args = sub.args
            if q in ("isinstance", "type", "torch.is_tensor") and args and isinstance(args[0], ast.Name):
                if args[0].id != name:
                    continue
                if q == "torch.is_tensor":
                    return True
                others = [*args[1:]] if q == "isinstance" else []
                if q == "type" and isinstance(node.test, ast.Compare):
                    others = list(node.test.comparators)
                for o in others:
                    oq = ctx.qualname(o) or ""
                    if oq in _VARIABLE or oq.endswith("Tensor") or oq.endswith("Parameter"):
                        return True
    return False


def _tested_as_another_class(ctx: Context, name: str) -> bool:
    """The read sits in the body of `if isinstance(name, C)` with `C` a class that is not
    PyTorch's (a checkpoint library's `ShardedTensor`, a dataclass): `name` is a `C` there."""
    stack = ctx.stack
    for parent, child in zip(reversed(stack[:-1]), reversed(stack[1:])):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        if not isinstance(parent, ast.If) or not any(child is s for s in parent.body):
            continue
        tests = (
            parent.test.values
            if isinstance(parent.test, ast.BoolOp) and isinstance(parent.test.op, ast.And)
            else [parent.test]
        )
        for t in tests:
            tested = isinstance_test(t)
            if tested is not None and tested[0] == name:
                classes = tested[1]
                return all(not (ctx.qualname(c) or "").startswith("torch") for c in classes) and all(
                    isinstance(c, (ast.Name, ast.Attribute))
                    and terminal_name(c) not in ("Tensor", "Parameter")
                    for c in classes
                )
    return False


def _tensor_owner(ctx: Context, owner: ast.AST, node: ast.Attribute) -> bool:
    """What `.data` is read from is a tensor (or parameter, or gradient)."""
    if isinstance(owner, ast.Name) and _tested_as_another_class(ctx, owner.id):
        return False  # `if isinstance(v, ShardedTensor): v.data`: that class's own field
    if ctx.is_tensor(owner):
        return True
    parent = ctx.parent
    if isinstance(parent, ast.Call) and node in parent.args and ctx.qualname(parent.func) in _VARIABLE:
        return True  # `Variable(h.data)`: the old wrapper takes a tensor
    if isinstance(owner, ast.Attribute) and owner.attr in ("weight", "bias", "grad"):
        base = owner.value
        if owner.attr == "grad":
            return ctx.is_tensor(base) or (
                isinstance(base, ast.Name) and _loop_source_call(ctx, base) in (*_PARAM_SOURCES, "params")
            )
        return isinstance(base, ast.Name) and _module_argument(ctx, base)
    if (
        isinstance(owner, ast.Call)
        and isinstance(owner.func, ast.Attribute)
        and owner.func.attr in _TENSOR_ONLY
    ):
        return _may_carry_a_graph(ctx, owner.func.value)  # `out.cpu().data`: only a tensor has both
    if _hook_tensor_argument(ctx, owner):
        return True  # `input[0].data` in a forward pre-hook
    if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "next":
        # next(self.parameters()).data
        a = owner.args[0] if owner.args else None
        return isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) and a.func.attr in _PARAM_SOURCES
    if isinstance(owner, ast.Name):
        if _loop_source_call(ctx, owner) in (*_PARAM_SOURCES, "params", "hidden"):
            return True
        if (
            isinstance(parent, ast.Subscript)
            and parent.value is node
            and "loss" in owner.id.lower()
            and ctx.kind(owner) is None
        ):
            return True  # `loss.data[0]`: the 0.3-era way to read a loss, whatever built it
        return _guarded_as_tensor(ctx, owner.id) or (
            ctx.frame.node is not None and owner.id in _backpropagated(ctx.frame.node)
        )
    return False


# methods whose result, when it has a `.data`, is a tensor
_TENSOR_ONLY = frozenset({"cpu", "cuda", "detach"})


def _may_carry_a_graph(ctx: Context, node: ast.AST) -> bool:
    """What `.cpu()` copied may carry a graph: a model's output (`net.decoder(x)`, a name bound
    to one), or one known to require grad. Batches, labels and masks never do, and `.data` on their copies bypasses nothing."""
    while (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SHAPE_VIEWS
    ):
        node = node.func.value  # `attn.squeeze(0).cpu().data`
    if isinstance(node, ast.Call):
        return _is_module_call(ctx, node)
    return _graph_rank(ctx, node) == 0  # a model output (its first test), or known to require grad


_SHAPE_VIEWS = frozenset(
    {"squeeze", "unsqueeze", "view", "reshape", "permute", "transpose", "contiguous", "float"}
)


def _hook_tensor_argument(ctx: Context, owner: ast.AST) -> bool:
    """`input[0]` in a function this source registers as a forward hook
    (`layer.register_forward_pre_hook(self._save_input)`): after the module, it is handed the
    layer's inputs (and output), which carry the graph of the forward. Not a backward hook's
    gradients, which carry none after a plain `backward()`."""
    base = owner.value if isinstance(owner, ast.Subscript) else owner
    fn = ctx.frame.node
    if not isinstance(base, ast.Name) or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if not ctx.stack or ctx.origin(base) is not None:
        return False
    kind = _registered_hooks(ctx.stack[0]).get(fn.name)
    if kind is None:
        return False
    args = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    if args and args[0] == "self":
        args = args[1:]
    if "backward" in kind or kind == "register_hook":
        return False  # gradients of a plain backward carry no graph: `.data` there bypasses nothing
    return base.id in args[1:]


@per_node
def _registered_hooks(tree: ast.AST) -> dict[str, str]:
    """Function name -> the `register_*hook` call it is handed to (`f` or `self.f`)."""
    out: dict[str, str] = {}
    for n in ast.walk(tree):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr.startswith("register")
            and n.func.attr.endswith("hook")
            and n.args
        ):
            a = n.args[0]
            name = a.id if isinstance(a, ast.Name) else a.attr if isinstance(a, ast.Attribute) else None
            if name is not None:
                out.setdefault(name, n.func.attr)
    return out


@per_node
def _backpropagated(scope: ast.AST) -> frozenset[str]:
    """The names `scope` calls `.backward()` on (`loss_1, loss_2 = co_loss(...)` then
    `loss_1.backward()`): tensors, whatever built them."""
    return frozenset(
        c.func.value.id  # type: ignore[attr-defined]
        for c in ast.walk(scope)
        if isinstance(c, ast.Call) and _is_backward(c) and isinstance(c.func.value, ast.Name)  # type: ignore[attr-defined]
    )


# reductions that give a 0-dim tensor when called over the whole tensor (no `dim`)
_FULL_REDUCTIONS = frozenset({"sum", "mean", "prod", "norm", "std", "var", "max", "min", "amax", "amin"})


def _full_reduction(call: ast.Call) -> bool:
    """`torch.sum(x)`, `x.mean()`, `x.eq(y).sum(dtype=torch.long)`: a reduction over every
    element, 0-dim on PyTorch >= 0.4. Not with a dimension (`x.sum(1)`, `torch.max(x, dim=0)`)."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and f.attr in _FULL_REDUCTIONS):
        return False
    module_call = isinstance(f.value, ast.Name) and f.value.id in ("torch", "th")
    if len(call.args) > (1 if module_call else 0) or any(isinstance(a, ast.Starred) for a in call.args):
        return False
    return not any(kw.arg in (None, "dim", "axis", "keepdim") for kw in call.keywords)


def _scalar_loss(ctx: Context, owner: ast.AST) -> bool:
    """A reduced loss or reduction (0-dim on PyTorch >= 0.4): named like a loss, built by a
    loss function or by a reduction over every element."""
    value: ast.AST | None = owner
    if isinstance(owner, ast.Name):
        low = owner.id.lower()
        if "loss" in low or low.startswith("err"):
            return True
        value = ctx.origin(owner)
    if not isinstance(value, ast.Call):
        return False
    if _full_reduction(value):
        return True
    for kw in value.keywords:
        if kw.arg in ("reduction", "reduce") and not (
            isinstance(kw.value, ast.Constant) and kw.value.value in ("mean", "sum", True)
        ):
            return False
    q = ctx.qualname(value.func) or ""
    return "loss" in q.lower() or (ctx.built_by(value.func) or "").endswith("Loss")


def _args(
    call: ast.Call,
    skip: int = 0,
    lead: str = "",
    strip: frozenset[str] = frozenset(),
) -> str:
    """`(0.0, 0.02)` for a short argument list, `(...)` for a long one, `()` for none; `lead`
    goes first (`nn.init.normal_(w, 0.0, 0.02)`); `x.data` reads of the tensors named in
    `strip` become `x` (the same values under `no_grad`)."""

    class Strip(ast.NodeTransformer):
        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            if node.attr == "data" and ast.unparse(node.value) in strip:
                return self.visit(node.value)
            return self.generic_visit(node)

    def text(e: ast.AST) -> str:
        return ast.unparse(Strip().visit(copy.deepcopy(e)) if strip else e)

    parts = [text(a) for a in call.args[skip:]]
    parts += [f"{k.arg}={text(k.value)}" if k.arg else f"**{text(k.value)}" for k in call.keywords]
    joined = ", ".join(parts)
    if len(joined) > 30:
        joined = "..."
    return "(" + ", ".join(p for p in (lead, joined) if p) + ")"


def _tensor_reads(ctx: Context, call: ast.Call, owner: str) -> frozenset[str]:
    """The owner and the tensors read through `.data` in a call's arguments."""
    out = {owner}
    for sub in ast.walk(call):
        if isinstance(sub, ast.Attribute) and sub.attr == "data" and isinstance(sub.value, ast.Name):
            if ctx.is_tensor(sub.value) or _loop_source_call(ctx, sub.value) in (*_PARAM_SOURCES, "params"):
                out.add(sub.value.id)
        if isinstance(sub, ast.Attribute) and sub.attr == "data" and isinstance(sub.value, ast.Attribute):
            if sub.value.attr == "grad":
                out.add(ast.unparse(sub.value))
    return frozenset(out)


_METADATA = TENSOR_METADATA | {"type"}


# tensor methods and torch functions that keep shape, dtype and device (elementwise)
_SAME_KIND = frozenset(
    {
        "clone",
        "detach",
        "clamp",
        "clip",
        "mul",
        "add",
        "sub",
        "div",
        "abs",
        "sign",
        "sqrt",
        "exp",
        "neg",
        "pow",
    }
    | {"masked_fill", "where", "lerp", "addcmul", "addcdiv", "sigmoid", "tanh", "relu", "data", "grad"}
)
# conversions: a `.data =` swap with one of these changes dtype, device or layout on purpose
_CONVERTS = frozenset(
    {"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "type", "type_as", "long", "int", "bool"}
    | {"contiguous", "pin_memory", "resize_", "view", "view_as", "reshape", "t", "transpose", "permute"}
    | {"expand"}
    | {"as_strided", "to_sparse", "to_dense", "coalesce", "share_memory_"}
)


def _assigned_value(ctx: Context) -> ast.AST | None:
    for node in reversed(ctx.stack):
        if isinstance(node, ast.Assign):
            return node.value
        if isinstance(node, ast.stmt):
            return None
    return None


def _in_conversion_swap(ctx: Context) -> bool:
    for node in reversed(ctx.stack):
        if isinstance(node, ast.Assign):
            return any(
                isinstance(t, ast.Attribute)
                and t.attr == "data"
                and _swap_kind(ctx, node.value, ast.unparse(t.value)) == "convert"
                for t in node.targets
            )
        if isinstance(node, ast.stmt):
            return False
    return False


def _saved_for_a_swap(ctx: Context, node: ast.Attribute) -> bool:
    """`saved.append(param.data)` in a function that later puts each saved tensor back with
    `param.data = s` (for `s` in `saved`): the original storage, kept for the swap back."""
    parent = ctx.parent
    found = _saved_data(parent) if parent is not None else None
    if found is None or parent.args[0] is not node:  # type: ignore[union-attr]
        return False
    saved = found[0]
    scope = ctx.enclosing_function() or (ctx.stack[0] if ctx.stack else None)
    for loop in ast.walk(scope) if scope is not None else ():
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        if not any(is_name(a, saved) for a in _zipped(loop.iter)):
            continue
        targets = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
        if any(
            isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Attribute) and t.attr == "data" for t in n.targets)
            and isinstance(n.value, ast.Name)
            and n.value.id in targets
            for n in ast.walk(loop)
        ):
            return True
    return False


def _original_saved_first(ctx: Context, owner: str) -> bool:
    """`saved.append(param.data)` earlier in the same loop body, then `param.data = avg`: the
    original storage is kept to be put back, so this is a swap, not a write of new values."""
    loop = ctx.loops[-1].node if ctx.loops else None
    stmt = ctx.statement()
    if loop is None or stmt is None:
        return False
    return any(
        (saved := _saved_data(n)) is not None and ast.unparse(saved[1]) == owner and n.lineno < stmt.lineno
        for n in ast.walk(loop)
    )


def _zipped(it: ast.AST) -> list[ast.AST]:
    """The iterables a loop walks together: the arguments of `zip(a, b)`, else `[it]`."""
    return list(it.args) if isinstance(it, ast.Call) and is_name(it.func, "zip") else [it]


def _saved_data(node: ast.AST) -> tuple[str, ast.AST] | None:
    """`saved.append(p.data)` -> ("saved", p)."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "append"
        and isinstance(node.func.value, ast.Name)
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Attribute)
        and node.args[0].attr == "data"
    ):
        return node.func.value.id, node.args[0].value
    return None


def _restores_saved_data(ctx: Context, value: ast.AST) -> bool:
    """`param.data = param_data` where `param_data` comes from a list the function filled with
    `.data` reads (`saved.append(param.data)`), or is itself a saved `x.data`: the code put
    other storage in place (a moving average swapped in for validation) and now puts the
    original tensor back. Only rebinding does that: `copy_` would overwrite the swapped-in
    tensor, and the two never share storage again."""
    if not isinstance(value, ast.Name):
        return False
    origin = ctx.origin(value)
    if isinstance(origin, ast.Attribute) and origin.attr == "data":
        return True
    source = ctx.loop_source(value.id)
    if source is None:
        return False
    names = {a.id for a in _zipped(source) if isinstance(a, ast.Name)}
    scope = ctx.enclosing_function() or (ctx.stack[0] if ctx.stack else None)
    return scope is not None and any(
        (saved := _saved_data(n)) is not None and saved[0] in names for n in ast.walk(scope)
    )


def _swap_kind(ctx: Context, value: ast.AST, owner: str, depth: int = 0) -> str:
    """ "same": built from the owner by elementwise ops (same shape, dtype, device); "convert":
    a conversion or a function the linter cannot see (`fn(p.data)`, `p.to(dtype)`); "other"."""
    if isinstance(value, ast.Name) and depth == 0:
        origin = ctx.origin(value)
        if origin is not None:
            return _swap_kind(ctx, origin, owner, 1)
    same_ops = True
    for sub in ast.walk(value):
        if not isinstance(sub, ast.Call):
            continue
        f = sub.func
        if isinstance(f, ast.Attribute):
            q = ctx.qualname(f) or ""
            if f.attr in _CONVERTS:
                return "convert"
            if (
                isinstance(f.value, ast.Name)
                and ctx.resolve_import(f.value.id) is not None
                and not q.startswith(("torch.", "numpy."))
            ):
                return "convert"  # `c_f.to_device(p.data, ...)`: a function of an imported module, as `fn(p.data)`
            if q.startswith("torch.") and not q.startswith(("torch.nn.", "torch.autograd.")):
                same_ops = same_ops and f.attr in _SAME_KIND
            else:
                same_ops = same_ops and f.attr in _SAME_KIND
        elif isinstance(f, ast.Name):
            if not (ctx.qualname(f) or "").startswith("torch."):
                return "convert"  # `fn(param.data)`: whatever fn does to dtype and device
            same_ops = False
    parents = parents_of(value)

    def operand(n: ast.AST) -> bool:
        """The owner itself (or its `.data`/`.grad`), not the root of another attribute."""
        up = parents.get(id(n))
        return not (isinstance(up, ast.Attribute) and up.value is n and up.attr not in ("data", "grad"))

    mentions_owner = any(
        ast.unparse(n) == owner and operand(n)
        for n in ast.walk(value)
        if isinstance(n, (ast.Name, ast.Attribute))
    )
    if same_ops and mentions_owner and not any(isinstance(n, ast.Subscript) for n in ast.walk(value)):
        return "same"
    return "other"


_ACTIVATION_NAME = re.compile(
    r"(^|_)(out|outs|output|outputs|pred|preds|logits|hidden|alignments?|attn|attention|scores|feats?|features)(_|$)",
    re.IGNORECASE,
)


def _activation_like(ctx: Context, owner: ast.AST) -> bool:
    """`outputs[0]`, `mel_out`, `logits`: a computed tensor, not a parameter; autograd may have
    saved it for the backward of the operations that read it."""
    while isinstance(owner, ast.Subscript):
        owner = owner.value
    if not isinstance(owner, ast.Name) or _param_like(ctx, owner):
        return False
    origin = ctx.origin(owner)
    if isinstance(origin, ast.Call) and ctx.kind(origin.func) == MODULE:
        return True
    return _ACTIVATION_NAME.search(owner.id) is not None and ctx.kind(owner) != "parameter"


def _param_like(ctx: Context, owner: ast.AST) -> bool:
    return (isinstance(owner, ast.Attribute) and owner.attr in ("weight", "bias")) or ctx.kind(
        owner
    ) == "parameter"


def _stored_through(ctx: Context, sub: ast.Subscript) -> bool:
    """`x.data[j][i] = v`: the outer subscript of a chain stores."""
    stack = ctx.stack
    k = len(stack) - 1
    while k >= 0 and stack[k] is not sub:
        k -= 1
    node: ast.AST = sub
    while k >= 1 and isinstance(stack[k - 1], ast.Subscript) and stack[k - 1].value is node:
        node = stack[k - 1]
        k -= 1
    return node is not sub and isinstance(getattr(node, "ctx", None), ast.Store)


def _writing_helper(ctx: Context, parent: ast.AST | None, node: ast.Attribute) -> str | None:
    """`swap_(self.affine.data, i, j)` with a function of this source that changes that
    parameter in place (`data[i], data[j] = data[j].clone(), data[i].clone()`, `data.mul_(s)`),
    also one nested in the method that calls it."""
    if not (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and node in parent.args):
        return None
    fn = ctx.origin(parent.func)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    index = parent.args.index(node)
    params = [a.arg for a in fn.args.args]
    if index >= len(params) or params[index] not in _params_changed_in_place(ctx, fn):
        return None
    return fn.name


def _init_helper(ctx: Context, parent: ast.AST | None, node: ast.Attribute) -> str | None:
    """`xavier(m.weight.data)` with `def xavier(param): init.xavier_uniform_(param)` in the
    source: a helper that only hands its argument to `nn.init` (a write, not a read)."""
    if not (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and node in parent.args):
        return None
    index = parent.args.index(node)
    mod = module_node(ctx)
    fn = next(
        (
            n
            for n in (mod.body if isinstance(mod, ast.Module) else [])
            if isinstance(n, ast.FunctionDef) and n.name == parent.func.id
        ),
        None,
    )
    if fn is None or index >= len(fn.args.args):
        return None
    arg = fn.args.args[index].arg
    uses = [
        n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == arg and isinstance(n.ctx, ast.Load)
    ]
    inits = [
        c
        for c in ast.walk(fn)
        if isinstance(c, ast.Call)
        and c.args
        and isinstance(c.args[0], ast.Name)
        and c.args[0].id == arg
        and (ctx.qualname(c.func) or "").startswith("torch.nn.init.")
    ]
    if not inits or len(uses) != len(inits):
        return None  # the helper does more with its argument than initialise it
    return fn.name


# methods whose tensor argument lends only its dtype, device or shape (`a.type_as(x)`,
# `a.to(x)`, `a.expand_as(x)`): no value of the argument is read
_TEMPLATE_METHODS = frozenset({"type_as", "to", "expand_as", "view_as", "reshape_as"})


def _template_argument(ctx: Context, parent: ast.AST | None, node: ast.AST) -> bool:
    """`a.type_as(x.data)`, `a.to(x.data)`, `torch.zeros_like(x.data)`: the `.data` read is the
    sole positional argument of a method that takes only the tensor's dtype, device or shape,
    or the first argument of a `torch.*_like` factory or of an `nn.init` helper that reads the
    shape (`nn.init._calculate_fan_in_and_fan_out(w.data)`). No value of `x` reaches the result, so
    nothing bypasses autograd (`a.to(x.data)` with more positional arguments is not this form)."""
    if not (isinstance(parent, ast.Call) and parent.args and parent.args[0] is node):
        return False
    func = parent.func
    if isinstance(func, ast.Attribute) and func.attr in _TEMPLATE_METHODS and len(parent.args) == 1:
        return True
    q = ctx.qualname(func) or ""
    if q in _SHAPE_HELPERS:
        return True
    return q.startswith("torch.") and q.split(".", 1)[1] in LIKE_FUNCS


# `nn.init` helpers that read only the tensor's dimensions
_SHAPE_HELPERS = frozenset(
    {"torch.nn.init._calculate_fan_in_and_fan_out", "torch.nn.init._calculate_correct_fan"}
)


def _bound_for_metadata_only(ctx: Context, node: ast.Attribute) -> bool:
    """`w = p.data` where the function then uses `w` only as a factory or for metadata
    (`w.new(...)`, `w.new_zeros(...)`, `w.device`, `a.type_as(w)`): no value is read through
    `.data`."""
    holder = ctx.parent
    if not (isinstance(holder, ast.Assign) and holder.value is node and len(holder.targets) == 1):
        return False
    target = holder.targets[0]
    fn = ctx.frame.node
    if not isinstance(target, ast.Name) or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    parents = parents_of(fn)
    uses = [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Name) and n.id == target.id and isinstance(n.ctx, ast.Load)
    ]
    for use in uses:
        up = parents.get(id(use))
        if isinstance(up, ast.Attribute) and (up.attr in _METADATA or up.attr.startswith("new")):
            continue
        if not _template_argument(ctx, up, use):
            return False
    return bool(uses)


# ---- TM403: is anything at stake in a `.data` read? -------------------------------------

# torch factories whose result never requires grad unless told to (`requires_grad=True`), whatever
# their arguments (not `as_tensor`, which returns a tensor argument as it is)
_PLAIN_FACTORIES = NEW_TENSOR_FUNCS | LIKE_FUNCS | {"logspace", "from_numpy"}
_NOT_TENSORS = frozenset({NUMBER, DEVICE, DTYPE, STRING, NONE, SHAPE})


def _live_grad(ctx: Context, name: str) -> bool | None:
    """For a live tensor of an earlier cell: True when it is a parameter, requires grad or has a
    graph; False for a plain `torch.Tensor` with neither; None when unknown (not a tensor, a
    subclass, no kernel). Reads only the C-level `requires_grad`/`grad_fn` of exact types."""
    obj = ctx.live_object(name)
    torch = sys.modules.get("torch")
    if obj is None or torch is None:
        return None
    t = type(obj)
    if t is torch.nn.Parameter:
        return True
    if t is not torch.Tensor:
        return None
    try:
        return bool(obj.requires_grad or obj.grad_fn is not None)
    except Exception:
        return None


def _bound_once(ctx: Context, name: str) -> bool:
    """`name` is assigned once in the scope (updates by a number aside) and never switched to
    requiring grad (`name.requires_grad_()`, `name.requires_grad = True`)."""
    scope = scope_node(ctx)
    # `x /= np.sqrt(var)`: an update by a number keeps a plain tensor plain
    by_numbers = {
        id(n.target)
        for n in ast.walk(scope)
        if isinstance(n, ast.AugAssign) and ctx.kind(n.value) in (NUMBER, NDARRAY)
    }
    stores = sum(
        1
        for n in ast.walk(scope)
        if isinstance(n, ast.Name)
        and n.id == name
        and isinstance(n.ctx, ast.Store)
        and id(n) not in by_numbers
    )
    return stores == 1 and not _switched_to_grad(ctx, name)


def _switched_to_grad(ctx: Context, name: str) -> bool:
    """The source sets `name.requires_grad_()` or `name.requires_grad = ...` somewhere."""
    pattern = re.compile(rf"\b{re.escape(name)}\s*\.\s*requires_grad")
    return any(pattern.search(line) for line in ctx.lines)


def _plain_tensor(ctx: Context, node: ast.AST, depth: int = 0) -> bool:
    """A tensor that never required grad and has no graph: a torch factory without
    `requires_grad` (`torch.linspace(...)`), torch functions, tensor methods and arithmetic of
    such tensors and numbers, a name assigned once from one; live, a plain `torch.Tensor` with
    `requires_grad` False and no `grad_fn`."""
    if depth > 6:
        return False
    if isinstance(node, ast.Name):
        origin = ctx.origin(node)
        if origin is None:
            return _live_grad(ctx, node.id) is False or _plain_accumulator(ctx, node.id, depth)
        if _bound_once(ctx, node.id):
            return _plain_tensor(ctx, origin, depth + 1)
        return _plain_accumulator(ctx, node.id, depth)
    if isinstance(node, ast.BinOp):
        return _plain_operand(ctx, node.left, depth) and _plain_operand(ctx, node.right, depth)
    if isinstance(node, ast.UnaryOp):
        return _plain_tensor(ctx, node.operand, depth + 1)
    if isinstance(node, ast.Subscript):
        return _plain_tensor(ctx, node.value, depth + 1) and _plain_operand(ctx, node.slice, depth)
    if not isinstance(node, ast.Call) or any(
        kw.arg is None or (kw.arg == "requires_grad" and not _false(kw.value)) for kw in node.keywords
    ):
        return False
    func = node.func
    q = ctx.qualname(func) or ""
    if q.startswith("torch.") and q.count(".") == 1 and q[6:] in _PLAIN_FACTORIES:
        return True  # sizes, values or a copy: no graph comes through the arguments
    args = [*node.args, *(kw.value for kw in node.keywords)]
    if not all(_plain_operand(ctx, a, depth) for a in args):
        return False
    if q.startswith("torch."):
        return q.count(".") == 1 and ctx.kind(node) == TENSOR
    if isinstance(func, ast.Attribute) and not func.attr.startswith("requires_grad"):
        return _plain_tensor(ctx, func.value, depth + 1)  # a tensor method of a plain tensor
    return False


def _plain_accumulator(ctx: Context, name: str, depth: int) -> bool:
    """`total = torch.zeros(1)`, then only `total = total + loss.detach()` or `total += n` (a
    number, a plain tensor, a detached one, or a value computed under `no_grad`, such as
    `stats["n"]`): a running sum that never holds a graph."""
    values = _assigned_values(ast.walk(scope_node(ctx)), name)
    if values is None or not any(
        _plain_tensor(ctx, v, depth + 1) for v in values if not any(is_name(n, name) for n in ast.walk(v))
    ):
        return False  # bound some other way (a loop target, an unpacking), or never from a plain start
    if _switched_to_grad(ctx, name):
        return False

    def adds_no_graph(v: ast.AST) -> bool:
        if is_name(v, name) or isinstance(v, ast.Constant) or ctx.kind(v) in _NOT_TENSORS:
            return True
        if isinstance(v, ast.BinOp):
            return adds_no_graph(v.left) and adds_no_graph(v.right)
        if (
            isinstance(v, ast.Call)
            and isinstance(v.func, ast.Attribute)
            and v.func.attr in ("detach", "item")
        ):
            return True  # `loss.detach()`: no graph, whatever `loss` holds
        root = chain_root(v)
        if isinstance(root, ast.Name) and root.id != name and built_without_grad(ctx, root):
            return True  # `stats["n"]` with `stats` computed under `torch.no_grad()`
        return _plain_operand(ctx, v, depth + 1)

    return all(adds_no_graph(v) for v in values)


def _false(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _plain_operand(ctx: Context, node: ast.AST, depth: int) -> bool:
    """An argument that brings no graph: a constant, a number, device, dtype or shape, a plain
    tensor, or a tuple/list/slice of those."""
    if isinstance(node, ast.Constant) or ctx.kind(node) in _NOT_TENSORS:
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_plain_operand(ctx, e, depth) for e in node.elts)
    if isinstance(node, ast.Slice):
        return all(
            _plain_operand(ctx, e, depth) for e in (node.lower, node.upper, node.step) if e is not None
        )
    if isinstance(node, ast.Starred):
        return _plain_operand(ctx, node.value, depth)
    return _plain_tensor(ctx, node, depth + 1)


def _graph_rank(ctx: Context, owner: ast.AST, depth: int = 0) -> int:
    """0: the owner is known to carry a graph or require grad (a parameter, a model output, a
    tensor made with `requires_grad=True`, a live one that does, or one computed from those);
    1: not known."""
    if ctx.kind(owner) == PARAMETER or _is_model_output(ctx, owner):
        return 0
    if isinstance(owner, ast.Name):
        origin = ctx.origin(owner)
        if origin is None:
            return 0 if _live_grad(ctx, owner.id) else 1
        if isinstance(origin, ast.Call) and any(
            kw.arg == "requires_grad" and not (isinstance(kw.value, ast.Constant) and not kw.value.value)
            for kw in origin.keywords
        ):
            return 0
        owner = origin
    if depth < 3 and not isinstance(owner, ast.Name):
        for sub in ast.walk(owner):
            if isinstance(sub, ast.Name) and ctx.is_tensor(sub) and _graph_rank(ctx, sub, depth + 1) == 0:
                return 0
    return 1


def _flag_read(ctx: Context, node: ast.Attribute, owner: str) -> None:
    """A plain `.data` read. Several in one statement make one finding naming them all, the
    ones that carry a graph first (`y_pred.data` before `X.data`), with one fix for all."""
    stmt = ctx.statement()
    reads: dict[int, tuple[list[tuple[int, str, ast.Attribute]], Finding]] = ctx.__dict__.setdefault(
        "_torchmagic_data_reads", {}
    )
    entry = (_graph_rank(ctx, node.value), owner, node)
    entries = [entry]
    if stmt is not None and id(stmt) in reads:
        earlier, finding = reads[id(stmt)]
        ctx.withdraw(finding)
        entries = sorted([*earlier, entry], key=lambda e: e[0])
    lead = entries[0][2]
    names = [f"`{o}.data`" for _, o, _ in entries]
    reads_text = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    detached = " and ".join(f"`{o}.detach()`" for _, o, _ in entries)
    spans = sorted((_pos(n), _end(n)) for _, _, n in entries)
    in_order = sorted((n for _, _, n in entries), key=_pos)
    overlap = any(a[1] > b[0] for a, b in zip(spans, spans[1:]))
    ctx.flag(
        lead,
        f"{reads_text} {'reads the tensor' if len(entries) == 1 else 'read the tensors'} behind autograd's back.",
        f"Read with {detached}.",
        # unsafe: `.detach()` shares the version counter, so a later in-place write to the
        # result now makes a backward that saved the tensor fail loudly (as it should)
        fix=None
        if overlap
        else fix_of(
            "Read with `.detach()`",
            [ctx.edits.replace(n, f"{ctx.edits.atom(n.value)}.detach()") for n in in_order],
            "unsafe",
        ),
    )
    if stmt is not None:
        reads[id(stmt)] = (entries, ctx.findings[-1])


@check("TM403", attrs={"data"})
def data_attribute(node: ast.Attribute, ctx: Context) -> None:
    parent = ctx.parent
    if isinstance(parent, ast.Call) and parent.func is node:
        return  # `obj.data(...)` is a method, not the tensor attribute
    owner_node = node.value
    if not _tensor_owner(ctx, owner_node, node) or packed_sequence(ctx, owner_node):
        return  # not a tensor, or a `PackedSequence`'s field
    owner = unparse_operand(owner_node, 40)
    if isinstance(node.ctx, ast.Load) and (_in_conversion_swap(ctx) or _saved_for_a_swap(ctx, node)):
        return  # `p.data = fn(p.data)`, `saved.append(p.data)`: the read is part of a swap
    grand = ctx.stack[-2] if len(ctx.stack) >= 2 else None
    method = (
        parent.attr
        if isinstance(parent, ast.Attribute) and isinstance(grand, ast.Call) and grand.func is parent
        else None
    )
    call = grand if method is not None else None
    if method in _RESHAPES:
        ctx.flag(
            node,
            f"`{owner}.data.{method}(...)` changes the shape of a detached alias: `{owner}` itself keeps"
            " its old shape on current PyTorch.",
            f"Call it on the tensor itself: `{owner}.{method}{_args(call)}`, or bind a new tensor"  # type: ignore[arg-type]
            f" (`{owner} = ...`).",
        )
        return
    if (
        method is not None
        and method.endswith("_")
        and not method.endswith("__")
        and _of_a_lazy_module(ctx, owner_node)
    ):
        layer = unparse_operand(owner_node.value, 30)  # type: ignore[attr-defined]
        ctx.flag(
            node,
            f"`{owner}.data.{method}(...)` writes a lazy module's parameter before it exists: `{layer}` creates"
            f" its `{owner_node.attr}` at the first forward pass, and this write is lost.",  # type: ignore[attr-defined]
            f"Initialise `{layer}` after a first forward pass (a dry run on a sample batch), or give the layer"
            " its input size so it is not lazy.",
        )
        return
    if _nothing_bypassed(ctx, owner_node, parent, method):
        return
    if method is not None and method.endswith("_") and not method.endswith("__"):
        args = _args(call)  # type: ignore[arg-type]
        clean = _args(call, strip=_tensor_reads(ctx, call, owner))  # type: ignore[arg-type]
        if method in _INIT and _param_like(ctx, owner_node):
            fix = (
                f"Initialise with `nn.init.{_INIT[method]}{_args(call, lead=owner)}` or"  # type: ignore[arg-type]
                f" `with torch.no_grad(): {owner}.{method}{clean}`."
            )
        elif _activation_like(ctx, owner_node):
            # an in-place write under no_grad raises at backward() when an op saved the tensor
            fix = (
                f"Out of place, `{owner} = {owner}.{method[:-1]}{clean}` lets the gradient see the write."
                " If gradients must flow as if the values were unchanged (what `.data` does), keep it and"
                f" say so: the same in-place write under `torch.no_grad()` raises at `backward()` when an"
                f" operation saved `{owner}` for it."
            )
        else:
            fix = _write_hint(ctx, f"{owner}.{method}{clean}")
        ctx.flag(node, f"`{owner}.data.{method}{args}` writes the tensor behind autograd's back.", fix)
        return
    if (
        isinstance(parent, ast.Call)
        and node in parent.args
        and (ctx.qualname(parent.func) or "").startswith("torch.nn.init.")
        and ctx.qualname(parent.func) not in _SHAPE_HELPERS
    ):
        rest = _args(parent, skip=1, lead=owner) if parent.args[0] is node else "(...)"
        ctx.flag(
            node,
            f"`{unparse(parent, 50)}` passes `.data`: `nn.init` already writes without recording a graph.",
            f"Pass the tensor itself: `{unparse(parent.func, 30)}{rest}`.",
            severity="info",
            # nn.init writes under no_grad into the same storage: the same values either way
            fix=fix_of("Pass the tensor itself", [ctx.edits.replace(node, ctx.edits.source(node.value))]),
        )
        return
    helper = _writing_helper(ctx, parent, node)
    if helper is not None:
        ctx.flag(
            node,
            f"`{unparse(parent, 50)}` passes `.data` to `{helper}`, which writes it in place: a write"
            " behind autograd's back.",
            _write_hint(ctx, f"{unparse(parent.func, 30)}({owner}, ...)"),
        )
        return
    init = _init_helper(ctx, parent, node)
    if init is not None:
        ctx.flag(
            node,
            f"`{unparse(parent, 50)}` passes `.data` to `{init}`, which writes it with `nn.init`: that"
            " already writes without recording a graph.",
            f"Pass the tensor itself: `{unparse(parent.func, 30)}({owner})`.",
            severity="info",
            fix=fix_of("Pass the tensor itself", [ctx.edits.replace(node, ctx.edits.source(node.value))]),
        )
        return
    if isinstance(parent, ast.Attribute) and (parent.attr in _METADATA or parent.attr.startswith("new")):
        return  # `x.data.device`, `x.data.new(...)`: metadata or a factory, no value is read
    if _template_argument(ctx, parent, node):
        return  # `a.type_as(x.data)`, `torch.zeros_like(x.data)`: only its dtype/device/shape is read
    if _bound_for_metadata_only(ctx, node):
        return  # `w = next(self.parameters()).data` then only `w.new(...)`: the same, via a name
    if (
        isinstance(parent, ast.Call)
        and isinstance(parent.func, ast.Name)
        and parent.func.id in ("isinstance", "type")
        and parent.args
        and parent.args[0] is node
    ):
        return  # `isinstance(x.data, torch.cuda.FloatTensor)`: a type check
    if (
        isinstance(parent, ast.Compare)
        and all(isinstance(op, (ast.Is, ast.IsNot)) for op in parent.ops)
        and any(isinstance(c, ast.Constant) and c.value is None for c in [parent.left, *parent.comparators])
    ):
        return  # `p.data is not None`: an identity test, no value is read
    if isinstance(parent, ast.Subscript) and parent.value is node:
        if isinstance(parent.ctx, ast.Store) or _stored_through(ctx, parent):
            ctx.flag(
                node,
                f"`{owner}.data[...] = ...` writes the tensor behind autograd's back.",
                _write_hint(ctx, f"{owner}[...] = ..."),
            )
            return
        s = parent.slice
        if isinstance(s, ast.Constant) and s.value == 0 and _scalar_loss(ctx, owner_node):
            ctx.flag(
                node,
                f"`{owner}.data[0]` indexes a 0-dim tensor: it raises on current PyTorch.",
                f"Read the number with `{owner}.item()`.",
                # unsafe: the tensor is taken for 0-dim from what it holds (a loss); one with
                # elements (`reduction="none"`) indexed fine and would now raise
                fix=fix_of(
                    "Read it with `.item()`",
                    [ctx.edits.replace(parent, f"{ctx.edits.atom(node.value)}.item()")],
                    "unsafe",
                ),
            )
            return
    if isinstance(parent, ast.AugAssign) and parent.target is node:
        op = _OPS.get(type(parent.op), "+")
        ctx.flag(
            node,
            f"`{owner}.data {op}= ...` writes the tensor behind autograd's back.",
            _write_hint(ctx, f"{owner} {op}= ..."),
        )
        return
    if isinstance(node.ctx, ast.Store):
        value = _assigned_value(ctx)
        if value is not None and (_restores_saved_data(ctx, value) or _original_saved_first(ctx, owner)):
            return  # a swap of storage (and its undoing): `copy_` would overwrite the saved or swapped-in tensor
        swap = _swap_kind(ctx, value, owner) if value is not None else "other"
        if swap == "convert":
            return  # a deliberate swap of dtype, device or layout: `.data =` is the only way to do it
        if swap == "same":
            fix = _write_hint(ctx, f"{owner}.copy_(...)")
        else:
            fix = (
                f"Write under no_grad: `with torch.no_grad(): {owner}.copy_(...)` when the new value has"
                " the same shape, dtype and device (`copy_` keeps the tensor's own)."
            )
        ctx.flag(node, f"`{owner}.data = ...` replaces the tensor behind autograd's back.", fix)
        return
    if _plain_tensor(ctx, owner_node):
        return  # a tensor that never required grad: the read bypasses nothing
    if _index_output(ctx, owner_node):
        return  # `_, idx = scores.max(1)` then `idx.data`: integer indices carry no graph
    if _into_a_gradient(ctx):
        return  # `p.grad.data.add_(l.data)`: without `.data`, the gradient would record a graph
    if _without_a_graph(ctx, owner_node):
        return  # `output.cpu().data` of an output computed under `no_grad`: no graph to bypass
    _flag_read(ctx, node, owner)


def _without_a_graph(ctx: Context, owner: ast.AST) -> bool:
    """What `.data` is read from (through `.cpu()`-like calls) is a name last bound inside a
    `no_grad`/`inference_mode` block: an output with no graph, which `.data` cannot bypass."""
    root = chain_root(owner)
    if isinstance(root, ast.Name) and built_without_grad(ctx, root):
        return True
    while (
        isinstance(owner, ast.Call)
        and isinstance(owner.func, ast.Attribute)
        and owner.func.attr in KEEPS_DTYPE
    ):
        owner = owner.func.value
    return joined_without_grad(ctx, owner)  # `torch.cat(scores).data`


def _into_a_gradient(ctx: Context) -> bool:
    """The read is an argument of an in-place write to a gradient (`p.grad.add_(...)`,
    `p.grad.data.mul_(...).add_(...)`)."""
    for node in reversed(ctx.stack):
        if isinstance(node, ast.stmt):
            return False
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        target = node.func.value
        while isinstance(target, ast.Call) and isinstance(target.func, ast.Attribute):
            target = target.func.value  # `.mul_(...).add_(...)`: the chain writes its head
        if isinstance(target, ast.Attribute) and target.attr == "data":
            target = target.value
        if node.func.attr.endswith("_") and isinstance(target, ast.Attribute) and target.attr == "grad":
            return True
    return False


def _nothing_bypassed(ctx: Context, owner: ast.AST, parent: ast.AST | None, method: str | None) -> bool:
    """`.data` that bypasses no check of autograd's, read or written: on a gradient (`p.grad.data`,
    in no graph unless a double backward asked for one), where no graph is recorded (a `no_grad`
    or `inference_mode` block or decorated function), or read and detached at once
    (`w.data.clone().detach()`). Dropping `.data` there changes nothing but the spelling."""
    if isinstance(owner, ast.Attribute) and owner.attr == "grad":
        return True
    if ctx.grad_mode is not None:
        return True
    if method == "detach":
        return True
    if method == "clone" and len(ctx.stack) >= 4:
        outer = ctx.stack[-3]
        return isinstance(outer, ast.Attribute) and outer.attr == "detach"
    return False


def _index_output(ctx: Context, node: ast.AST) -> bool:
    """The indices output of `max`/`topk`/`sort`... (`_, best = torch.max(scores, 1)`, the last
    unpacking of the name before the read), maybe squeezed or moved, or a name that says it holds
    lengths or indices: an integer tensor."""
    while (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in KEEPS_DTYPE
    ):
        node = node.func.value
    if not isinstance(node, ast.Name):
        return False
    if INTEGER_NAME.search(node.id):
        return True  # `text_lengths`, `token_ids`: counts and indices
    last = ctx.last_unpacking(node)
    if last is None or indices_of(ctx, last.value) is None:
        return False
    return any(
        isinstance(t, (ast.Tuple, ast.List))
        and len(t.elts) == 2
        and isinstance(t.elts[1], ast.Name)
        and t.elts[1].id == node.id
        for t in last.targets
    )


@check("TM404", calls={"Variable"})
def variable_deprecated(call: ast.Call, ctx: Context) -> None:
    q = ctx.qualname(call.func) or ""
    if q not in ("torch.autograd.Variable", "torch.autograd.variable.Variable"):
        return
    ctx.flag(
        call,
        f"`{unparse(call, 50)}` uses the deprecated `Variable` wrapper.",
        "Use the tensor itself (`Variable(x)` is `x.detach()`); for a new leaf that needs"
        " gradients, pass `requires_grad=True` to the factory or call `.requires_grad_()`.",
        fix=_variable_fix(call, ctx),
    )


def _variable_fix(call: ast.Call, ctx: Context) -> Fix | None:
    """`Variable(x)` is `x.detach()`, `Variable(x, requires_grad=r)` is
    `x.detach().requires_grad_(r)`; `volatile` has no effect any more."""
    params = ("data", "requires_grad", "volatile")
    given: dict[str, ast.AST] = dict(zip(params, call.args))
    for kw in call.keywords:
        if kw.arg not in params or kw.arg in given:
            return None  # **kwargs, or an argument PyTorch would reject anyway
        given[kw.arg] = kw.value
    if len(call.args) > len(params) or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    data = given.get("data")
    if data is None:
        return None
    grad = given.get("requires_grad")
    text = ctx.edits.atom(data)
    if not _fresh_tensor(ctx, data):
        text += ".detach()"  # the one thing Variable(x) still does: cut x from its graph
    if grad is not None and not (isinstance(grad, ast.Constant) and grad.value is False):
        text += (
            ".requires_grad_()"
            if isinstance(grad, ast.Constant) and grad.value is True
            else (f".requires_grad_({ctx.edits.source(grad)})")
        )
    return fix_of("Drop the `Variable` wrapper", [ctx.edits.replace(call, text)])


def _fresh_tensor(ctx: Context, node: ast.AST) -> bool:
    """`torch.randn(3)`, `torch.tensor(data)`: a new tensor that needs no gradient, which
    detaching would leave as it is."""
    if not isinstance(node, ast.Call) or any(
        kw.arg == "requires_grad" or kw.arg is None for kw in node.keywords
    ):
        return False
    q = ctx.qualname(node.func) or ""
    return q.startswith("torch.") and q.count(".") == 1 and q[6:] in _FRESH


# not the legacy `torch.Tensor(t)` / `torch.FloatTensor(t)`: given a tensor they alias it, graph
# and all, so the wrapper's detach still matters there
_FRESH = NEW_TENSOR_FUNCS | {"from_numpy"}


def _is_model_output(ctx: Context, node: ast.AST) -> bool:
    """A module call (`model(x)`, `self.net(x)`), a loss, or a name assigned from one; through a
    layer without parameters (`nn.Softmax(dim=-1)(logits)`), what that layer was given."""
    seen = 0
    while seen < 6:
        seen += 1
        if isinstance(node, ast.Call) and node.args and _a_loss(ctx, node.func):
            inputs = [chain_root(a) for a in node.args[:2]]
            if any(_from_weights_unknown(ctx, a) for a in inputs):
                # `nn.MSELoss()(ft(t), decoder(fs, t))`: it needs grad where another input does
                return any(_is_model_output(ctx, a) for a in inputs)
        if isinstance(node, ast.Call) and node.args and _parameterless(ctx, node.func):
            node = chain_root(node.args[0])
            continue
        if not isinstance(node, ast.Name):
            break
        if "loss" in node.id.lower() and ctx.is_tensor(node):
            return True
        origin = ctx.origin(node)
        if origin is None:
            return False
        node = (
            chain_root(origin) if not isinstance(origin, ast.Call) or _is_module_call(ctx, origin) else origin
        )
    return isinstance(node, ast.Call) and _is_module_call(ctx, node)


def _is_module_call(ctx: Context, call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "forward":
        func = func.value
    return ctx.kind(func) == MODULE and not _parameterless(ctx, func) and not _weights_unknown(ctx, func)


def _a_loss(ctx: Context, module: ast.AST) -> bool:
    built = ctx.origin(module) if isinstance(module, ast.Name) else module
    q = (ctx.qualname(built.func) or "") if isinstance(built, ast.Call) else ""
    return q.startswith("torch.nn.") and q.endswith("Loss")


def _trains_a_weight(module: object, limit: int = 4096) -> bool:
    """The live module or one of its submodules holds a parameter that requires grad (read
    from their `_parameters`/`_modules` dicts: no user code runs)."""
    from ...explain.safe import module_store

    todo, seen = [module], 0
    while todo and seen < limit:
        m = todo.pop()
        seen += 1
        if any(
            getattr(p, "requires_grad", False)
            for p in module_store(m, "_parameters").values()
            if p is not None
        ):
            return True
        todo.extend(module_store(m, "_modules").values())
    return seen >= limit  # too big to walk: assume it does


def _from_weights_unknown(ctx: Context, node: ast.AST) -> bool:
    """What a module without weights (of this source, or of `_weights_unknown`) or one of its
    methods returns (`decoder(fs, t)`, `decoder.line_integrate(fh, t)`), or a name bound to it."""
    if isinstance(node, ast.Name):
        node = ctx.origin(node)
    if not isinstance(node, ast.Call):
        return False
    func = node.func.value if isinstance(node.func, ast.Attribute) else node.func
    return _weights_unknown(ctx, func) or ctx.kind(func) == MODULE and _parameterless(ctx, func)


# libraries whose modules are models: built from them, a module holds weights
_MODEL_LIBRARIES = frozenset(
    {"torch", "torchvision", "torchaudio", "timm", "transformers", "diffusers", "open_clip", "ultralytics"}
)
# what the code does only to a module with weights
_WEIGHT_USES = frozenset(
    {"parameters", "named_parameters", "load_state_dict", "state_dict", "requires_grad_", "train", "eval"}
)


def _weights_unknown(ctx: Context, module: ast.AST) -> bool:
    """`decoder = FixedTablot(terms=33)`, a class of another library that this source builds and
    calls but never trains, loads weights into, lists the parameters of or switches between
    train and eval: nothing says it holds weights (a numerical method packaged as a module), so
    its output is not known to need grad. A model library's class, or a class of this source,
    is known."""
    if not isinstance(module, ast.Name):
        return False
    live = ctx.namespace.get(module.id) if ctx.namespace else None
    if live is not None and "torch" in sys.modules:
        from ...explain.safe import is_module

        if is_module(live):
            return not _trains_a_weight(live)  # in a kernel: the module itself says
    built = _built(ctx, module)
    if (
        not isinstance(built, ast.Call)
        or isinstance(built.func, ast.Attribute)
        and built.func.attr == "from_pretrained"
    ):
        return False
    if isinstance(built.func, ast.Name) and built.func.id in ctx.classes:
        return False
    q = ctx.qualname(built.func) or ""
    if "." not in q or q.split(".")[0] in _MODEL_LIBRARIES:
        return False
    tree = module_node(ctx)
    if tree is None:
        return False
    return not any(
        isinstance(n, ast.Attribute)
        and n.attr in _WEIGHT_USES
        and isinstance(n.value, ast.Name)
        and n.value.id == module.id
        for n in ast.walk(tree)
    )


def _parameterless(ctx: Context, module: ast.AST) -> bool:
    """`Swish()` of a class of this source that registers no parameter, or `nn.Softmax(dim=1)`:
    its output needs grad only where its input does, so it is not a model output."""
    built = _built(ctx, module)
    if isinstance(built, ast.Call):
        q = ctx.qualname(built.func) or ""
        if q.startswith("torch.nn.") and q.rsplit(".", 1)[1] in PARAMETERLESS_LAYERS:
            return True
    return bare_module_instance(ctx, built)


_MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half"})


def _built(ctx: Context, module: ast.AST) -> ast.AST | None:
    """The call that built a module, through a name and the moves after it
    (`act = Swish().to(device)` -> `Swish()`)."""
    built = ctx.origin(module) if isinstance(module, ast.Name) else module
    while isinstance(built, ast.Call) and isinstance(built.func, ast.Attribute) and built.func.attr in _MOVES:
        built = built.func.value
    return built


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
    if isinstance(root, ast.Name) and built_without_grad(ctx, root):
        return  # `with torch.no_grad(): output = model(x)`, then `output["masks"].cpu().numpy()`
    ctx.flag(
        call,
        f"`{unparse(call, 50)}` fails on a tensor that requires grad.",
        f"Detach first: `{unparse_operand(root, 30)}.detach().cpu().numpy()`.",
        # `.detach()` changes no value: without grad it is a no-op, with grad the line raised
        fix=fix_of("Detach first", [ctx.edits.insert_after(call.func.value, ".detach()")]),
    )


@check("TM406", calls={"backward"})
def backward_under_no_grad(call: ast.Call, ctx: Context) -> None:
    if ctx.grad_mode is None:
        return
    if not isinstance(call.func, ast.Attribute) and ctx.qualname(call.func) != "torch.autograd.backward":
        return
    target = (
        call.func.value if isinstance(call.func, ast.Attribute) else (call.args[0] if call.args else None)
    )
    if _graph_built_before_grad_off(ctx, target):
        return
    ctx.flag(
        call,
        f"`{unparse(call, 50)}` runs under `{ctx.grad_mode}`, where no graph is recorded.",
        f"Move the forward pass and `.backward()` out of the `{ctx.grad_mode}` block.",
    )


def _of_a_lazy_module(ctx: Context, owner: ast.AST) -> bool:
    """`self.net.weight` where the same function built `self.net = nn.LazyLinear(1)`: until
    the first forward pass the parameter is an `UninitializedParameter`, whose `.data` writes
    are silently dropped and which `nn.init` refuses."""
    if not isinstance(owner, ast.Attribute) or owner.attr not in ("weight", "bias"):
        return False
    layer = node_text(owner.value)
    scope = ctx.frame.node or module_node(ctx)
    for sub in walk_scope(scope) if scope is not None else ():
        if (
            isinstance(sub, ast.Assign)
            and isinstance(sub.value, ast.Call)
            and (terminal_name(sub.value.func) or "").startswith("Lazy")
            and any(node_text(t) == layer for t in sub.targets)
        ):
            return True
    return False


def _graph_built_before_grad_off(ctx: Context, target: ast.AST | None) -> bool:
    """`loss = model.training_step(batch)`, then `with torch.no_grad(): loss.backward()`: the
    loss was computed before gradients were switched off, so its graph exists and the backward
    works (d2l runs its hand-written optimizer step this way). Also a loss handed in as an
    argument of the function that holds the block."""
    root = chain_root(target) if target is not None else None
    stored = isinstance(target, ast.Attribute) and is_name(target.value, "self")
    if not isinstance(root, ast.Name) or (root is not target and not stored):
        return False  # `model(x).sum().backward()`: computed right there, under the switch
    starts = [
        node.lineno
        for node in ctx.stack
        if isinstance(node, (ast.With, ast.AsyncWith))
        and any(disables_grad(ctx, i.context_expr) for i in node.items)
    ]
    if not starts:
        return False  # a decorated function: what it computes itself is computed without grad
    if stored:
        # `self.batch_loss = self.loss(out, y)` under `set_grad_enabled(True)`, then the block
        scope = ctx.frame.node
        if scope is None:
            return False
        text = node_text(target)
        parents = parents_of(scope)

        def without_grad(n: ast.AST) -> bool:
            while id(n) in parents:
                n = parents[id(n)]
                if isinstance(n, (ast.With, ast.AsyncWith)) and any(
                    disables_grad(ctx, i.context_expr) for i in n.items
                ):
                    return True
            return False

        return any(
            isinstance(n, ast.Assign)
            and n.lineno < min(starts)
            and any(node_text(t) == text for t in n.targets)
            and not without_grad(n)
            for n in walk_scope(scope)
        )
    origin = ctx.origin(root)
    if origin is None:
        return root.id in ctx.frame.names  # a parameter of the function around the block
    return getattr(origin, "lineno", starts[0]) < min(starts)


# ---- TM408: evaluation loops that record graphs nobody back-propagates ---------------------

Pos = tuple[int, int]


def _pos(node: ast.AST) -> Pos:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def _end(node: ast.AST) -> Pos:
    return (getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0)


@per_node
def _mode_switches(scope: ast.AST) -> tuple[list[tuple[Pos, str]], list[tuple[Pos, str]]]:
    """`(position, receiver)` of every `m.eval()` (and `m.train(False)`) and of every
    `m.train()` in the scope."""
    evals: list[tuple[Pos, str]] = []
    trains: list[tuple[Pos, str]] = []
    for sub in walk_scope(scope):
        if not (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)):
            continue
        name = sub.func.attr
        if name == "eval" and not sub.args and not sub.keywords:
            evals.append((_pos(sub), node_text(sub.func.value)))
        elif name == "train":
            recv = node_text(sub.func.value)
            mode = sub.args[0] if sub.args else (sub.keywords[0].value if sub.keywords else None)
            if isinstance(mode, ast.Constant) and mode.value is False:
                evals.append((_pos(sub), recv))
            else:
                trains.append((_pos(sub), recv))
    return evals, trains


def _module_switches_to_eval(ctx: Context) -> bool:
    """Any `x.eval()` or `x.train(False)` in the file or cell (read from its text, kept on the tree)."""
    mod = module_node(ctx)
    if mod is None:
        return True
    return remember(
        mod, "switches_to_eval", lambda: any(".eval(" in line or ".train(" in line for line in ctx.lines)
    )


def _frozen_modules(ctx: Context) -> set[str]:
    """Modules whose parameters are all switched off: `m.requires_grad_(False)`, or
    `for p in m.parameters(): p.requires_grad = False` (a forward through them records nothing)."""
    mod = module_node(ctx)
    if mod is None:
        return set()
    return remember(mod, "frozen_modules", lambda: _find_frozen(ctx, mod))


def _find_frozen(ctx: Context, mod: ast.AST) -> set[str]:
    out: set[str] = set()
    for sub in ast.walk(mod) if any("requires_grad" in line for line in ctx.lines) else ():
        if switches_grad_off(sub):
            out.add(ast.unparse(sub.func.value))  # type: ignore[attr-defined]
        if (
            isinstance(sub, ast.For)
            and isinstance(sub.iter, ast.Call)
            and isinstance(sub.iter.func, ast.Attribute)
            and sub.iter.func.attr == "parameters"
        ):
            for inner in ast.walk(sub):
                off = (
                    isinstance(inner, ast.Assign)
                    and any(isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in inner.targets)
                    and isinstance(inner.value, ast.Constant)
                    and inner.value.value is False
                ) or switches_grad_off(inner)
                if off:
                    out.add(ast.unparse(sub.iter.func.value))
    return out


def _body_nodes(loop: ast.AST, ctx: Context, guarded: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """The loop's own nodes in source order, with whether a `no_grad`-like block guards them;
    nested statement loops (they are checked on their own) and function bodies are left out.
    Lazy: the search for the loop's first forward pass usually stops early."""
    children = [*loop.body, *getattr(loop, "orelse", [])] if isinstance(loop, LOOPS) else []
    todo = [(stmt, guarded) for stmt in reversed(children)]
    while todo:
        node, g = todo.pop()
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While, *(_FN_NODES))):
            continue
        if isinstance(node, (ast.With, ast.AsyncWith)):
            g = g or any(disables_grad(ctx, i.context_expr) for i in node.items)
        if isinstance(node, ast.Try) and not g and _tries_without_grad_first(ctx, node):
            # `try: with no_grad(): out = model(x)` / `except RuntimeError: out = model(x)`: the
            # handler is the fallback for models whose forward needs autograd
            yield node, g
            todo.extend((child, True) for child in reversed(node.handlers))
            todo.extend((child, g) for child in reversed([*node.body, *node.orelse, *node.finalbody]))
            continue
        yield node, g
        todo.extend((child, g) for child in reversed(list(ast.iter_child_nodes(node))))


def _tries_without_grad_first(ctx: Context, node: ast.Try) -> bool:
    """The `try` body is one `no_grad`-like block: its handlers are the fallback with grad on."""
    return (
        len(node.body) == 1
        and isinstance(node.body[0], (ast.With, ast.AsyncWith))
        and any(disables_grad(ctx, i.context_expr) for i in node.body[0].items)
    )


_FN_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _turns_grad_on(ctx: Context, loop: ast.AST) -> bool:
    """The loop makes its inputs require grad (`coords.requires_grad = True`,
    `x.requires_grad_()`) or takes gradients itself (`torch.autograd.grad`, `enable_grad`):
    an evaluation that needs autograd, such as forces from an energy."""
    for sub in ast.walk(loop):
        if isinstance(sub, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in sub.targets
        ):
            if not (isinstance(sub.value, ast.Constant) and sub.value.value is False):
                return True
        if isinstance(sub, ast.Call):
            if isinstance(sub.func, ast.Attribute) and sub.func.attr == "requires_grad_":
                if not any(isinstance(a, ast.Constant) and a.value is False for a in sub.args):
                    return True
            if ctx.qualname(sub.func) in (
                "torch.autograd.grad",
                "torch.enable_grad",
                "torch.set_grad_enabled",
            ):
                return True
    return False


# calls in an evaluation loop that may train through a helper the linter cannot see
_TRAINING_WORDS = ("train", "fit", "backward", "attack", "adversar")


def _calls_backward(ctx: Context, node: ast.AST, depth: int = 0) -> bool:
    """`node` back-propagates, steps an optimizer, or calls a function of this file that does."""
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call):
            continue
        if is_backward(ctx, sub):
            return True
        f = sub.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if _optimizer_step(sub):
            return True
        if name != "train" and any(w in name.lower() for w in _TRAINING_WORDS):
            return True
        if depth < 2:
            target = None
            if isinstance(f, ast.Name):
                target = ctx.origin(f)
            elif (
                isinstance(f, ast.Attribute)
                and isinstance(f.value, ast.Name)
                and f.value.id == "self"
                and ctx.cls
            ):
                target = next(
                    (s for s in ctx.cls.node.body if isinstance(s, _FN_NODES[:2]) and s.name == f.attr), None
                )
            if (
                isinstance(target, _FN_NODES[:2])
                and target is not node
                and _calls_backward(ctx, target, depth + 1)
            ):
                return True
    return False


def _bound_in(node: ast.AST) -> set[str]:
    out: set[str] = set()
    for sub in ast.walk(node):
        targets: list[ast.AST] = []
        if isinstance(sub, ast.Assign):
            targets = list(sub.targets)
        elif isinstance(sub, (ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = [sub.target]
        elif (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in ("append", "extend")
        ):
            targets = [sub.func.value]
        for t in targets:
            for e in ast.walk(t):
                k = key(e) if isinstance(e, (ast.Name, ast.Attribute, ast.Subscript)) else None
                if k:
                    out.add(k)
    return out


def _target_text(t: ast.AST, top: bool = True) -> str:
    if isinstance(t, (ast.Tuple, ast.List)):
        inner = ", ".join(_target_text(e, False) for e in t.elts)
        return inner if top else f"({inner})"
    return ast.unparse(t)


def _loop_head(node: ast.AST) -> str:
    if isinstance(node, (ast.For, ast.AsyncFor)):
        target = _target_text(node.target)
        return f"for {target if len(target) <= 24 else '...'} in {unparse(node.iter, 30)}"
    return f"while {unparse(node.test, 30)}"  # type: ignore[attr-defined]


NOTES = "TM408"  # ctx.notes key: module-level function -> {"params": [...], "calls": [...]}


def _helper_def(ctx: Context, call: ast.Call) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, int] | None:
    """The function of this source a call runs (`calc_loss(x, y)`, `self.score(x)`), with the
    number of leading parameters the call does not pass (1 for `self`)."""
    f = call.func
    target: ast.AST | None = None
    skip = 0
    if isinstance(f, ast.Name):
        target = ctx.origin(f)
        mod = module_node(ctx)
        if target is None and not ctx.defined(f.id) and isinstance(mod, ast.Module):
            # defined further down the file: called once the whole file has run
            target = next((n for n in mod.body if isinstance(n, _FN_NODES[:2]) and n.name == f.id), None)
    elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" and ctx.cls:
        target = next(
            (s for s in ctx.cls.node.body if isinstance(s, _FN_NODES[:2]) and s.name == f.attr), None
        )
        skip = 1
    if not isinstance(target, _FN_NODES[:2]):
        return None
    return target, skip


def _fn_summary(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, list[str]] | None:
    """What a function calls with gradients on (`model`, `m`, `self.net.forward` -> `self.net`)
    and its parameters; None when it runs with gradients off (a `no_grad`/`inference_mode`
    decorator) or back-propagates."""
    return remember(fn, "tm408_summary", lambda: _summarise(ctx, fn))


def _summarise(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, list[str]] | None:
    if any(disables_grad(ctx, d) for d in fn.decorator_list) or _calls_backward(ctx, fn):
        return None
    calls: list[str] = []
    for sub, guarded in _body_nodes(ast.For(body=fn.body, orelse=[]), ctx):
        if guarded or not isinstance(sub, ast.Call):
            continue
        g = sub.func
        if isinstance(g, ast.Attribute) and g.attr == "forward":
            g = g.value
        if isinstance(g, (ast.Name, ast.Attribute)):
            text = node_text(g)
            if text not in calls:
                calls.append(text)
    return {"params": [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)], "calls": calls[:64]}


def _helper_forward(ctx: Context, call: ast.Call, receivers: set[str]) -> tuple[str, str] | None:
    """`(what the helper calls, module)` when the call runs a function of this source (or of an
    earlier notebook cell) that calls one of `receivers` (modules switched to eval) with
    gradients on: not decorated with `no_grad`/`inference_mode`, the forward not under such a
    block, no backward in it. A module passed as an argument counts as the one passed
    (`score(net, x)` with `def score(m, x): m(x)`)."""
    found = _helper_def(ctx, call)
    if found is not None:
        summary = _fn_summary(ctx, found[0])
        skip = found[1]
    elif isinstance(call.func, ast.Name) and ctx.origin(call.func) is None:
        # a function of an earlier cell: known from its source (CLI) or the live function's
        summary = ctx.notes.get(NOTES, {}).get(call.func.id) or _live_summary(ctx, call.func.id)
        skip = 0
    else:
        return None
    if not summary:
        return None
    params = summary["params"][skip:]
    passed = {p: ast.unparse(a) for p, a in zip(params, call.args) if not isinstance(a, ast.Starred)}
    passed.update({k.arg: ast.unparse(k.value) for k in call.keywords if k.arg in params})
    for text in summary["calls"]:
        head = text.split(".", 1)[0]
        if head in params:
            if head not in passed:
                continue  # a parameter left at its default: not the module the caller switched
            mapped = passed[head] + text[len(head) :]
        else:
            mapped = text
        if mapped in receivers:
            return text, mapped
    return None


def _live_summary(ctx: Context, name: str) -> dict[str, list[str]] | None:
    """`_fn_summary` of a plain Python function in the kernel (see `live_function`)."""
    fn = live_function(ctx, name)
    return _fn_summary(ctx, fn) if fn is not None else None


@check("TM408", loops=True, finish=True)
def eval_without_no_grad(loop: LoopInfo | ast.Module, ctx: Context) -> None:
    if isinstance(loop, ast.Module):
        note_cell_functions(ctx, loop, NOTES, lambda fn: _fn_summary(ctx, fn))  # what they run with grad on
        return
    node = loop.node
    if not isinstance(node, LOOPS) or ctx.in_forward:
        return
    if not _module_switches_to_eval(ctx):
        return
    if libraries.forward_needs_autograd(ctx) or _turns_grad_on(ctx, node):
        return  # forces as gradients of the energy: the evaluation needs autograd
    scope = scope_node(ctx)
    evals, trains = _mode_switches(scope)
    if not evals or all(p > _end(node) for p, _ in evals):
        return
    frozen = _frozen_modules(ctx)
    forward = None
    via = None  # the helper of this source that runs the forward
    for sub, guarded in _body_nodes(node, ctx):
        if guarded or not isinstance(sub, ast.Call):
            continue
        at = _pos(sub)
        evaluated = {
            r
            for r in {r for p, r in evals if p < at} - frozen
            if not any(max(p for p, e in evals if e == r and p < at) < t < at for t, q in trains if q == r)
        }
        f = sub.func
        if isinstance(f, ast.Attribute) and f.attr == "forward":
            f = f.value
        recv = node_text(f)
        if recv in evaluated:
            forward = (sub, recv)
            break
        helper = _helper_forward(ctx, sub, evaluated) if evaluated else None
        if helper is not None:
            via = sub
            forward = helper
            break
    if forward is None or _calls_backward(ctx, node) or grad_disabled_here(ctx, node.lineno):
        return
    if _uses_a_model_wrapper(ctx, node):
        return  # `adversary.perturb(x, y)` with `adversary = Attack(model)`: may need gradients
    call, recv = forward
    inner = call if isinstance(call, str) else ast.unparse(call.func)
    # the loop's outputs feed a backward further down (before the model goes back to training)
    flow = flow_of(ctx, scope)
    barrier = min((p for p, _ in trains if p > _pos(via or call)), default=(10**9, 0))  # type: ignore[arg-type]
    later = [c for c in flow.backward_calls if _end(node) < _pos(c) < barrier]
    if later:
        bound = _bound_in(node)
        for c in later:
            if flow.closure(backward_roots(c)) & bound:
                return
    runs = f"`{inner if len(inner) <= 30 else recv}(...)`"
    if via is not None:
        runs = (
            f"`{unparse(via.func, 30)}(...)`, which calls {runs if inner.startswith(recv) else f'`{recv}`'},"
        )
    ctx.flag(
        node,
        f"`{_loop_head(node)}` runs {runs} after `{recv}.eval()` with gradients on:"
        " every forward records a graph and keeps its activations, and nothing back-propagates them.",
        "Run the evaluation under `with torch.no_grad():` (or decorate the function with"
        " `@torch.no_grad()`); `torch.inference_mode()` is faster where the outputs never feed training.",
    )


def _uses_a_model_wrapper(ctx: Context, loop: ast.AST) -> bool:
    """The loop calls a method of an object built around a model by a class that is not
    PyTorch's (`GradientSignAttack(model, ...)`, `IntegratedGradients(net)`): what it runs with
    the model (an attack's or an explainer's backward) is not visible here."""
    for sub in ast.walk(loop):
        if not (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)):
            continue
        holder = sub.func.value
        built = ctx.origin(holder) if isinstance(holder, ast.Name) else None
        if not isinstance(built, ast.Call) or (ctx.qualname(built.func) or "").startswith("torch."):
            continue
        if any(ctx.kind(a) == MODULE for a in [*built.args, *(k.value for k in built.keywords)]):
            return True
    return False


def _write_hint(ctx: Context, write: str) -> str:
    return f"Write under no_grad: `with torch.no_grad(): {write}`."
