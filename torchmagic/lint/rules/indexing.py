"""TM7xx — vectorisation and indexing."""

from __future__ import annotations

import ast
import re

from ..accelerator import ACCELERATOR, where
from ..context import Context
from ..fixes import fix_of
from ..kinds import DTYPE, MODULE, NDARRAY, NUMBER, STRING
from ..nodes import is_name, isinstance_test, parents_of, remember, sole_bindings, terminal_name
from ..registry import check
from ._common import over_unique_groups, unparse, unparse_operand


def _length_of(ctx: Context, expr: ast.AST, depth: int = 0) -> ast.AST | None:
    """The tensor whose first-dimension length `expr` is: `x.size(0)`, `x.shape[0]`, `len(x)`,
    or a name bound to one (`n = x.size(0)`)."""
    if isinstance(expr, ast.Name) and depth < 2:
        origin = ctx.origin(expr)
        return _length_of(ctx, origin, depth + 1) if origin is not None else None
    if isinstance(expr, ast.Call):
        f = expr.func
        if isinstance(f, ast.Name) and f.id == "len" and len(expr.args) == 1:
            return expr.args[0]
        if isinstance(f, ast.Attribute) and f.attr == "size" and len(expr.args) == 1:
            a = expr.args[0]
            if isinstance(a, ast.Constant) and a.value == 0:
                return f.value
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute):
        s = expr.slice
        if expr.value.attr == "shape" and isinstance(s, ast.Constant) and s.value == 0:
            return expr.value.value
    return None


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b)


def _calls_a_module(ctx: Context, body: list[ast.stmt]) -> bool:
    """A forward pass per item (`decoder(z)`): each iteration is a whole model call, which no
    vectorised indexing op replaces."""
    for stmt in body:
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Call):
                f = sub.func
                if ctx.kind(f) == MODULE:
                    return True
                if isinstance(f, ast.Attribute) and ctx.kind(f.value) == MODULE:
                    return True  # `agent.get_action_and_value(obs)`: a method of a model
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
                    return True
                if isinstance(f, ast.Name) and _self_attribute(ctx.origin(f)):
                    return True  # `decoder = self.net.decoder` ... `decoder(z)`
                if isinstance(f, ast.Name) and f.id in _looping_functions(ctx):
                    return True  # `estimate(V, batch)`, a function of this file with loops of its own
    return False


def _looping_functions(ctx: Context) -> frozenset[str]:
    """Names of the file's top-level functions that run loops: a call of one per item is a
    whole procedure per value (an estimate redone for each sample count), not an element op."""
    tree = ctx.stack[0] if ctx.stack else None
    if tree is None:
        return frozenset()
    return remember(
        tree,
        "tm701.looping_functions",
        lambda: frozenset(
            f.name
            for f in getattr(tree, "body", [])
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            and any(isinstance(n, (ast.For, ast.While, ast.AsyncFor)) for n in ast.walk(f))
        ),
    )


def _self_attribute(node: ast.AST | None) -> bool:
    """`self.net.decoder`: an attribute of the object, as a submodule is."""
    if not isinstance(node, ast.Attribute):
        return False
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"


def _recurrence(body: list[ast.stmt]) -> bool:
    """`h = cell(x[t], h)`: a step that depends on the previous one is not vectorisable."""
    for stmt in body:
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Assign):
                names = {t.id for t in sub.targets if isinstance(t, ast.Name)}
                for t in sub.targets:
                    if isinstance(t, ast.Tuple):
                        names |= {e.id for e in t.elts if isinstance(e, ast.Name)}
                if names and any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(sub.value)):
                    return True
    return False


def _read_before_written(body: list[ast.stmt]) -> bool:
    """A name the body reads before a later statement of it assigns it (`obs[step] = next_obs`
    ... `next_obs, r, done, info = envs.step(action)`): each iteration starts from what the
    one before produced, a rollout rather than independent elements. A counter (`k += 1`) is
    not: it walks with the loop like an `arange`."""
    assigned_at: dict[str, int] = {}
    for k, stmt in enumerate(body):
        for sub in ast.walk(stmt):
            if isinstance(sub, (ast.Assign, ast.AnnAssign)):
                for target in sub.targets if isinstance(sub, ast.Assign) else [sub.target]:
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name):
                            assigned_at.setdefault(n.id, k)
    for k, stmt in enumerate(body):
        for sub in ast.walk(stmt):
            if (
                isinstance(sub, ast.Name)
                and isinstance(sub.ctx, ast.Load)
                and assigned_at.get(sub.id, -1) > k
            ):
                return True
    return False


def _carried_state(body: list[ast.stmt], var: str) -> bool:
    """A container written at an index other than the loop's (`detected[j] = 1`) and read in the
    same loop: later iterations depend on earlier ones (greedy matching), not one vectorised op."""
    written: set[str] = set()
    read: set[str] = set()
    for stmt in body:
        for sub in ast.walk(stmt):
            if not (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name)):
                continue
            uses_var = any(isinstance(n, ast.Name) and n.id == var for n in ast.walk(sub.slice))
            if isinstance(sub.ctx, ast.Store) and not uses_var:
                written.add(sub.value.id)
            elif isinstance(sub.ctx, ast.Load):
                read.add(sub.value.id)
    return bool(written & read)


# `range(model.cfg.n_layers)`, `range(num_heads)`: a count of a model's layers, heads or blocks
_PARTS_COUNT = re.compile(r"^(n|num|number_of)_?(layers?|heads?|blocks?)$|^(layers?|heads?|blocks?)$", re.I)


def _over_model_parts(it: ast.Call) -> bool:
    """A loop over a model's layers or heads (activation patching, per-layer probes): each pass
    is about one part of the model, not an element of a tensor."""
    bound = it.args[-1] if len(it.args) <= 2 else None
    if (
        isinstance(bound, ast.Call)
        and isinstance(bound.func, ast.Name)
        and bound.func.id == "len"
        and bound.args
    ):
        bound = bound.args[0]  # `range(len(model.blocks))`
    return bool(_PARTS_COUNT.match(terminal_name(bound) or ""))


def _small_range(ctx: Context, it: ast.Call) -> bool:
    """`range(16)`, or `range(N)` with `N = 16`: a handful of iterations."""
    if len(it.args) != 1:
        return False
    bound: ast.AST | None = it.args[0]
    if isinstance(bound, ast.Name):
        bound = ctx.origin(bound)
    return isinstance(bound, ast.Constant) and isinstance(bound.value, int) and bound.value <= 32


def _indexes_element(ctx: Context, body: list[ast.stmt], tensor: ast.AST, var: str) -> bool:
    """The body reads `x[i]` (or `x[i, ...]`) or writes `out[i] = ...` on a tensor."""
    for stmt in body:
        for sub in ast.walk(stmt):
            if not isinstance(sub, ast.Subscript):
                continue
            s = sub.slice
            first = s.elts[0] if isinstance(s, ast.Tuple) and s.elts else s
            if not (isinstance(first, ast.Name) and first.id == var):
                continue
            if _same(sub.value, tensor):
                return True
            if isinstance(sub.ctx, ast.Store) and ctx.is_tensor(sub.value):
                return True
    return False


# what a loop body does that no tensor operation can replace: drawing, plotting, files, logs
_EFFECT_ROOTS = frozenset(
    {"draw", "plt", "ax", "axs", "axes", "fig", "figure", "canvas", "font", "cv2", "Image", "ImageDraw"}
    | {
        "writer",
        "logger",
        "logging",
        "f",
        "fh",
        "fp",
        "file",
        "out",
        "csv_writer",
        "wandb",
        "tb",
        "os",
        "shutil",
    }
)
_EFFECT_FUNCS = frozenset({"print", "open", "imshow", "imsave", "save_image", "savefig", "write", "writerow"})


# `audio_write`, `save_audio`, `display`, `show_images`: a function named for an effect
_EFFECT_WORDS = re.compile(r"(?:^|_)(?:write|save|display|show|plot|draw)(?:_|$)")


def _call_root(func: ast.AST) -> str | None:
    while isinstance(func, (ast.Attribute, ast.Call, ast.Subscript)):
        func = func.func if isinstance(func, ast.Call) else func.value
    return func.id if isinstance(func, ast.Name) else None


def _only_side_effects(ctx: Context, body: list[ast.stmt], tensor: ast.AST) -> bool:
    """The body draws, plots, prints or writes files per item and changes no tensor: nothing to
    vectorise (on an accelerator, each item's copy out is TM301's to report)."""
    effect = False
    for stmt in body:
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Store) and ctx.is_tensor(sub.value):
                return False
            if isinstance(sub, ast.AugAssign) and ctx.is_tensor(sub.target):
                return False
            if isinstance(sub, ast.Call):
                f = sub.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
                if name in ("append", "extend", "insert"):
                    continue  # `out.append(torch.stack(...))`: a list being built, not a file
                if (
                    name in _EFFECT_FUNCS
                    or _call_root(f) in _EFFECT_ROOTS
                    or _EFFECT_WORDS.search(name or "")
                ):
                    effect = True
    return effect


def _moving_block(value: ast.AST, moving: set[str]) -> bool:
    """`x[:, start:end]` with a bound that moves with the loop: a whole block per iteration."""
    if not isinstance(value, ast.Subscript):
        return False
    parts = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
    for part in parts:
        if isinstance(part, ast.Slice) and part.lower is not None and part.upper is not None:
            bounds = [n for b in (part.lower, part.upper) for n in ast.walk(b)]
            if any(isinstance(n, ast.Name) and n.id in moving for n in bounds):
                return True
    return False


def _copies_blocks(node: ast.For) -> bool:
    """The body only cuts a block per iteration (`folded[i] = x[:, start:end]`, `parts.append(
    x[start:end])`), the bounds moving with the loop, and does integer bookkeeping: a copy per
    fold or per image, not a computation element by element."""
    bookkeeping = {
        id(stmt): (stmt.targets[0].id, stmt.value)
        for stmt in node.body
        if isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and not any(isinstance(n, (ast.Call, ast.Subscript)) for n in ast.walk(stmt.value))
    }
    moving = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    grew = True
    while grew:  # `start = k * step`, `end = start + width`, `start = end`: bounds that move
        grew = False
        for name, value in bookkeeping.values():
            if name not in moving and any(
                isinstance(n, ast.Name) and n.id in moving for n in ast.walk(value)
            ):
                moving.add(name)
                grew = True
    copied = False
    for stmt in node.body:
        if id(stmt) in bookkeeping:
            continue
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            if isinstance(stmt.targets[0], ast.Subscript) and _moving_block(stmt.value, moving):
                copied = True
                continue
        if (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute)
            and stmt.value.func.attr == "append"
            and len(stmt.value.args) == 1
            and _moving_block(stmt.value.args[0], moving)
        ):
            copied = True
            continue
        return False
    return copied


def _fills_device_tensor(ctx: Context, body: list[ast.stmt], var: str) -> ast.AST | None:
    """`X[i] = ...` on a tensor that lives on an accelerator: one small copy per iteration."""
    for stmt in body:
        for sub in ast.walk(stmt):
            if not (isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Store)):
                continue
            s = sub.slice
            first = s.elts[0] if isinstance(s, ast.Tuple) and s.elts else s
            if isinstance(first, ast.Name) and first.id == var and ctx.is_tensor(sub.value):
                if where(ctx, sub.value) == ACCELERATOR:
                    return sub.value
    return None


@check("TM701", nodes=(ast.For,))
def python_loop_over_tensor(node: ast.For, ctx: Context) -> None:
    it = node.iter
    if ctx.is_tensor(it) and not isinstance(it, ast.Call):
        if _calls_a_module(ctx, node.body) or _recurrence(node.body) or _sweeps_a_setting(ctx, node):
            return
        if (
            over_unique_groups(ctx, it)
            or _few_leading(it)
            or _elements_are_objects(node)
            or _only_converts(node)
            or _reads_only_metadata(node)
        ):
            return
        if _only_side_effects(ctx, node.body, it) or _copies_blocks(node) or _sums_whole_steps(node):
            return
        ctx.flag(
            node,
            f"`for {unparse(node.target, 20)} in {unparse(it, 30)}` loops over a tensor's rows in Python.",
            "Replace the loop by one vectorised operation over the whole tensor (broadcasting,"
            " `x.max(dim=1)`, `gather`, `torch.where`).",
        )
        return
    if not (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Name)
        and it.func.id == "range"
        and it.args
        and isinstance(node.target, ast.Name)
    ):
        return
    body = node.body
    if _calls_a_module(ctx, body) or _recurrence(body) or _carried_state(body, node.target.id):
        return
    if _read_before_written(body):
        return
    if _small_range(ctx, it) or _over_model_parts(it):
        return
    tensor = _length_of(ctx, it.args[0]) if len(it.args) == 1 else None
    if tensor is None or not ctx.is_tensor(tensor) or not _indexes_element(ctx, body, tensor, node.target.id):
        filled = _fills_device_tensor(ctx, body, node.target.id)
        if filled is not None and not _copies_blocks(node) and not _ragged_rows(ctx, body, node.target.id):
            ctx.flag(
                node,
                f"`for {node.target.id} in {unparse(it, 40)}` writes `{unparse(filled, 20)}[{node.target.id}]`"
                " one element at a time into a tensor on the accelerator.",
                "Compute the values with one vectorised expression and write them at once"
                f" (`{unparse(filled, 20)}[a:b] = ...`), or build the tensor on the CPU and move it once.",
            )
        return
    if (
        _only_side_effects(ctx, body, tensor)
        or _copies_blocks(node)
        or _ragged_rows(ctx, body, node.target.id)
    ):
        return
    window = _sliding_window(node)
    if window is not None:
        read, unfold = window
        ctx.flag(
            node,
            f"`for {node.target.id} in {unparse(it, 40)}` slides the window `{unparse(read, 40)}`"
            " over the tensor one position at a time in Python.",
            f"Take every window at once: `{unfold}` is a view with the windows in its last"
            " dimensions, so one reduction over them replaces the loop; a window multiplied by a"
            " kernel and summed is a convolution: `torch.nn.functional.conv2d` (or `conv1d`).",
        )
        return
    ctx.flag(
        node,
        f"`for {node.target.id} in {unparse(it, 40)}` indexes `{unparse(tensor, 20)}` element by element in Python.",
        "Replace the loop by one vectorised operation over the whole tensor (broadcasting,"
        " `x.max(dim=1)`, `gather`, `torch.where`).",
    )


def _ragged_rows(ctx: Context, body: list[ast.stmt], var: str) -> bool:
    """`x[i][mask[i]]`: each row keeps the elements its own boolean mask picks, a different
    number per row, so the rows do not stack into one tensor operation as they are."""
    for stmt in body:
        for sub in ast.walk(stmt):
            if not (
                isinstance(sub, ast.Subscript)
                and isinstance(sub.value, ast.Subscript)
                and is_name(sub.value.slice, var)
                and isinstance(sub.slice, ast.Subscript)
                and is_name(sub.slice.slice, var)
                and isinstance(sub.slice.value, ast.Name)
            ):
                continue
            mask = sub.slice.value
            if "mask" in mask.id.lower() or isinstance(ctx.origin(mask), ast.Compare):
                return True
    return False


def _full_slice(node: ast.AST) -> bool:
    """`image[:, :, idx]`: a subscript that keeps at least one whole dimension."""
    if not isinstance(node, ast.Subscript):
        return False
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return any(
        isinstance(p, ast.Slice) and p.lower is None and p.upper is None and p.step is None for p in parts
    )


def _sums_whole_steps(loop: ast.For) -> bool:
    """`for offset in offsets: coef, ind = weights(tm, offset); out += coef * image[:, :, ind]`: each
    row of the small tensor (a kernel offset, a tap) is only handed to functions, and each step adds
    an operation over whole dimensions of other tensors into an accumulator built before the loop.
    The loop is a sum over one short dimension whose every step is already vectorised; folding
    that dimension in too would multiply the memory by its length."""
    if not isinstance(loop.target, ast.Name):
        return False
    var = loop.target.id
    handed = {
        id(a)
        for stmt in loop.body
        for n in ast.walk(stmt)
        if isinstance(n, ast.Call)
        for a in [*n.args, *(k.value for k in n.keywords)]
    }
    uses = [n for stmt in loop.body for n in ast.walk(stmt) if is_name(n, var)]
    if not uses or any(id(u) not in handed for u in uses):
        return False
    bound = {
        n.id
        for stmt in loop.body
        for a in ast.walk(stmt)
        if isinstance(a, ast.Assign)
        for t in a.targets
        for n in ast.walk(t)
        if isinstance(n, ast.Name)
    }  # the accumulator is not rebound inside the loop, only added to
    return any(
        isinstance(stmt, ast.AugAssign)
        and isinstance(stmt.op, ast.Add)
        and isinstance(stmt.target, ast.Name)
        and stmt.target.id not in bound
        and any(_full_slice(n) for n in ast.walk(stmt.value))
        for stmt in loop.body
    )


def _few_leading(it: ast.AST) -> bool:
    """`for wid in sort_wid[:5]`: the first few entries (a constant bound of at most 16), a
    handful of candidates tried in turn."""
    if not (isinstance(it, ast.Subscript) and isinstance(it.slice, ast.Slice)):
        return False
    part = it.slice
    upper = part.upper
    return (
        part.lower is None
        and part.step is None
        and isinstance(upper, ast.Constant)
        and isinstance(upper.value, int)
        and 0 < upper.value <= 16
    )


# the attributes a tensor has that are not methods: an element read for any other is an object
_TENSOR_DATA_ATTRS = frozenset(
    {"shape", "dtype", "device", "data", "grad", "T", "mT", "H", "mH", "real", "imag", "ndim"}
    | {"is_cuda", "requires_grad", "grad_fn", "is_leaf", "layout", "names", "itemsize", "nbytes"}
)


def _elements_are_objects(loop: ast.For) -> bool:
    """`for mol_tree in mol_batch: dfs(s, mol_tree.nodes[0], -1)`: the body reads an attribute no
    tensor has (`.nodes`, `.smiles`) from each element, so the loop walks objects, whatever the
    name was guessed to hold (an unannotated `forward` argument)."""
    if not isinstance(loop.target, ast.Name):
        return False
    name = loop.target.id
    if any(_tested_as_a_container(n, name) for stmt in loop.body for n in ast.walk(stmt)):
        return True  # `assert isinstance(fmap, list)`: the code says what each element is
    funcs = {id(n.func) for stmt in loop.body for n in ast.walk(stmt) if isinstance(n, ast.Call)}
    return any(
        isinstance(n, ast.Attribute)
        and is_name(n.value, name)
        and id(n) not in funcs
        and n.attr not in _TENSOR_DATA_ATTRS
        for stmt in loop.body
        for n in ast.walk(stmt)
    )


def _tested_as_a_container(node: ast.AST, name: str) -> bool:
    """`isinstance(name, list)`, `isinstance(name, (list, tuple))`."""
    tested = isinstance_test(node)
    if tested is None or tested[0] != name:
        return False
    return all(isinstance(k, ast.Name) and k.id in ("list", "tuple", "dict") for k in tested[1])


_METADATA_READS = frozenset({"shape", "dtype", "device", "ndim", "size", "dim", "numel"})


def _reads_only_metadata(loop: ast.For) -> bool:
    """`for img in images: sizes.append(img.shape[-2:])`: the body reads only each element's
    shape, dtype or device. The rows of one tensor all share those, so the loop walks a list of
    tensors of varied sizes, and there is no per-row arithmetic to vectorise."""
    if not isinstance(loop.target, ast.Name):
        return False
    name = loop.target.id
    uses = [n for stmt in loop.body for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id == name]
    if not uses:
        return False
    parents = parents_of(loop)
    for use in uses:
        up = parents.get(id(use))
        if isinstance(up, ast.Attribute) and up.attr in _METADATA_READS:
            continue
        if isinstance(up, ast.Call) and is_name(up.func, "len") and up.args == [use]:
            continue
        return False
    return True


def _sweeps_a_setting(ctx: Context, loop: ast.For) -> bool:
    """`for z in z_scan: out = system.measure_at_z(field, z.item())`: each element is handed, as a
    Python number, to a call that runs a whole computation for it (a sweep over a setting);
    no tensor operation over the elements replaces those runs."""
    if not isinstance(loop.target, ast.Name):
        return False
    name = loop.target.id
    handed = 0
    for sub in ast.walk(ast.Module(body=loop.body, type_ignores=[])):
        if not isinstance(sub, ast.Call) or (ctx.qualname(sub.func) or "").startswith("torch."):
            continue
        if isinstance(sub.func, ast.Attribute) and ctx.is_tensor(sub.func.value):
            continue  # `scores.pow(level.item())`: tensor work per element, which one op replaces
        for arg in [*sub.args, *(k.value for k in sub.keywords)]:
            if _as_a_number(arg, name):
                handed += 1
    uses = sum(isinstance(n, ast.Name) and n.id == name for s in loop.body for n in ast.walk(s))
    return handed > 0 and handed == uses


def _as_a_number(node: ast.AST, name: str) -> bool:
    """`z.item()`, `float(z)`, `int(z)` of the loop variable `name`."""
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Attribute) and node.func.attr == "item" and not node.args:
        return isinstance(node.func.value, ast.Name) and node.func.value.id == name
    return (
        isinstance(node.func, ast.Name)
        and node.func.id in ("float", "int")
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id == name
    )


def _only_converts(loop: ast.For) -> bool:
    """`for el in grid_size: output_size.append(int(el))`: the body only turns each element into
    a Python number for a list; no tensor operation replaces it (`.tolist()` would, TM301's
    business when it waits for a GPU)."""
    if not isinstance(loop.target, ast.Name) or len(loop.body) != 1:
        return False
    stmt = loop.body[0]
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    if terminal_name(call.func) != "append" or len(call.args) != 1:
        return False
    arg = call.args[0]
    if (
        isinstance(arg, ast.Call)
        and isinstance(arg.func, ast.Name)
        and arg.func.id in ("int", "float", "bool")
    ):
        arg = arg.args[0] if len(arg.args) == 1 else arg
    elif (
        isinstance(arg, ast.Call)
        and isinstance(arg.func, ast.Attribute)
        and arg.func.attr in ("item", "tolist")
    ):
        arg = arg.func.value
    else:
        return False
    return is_name(arg, loop.target.id)


def _window_size(part: ast.AST, loop_vars: set[str]) -> ast.AST | None:
    """`size` of the slice `i:i + size` on a loop's variable (step 1): one window position."""
    if not (isinstance(part, ast.Slice) and part.step is None):
        return None
    lo, hi = part.lower, part.upper
    if not (isinstance(lo, ast.Name) and lo.id in loop_vars):
        return None
    if isinstance(hi, ast.BinOp) and isinstance(hi.op, ast.Add):
        if isinstance(hi.left, ast.Name) and hi.left.id == lo.id:
            return hi.right
        if isinstance(hi.right, ast.Name) and hi.right.id == lo.id:
            return hi.left
    return None


def _sliding_window(loop: ast.For) -> tuple[ast.Subscript, str] | None:
    """The body reads `x[i:i + h, j:j + w]` with `i`, `j` the variables of this loop and the
    loops inside it: a sliding window (a convolution, a pooling), which `x.unfold` gives whole.
    Returns the read and the `unfold` spelling of it."""
    loop_vars = {
        n.target.id for n in ast.walk(loop) if isinstance(n, ast.For) and isinstance(n.target, ast.Name)
    }
    for sub in ast.walk(loop):
        if not (isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Load)):
            continue
        parts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
        unfolds = []
        for dim, part in enumerate(parts):
            size = _window_size(part, loop_vars)
            if size is not None:
                unfolds.append(f".unfold({dim}, {unparse(size, 15)}, 1)")
            elif not (isinstance(part, ast.Slice) and part.lower is None and part.upper is None):
                break  # an index or a fixed slice: not a plain window over these dimensions
        else:
            if unfolds:
                return sub, unparse_operand(sub.value, 20) + "".join(unfolds)
    return None


def _is_scalar(ctx: Context, node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _is_scalar(ctx, node.operand)
    if isinstance(node, ast.Name):
        return ctx.kind(node) == NUMBER
    return False


@check("TM702", nodes=(ast.Subscript,))
def arange_index_for_slice(node: ast.Subscript, ctx: Context) -> None:
    s = node.slice
    if not (isinstance(s, ast.Tuple) and len(s.elts) == 2):
        return
    rows, col = s.elts
    if not (isinstance(rows, ast.Call) and ctx.qualname(rows.func) == "torch.arange" and len(rows.args) == 1):
        return
    length_of = _length_of(ctx, rows.args[0])
    if length_of is None or not _same(length_of, node.value) or not _is_scalar(ctx, col):
        return
    ctx.flag(
        node,
        f"`{unparse(node, 50)}` picks one column with an arange gather.",
        f"Slice instead: `{unparse(node.value, 20)}[:, {unparse(col, 20)}]`.",
        # unsafe: the same values, but a slice is a view where the gather made a copy, so an
        # in-place write to the result now reaches the original
        fix=fix_of("Slice the column", [ctx.edits.replace(rows, ":")], "unsafe"),
    )


_TRANSPOSES = frozenset({"transpose", "permute", "t", "swapaxes", "swapdims", "movedim", "moveaxis"})
_TRANSPOSE_ATTRS = frozenset({"T", "mT", "H", "mH"})


@check("TM703", calls={"view"})
def view_after_transpose(call: ast.Call, ctx: Context) -> None:
    if not isinstance(call.func, ast.Attribute):
        return
    value = call.func.value
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in _TRANSPOSES
    ):
        what, base = f".{value.func.attr}()", value.func.value
    elif isinstance(value, ast.Attribute) and value.attr in _TRANSPOSE_ATTRS:
        what, base = f".{value.attr}", value.value
    else:
        return
    # numpy's `.view(dtype)` reinterprets bytes and works on any layout.
    if ctx.kind(base) == NDARRAY:
        return
    if len(call.args) == 1 and not call.keywords:
        a = call.args[0]
        if ctx.kind(a) in (DTYPE, STRING) or ((ctx.qualname(a) or "").startswith("numpy.")):
            return
    if any(kw.arg == "dtype" for kw in call.keywords):
        return
    if not _view_must_fail(ctx, call, value, base):
        return
    ctx.flag(
        call,
        f"`{unparse(call, 50)}` calls `.view` on the non-contiguous result of `{what}`.",
        f"Use `{unparse_operand(value, 30)}.reshape(...)` or `{unparse_operand(value, 30)}.contiguous().view(...)`.",
        # reshape returns the same view wherever view succeeds; where view raised, it copies
        fix=fix_of("Use `.reshape`", [ctx.edits.attribute_name(call.func, "reshape")])
        if _sizes_only(ctx, call)
        else None,
    )


# ---- TM703: does the view merge dimensions that the transpose took out of order? ----------
#
# On a contiguous tensor permuted by `p`, the permuted dimensions fall into runs: maximal
# stretches `p[k], p[k + 1], ...` of consecutive original dimensions in their original order
# (dimensions of size 1 do not break a run). `.view` can split any dimension and merge
# dimensions within a run, never across one. So with every size above 1, a view with fewer
# sizes than there are runs must merge across one and raises; one with as many may keep every
# run whole (`x.permute(0, 2, 3, 1).view(b, h * w, c)`) and is not reported.

_MAX_RANK = 8


def _view_must_fail(ctx: Context, call: ast.Call, value: ast.AST, base: ast.AST) -> bool:
    """The view raises for every shape whose sizes are above 1 (except the dimensions the view
    itself says are 1), whatever rank the transposed tensor has."""
    sizes = _view_sizes(ctx, call)
    if sizes is None:
        return False  # `view(shape)`, `view(*dims)`: how many sizes is not known
    perms = _permutations(value)
    if perms is None:
        # a transpose of dimensions not written as numbers: at least two runs
        return sum(not _is_one(a) for a in sizes) < 2
    named = _named_dims(ctx, sizes, base)
    rank = _unpacked_rank(ctx, base)
    if rank is not None and any(len(p) == rank for p in perms):
        perms = [p for p in perms if len(p) == rank]
    return all(_fails_for(perm, sizes, named) for perm in perms)


def _unpacked_rank(ctx: Context, base: ast.AST) -> int | None:
    """The rank `b, c, t = x.shape` shows the transposed tensor `x` to have."""
    fn = ctx.frame.node
    if not (isinstance(base, ast.Name) and isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))):
        return None
    for n in ast.walk(fn):
        if (
            isinstance(n, ast.Assign)
            and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Tuple)
            and not any(isinstance(e, ast.Starred) for e in n.targets[0].elts)
            and _shape_of(n.value) == base.id
        ):
            return len(n.targets[0].elts)
    return None


def _view_sizes(ctx: Context, call: ast.Call) -> list[ast.AST] | None:
    """The sizes `view(a, b)` or `view((a, b))` asks for, None when their number is not known."""
    args = call.args
    if not args and len(call.keywords) == 1 and call.keywords[0].arg == "size":
        args = [call.keywords[0].value]  # `view(size=(b, -1))`
    elif call.keywords:
        return None
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = args[0].elts
    if not args or any(isinstance(a, ast.Starred) for a in args):
        return None
    one = args[0]
    if len(args) == 1 and not (
        isinstance(one, (ast.Constant, ast.UnaryOp, ast.BinOp)) or _size_expr(ctx, one)
    ):
        return None  # a single name or call may hold a whole shape
    return list(args)


def _is_one(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 1 and not isinstance(node.value, bool)


def _int(node: ast.AST) -> int | None:
    """The value of an integer literal (`2`, `-1`)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    return None


def _int_args(call: ast.Call) -> list[int] | None:
    """`permute(0, 2, 1)`, `permute((0, 2, 1))`, `size(0)`: the integer literals passed."""
    args = call.args
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = args[0].elts
    out = [_int(a) for a in args]
    return None if call.keywords or None in out else out  # type: ignore[return-value]


def _permutations(value: ast.AST) -> list[tuple[int, ...]] | None:
    """The permutations the transpose may stand for, one per rank it is valid at (the rank is
    known only for `permute`); None when its dimensions are not numbers."""
    if isinstance(value, ast.Attribute):  # `.T`, `.H` (2-D), `.mT`, `.mH`: the last two swapped
        ranks = range(2, 3) if value.attr in ("T", "H") else range(2, _MAX_RANK + 1)
        return [(*range(n - 2), n - 1, n - 2) for n in ranks]
    assert isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
    op = value.func.attr
    if op == "t":
        return [(1, 0)]
    dims = _int_args(value)
    if dims is None:
        return None
    if op == "permute":
        n = len(dims)
        perm = tuple(d % n for d in dims) if n and all(-n <= d < n for d in dims) else None
        return [perm] if perm is not None and sorted(perm) == list(range(n)) else None
    if len(dims) != 2:
        return None
    out = [p for n in range(1, _MAX_RANK + 1) if (p := _moved(op, dims, n)) is not None]
    return out or None


def _moved(op: str, dims: list[int], n: int) -> tuple[int, ...] | None:
    """The permutation `transpose(i, j)` or `movedim(i, j)` makes of a rank-`n` tensor."""
    if not all(-n <= d < n for d in dims):
        return None
    i, j = (d % n for d in dims)
    order = list(range(n))
    if op in ("movedim", "moveaxis"):
        order.insert(j, order.pop(i))
    else:
        order[i], order[j] = order[j], order[i]
    return tuple(order)


def _named_dims(ctx: Context, sizes: list[ast.AST], base: ast.AST) -> list[list[int] | None]:
    """For each view size, the dimensions of the transposed tensor it multiplies when the code
    names them (`b, c, t = x.shape` then `view(b, t, c)`, `x.size(0)`, `h * d`); None when not
    known. A negative index stays negative (the rank may not be known)."""
    if not isinstance(base, ast.Name):
        return [None] * len(sizes)
    fn = ctx.frame.node
    bound = sole_bindings(fn) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else {}
    return [_dims_of(a, base.id, bound) for a in sizes]


def _dims_of(node: ast.AST, base: str, bound: dict[str, tuple[ast.AST, int | None]]) -> list[int] | None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = _dims_of(node.left, base, bound), _dims_of(node.right, base, bound)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.Name) and node.id in bound:
        value, index = bound[node.id]
        if index is not None and _shape_of(value) == base:
            return [index]
        return _dims_of(value, base, {}) if index is None else None
    if isinstance(node, ast.Subscript) and _shape_of(node.value) == base:
        d = _int(node.slice)
        return None if d is None else [d]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size":
        d = _int_args(node)
        if (
            d is not None
            and len(d) == 1
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == base
        ):
            return d
    return None


def _shape_of(node: ast.AST) -> str | None:
    """`x` for `x.shape` or `x.size()`."""
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        node = node.func
        if not (isinstance(node, ast.Attribute) and node.attr == "size"):
            return None
    elif not (isinstance(node, ast.Attribute) and node.attr == "shape"):
        return None
    return node.value.id if isinstance(node.value, ast.Name) else None


def _fails_for(perm: tuple[int, ...], sizes: list[ast.AST], named: list[list[int] | None]) -> bool:
    """The view of the tensor permuted by `perm` raises whenever its sizes are above 1. Leading
    `1`s of the view at dimensions the permutation leaves in place are read as those sizes (a
    batch of one: `pe.permute(0, 2, 3, 1).view(1, -1, c)`)."""
    n = len(perm)
    ones = set()
    for k, a in enumerate(sizes):
        if not (_is_one(a) and k < n and perm[k] == k and all(perm[i] == i for i in range(k))):
            break
        ones.add(k)
    order = [d for d in perm if d not in ones]
    runs = _runs(order, ones)
    kept = [(a, dims) for a, dims in zip(sizes, named) if not _is_one(a)]
    if len(kept) < len(runs):
        return True
    if all(dims is not None for _, dims in kept):
        flat = [d % n if -n <= d < n else None for _, dims in kept for d in dims]  # type: ignore[union-attr]
        if None in flat or sorted(flat) != sorted(order):  # type: ignore[type-var]
            return False  # not every dimension named once: nothing to compare
        groups = [[d % n for d in dims] for _, dims in kept]  # type: ignore[union-attr]
        return flat != order or any(len(_runs(g, ones)) > 1 for g in groups)
    return False


def _runs(order: list[int], ones: set[int]) -> list[list[int]]:
    """Split `order` where the next dimension is not the next one in memory (past size-1 ones)."""
    runs: list[list[int]] = []
    for d in order:
        if runs and d > runs[-1][-1] and all(k in ones for k in range(runs[-1][-1] + 1, d)):
            runs[-1].append(d)
        else:
            runs.append([d])
    return runs


def _sizes_only(ctx: Context, call: ast.Call) -> bool:
    """`view(b, -1)`, `view((b, -1))`, `view(x.size(0), n * 4)`: arguments that can only be
    sizes, which `reshape` takes the same way (not `size=`, which it spells `shape=`, nor a
    single name that might hold a dtype)."""
    if call.keywords or not call.args:
        return False
    if len(call.args) == 1:
        a = call.args[0]
        return isinstance(a, (ast.Tuple, ast.List)) or _size_expr(ctx, a)
    return not any(isinstance(a, ast.Starred) for a in call.args)  # several: sizes (a dtype comes alone)


def _size_expr(ctx: Context, node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _size_expr(ctx, node.operand)
    if isinstance(node, ast.BinOp):
        return _size_expr(ctx, node.left) or _size_expr(ctx, node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in ("size", "numel", "dim")
    if isinstance(node, ast.Subscript):
        v = node.value
        return (isinstance(v, ast.Attribute) and v.attr == "shape") or (
            isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "size"
        )
    return ctx.kind(node) == NUMBER
