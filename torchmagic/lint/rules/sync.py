"""TM3xx — CPU-GPU synchronisation: code that makes the CPU wait for the GPU.

Both rules speak of the GPU, so they stay silent where no GPU is involved: a value known to
be on the CPU (live device, `.cpu()`-ed, a factory without a device, combined with a CPU
tensor literal: see `accelerator.where`), the CPU-only branch of
`x.cpu().numpy() if x.is_cuda else x.numpy()`, and code with no path to an accelerator at all
(`needs_accelerator`: kept only when the file, notebook or kernel moves something to one).
"""

from __future__ import annotations

import ast
import builtins
import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from ...report import Finding
from .. import accelerator, libraries
from ..context import Context, LoopInfo
from ..kinds import (
    DATASET,
    DEVICE,
    DICT,
    DTYPE,
    LIST,
    LOADER,
    MODULE,
    NDARRAY,
    NONE,
    NUMBER,
    OPTIMIZER,
    SCHEDULER,
    SHAPE,
    STATE_DICT,
    STRING,
    TENSOR_KINDS,
    TENSOR_METADATA,
)
from ..nodes import (
    COMPREHENSIONS,
    LOOPS,
    SCOPES,
    ancestors,
    block_of,
    constant_or_len,
    enclosing_blocks,
    is_name,
    isinstance_test,
    keyword,
    over_integers,
    own_nodes,
    parameter_default,
    parameters,
    parents_of,
    per_node,
    remember,
    sole_binding,
    terminal_name,
    top_level_calls,
    unwrapped_iterable,
)
from ..registry import check
from ..walker import is_step_loop
from . import devices, io
from ._common import (
    declared_options,
    format_template,
    inside_a_call,
    live_function,
    move_target,
    name_like,
    note_cell_functions,
    over_unique_groups,
    root_name,
    unparse,
    unparse_operand,
    word_of,
    writes_a_file,
)
from ._flow import is_backward

# Receivers that are certainly not tensors: `.item()`/`.tolist()` on them is no GPU sync.
_NOT_TENSOR = frozenset(
    {NUMBER, STRING, NDARRAY, LIST, DICT, MODULE, OPTIMIZER, SCHEDULER, LOADER, DATASET, DEVICE, DTYPE}
    | {NONE, SHAPE, STATE_DICT}
)
# `.numpy()` is not among them: on a CPU tensor it waits for nothing, on a GPU tensor it raises;
# the wait in `x.cpu().numpy()` is the `.cpu()`
_SYNC_METHODS = frozenset({"item", "tolist", "cpu", "nonzero"})

PERIODIC, ONCE, ON_REQUEST = "periodic", "once", "on request"


def _loop_names(loop: ast.AST) -> set[str]:
    target = getattr(loop, "target", None)
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)} if target is not None else set()


def _iterable(loop: ast.AST) -> ast.AST | None:
    """What a loop walks: a `for`'s iterable, or a comprehension's first one."""
    return loop.generators[0].iter if isinstance(loop, COMPREHENSIONS) else getattr(loop, "iter", None)


def _unenumerated(it: ast.AST | None) -> ast.AST | None:
    """`xs` for `enumerate(xs)`: the items an enumeration walks."""
    return unwrapped_iterable(it, _ENUMERATE)


_ENUMERATE = frozenset({"enumerate"})


def _iteration_names(loop: ast.AST) -> set[str]:
    """The names a loop, or a comprehension, binds on each iteration."""
    if isinstance(loop, COMPREHENSIONS):
        return {n.id for g in loop.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
    return _loop_names(loop)


def _is_mod(test: ast.AST) -> bool:
    return any(isinstance(b, ast.BinOp) and isinstance(b.op, ast.Mod) for b in ast.walk(test))


def _periodic_helper(ctx: Context, test: ast.AST) -> bool:
    """`if every_n_steps(state, args.log_freq):` with the helper defined in this source around a
    `step % freq == 0`: a guard that lets every N-th step through, given a name."""
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name)):
        return False
    func = ctx.frames[0].values.get(test.func.id)
    return isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_mod(func)


def _is_once(test: ast.AST, loop_names: set[str]) -> bool:
    """`i == 0`, `step == len(loader) - 1`, `epoch == last`: true on one iteration only."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, *test.comparators]
    return any(isinstance(s, ast.Name) and s.id in loop_names for s in sides) or any(
        isinstance(s, ast.Constant) and isinstance(s.value, int) and not isinstance(s.value, bool)
        for s in sides
    )


def _is_first_or_last(test: ast.AST, loop_names: set[str]) -> bool:
    """`i == 0` on a loop's own name (within an `and`: `if i == 0 and log_samples:`)."""
    return (
        _is_once(test, loop_names)
        and isinstance(test, ast.Compare)
        and any(isinstance(s, ast.Name) and s.id in loop_names for s in (test.left, *test.comparators))
    )


def _last_or_stopping(test: ast.AST, loop_names: set[str]) -> bool:
    """`i == len(loader) - 1 or self.terminate`: the last iteration, or the one on which the run
    stops (a flag named for it), whichever comes first: once per pass."""
    return (
        isinstance(test, ast.BoolOp)
        and isinstance(test.op, ast.Or)
        and any(_is_once(v, loop_names) for v in test.values)
        and all(_is_once(v, loop_names) or _STOPPING.search(word_of(v)) for v in test.values)
    )


_STOPPING = re.compile(r"terminat|stop|finish|done|abort", re.I)


def _index_against(test: ast.AST, loop_names: set[str], ops: tuple[type, ...]) -> ast.AST | None:
    """`i < <right>` (one comparison, an operator of `ops`, a loop name on the left): the right
    side; None for any other test."""
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ops)
        and isinstance(test.left, ast.Name)
        and test.left.id in loop_names
    ):
        return test.comparators[0]
    return None


def _before_the_last(test: ast.AST, loop_names: set[str]) -> bool:
    """`i < len(loader) - 1` (or `!= len(loader) - 1`): false on the last iteration only, so its
    `else` runs once."""
    right = _index_against(test, loop_names, (ast.Lt, ast.NotEq))
    return (
        isinstance(right, ast.BinOp)
        and isinstance(right.op, ast.Sub)
        and isinstance(right.right, ast.Constant)
        and right.right.value == 1
        and isinstance(right.left, ast.Call)
        and isinstance(right.left.func, ast.Name)
        and right.left.func.id == "len"
    )


def _in_a_conjunct(test: ast.AST, holds: Callable[[ast.AST], bool]) -> bool:
    """`holds` for the test, or for one operand of an `and` in it (`if log and i == 0:` runs
    no more often than `i == 0` does)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_in_a_conjunct(v, holds) for v in test.values)
    return holds(test)


def _is_sampled(test: ast.AST, loop_names: set[str]) -> bool:
    """`i in sample_ids`, `step in save_steps` (also within an `and`): true on the iterations
    a collection picks, not on every one."""
    return _in_a_conjunct(test, lambda t: _sampled(t, loop_names))


def _sampled(test: ast.AST, loop_names: set[str]) -> bool:
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.In)
        and isinstance(test.left, ast.Name)
        and test.left.id in loop_names
    )


def _debug_switch(test: ast.AST) -> bool:
    """`if debug:`, `if self.verbose:`, `if args.verbose > 1:`: a switch the user turns on to see
    every step, who then asked for the wait."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.comparators[0], ast.Constant):
        test = test.left
    return isinstance(test, (ast.Name, ast.Attribute)) and name_like(test, "debug", "verbose")


def _resets_counter(node: ast.If) -> bool:
    """`if seen >= N: ...; seen = 0`: a counter that the guarded block resets."""
    names = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and stmt.value.value == 0:
            if any(isinstance(t, ast.Name) and t.id in names for t in stmt.targets):
                return True
    return False


def _is_bounded(test: ast.AST) -> bool:
    """`len(examples) < 5`, `n_shown <= 8` (also within an `and`): a guard that lets a few
    iterations through."""
    return _in_a_conjunct(test, _bounded)


def _bounded(test: ast.AST) -> bool:
    if (
        not isinstance(test, ast.Compare)
        or len(test.ops) != 1
        or not isinstance(test.ops[0], (ast.Lt, ast.LtE))
    ):
        return False
    right = test.comparators[0]
    return isinstance(right, ast.Constant) and isinstance(right.value, int) and right.value <= 16


# what a count of examples to show is named (`self.showpiece_num`, `args.n_samples`, `num_vis`)
_SHOWN = re.compile(r"show|sample|vis|plot|example|display|image|img|audio|figure", re.I)


def _first_few(test: ast.AST, loop_names: set[str]) -> bool:
    """`i < self.showpiece_num`, `idx < args.n_samples`: the loop's index against a count of
    examples to show, true on the first few iterations only."""
    right = _index_against(test, loop_names, (ast.Lt, ast.LtE))
    return right is not None and bool(_SHOWN.search(word_of(right)))


_EPISODE_FLAGS = frozenset(
    {"done", "dones", "terminal", "terminals", "terminated", "truncated", "is_terminal"}
)


def _flag_name(ctx: Context, node: ast.AST, depth: int = 0) -> bool:
    """`done`, `dones[i]`, `next_done[idx]`, or `d` of `for idx, d in enumerate(done)`."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if not isinstance(node, ast.Name):
        return False
    name = node.id.lower()
    if name in _EPISODE_FLAGS or name.endswith("_done") or name.endswith("_dones"):
        return True
    source = ctx.loop_source(node.id)
    while isinstance(source, ast.Call) and terminal_name(source.func) in ("enumerate", "zip") and source.args:
        source = source.args[-1] if terminal_name(source.func) == "enumerate" else source.args[0]
    return depth < 4 and source is not None and _flag_name(ctx, source, depth + 1)


def _is_episode_end(ctx: Context, test: ast.AST) -> bool:
    """`if done:`, `if d and info["lives"][idx] == 0:`, `if "episode" in info:`: true when an
    episode of an environment ends, once in many steps (also within an `and`)."""
    return _in_a_conjunct(test, lambda t: _episode_end(ctx, t))


def _episode_end(ctx: Context, test: ast.AST) -> bool:
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.In)
        and isinstance(test.left, ast.Constant)
        and test.left.value in ("episode", "final_info", "final_observation")
    ):
        return True
    return _flag_name(ctx, test)


# words of an iterable that hands out data or steps, not the parts of one step
_DATA_WORDS = re.compile(r"load|data|batch|sample|iter|stream|env|step|epoch|queue|gen|reader", re.IGNORECASE)


def _over_named_parts(loop: ast.For | ast.AsyncFor) -> bool:
    """`for name in self.saes:`, `for k, v in self.heads.items():`: a walk over named parts the
    object holds (autoencoders per layer, heads), not over a data source or a range."""
    it = _unenumerated(loop.iter)
    if (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Attribute)
        and it.func.attr in ("items", "keys", "values")
    ):
        it = it.func.value
    return (
        isinstance(it, ast.Attribute)
        and isinstance(it.value, ast.Name)
        and it.value.id == "self"
        and not _DATA_WORDS.search(it.attr)
    )


def _walks_own_lists(ctx: Context, loop: ast.AST) -> bool:
    """`for i, (voc, audio) in enumerate(zip(kept_voc, kept_audio))`, where each list is one the
    source builds itself (`kept_voc = []` then `.append`): a loop over results kept in memory,
    part of the step that goes over them, not a pass over a loader."""
    it = getattr(loop, "iter", None)
    while isinstance(it, ast.Call) and terminal_name(it.func) in ("enumerate", "reversed") and it.args:
        it = it.args[0]
    sources = it.args if isinstance(it, ast.Call) and terminal_name(it.func) == "zip" else [it]
    return bool(sources) and all(
        isinstance(a, ast.Name) and isinstance(ctx.origin(a), ast.List) for a in sources
    )


def _named_test(ctx: Context, test: ast.AST, loop: ast.AST | None) -> ast.AST:
    """`if g_reg:` with `g_reg = i % N == 0` bound earlier in the same loop: the comparison
    the name holds (a test given a name is the same test, evaluated on each iteration); any
    other test as it is. A name bound before the loop holds one value for all iterations."""
    if isinstance(test, ast.Name) and loop is not None:
        origin = ctx.origin(test)
        if isinstance(origin, ast.Compare) and loop.lineno <= origin.lineno <= (loop.end_lineno or 0):
            return origin
    return test


def guard_kind(ctx: Context, node: ast.AST) -> str | None:
    """How often `node` runs in its innermost loop: on one iteration only (`if i == 0:`),
    every N steps (`if step % N == 0:`, a counter the block resets, `if step % N: continue`
    before it, or `if step % N: return` before the loop in a function), when the user asks
    (`if debug:`), or on every iteration (None)."""
    depth = len(ctx.loops) - 1
    loop = ctx.loops[depth].node if ctx.loops else None
    names = _loop_names(loop) if loop is not None else set()
    stack = [*ctx.stack, node]
    through_items = False
    for i in range(len(stack) - 2, -1, -1):
        parent, child = stack[i], stack[i + 1]
        if parent is loop:
            over_items = (
                depth > 0
                and isinstance(loop, (ast.For, ast.AsyncFor))
                and is_step_loop(loop)
                and not _walks_own_lists(ctx, loop)
                and (_over_batch_items(ctx, loop) or _over_named_parts(loop))
            )
            if not is_step_loop(loop) or (depth > 0 and _walks_own_lists(ctx, loop)) or over_items:
                # a loop over the model's parameters (or a dict's items, or one batch's items) is
                # part of one step: a guard around it (`if step % N == 0: for name, p in
                # model.named_parameters():`) decides how often the whole loop runs; with no loop
                # around it in the function (a `log()` method called per step), so does a guard in
                # the function; around a walk over one batch's items, only a periodic guard
                # (`if steps % N == 0: for i in range(x.shape[0]): plot(x[i].cpu())`) tells
                through_items = through_items or over_items
                depth -= 1
                loop = ctx.loops[depth].node if depth >= 0 else None
                names = _loop_names(loop) if loop is not None else set()
                continue
            if depth == 0 and _periodic_around(stack[:i]):
                return PERIODIC
            break
        if isinstance(parent, ast.If):
            in_body = any(child is s for s in parent.body)
        elif isinstance(parent, ast.IfExp):
            in_body = child is parent.body
        else:
            continue
        if not in_body:
            if not through_items and _before_the_last(parent.test, names):
                return ONCE  # `if i < len(loader) - 1: ... else: <the last batch>`
            continue
        if _is_mod(parent.test) or _is_mod(_named_test(ctx, parent.test, loop)):
            return PERIODIC
        if _in_a_conjunct(parent.test, lambda t: _periodic_helper(ctx, t)):
            return PERIODIC
        if through_items:
            continue
        if (
            _is_once(parent.test, names)
            or _in_a_conjunct(parent.test, lambda t, n=names: _is_first_or_last(t, n))
            or _last_or_stopping(parent.test, names)
            or _is_bounded(parent.test)
            or _is_sampled(parent.test, names)
            or _in_a_conjunct(parent.test, lambda t, n=names: _first_few(t, n))
        ):
            return ONCE
        if isinstance(parent, ast.If) and _is_episode_end(ctx, parent.test):
            return PERIODIC  # once per episode of an environment, as logging every N steps
        if isinstance(parent, ast.If) and _resets_counter(parent):
            return PERIODIC
        if _debug_switch(parent.test):
            return ON_REQUEST
    # `if step % N: continue` early in the loop; with no loop around in the function (a
    # callback run after each step), `if self.step % N != 0: return` early in the function
    scope, leave = (loop, ast.Continue) if loop is not None else (ctx.frame.node, ast.Return)
    for stmt in getattr(scope, "body", None) or []:
        if any(stmt is s for s in stack):
            break
        if isinstance(stmt, ast.If) and stmt.body and isinstance(stmt.body[-1], leave) and _is_mod(stmt.test):
            return PERIODIC
    return None


def _periodic_around(outer: list[ast.AST]) -> bool:
    """`if self.step % self.validate_every == 0:` around the outermost loop of a function (a
    trainer's step, called once per step): the whole loop, a validation pass, runs every N
    calls. (Inside a loop of the function, the pass runs on a schedule of that loop's own,
    such as every few epochs, and each of its batches still waits.)"""
    for j in range(len(outer) - 1, -1, -1):
        up = outer[j]
        if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
        below = outer[j + 1] if j + 1 < len(outer) else None
        if isinstance(up, ast.If) and any(below is st for st in up.body) and _is_mod(up.test):
            return True
    return False


def _tensor_in_print(ctx: Context, call: ast.Call) -> ast.AST | None:
    for arg in call.args:
        value = arg.value if isinstance(arg, ast.Starred) else arg
        if isinstance(value, ast.JoinedStr):
            for part in value.values:
                if isinstance(part, ast.FormattedValue) and ctx.is_tensor(part.value):
                    return part.value
        elif ctx.is_tensor(value):
            return value
    return None


MAX_SHORT_LOOP = 16


def _small_int(ctx: Context, node: ast.AST) -> bool:
    """A constant, or a parameter of the enclosing function whose default is one, of at most
    `MAX_SHORT_LOOP` (`def show(images, n=4): for i in range(n): ...`)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and node.value <= MAX_SHORT_LOOP
    func = ctx.frame.node
    if isinstance(node, ast.Name) and isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        default = parameter_default(func, node.id)
        return default is not None and _small_int(ctx, default) and not isinstance(default, ast.Name)
    return False


def _few_iterations(ctx: Context, loop: ast.AST) -> bool:
    """`for i in range(4)`, `for ax in [a, b, c]`, a loader over a few rows written out in the
    source, or a loop that stops after a count (`if shown == num_images: return`): it runs a
    handful of times (showing a few images, a few layers, a toy demo's batches), which is not
    where per-iteration syncs cost anything."""
    return _few_iterations_alone(ctx, loop) or _stops_early(ctx)


def _stops_early(ctx: Context) -> bool:
    """One of the loops around stops after a count (`if shown == num_images: return`)."""
    return any(_stops_on_a_count(outer.node) or _stops_at_option(ctx, outer.node) for outer in ctx.loops)


def _few_iterations_alone(ctx: Context, loop: ast.AST) -> bool:
    """`_few_iterations` from the loop's own header alone."""
    it = getattr(loop, "iter", None)
    if isinstance(it, ast.Call) and terminal_name(it.func) == "range" and it.args:
        last = it.args[0] if len(it.args) == 1 else it.args[1]
        if _small_int(ctx, last):
            return True
        count = _range_count(ctx, it, None)  # `range(1, len(sizes) + 1)` over a short list
        if count is not None and count <= MAX_SHORT_LOOP:
            return True
    if it is not None and _short_literal(ctx, it):
        return True
    if isinstance(it, ast.Call) and terminal_name(it.func) == "zip" and it.args:
        if any(_short_literal(ctx, a) for a in it.args):
            return True  # `zip(self.bin_lowers, self.bin_uppers)`: as long as the shortest
    if (
        isinstance(it, ast.Call)
        and terminal_name(it.func) in ("range", "enumerate")
        and len(it.args) == 1
        and isinstance(it.args[0], ast.Call)
        and terminal_name(it.args[0].func) == "len"
        and len(it.args[0].args) == 1
        and _short_literal(ctx, it.args[0].args[0])
    ):
        return True  # `for c in range(len(target))`, `target = torch.tensor([1, 2, 3]).to(device)`
    walked = _iterable(loop)  # also a comprehension's, which the checks above do not read
    if walked is not None and _over_dimensions(ctx, walked):
        return True
    return it is not None and _few_batches(ctx, it)


# wrappers whose iterations follow the count of what they wrap
_COUNT_WRAPPERS = frozenset({"enumerate", "reversed", "zip", "combinations", "permutations", "product"})


def _over_dimensions(ctx: Context, it: ast.AST, depth: int = 0) -> bool:
    """`for d in range(ndim)` with `ndim = len(x.shape)`, `for ax in combinations(range(x.ndim), 2)`,
    `for i, s in enumerate(x.shape)`: a loop over a tensor's dimensions, which runs a handful of
    times whatever the data. Not `range(x.shape[0])`: that counts rows."""
    if depth > 3:
        return False
    if _is_shape(it):
        return True
    if not isinstance(it, ast.Call):
        return False
    name = terminal_name(it.func)
    if name == "range" and it.args:
        last = it.args[0] if len(it.args) == 1 else it.args[1]
        return _dimension_count(ctx, last)
    if name in _COUNT_WRAPPERS and it.args:
        args = it.args[:1] if name != "zip" else it.args
        return any(_over_dimensions(ctx, a, depth + 1) for a in args)
    return False


def _is_shape(node: ast.AST) -> bool:
    """`x.shape`, `x.size()`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "shape"
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "size"
        and not node.args
        and not node.keywords
    )


def _dimension_count(ctx: Context, node: ast.AST, depth: int = 0) -> bool:
    """`len(x.shape)`, `x.ndim`, `x.dim()`, `ndim - 1`, or a name the function binds once to one."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Sub, ast.Add)):
        small = node.right if isinstance(node.right, ast.Constant) else node.left
        other = node.left if small is node.right else node.right
        return isinstance(small, ast.Constant) and _dimension_count(ctx, other, depth)
    if isinstance(node, ast.Attribute):
        return node.attr == "ndim"
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("dim", "ndimension"):
            return not node.args
        return (
            isinstance(node.func, ast.Name)
            and node.func.id == "len"
            and len(node.args) == 1
            and _is_shape(node.args[0])
        )
    if isinstance(node, ast.Name) and depth < 2:
        scope = ctx.frame.node
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        bound = sole_binding(scope, node.id)
        return bound is not None and bound[1] is None and _dimension_count(ctx, bound[0], depth + 1)
    return False


# constructors that build a tensor or array from the data they are given
_FROM_DATA = frozenset(
    {"tensor", "as_tensor", "LongTensor", "FloatTensor", "IntTensor", "Tensor", "array", "asarray"}
)


def _short_literal(
    ctx: Context, node: ast.AST, depth: int = 0, scope: ast.AST | None = None, wrappers: bool = True
) -> bool:
    """`[1, 2, 3]`, `torch.tensor([1, 2, 3]).to(device)`, `wrap(torch.LongTensor([4, 5]))`, or
    a name bound to one: a handful of values written out in the source. `scope`: the function
    of this source whose names `node` reads (None: the code being walked); `wrappers`: also
    a call of another function around such a tensor, which may well repeat it."""
    if depth > 3:
        return False
    if isinstance(node, (ast.List, ast.Tuple)):
        return len(node.elts) <= MAX_SHORT_LOOP and not any(isinstance(e, ast.Starred) for e in node.elts)
    if isinstance(node, ast.Dict):
        return len(node.keys) <= MAX_SHORT_LOOP and None not in node.keys  # no `**other`
    if isinstance(node, ast.IfExp):  # `[0, 1] if torch.cuda.device_count() > 1 else [0]`
        return all(_short_literal(ctx, side, depth + 1, scope, wrappers) for side in (node.body, node.orelse))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("items", "keys", "values")
        and not node.args
    ):
        # `for name, logit in logits.items()` with `logits = {"image": a, "text": b}`, never grown
        base = node.func.value
        if isinstance(base, ast.Name) and ctx.stack and base.id in _grown_names(ctx.stack[0]):
            return False
        return isinstance(base, ast.Name) and _short_literal(ctx, base, depth + 1, scope, wrappers)
    if isinstance(node, ast.Name):
        found = _value(ctx, node, scope)
        return (
            found is not None
            and not isinstance(found[0], ast.Name)
            and _short_literal(ctx, found[0], depth + 1, found[1], wrappers)
        )
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        return _short_literal(ctx, node.value, depth + 1, scope, wrappers)  # a slice is no longer
    if isinstance(node, ast.Attribute):
        stored = _self_attribute(ctx, node)
        return stored is not None and _short_literal(ctx, stored[0], depth + 1, stored[1], wrappers)
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if (ctx.qualname(f) or "") in _RANGES:
        count = _range_count(ctx, node, scope)
        return count is not None and count <= MAX_SHORT_LOOP
    if isinstance(f, ast.Attribute) and f.attr in ("to", "cuda", "cpu", "long", "float", "int"):
        return _short_literal(ctx, f.value, depth + 1, scope, wrappers)
    if not node.args:
        return False
    first = node.args[0]
    if terminal_name(f) in _FROM_DATA:
        return isinstance(first, (ast.List, ast.Tuple)) and _short_literal(
            ctx, first, depth + 1, scope, wrappers
        )
    if _builds_data(ctx, node):
        return False  # a loader's or dataset's length is its own (`_short_data` reads it)
    # a wrapper around such a tensor (`cuda_variable(torch.LongTensor([1, 2, 3]))`)
    return wrappers and isinstance(first, ast.Call) and _short_literal(ctx, first, depth + 1, scope, wrappers)


_RANGES = frozenset({"torch.linspace", "torch.logspace", "torch.arange"})


def _range_count(ctx: Context, call: ast.Call, scope: ast.AST | None) -> int | None:
    """How many values `torch.linspace(0, 1, n_bins + 1)` or `torch.arange(a, b)` holds, when
    its bounds are small numbers written in the source (a parameter's default counts, as for
    `range(n)`); None when unknown."""
    name = terminal_name(call.func)
    if name in ("linspace", "logspace"):
        steps = keyword(call, "steps") or (call.args[2] if len(call.args) > 2 else None)
        return _int_value(ctx, steps, scope, 0) if steps is not None else None
    args = [_int_value(ctx, a, scope, 0) for a in call.args]
    if not args or len(args) > 3 or keyword(call, "end") is not None:
        return None
    known = [a for a in args if a is not None]
    if len(known) != len(args):
        return None
    start, end, step = (
        (0, known[0], 1) if len(known) == 1 else (known[0], known[1], known[2] if len(known) == 3 else 1)
    )
    return max(0, -(-(end - start) // step)) if step > 0 else None


def _int_value(ctx: Context, node: ast.AST, scope: ast.AST | None, depth: int) -> int | None:
    """The value of a small integer expression: a literal, `n + 1`, or a name bound once to
    one, or a parameter of the function (`scope`, else the one being walked) with such a
    default."""
    if depth > 4:
        return None
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, int) and not isinstance(node.value, bool) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        left, right = (
            _int_value(ctx, node.left, scope, depth + 1),
            _int_value(ctx, node.right, scope, depth + 1),
        )
        if left is None or right is None:
            return None
        return (
            left + right
            if isinstance(node.op, ast.Add)
            else left - right
            if isinstance(node.op, ast.Sub)
            else left * right
        )
    if isinstance(node, ast.Call) and terminal_name(node.func) == "len" and len(node.args) == 1:
        return _literal_length(ctx, node.args[0], scope)
    if not isinstance(node, ast.Name):
        return None
    func = scope if scope is not None else ctx.frame.node
    if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        default = parameter_default(func, node.id)
        if default is not None:
            return _int_value(ctx, default, None, depth + 1) if isinstance(default, ast.Constant) else None
    found = _value(ctx, node, scope)
    return _int_value(ctx, found[0], found[1], depth + 1) if found is not None and found[1] is scope else None


_GROWS = frozenset({"append", "extend", "insert", "update", "setdefault"})


def _literal_length(ctx: Context, node: ast.AST, scope: ast.AST | None) -> int | None:
    """`len(sizes)` with `sizes = [5, 8, 11]` bound once and never grown (`sizes.append`,
    `sizes += ...`, `sizes[i:j] = ...`): the number of values written out in the source."""
    name = node.id if isinstance(node, ast.Name) else None
    if name is not None:
        found = _value(ctx, node, scope)  # type: ignore[arg-type]
        if found is None or found[1] is not scope:
            return None
        node = found[0]
    if not isinstance(node, (ast.List, ast.Tuple)) or any(isinstance(e, ast.Starred) for e in node.elts):
        return None
    if name is not None and ctx.stack and name in _grown_names(ctx.stack[0]):
        return None
    return len(node.elts)


@per_node
def _grown_names(tree: ast.AST) -> frozenset[str]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _GROWS:
            if isinstance(n.func.value, ast.Name):
                out.add(n.func.value.id)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            out.add(n.target.id)
        elif isinstance(n, ast.Assign):
            out.update(
                t.value.id
                for t in n.targets
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
            )
    return frozenset(out)


def _self_attribute(ctx: Context, node: ast.Attribute) -> tuple[ast.AST, ast.AST] | None:
    """What `self.bins` holds, in a method of a class of this source that stores into `.bins`
    once (`self.bins = ...` in `__init__`): that value, and the method to read its names in."""
    cls = ctx.cls
    if cls is None or not ctx.stack or not (isinstance(node.value, ast.Name) and node.value.id == "self"):
        return None
    return accelerator.attribute_store(ctx.stack[0], cls.node, node.attr)


def _builds_data(ctx: Context, call: ast.Call) -> bool:
    """`DataLoader(...)`, `TensorDataset(...)`, `MyDataset(...)`: a loader or a dataset."""
    name = terminal_name(call.func)
    if name in ("DataLoader", "TensorDataset"):
        return True
    cls = ctx.classes.get(name) if isinstance(call.func, ast.Name) and name else None
    return cls is not None and cls.kind == DATASET


def _value(ctx: Context, node: ast.Name, scope: ast.AST | None) -> tuple[ast.AST, ast.AST | None] | None:
    """What a name holds, and the scope to read that expression's names in: its assignment in
    the code being walked (`scope` None), or its only binding in `scope`, a function of this
    source looked into. `a, b = make()` reads the item `make` returns, when `make` is a
    function of this source ending in `return x, y`."""
    if scope is None:
        origin = ctx.origin(node)
        if origin is not None:
            return origin, None
        where = _binding_scope(ctx, node.id)
        binding = sole_binding(where, node.id) if where is not None else None
    else:
        binding = sole_binding(scope, node.id)
    if binding is None:
        return None
    value, index = binding
    if index is None:
        return value, scope
    return _returned_item(ctx, value, index, scope)


def _binding_scope(ctx: Context, name: str) -> ast.AST | None:
    """The code that binds `name` where the walker stands: the function being walked, or the
    module (the cell) for a name of the top level."""
    if name in ctx.frame.names and ctx.frame.node is not None:
        return ctx.frame.node
    if name in ctx.frames[0].names and ctx.stack and isinstance(ctx.stack[0], ast.Module):
        return ctx.stack[0]
    return None


def _returned_item(
    ctx: Context, call: ast.AST, index: int, scope: ast.AST | None
) -> tuple[ast.AST, ast.AST] | None:
    """The `index`-th item of what `make()` returns, when `make` is a function of this source
    with one `return x, y`: that expression, and the function to read its names in."""
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        return None
    name = call.func.id
    fn = ctx.origin(call.func) if scope is None else ctx.frames[0].values.get(name)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    returns = [n for n in own_nodes(fn) if isinstance(n, ast.Return)]
    if len(returns) != 1 or not isinstance(items := returns[0].value, ast.Tuple):
        return None
    if index >= len(items.elts) or any(isinstance(e, ast.Starred) for e in items.elts):
        return None
    return items.elts[index], fn


# samplers that draw each row of the dataset at most once per pass (`num_samples` may ask more)
_ONE_PASS_SAMPLERS = frozenset({"DistributedSampler", "SequentialSampler", "RandomSampler"})
_MAX_DATA_DEPTH = 6


def _few_batches(ctx: Context, it: ast.AST) -> bool:
    """`for x, y in train_loader`, where the loader (or the dataset) holds a handful of rows
    written out in the source (`X = torch.tensor([[...], ...])`, a toy demo): one batch per
    row at most, so it runs a handful of iterations, however large its batches would be. The
    loader may come from a function of this source (`train_loader, _ = prepare_dataset()`)."""
    while isinstance(it, ast.Call) and terminal_name(it.func) in ("enumerate", "tqdm", "iter") and it.args:
        it = it.args[0]
    return _short_data(ctx, it, None, 0)


def _short_data(ctx: Context, node: ast.AST, scope: ast.AST | None, depth: int) -> bool:
    """A DataLoader or Dataset whose length is that of a short literal tensor."""
    if depth > _MAX_DATA_DEPTH:
        return False
    if isinstance(node, ast.Name):
        found = _value(ctx, node, scope)
        return found is not None and _short_data(ctx, found[0], found[1], depth + 1)
    if not isinstance(node, ast.Call):
        return False
    name = terminal_name(node.func)
    if name == "DataLoader":
        data = keyword(node, "dataset") or (node.args[0] if node.args else None)
        return data is not None and _one_pass(node) and _short_data(ctx, data, scope, depth + 1)
    if name == "TensorDataset":  # as long as its first tensor
        return bool(node.args) and _short_literal(ctx, node.args[0], scope=scope, wrappers=False)
    cls = ctx.classes.get(name) if isinstance(node.func, ast.Name) and name else None
    if cls is None or cls.kind != DATASET:
        return False
    counted = _counted_arguments(cls.node, node)
    return bool(counted) and all(_short_literal(ctx, a, scope=scope, wrappers=False) for a in counted)


def _one_pass(loader: ast.Call) -> bool:
    """The loader draws each row at most once per pass: no sampler, or one that walks the
    dataset (`DistributedSampler(ds)`) without asking for more samples than it has."""
    if keyword(loader, "batch_sampler") is not None:
        return False
    sampler = keyword(loader, "sampler")
    if sampler is None:
        return True
    return (
        isinstance(sampler, ast.Call)
        and terminal_name(sampler.func) in _ONE_PASS_SAMPLERS
        and keyword(sampler, "num_samples") is None
        and not any(kw.arg is None for kw in sampler.keywords)
    )


def _counted_attr(expr: ast.AST) -> str | None:
    """`len(self.labels)`, `self.labels.shape[0]`, `self.labels.size(0)` -> "labels": the
    attribute a `__len__` counts the rows of."""
    if isinstance(expr, ast.Call) and terminal_name(expr.func) == "len" and len(expr.args) == 1:
        base: ast.AST = expr.args[0]
    elif (
        isinstance(expr, ast.Subscript)
        and isinstance(expr.value, ast.Attribute)
        and expr.value.attr == "shape"
    ):
        base = expr.value.value
    elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "size":
        base = expr.func.value
    else:
        return None
    if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id == "self":
        return base.attr
    return None


def _counted_arguments(cls: ast.ClassDef, call: ast.Call) -> list[ast.AST]:
    """The argument of `call` that a Dataset class of this source counts as its length:
    `def __len__(self): return self.labels.shape[0]` with `self.labels = y` in `__init__`
    (and nowhere else) -> what `call` passes as `y`. Empty when its length comes from
    anything else (a file, a constant, a computed value): its rows are then unknown."""
    methods = {s.name: s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    length, init = methods.get("__len__"), methods.get("__init__")
    if length is None or init is None:
        return []
    returns = [n for n in own_nodes(length) if isinstance(n, ast.Return)]
    attr = _counted_attr(returns[0].value) if len(returns) == 1 and returns[0].value is not None else None
    if attr is None:
        return []
    writes = [
        n
        for n in ast.walk(cls)
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
        and any(
            isinstance(t, ast.Attribute)
            and t.attr == attr
            and isinstance(t.value, ast.Name)
            and t.value.id == "self"
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        )
    ]
    if (
        len(writes) != 1
        or not isinstance(writes[0], ast.Assign)
        or not any(w is writes[0] for w in own_nodes(init))
    ):
        return []
    source = writes[0].value
    if not isinstance(source, ast.Name):
        return []
    positional = [a.arg for a in [*init.args.posonlyargs, *init.args.args][1:]]
    if source.id in positional:
        i = positional.index(source.id)
        if i < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: i + 1]):
            return [call.args[i]]
    given = keyword(call, source.id)
    return [given] if given is not None else []


def _index_name(loop: ast.AST) -> str | None:
    """`i` of `for i, x in enumerate(xs)` or `for i in range(n)`: the iteration count."""
    it, target = getattr(loop, "iter", None), getattr(loop, "target", None)
    if not isinstance(it, ast.Call):
        return None
    name = terminal_name(it.func)
    if name == "enumerate" and isinstance(target, ast.Tuple) and target.elts:
        first = target.elts[0]
        return first.id if isinstance(first, ast.Name) else None
    if name == "range" and isinstance(target, ast.Name):
        return target.id
    return None


@per_node
def _index_stops(loop: ast.AST) -> list[ast.AST]:
    """`N` of each `if i == N: break` (or `>=`, `>`, or a `return`) in the loop's own body, on
    its enumerate/range index `i`: where the loop stops counting (kept on the loop; callers
    must not change the list)."""
    index = _index_name(loop)
    if index is None:
        return []
    out = []
    for stmt in getattr(loop, "body", None) or []:
        if not (
            isinstance(stmt, ast.If) and stmt.body and isinstance(stmt.body[-1], (ast.Break, ast.Return))
        ):
            continue
        test = stmt.test
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Eq, ast.GtE, ast.Gt))
            and isinstance(test.left, ast.Name)
            and test.left.id == index
        ):
            out.append(test.comparators[0])
    return out


def _stops_at_index(loop: ast.AST) -> bool:
    """`if i == 4: break` (or `i >= 8`) on the loop's index and a small number: it runs a
    handful of iterations (a few validation batches to plot)."""
    return any(
        isinstance(bound, ast.Constant)
        and isinstance(bound.value, int)
        and not isinstance(bound.value, bool)
        and bound.value <= MAX_SHORT_LOOP
        for bound in _index_stops(loop)
    )


def _stops_at_option(ctx: Context, loop: ast.AST) -> bool:
    """`if i == args.n_samples - 1: break` on the loop's index, where `--n_samples` is a
    command-line option of this source whose default is a small number (up to 16, give or take
    one): the option's default counts as a parameter's does."""
    bounds = _index_stops(loop)
    if not bounds or not ctx.stack:
        return False
    defaults = _option_defaults(ctx.stack[0])
    if not defaults:
        return False
    return any(
        (value := _option_value(bound, defaults)) is not None and value <= MAX_SHORT_LOOP for bound in bounds
    )


def _option_value(node: ast.AST, defaults: dict[str, int]) -> int | None:
    """`args.n_samples` (its default), `args.n_samples - 1`: a count read from an option."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        base, step = _option_value(node.left, defaults), node.right
        if base is None or not (isinstance(step, ast.Constant) and type(step.value) is int):
            return None
        return base + step.value if isinstance(node.op, ast.Add) else base - step.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return defaults.get(node.attr)
    return None


@per_node
def _option_defaults(tree: ast.AST) -> dict[str, int]:
    """`parser.add_argument("--n_samples", type=int, default=8)` -> {"n_samples": 8}: the
    integer defaults of the command-line options a source declares (an option declared twice
    with different defaults is left out)."""
    found = {
        dest: {d.value if isinstance(d, ast.Constant) and type(d.value) is int else None for d in defaults}
        for dest, defaults in declared_options(tree).items()
    }
    return {k: v for k, vs in found.items() if len(vs) == 1 and (v := next(iter(vs))) is not None}


@per_node
def _stops_on_a_count(loop: ast.AST) -> bool:
    """The loop increments a counter and returns or breaks when it reaches a value, or breaks
    on its own index reaching a small number."""
    if _stops_at_index(loop):
        return True
    counters: set[str] = set()
    compared: set[str] = set()  # names in `if <name> >= ...: break` (or return)
    for n in ast.walk(loop):
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and isinstance(n.target, ast.Name):
            counters.add(n.target.id)
        elif isinstance(n, ast.If) and n.body and isinstance(n.body[-1], (ast.Return, ast.Break)):
            test = n.test
            if isinstance(test, ast.Compare) and isinstance(test.ops[0], (ast.Eq, ast.GtE, ast.Gt)):
                compared.update(x.id for x in [test.left, *test.comparators] if isinstance(x, ast.Name))
    return not counters.isdisjoint(compared)


@per_node
def _counts_epochs(loop: ast.AST) -> bool:
    """A statement of the loop's own body counts epochs (`self.epoch_num += 1`) or runs one
    (`stats = self.train_epoch()`, `train_one_epoch(model, loader)`): each pass is an epoch."""
    for stmt in getattr(loop, "body", []):
        if (
            isinstance(stmt, ast.AugAssign)
            and isinstance(stmt.value, ast.Constant)
            and stmt.value.value == 1
            and "epoch" in (terminal_name(stmt.target) or "").lower()
        ):
            return True  # a count of epochs, not `epoch_loss += loss.item()`
        value = getattr(stmt, "value", None)
        if isinstance(value, ast.Call) and "epoch" in (terminal_name(value.func) or "").lower():
            return True
    return False


def _is_epoch_loop(loop: ast.AST) -> bool:
    """`for epoch in range(n_epochs)`, a loop that trains on each of its items, or a full-batch optimisation loop (`opt.step(closure)`,
    as with LBFGS, where each step sees all the data): its own body runs once per epoch."""
    names = _loop_names(loop) | {
        n.id if isinstance(n, ast.Name) else n.attr
        for n in ast.walk(getattr(loop, "iter", ast.Pass()))
        if isinstance(n, (ast.Name, ast.Attribute))
    }
    if any("epoch" in name.lower() for name in names):
        return True
    if _counts_epochs(loop):
        return True  # `while True: self.epoch_num += 1; ... = self.train_epoch()`
    if remember(loop, "tm301.runs_epochs", lambda: _runs_epoch_loops(loop)):
        return True  # `for stage in range(n): ...; for epoch in ...`: once per stage, fold or seed
    own = _loop_names(loop)
    if any(
        isinstance(n, ast.Call)
        and terminal_name(n.func) in ("train", "fit")
        and any(isinstance(a, ast.Name) and a.id in own for a in n.args)
        for n in ast.walk(loop)
    ):
        return True  # `for exp in stream: strategy.train(exp)`: a whole training run per item
    return any(
        isinstance(n, ast.Call)
        and terminal_name(n.func) == "step"
        and len(n.args) == 1
        and isinstance(n.args[0], ast.Name)
        and "closure" in n.args[0].id.lower()
        for n in ast.walk(loop)
    )


def _runs_epoch_loops(loop: ast.AST) -> bool:
    """The loop's body holds an epoch loop (not in a function it defines): each of its passes is
    a whole training run (a stage, a fold, a seed)."""
    return _holds_an_epoch_loop(n for stmt in getattr(loop, "body", []) for n in [stmt, *own_nodes(stmt)])


def _holds_an_epoch_loop(nodes: Iterable[ast.AST]) -> bool:
    return any(isinstance(n, LOOPS) and _is_epoch_loop(n) for n in nodes)


_EPOCH_COUNTS = frozenset({"epochs", "nepochs", "n_epochs", "num_epochs", "max_epochs", "num_train_epochs"})


def _once_per_training_run(ctx: Context) -> bool:
    """The read's loop trains a whole model per pass, or sits (with no model run or backward
    of its own between) in one that does: `for metric in results: ... .item()` after each
    model's training run."""
    for info in reversed(ctx.loops):
        if _trains_whole_runs(ctx, info.node):
            return True
        if _runs_a_model(ctx, info.node):
            return False
    return False


def _runs_a_model(ctx: Context, loop: ast.AST) -> bool:
    """The loop runs a forward pass (a call of a module) or a backward somewhere in it."""
    return any(
        isinstance(n, ast.Call) and (is_backward(ctx, n) or ctx.kind(n.func) == MODULE)
        for n in ast.walk(loop)
    )


def _trains_whole_runs(ctx: Context, loop: ast.AST) -> bool:
    """Each pass trains a model from start to end (`for name, net in models.items():
    train_model(net, ..., nepochs=n)`): a call given a number of epochs, or of a function of
    this file that runs an epoch loop. A read there runs once per trained model."""
    tree = ctx.stack[0] if ctx.stack else None
    return tree is not None and remember(
        loop, "tm301.trains_whole_runs", lambda: _calls_training_runs(tree, loop)
    )


def _calls_training_runs(tree: ast.AST, loop: ast.AST) -> bool:
    functions = {
        s.name: s for s in getattr(tree, "body", []) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    for stmt in getattr(loop, "body", []):
        for n in [stmt, *own_nodes(stmt)]:
            if not isinstance(n, ast.Call):
                continue
            if any(kw.arg in _EPOCH_COUNTS for kw in n.keywords):
                return True
            fn = functions.get(n.func.id) if isinstance(n.func, ast.Name) else None
            if fn is not None and _holds_an_epoch_loop(own_nodes(fn)):
                return True
    return False


_HOST_CONSUMERS = frozenset({"step", "range", "randint", "choice", "sample"})
# bytes of a file format, written as the loop goes (a codec's bitstream): host numbers by nature
_PACKERS = frozenset({"struct.pack", "struct.pack_into"})
# conversions between the read and its use: `a.cpu().numpy()`, `int(y.argmax().item())`
_CONVERSIONS = frozenset({"int", "float", "bool", "list", "tuple", "array", "asarray", "squeeze", "numpy"})
# constructors that bring a host value back to a tensor (the next decoding step's input)
_TO_TENSOR = frozenset(
    {"torch.tensor", "torch.as_tensor", "torch.LongTensor", "torch.Tensor", "torch.FloatTensor"}
    | {"torch.from_numpy", "torch.IntTensor", "torch.full"}
)


def _consumer(ctx: Context, call: ast.Call) -> tuple[ast.AST, ast.AST | None]:
    """The expression the read ends up as, after chained methods and conversions
    (`action.cpu().numpy()`, `int(y.argmax().item())`), and what holds that expression."""
    node: ast.AST = call
    stack = ctx.stack
    i = len(stack) - 1
    while i >= 0:
        p = stack[i]
        if isinstance(p, ast.Attribute) and p.value is node and i >= 1:
            up = stack[i - 1]
            if isinstance(up, ast.Call) and up.func is p:
                node, i = up, i - 2
                continue
        if isinstance(p, ast.Call) and p.args and p.args[0] is node and terminal_name(p.func) in _CONVERSIONS:
            node, i = p, i - 1
            continue
        if isinstance(p, ast.Subscript) and p.value is node:
            node, i = p, i - 1  # `a.cpu().numpy()[0]`: an element of the host copy
            continue
        break
    return node, (stack[i] if i >= 0 else None)


def _bound_name(ctx: Context, value: ast.AST, holder: ast.AST | None) -> str | None:
    """`a = <value>` -> "a"; `seq.append(<value>)` -> "seq"."""
    if isinstance(holder, ast.Assign) and holder.value is value and len(holder.targets) == 1:
        t = holder.targets[0]
        return t.id if isinstance(t, ast.Name) else None
    if (
        isinstance(holder, ast.Call)
        and isinstance(holder.func, ast.Attribute)
        and holder.func.attr == "append"
        and isinstance(holder.func.value, ast.Name)
        and holder.args
        and holder.args[0] is value
    ):
        return holder.func.value.id
    return None


def _fed_back(ctx: Context, loop: ast.AST, name: str, appended: bool) -> bool:
    """Inside the loop, the host value named `name` goes to `env.step(...)`, or back into a
    tensor (`torch.tensor([tokens[-1]])`: the next decoding step's input), directly or through
    one more name (`tok = ....item(); tokens.append(tok)`). `appended`: the name is a list the
    values are appended to."""
    names, seen = [(name, appended)], {name}
    while names:
        current, is_list = names.pop()
        for sub in ast.walk(loop):
            if not isinstance(sub, ast.Call):
                continue
            args = [*sub.args, *(k.value for k in sub.keywords)]
            if not any(isinstance(n, ast.Name) and n.id == current for a in args for n in ast.walk(a)):
                continue
            if terminal_name(sub.func) in _HOST_CONSUMERS or _tells_its_proposer(ctx, loop, sub):
                return True
            if _builds_tensor(ctx, sub.func):
                direct = not is_list and any(isinstance(a, ast.Name) and a.id == current for a in args)
                if direct or any(_one_value(n, current, is_list) for a in args for n in ast.walk(a)):
                    return True
            holder = sub.func.value if isinstance(sub.func, ast.Attribute) else None
            if (
                isinstance(sub.func, ast.Attribute)
                and sub.func.attr == "append"
                and isinstance(holder, ast.Name)
                and holder.id not in seen
                and len(seen) < 3
            ):
                seen.add(holder.id)
                names.append((holder.id, True))
    return False


def _tells_its_proposer(ctx: Context, loop: ast.AST, call: ast.Call) -> bool:
    """`searcher.update(config, error)` where the iteration began with `config =
    searcher.suggest()`: an ask/tell search that hands each result back, with its candidate, to
    the object that proposes the next one; the host has to have the value before going on.
    On `self`, both must be methods the class defines: `self.criterion(output, target)` after
    `output = self.model(x)` calls two attributes, not one object twice."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    receiver = ast.unparse(func.value)
    own = {m.name for m in ctx.class_methods()} if receiver == "self" else None
    passed = {a.id for a in [*call.args, *(k.value for k in call.keywords)] if isinstance(a, ast.Name)}
    return any(
        name in passed
        and proposer == receiver
        and method != func.attr
        and (own is None or {method, func.attr} <= own)
        for name, proposer, method in _proposals(loop)
    )


@per_node
def _proposals(loop: ast.AST) -> list[tuple[str, str, str]]:
    """`(config, searcher, suggest)` for each `config = searcher.suggest(...)` in the loop,
    found once per loop."""
    return [
        (sub.targets[0].id, ast.unparse(sub.value.func.value), sub.value.func.attr)
        for sub in ast.walk(loop)
        if isinstance(sub, ast.Assign)
        and len(sub.targets) == 1
        and isinstance(sub.targets[0], ast.Name)
        and isinstance(sub.value, ast.Call)
        and isinstance(sub.value.func, ast.Attribute)
    ]


def _builds_tensor(ctx: Context, func: ast.AST) -> bool:
    """`torch.tensor`, `torch.LongTensor`, ... or `x.new_tensor` / `x.data.new` on a tensor: a
    constructor that brings host values back into a tensor (`x.new(...)` on the device of `x`)."""
    if ctx.qualname(func) in _TO_TENSOR:
        return True
    return (
        isinstance(func, ast.Attribute) and func.attr in ("new", "new_tensor") and ctx.is_tensor(func.value)
    )


def _one_value(node: ast.AST, name: str, is_list: bool) -> bool:
    """`[tok]` / `[[tokens[-1]]]`: the latest value goes in, not a whole list of them (a tensor
    built from all the logged losses is bookkeeping, not the next input)."""
    if isinstance(node, ast.Subscript) and is_list:
        s = node.slice
        last = (
            isinstance(s, ast.UnaryOp) and isinstance(s.op, ast.USub) and isinstance(s.operand, ast.Constant)
        )
        return last and isinstance(node.value, ast.Name) and node.value.id == name
    if isinstance(node, ast.List) and not is_list:
        return any(isinstance(e, ast.Name) and e.id == name for e in node.elts)
    return False


def _host_needs_it(ctx: Context, call: ast.Call) -> bool:
    """The value is needed on the host to go on (`env.step(action.cpu().numpy())`,
    `vocab[idx.item()]`, a token sampled with `torch.multinomial(...)`, a greedy token fed back
    as the next input): keeping it on the device is no option, so the advice would not apply."""
    value, holder = _consumer(ctx, call)
    if isinstance(holder, ast.Subscript) and holder.slice is value:
        return True
    if _names_something(ctx, value, holder):
        return True
    if isinstance(holder, ast.Call) and value in holder.args:
        if terminal_name(holder.func) in _HOST_CONSUMERS:
            return True
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    if isinstance(receiver, ast.Call) and terminal_name(receiver.func) == "multinomial":
        return True
    name = _bound_name(ctx, value, holder)
    if name is None or not ctx.in_loop:
        return False
    loop = ctx.loops[-1].node
    if isinstance(holder, ast.Assign) and _names_something_in(ctx, loop, name):
        return True
    if isinstance(holder, ast.Assign) and _iterated_in(loop, name):
        return True
    return _fed_back(ctx, loop, name, appended=not isinstance(holder, ast.Assign))


def _packed_into_bytes(ctx: Context, call: ast.Call) -> bool:
    """The host value goes straight into `struct.pack`: bytes of a file format that the loop
    writes as it goes (a codec's bitstream, one header field per frame)."""
    value, holder = _consumer(ctx, call)
    return isinstance(holder, ast.Call) and value in holder.args and ctx.qualname(holder.func) in _PACKERS


def _unpacked_for_the_host(ctx: Context, call: ast.Call) -> bool:
    """`action, noise = [t.cpu() for t in policy(state)]` then `env.step(action.numpy())`: the
    comprehension copies a function's few outputs, unpacked into names, one of which the host
    needs to go on (as if written `action = out[0].cpu()`)."""
    value, holder = _consumer(ctx, call)
    if len(ctx.loops) < 2 or ctx.loops[-1].node is not holder:
        return False
    it = _iterable(holder)
    if it is None or ctx.kind(it) in TENSOR_KINDS:
        return False  # the elements of one tensor: one `.tolist()` would read them all
    outer = ctx.loops[-2].node
    return any(
        _fed_back(ctx, outer, n, False) or _names_something_in(ctx, outer, n)
        for n in _unpacked_names(ctx, value, holder)
    )


def _unpacked_names(ctx: Context, value: ast.AST, holder: ast.AST | None) -> list[str]:
    """The names the comprehension's items are unpacked into (`a, b = [... for ...]`)."""
    if not (isinstance(holder, (ast.ListComp, ast.GeneratorExp)) and holder.elt is value):
        return []
    up = next((ctx.stack[i - 1] for i in range(1, len(ctx.stack)) if ctx.stack[i] is holder), None)
    if not (isinstance(up, ast.Assign) and up.value is holder and len(up.targets) == 1):
        return []
    target = up.targets[0]
    if not isinstance(target, (ast.Tuple, ast.List)):
        return []
    return [e.id for e in target.elts if isinstance(e, ast.Name)]


def _iterated_in(loop: ast.AST, name: str) -> bool:
    """A loop inside `loop` goes round the host value (`labels = dets[:, -1].cpu().unique()`
    then `for c in labels:`, also through `enumerate`/`zip`): how many times it runs is known
    only on the host, so the value has to come over; keeping it on the device is no option."""
    for sub in ast.walk(loop):
        if sub is loop or not isinstance(sub, (ast.For, ast.AsyncFor)):
            continue
        it = sub.iter
        sources = (
            it.args if isinstance(it, ast.Call) and terminal_name(it.func) in ("enumerate", "zip") else [it]
        )
        if any(isinstance(a, ast.Name) and a.id == name for a in sources):
            return True
    return False


# the literal text of a file name: no spaces, and an extension at the end or a path separator
_PATH_TEXT = re.compile(r"^\S*(?:\.[A-Za-z][A-Za-z0-9]{1,4}|/\S*)$")


def _path_format(node: ast.AST | None) -> bool:
    """`f"{i:06d}.png"`, `"{}.jpg".format(i)`, `"out/%d.txt" % i`: a string that names a file."""
    text = format_template(node)
    return text is not None and bool(_PATH_TEXT.search(text))


def _names_something(ctx: Context, value: ast.AST, holder: ast.AST | None) -> bool:
    """The host value is a key of a dict display or comprehension (`{t["image_id"].item(): out
    for ...}`), or is formatted into a file name (`f"{idx.item():06d}.png"`): an id the host
    needs to file the results, not a number to accumulate."""
    if isinstance(holder, ast.Dict) and any(k is value for k in holder.keys):
        return True
    if isinstance(holder, ast.DictComp) and holder.key is value:
        return True
    if isinstance(holder, ast.FormattedValue) and holder.value is value:
        stack = ctx.stack
        joined = next((n for n in reversed(stack) if isinstance(n, ast.JoinedStr)), None)
        return _path_format(joined)
    if isinstance(holder, ast.Call) and any(a is value for a in holder.args):
        return _path_format(holder)
    if isinstance(holder, ast.Tuple):  # `"%s/%d.png" % (d, i.item())`
        up = next((n for n in reversed(ctx.stack) if isinstance(n, ast.BinOp)), None)
        return up is not None and up.right is holder and _path_format(up)
    if isinstance(holder, ast.BinOp) and holder.right is value:
        return _path_format(holder)
    return False


def _names_something_in(ctx: Context, loop: ast.AST, name: str) -> bool:
    """In the loop, the name bound to the host value is a dict key or formatted into a file
    name (`image_id = t["image_id"].item(); path = f"{image_id:012d}.png"`)."""

    def is_name(n: ast.AST) -> bool:
        while isinstance(n, ast.Call) and terminal_name(n.func) in _CONVERSIONS and n.args:
            n = n.args[0]
        return isinstance(n, ast.Name) and n.id == name

    for sub in ast.walk(loop):
        if isinstance(sub, ast.Dict) and any(k is not None and is_name(k) for k in sub.keys):
            return True
        if isinstance(sub, ast.DictComp) and is_name(sub.key):
            return True
        if isinstance(sub, ast.JoinedStr) and _path_format(sub):
            if any(isinstance(v, ast.FormattedValue) and is_name(v.value) for v in sub.values):
                return True
        if isinstance(sub, ast.Call) and _path_format(sub) and any(is_name(a) for a in sub.args):
            return True
        if isinstance(sub, ast.BinOp) and _path_format(sub):
            right = sub.right.elts if isinstance(sub.right, ast.Tuple) else [sub.right]
            if any(is_name(a) for a in right):
                return True
    return False


def _reads_each_element(ctx: Context, loop: ast.AST, value: ast.AST | None) -> bool:
    """`[labels[y.item()] for y in preds]`: the loop walks a tensor (or a list of them) and
    reads each element: one sync per element, where one `.tolist()` would do."""
    targets = _iteration_names(loop)
    it = _iterable(loop)
    if isinstance(value, ast.Name) and value.id in targets:
        return True
    return it is not None and ctx.kind(it) in TENSOR_KINDS


def _read_keys(ctx: Context, expr: ast.AST) -> set[str]:
    """The tensors an expression reads, as dotted names (`(pred == y).sum()` -> {pred, y},
    `self.loss` -> {self.loss}); not the functions and modules it calls (`F.relu`, `model`)."""
    parents = parents_of(expr)
    keys: set[str] = set()
    for n in ast.walk(expr):
        if not isinstance(n, (ast.Name, ast.Attribute)) or isinstance(parents.get(id(n)), ast.Attribute):
            continue  # only whole chains: `a.b.c`, not `a.b`
        chain: ast.AST = n
        up = parents.get(id(n))
        if isinstance(up, ast.Call) and up.func is n:
            if not isinstance(n, ast.Attribute):
                continue  # `model(x)`, `len(x)`: a callable, not a tensor read
            chain = n.value  # `x.sum` -> the receiver `x`
        if not isinstance(chain, (ast.Name, ast.Attribute)):
            continue
        root = chain
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name) or root.id in ctx.imports or ctx.kind(chain) in _NOT_TENSOR:
            continue
        keys.add(ast.unparse(chain))
    return keys


def _reads_in(ctx: Context, node: ast.AST) -> list[ast.AST]:
    """The values the TM301 reads in `node` (its parts that run whenever it runs) copy to the
    host: `loss` of `loss.item()`, the tensor of `print(<tensor>)`, the tensors an `if` or
    `assert` decides on."""
    out: list[ast.AST] = []
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, (ast.If, ast.While, ast.Assert, ast.IfExp)):
            if ctx.is_tensor(n.test):
                # `if torch.isnan(loss): raise ...`: deciding on a tensor copies it to the host
                out.extend(_tensors_in(ctx, n.test))
            todo.append(n.test)
            continue
        if isinstance(n, (ast.For, ast.AsyncFor)):
            todo.append(n.iter)
            continue
        if isinstance(n, ast.Try) or isinstance(n, COMPREHENSIONS):
            continue
        if isinstance(n, ast.BoolOp):
            todo.append(n.values[0])
            continue
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr in _SYNC_METHODS and not n.args:
                out.append(f.value)
            elif (
                isinstance(f, ast.Attribute)
                and f.attr == "to"
                and accelerator.device_type_of_literal(move_target(n)) == "cpu"
            ):
                out.append(f.value)  # `scores.to("cpu")`: a copy to the host, as `.cpu()`
            elif isinstance(f, ast.Name) and f.id == "print":
                tensor = _tensor_in_print(ctx, n)
                if tensor is not None:
                    out.append(tensor)
        todo.extend(ast.iter_child_nodes(n))
    return out


def _synced_by(ctx: Context, node: ast.AST) -> set[str]:
    """What the TM301 reads in `node` copy to the host, as `_read_keys`."""
    out: set[str] = set()
    for value in _reads_in(ctx, node):
        out |= _read_keys(ctx, value)
    return out


def _rebinds(node: ast.AST) -> set[str]:
    """Names and attributes a statement assigns (anywhere in it)."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Store):
            out.add(ast.unparse(n))
    return out


def _before_in_iteration(ctx: Context, loop: ast.AST | None) -> list[ast.AST] | None:
    """What always runs before the node being checked in the same iteration of `loop`, in
    order: the earlier statements of each enclosing block (a `with` block's statements one by
    one) and the tests of the enclosing `if`s. None where that order is not known (a
    comprehension, an `else` of the loop, a read in a handler)."""
    path = list(ctx.stack)
    start = next((i for i, n in enumerate(path) if n is loop), None)
    if start is None or isinstance(loop, COMPREHENSIONS):
        return None
    order: list[ast.AST] = []

    def run(node: ast.AST) -> None:
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                run(item.context_expr)
            for stmt in node.body:
                run(stmt)  # in order: `out = model(x)` then `out.item()` in one block
            return
        order.append(node)

    for k in range(start, len(path) - 1):
        anc, child = path[k], path[k + 1]
        inside = path[k + 2] if k + 2 < len(path) else None  # where in `child` the read is
        if not isinstance(child, ast.stmt):
            break
        found = block_of(anc, child)
        if found is None or (anc is loop and found[0] is not loop.body):  # type: ignore[attr-defined]
            return None
        block, index = found
        for earlier in block[:index]:
            run(earlier)
        if inside is None or not isinstance(inside, ast.stmt):
            break  # the read is in this statement's own expressions (an `if` test, a `with` item)
        if isinstance(child, (ast.If, ast.While)):
            run(child.test)
        elif isinstance(child, (ast.With, ast.AsyncWith)):
            for item in child.items:
                run(item.context_expr)
    return order


def _statement_loop(ctx: Context) -> ast.AST | None:
    """Around a comprehension, the statement loop or function it runs in: what runs before the
    comprehension's statement there (`loss = loss.item()` then `[c.item() for c in parts]`)."""
    for n in reversed(ctx.stack):
        if isinstance(n, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef)):
            return n
    return None


def _read_earlier_in_iteration(ctx: Context, before: list[ast.AST], keys: set[str]) -> bool:
    """Every tensor `keys` names was already copied to the host earlier in the same iteration,
    by a statement that always runs before this one (`total += loss.item()` ... then
    `writer.add_scalar("loss", loss.item())`), and not rebound since: the same wait, reported
    once, at the first read."""
    if not keys:
        return False
    synced: set[str] = set()
    for node in before:
        synced.update(_synced_by(ctx, node))
        for bound in _rebinds(node) - _scaled_in_place(ctx, node):
            synced.difference_update({k for k in synced if k == bound or k.startswith(bound + ".")})
    return keys <= synced


def _waits_earlier_for_a_shape(ctx: Context, before: list[ast.AST]) -> bool:
    """Earlier in the same iteration, an operation whose output size depends on the values
    (`pred[~mask]`, `x.nonzero()`, `torch.unique(...)`) makes the host wait on every iteration
    anyway, and the algorithm needs it: that wait is the iteration's, and a read after it adds
    a copy of a value, not a second stall worth its own finding. Only in a loop that runs a
    model per iteration (a forward pass or a backward), where that wait sits among the step's
    own work; a loop of masked reductions alone (per-class metrics) is what its reads make slow."""
    loop = ctx.loops[-1].node if ctx.loops else None
    if loop is None or not _runs_a_model(ctx, loop):
        return False
    for node in before:
        for n in ast.walk(node):
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load):
                if _is_mask_expr(ctx, n.slice) and accelerator.where(ctx, n.value) != accelerator.CPU:
                    if ctx.is_tensor(n.value) or ctx.kind(n.value) is None:
                        return True
            elif isinstance(n, ast.Call) and (
                _counting_call(n) or terminal_name(n.func) in ("unique", "unique_consecutive")
            ):
                return True
    return False


def _scaled_in_place(ctx: Context, node: ast.AST) -> set[str]:
    """`loss = loss / len(batch_group)`, `loss /= accum`: a value scaled by a host number, one
    tiny kernel on what was already read; reading it again waits for next to nothing."""
    if isinstance(node, ast.AugAssign):
        target, op, operand = node.target, node.op, node.value
    elif (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.value, ast.BinOp)
        and ast.unparse(node.value.left) == ast.unparse(node.targets[0])
    ):
        target, op, operand = node.targets[0], node.value.op, node.value.right
    else:
        return set()
    if not isinstance(target, (ast.Name, ast.Attribute)) or not isinstance(op, (ast.Div, ast.Mult)):
        return set()
    host = constant_or_len(operand) or ctx.kind(operand) == NUMBER
    return {ast.unparse(target)} if host else set()


# methods that return a view or the same data: reading through them launches no GPU work
_NO_WORK = frozenset({"detach", "squeeze", "unsqueeze", "view", "t", "view_as", "expand"})
_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)


def _launches_no_work(node: ast.AST) -> bool:
    """`acc`, `self.loss`, `prec[0]`, `out.detach()`: a tensor that already exists, read
    without computing anything new on the GPU."""
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Attribute):
        return _launches_no_work(node.value)
    if isinstance(node, ast.Subscript):
        index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return _launches_no_work(node.value) and all(
            isinstance(i, (ast.Constant, ast.Name, ast.Slice)) for i in index
        )
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in _NO_WORK and _launches_no_work(node.func.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        return bool(node.args) and _launches_no_work(
            node.args[0]
        )  # `getattr(dist, name)`: an attribute it holds
    return False


# reductions and casts of a tensor that already exists: one small kernel each
_SMALL_KERNELS = frozenset(
    {"mean", "sum", "max", "min", "amax", "amin", "argmax", "argmin", "norm", "std", "var", "prod"}
    | {"float", "double", "half", "long", "int", "abs", "all", "any"}
)


def _one_small_kernel(node: ast.AST) -> bool:
    """`losses.mean(1)`, `acc.float().mean()`: a reduction or cast of a tensor that already
    exists, with plain arguments. Right after a read has drained the queue, reading it waits
    only for that one kernel on an idle GPU, not for the step."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _SMALL_KERNELS
        and all(isinstance(a, (ast.Constant, ast.Name, ast.UnaryOp)) for a in node.args)
        and all(isinstance(k.value, (ast.Constant, ast.Name)) for k in node.keywords)
        and (_launches_no_work(node.func.value) or _one_small_kernel(node.func.value))
    )


def _right_after_a_read(ctx: Context, before: list[ast.AST], value: ast.AST, keys: set[str]) -> bool:
    """The statement just before this one in the iteration (or the test around it) read a GPU
    value, nothing new was computed since, and this read computes nothing either (`total +=
    loss.item()` then `correct += acc.item()`, `acc` computed before the first read): the GPU
    queue is already drained, so this read waits for nothing new: the first one is the finding.
    A tensor computed after the first read (`loss = ...` in between) is new GPU work, and a
    real second wait."""
    # in a loop over a step's parts (each parameter), every extra round trip is the cost itself
    small = _one_small_kernel(value) and bool(ctx.loops) and is_step_loop(ctx.loops[-1].node)
    if not before or not keys or not (_launches_no_work(value) or small):
        return False
    k = len(before) - 1
    while k > 0 and not _reads_in(ctx, before[k]) and _queues_no_gpu_work(ctx, before[k], set()):
        k -= 1  # `tbar.set_description(f"{total / (i + 1):.3f}")` in between: no GPU work
    last = before[k]
    if not isinstance(last, (*_SIMPLE, ast.expr)):
        return False  # a block (`if`, `for`, `try`) may queue work after its own reads
    if (
        isinstance(last, ast.Expr)
        and isinstance(last.value, ast.Call)
        and terminal_name(last.value.func) in ("synchronize",)
    ):
        return True
    reads = _reads_in(ctx, last)
    rebound = set().union(*(_rebinds(n) for n in before[k:]))
    # `b = b.cpu().numpy()`: the name now holds the host copy, so where it was is unknown here
    copied = _rebinds(last)
    if not any(root_name(r) in copied or accelerator.where(ctx, r) != accelerator.CPU for r in reads):
        return False
    return not any(key == b or key.startswith(b + ".") for key in keys for b in rebound)


_READ_OUT = frozenset({"cpu", "numpy", "item", "tolist"})
# `isinstance(v, (float, int))`: builtin types and exceptions, names no tensor goes by
_BUILTIN_TYPES = frozenset(
    {"bool", "int", "float", "complex", "str", "bytes", "list", "tuple", "dict", "set", "type"}
    | {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
)


def _queues_no_gpu_work(ctx: Context, node: ast.AST, host: set[str]) -> bool:
    """`image = images[i].detach().cpu().numpy()`, `Image.fromarray(pred).save(path)`: a
    statement that touches device tensors only to read them out (`.cpu()`, `.item()` of a tensor
    that already exists, `len(x)`, `x.shape`), moves nothing, calls no module and computes only
    with host values: it queues nothing new on the GPU. `host` holds the names earlier such
    statements bound; the names this one binds are added to it."""
    if isinstance(node, (ast.Name, ast.Attribute)):
        return True  # the test of an `if opts.save_results:` around the read computes nothing
    read_out: set[int] = set()
    callees: set[int] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.attr in ("shape", "ndim", "dtype", "device", "requires_grad"):
            read_out.update(id(x) for x in ast.walk(n))
        if isinstance(n, ast.Compare) and all(
            isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in n.ops
        ):
            # `ids is not None and i in ids`, `p.grad is not None`: decided on the host
            read_out.update(
                id(y)
                for x in (n.left, *n.comparators)
                if isinstance(x, (ast.Name, ast.Attribute))
                for y in ast.walk(x)
            )
        if isinstance(n, (ast.IfExp, ast.If)) and isinstance(n.test, (ast.Name, ast.Attribute)):
            # `loss_cls.item() if self.use_classifier else 0`: a flag tested on the host
            read_out.update(id(x) for x in ast.walk(n.test))
        if isinstance(n, ast.FormattedValue) and isinstance(n.value, (ast.Name, ast.Attribute)):
            # `f"{module_name}.{name}"`: formatting reads a value out, it queues no GPU work
            read_out.update(id(x) for x in ast.walk(n.value))
        if not isinstance(n, ast.Call):
            continue
        if _is_diagnostic(n) or _writes_a_summary(n):
            # `writer.add_histogram(name, v.cpu().numpy(), self.step)`: a logger takes values as
            # they are; its plain arguments compute nothing
            for a in [*n.args, *(k.value for k in n.keywords)]:
                if isinstance(a, (ast.Name, ast.Attribute)):
                    read_out.update(id(x) for x in ast.walk(a))
        f = n.func
        if isinstance(f, ast.Attribute) and f.attr in _READ_OUT and _launches_no_work(f.value):
            read_out.update(id(x) for x in ast.walk(f.value))
            continue
        if (isinstance(f, ast.Name) and f.id == "len") or (
            isinstance(f, ast.Attribute) and f.attr in TENSOR_METADATA
        ):
            read_out.update(id(x) for a in [f, *n.args] for x in ast.walk(a))  # metadata
            continue
        if isinstance(f, ast.Attribute) and f.attr in ("cuda", "to"):
            return False
        if ctx.kind(f) == MODULE:
            return False
        while isinstance(f, (ast.Attribute, ast.Subscript)):
            f = f.value
        callees.add(id(f))  # `plt` of `plt.imshow(img)`, `self` of `self.meters[k].update(v)`
    for n in ast.walk(node):
        if id(n) in read_out or not isinstance(n, ast.Name) or not isinstance(n.ctx, ast.Load):
            continue
        if n.id in host or n.id in _BUILTIN_TYPES or ctx.resolve_import(n.id) is not None:
            continue
        kind = ctx.kind(n)
        if kind == MODULE:
            return False
        if kind in _NOT_TENSOR or (kind is None and id(n) in callees):
            continue
        if accelerator.where(ctx, n) != accelerator.CPU:
            return False  # a tensor, or an unknown value computed with: may be on the GPU
    host.update(_rebinds(node))
    return True


def _over_batch_items(ctx: Context, loop: ast.For | ast.AsyncFor) -> bool:
    """`for i in range(len(images))`, `range(x.size(0))`, `for img in images` (a tensor): a loop
    over the items of one batch, not over batches."""
    it = _unenumerated(loop.iter)
    if isinstance(it, ast.Name):
        return ctx.kind(it) in TENSOR_KINDS
    if not (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Name)
        and it.func.id == "range"
        and len(it.args) == 1
    ):
        return False
    n = it.args[0]
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len" and n.args:
        return isinstance(n.args[0], ast.Name)
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "size":
        return isinstance(n.func.value, ast.Name)
    return (
        isinstance(n, ast.Subscript)
        and isinstance(n.value, ast.Attribute)
        and n.value.attr == "shape"
        and isinstance(n.value.value, ast.Name)
    )


def _loop_queues_nothing(ctx: Context, loop: ast.AST, value: ast.AST, call: ast.Call) -> bool:
    """`for k, v in kwargs.items(): if isinstance(v, torch.Tensor): v = v.item()`: a loop over
    the parts of one step (a dict's items, parameters, a short literal) that walks tensors which
    already exist and queues no GPU work of its own: the first read drains the queue and the
    others wait for nothing. Not a walk over one tensor's elements (`for y in preds`): one
    `.tolist()` would replace those copies."""
    if isinstance(loop, COMPREHENSIONS):
        return _comprehension_queues_nothing(ctx, loop, value)
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    it = _walked(_unenumerated(loop.iter))
    if is_step_loop(loop) and not (_walks_held_values(ctx, it) and _only_copies_out(loop, call)):
        return False
    if not _launches_no_work(value) or ctx.kind(it) in TENSOR_KINDS:
        return False
    host = _rebinds(loop.target)
    return all(_queues_no_gpu_work(ctx, part, host) for part in [_walked(loop.iter), *loop.body])


def _walked(it: ast.AST) -> ast.AST:
    """`zip(buffers, params)` -> `buffers`: pairing up (or numbering) what names already hold
    computes nothing, whatever device the values live on."""
    while (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Name)
        and it.func.id in ("zip", "enumerate")
        and it.args
        and all(isinstance(a, (ast.Name, ast.Attribute)) for a in it.args)
    ):
        it = it.args[0]
    return it


def _walks_held_values(ctx: Context, it: ast.AST) -> bool:
    """`for pred in predictions:` in no other loop: a walk over values a name already holds (a
    model's list of outputs), not over batches a loader makes or a generator computes."""
    return (
        len(ctx.loops) == 1
        and isinstance(it, (ast.Name, ast.Attribute))
        and ctx.kind(it) not in (LOADER, DATASET)
    )


# what a loop that only files host copies away calls, besides the copies themselves
_FILING = frozenset({"append", "extend", "update", "get", "items", "keys", "values", "astype", "squeeze"})


def _only_copies_out(loop: ast.AST, call: ast.Call) -> bool:
    """`prediction["boxes"] = pred["boxes"].detach().cpu().numpy()`, then `out.append(...)`:
    the read is a copy (`.cpu()`, `.numpy()`), and the loop calls nothing but such copies,
    container methods and builtins, so no function of the program can queue GPU work in it.
    Not a number read per value (`.item()`, `.tolist()`: one `.tolist()` of a stacked tensor)."""
    if not isinstance(call.func, ast.Attribute) or call.func.attr not in ("cpu", "numpy"):
        return False
    for n in ast.walk(loop):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Attribute):
            if f.attr in ("cpu", "numpy") or f.attr in _FILING or f.attr in _NO_WORK:
                continue
            if _on_a_host_copy(f.value):
                continue  # `p.cpu().float()`: works on the copy, on the CPU
            return False
        if not (isinstance(f, ast.Name) and f.id in vars(builtins) and f.id != "print"):
            return False
    return True


def _on_a_host_copy(node: ast.AST) -> bool:
    """`p.cpu()`, `p.detach().cpu().float()`: what a method is called on went through a copy to
    the host."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in ("cpu", "numpy"):
            return True
        node = node.func.value
    return False


def _row_of(value: ast.AST, seq: ast.AST) -> bool:
    """`seq[i]` itself, not a part of it (`seq[i][run]`, `seq[i].labels`)."""
    return isinstance(value, ast.Subscript) and ast.unparse(value.value) == ast.unparse(seq)


def _indexed(it: ast.AST) -> ast.AST:
    """`range(len(xs))` -> `xs`: a walk over the positions of a sequence walks the sequence."""
    if (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Name)
        and it.func.id == "range"
        and len(it.args) == 1
        and isinstance(it.args[0], ast.Call)
        and isinstance(it.args[0].func, ast.Name)
        and it.args[0].func.id == "len"
        and len(it.args[0].args) == 1
    ):
        return it.args[0].args[0]
    return it


def _comprehension_queues_nothing(ctx: Context, comp: ast.AST, value: ast.AST) -> bool:
    """`[a.cpu().numpy() for a in self.activations]`, `{k: v.detach().cpu() for k, v in
    model.state_dict().items()}`: one pass over tensors that already exist (a list of them, a
    model's state), reading each out and computing nothing: as the loop above, the first copy
    drains the queue. Not over a tensor itself (`[r.item() for r in preds]`: one `.tolist()`)."""
    gens = comp.generators  # type: ignore[attr-defined]
    if len(ctx.loops) != 1:
        return False  # in a batch loop, its first copy waits for each batch's work
    if any(g.ifs for g in gens) or not _launches_no_work(value) or not _nested_over_parts(gens):
        return False
    it = _indexed(gens[0].iter)
    if it is not gens[0].iter and _row_of(value, it):
        return False  # `[t[i].cpu() for i in range(len(t))]`: rows of what may be one tensor
    while isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and not it.args:
        if it.func.attr not in _MODEL_STATE | {"items", "values", "keys"}:
            return False
        it = it.func.value  # `model.state_dict().items()`: the tensors the model holds
    if ctx.kind(it) in TENSOR_KINDS or not isinstance(it, (ast.Name, ast.Attribute)):
        return False
    host = set().union(*(_rebinds(g.target) for g in gens))
    elt = comp.value if isinstance(comp, ast.DictComp) else comp.elt  # type: ignore[attr-defined]
    if any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("item", "tolist")
        for n in ast.walk(elt)
    ):
        return False  # `[labels[y.item()] for y in preds]`: numbers out of one tensor, one `.tolist()`
    return _queues_no_gpu_work(ctx, elt, host)


def _nested_over_parts(gens: list[ast.comprehension]) -> bool:
    """One generator, or inner ones that walk a part of an outer one's element (`for g in
    opt.param_groups for p in g["params"]`): still one pass over tensors that exist."""
    bound: set[str] = set()
    for i, g in enumerate(gens):
        if i:
            root = g.iter
            while isinstance(root, (ast.Subscript, ast.Attribute)):
                if isinstance(root, ast.Subscript) and not isinstance(root.slice, ast.Constant):
                    return False
                root = root.value
            if not (isinstance(root, ast.Name) and root.id in bound):
                return False
        bound |= {n.id for n in ast.walk(g.target) if isinstance(n, ast.Name)}
    return True


def offloads_on_request(ctx: Context, call: ast.Call) -> bool:
    """`if cpu_offload: shard = shard.cpu()`, `if self.cpu_cache: feat = feat.cpu()`: a copy to
    the host under a switch that asks for offloading. Each tensor leaves the device as soon as it is ready so that device memory never
    holds them all; keeping them on the device until after the loop defeats what was asked."""
    f = call.func
    if not isinstance(f, ast.Attribute) or not (
        f.attr == "cpu" or (f.attr == "to" and accelerator.device_type_of_literal(move_target(call)) == "cpu")
    ):
        return False
    child: ast.AST = call
    for up in reversed(ctx.stack):
        if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False  # a loop may sit inside the switch: `if self.cpu_cache: for i in ...:`
        taken = (isinstance(up, ast.If) and any(s is child for s in up.body)) or (
            isinstance(up, ast.IfExp) and up.body is child
        )
        if taken and any(_asks_to_offload(w) for w in _words(up.test)):  # type: ignore[attr-defined]
            return True
        child = up
    return False


def _asks_to_offload(word: str) -> bool:
    """`cpu_offload`, `offload_to_cpu`, `cpu_cache` (keep features in host memory as they come)."""
    low = word.lower()
    return "offload" in low or ("cpu" in low and "cache" in low)


def _words(expr: ast.AST) -> list[str]:
    """The names and attribute names an expression mentions (`cfg.cpu_offload` -> cfg, cpu_offload)."""
    return [
        n.id if isinstance(n, ast.Name) else n.attr
        for n in ast.walk(expr)
        if isinstance(n, (ast.Name, ast.Attribute))
    ]


def _after_a_read_in_statement(ctx: Context, call: ast.Call, value: ast.AST) -> bool:
    """`if pred.item() != target.item():`: the first read of the statement drains the GPU
    queue, and this one, computing nothing itself, waits for nothing new."""
    if not _launches_no_work(value):
        return False
    part: ast.AST | None = ctx.statement()
    if part is None:  # in a block's own expressions: only an `if` test counts
        block = next((n for n in reversed(ctx.stack) if isinstance(n, ast.stmt)), None)
        if not isinstance(block, ast.If) or not any(block.test is n for n in ctx.stack):
            return False
        part = block.test
    start = (call.lineno, call.col_offset)
    return any(
        (read.end_lineno or read.lineno, read.end_col_offset or 0) < start
        and accelerator.where(ctx, read) != accelerator.CPU
        for read in _reads_in(ctx, part)
    )


def _drained_before_inner_loop(ctx: Context, value: ast.AST, keys: set[str]) -> bool:
    """`for i in range(len(images)): image = images[i].detach().cpu()` in a batch loop that
    already read a GPU value earlier in the same iteration (`preds = out.argmax(1).cpu()`), with
    nothing queued on the GPU since, in between or in the inner loop: the queue is drained, so the
    per-element copies wait for nothing; the earlier read is the wait."""
    if len(ctx.loops) < 2 or not keys or not _launches_no_work(value):
        return False
    inner, outer = ctx.loops[-1].node, ctx.loops[-2].node
    if not isinstance(inner, (ast.For, ast.AsyncFor)) or not _over_batch_items(ctx, inner):
        return False
    host = _rebinds(inner.target) if isinstance(inner.iter, ast.Call) else set()  # `i` of a `range`
    if not all(_queues_no_gpu_work(ctx, part, host) for part in [inner.iter, *inner.body]):
        return False
    before = _before_in_iteration(ctx, outer)
    if not before:
        return False
    last = next(
        (
            k
            for k in range(len(before) - 1, -1, -1)
            if any(accelerator.where(ctx, r) != accelerator.CPU for r in _reads_in(ctx, before[k]))
        ),
        None,
    )
    if last is None or not all(_queues_no_gpu_work(ctx, n, set()) for n in before[last + 1 :]):
        return False
    rebound = set().union(*(_rebinds(n) for n in before[last:]))
    return not any(key == b or key.startswith(b + ".") for key in keys for b in rebound)


def _over_gathered_values(ctx: Context, loop: ast.AST) -> bool:
    """The loop walks a list a `torch.distributed` collective filled earlier in the function
    (`dist.all_gather(size_list, local_size)` then `[int(s.item()) for s in size_list]`, also in
    a `zip` or `enumerate`): the
    first read waits for the collective, the others for nothing, and the host needs the values
    (buffer sizes, batch counts) to go on."""
    source = _iterable(loop)
    fn = ctx.enclosing_function()
    if isinstance(source, ast.Call) and terminal_name(source.func) in ("zip", "enumerate"):
        walked = {a.id for a in source.args if isinstance(a, ast.Name)}  # `zip(buffers, lengths)`
    else:
        walked = {source.id} if isinstance(source, ast.Name) else set()
    if not walked or fn is None:
        return False
    return any(
        isinstance(n, ast.Call) and n.lineno < loop.lineno and _collective_inputs(n) & walked
        for n in ast.walk(fn)
    )


def _collective_inputs(call: ast.Call) -> set[str]:
    """The plain names handed to a `torch.distributed` collective (`dist.all_reduce(stop)` ->
    {"stop"}); empty for any other call."""
    if terminal_name(call.func) not in devices.COLLECTIVES:
        return set()
    return {a.id for a in call.args if isinstance(a, ast.Name)}


# methods that store or report a value rather than compute with it
_KEEPERS = frozenset({"append", "extend", "insert", "add", "update", "put", "write", "set_postfix"})


# packages whose functions may compute on the device: their results are no host library's
_DEVICE_LIBRARIES = frozenset(
    {"torch", "torchvision", "torchaudio", "torchmetrics", "numpy", "np", "math", "builtins", "jax", "cupy"}
)


def _host_library_call(ctx: Context, call: ast.Call, bound: frozenset[int]) -> bool:
    """`index.search(...)`, `csc_matrix.dot(...)`, `utils.post_process_prediction(...)`: a
    function or method of an object that is neither torch, NumPy, the class itself, a tensor nor
    a module, whose result the code binds (`id` in `bound`) to go on with it."""
    func = call.func
    if id(call) not in bound:
        return False
    if isinstance(func, ast.Name):
        # `total += pesq(16000, ref, deg, "wb")`: a function imported from a host library
        origin = ctx.resolve_import(func.id) or ""
        return bool(origin) and origin.split(".")[0] not in _DEVICE_LIBRARIES
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr in _KEEPERS or func.attr.startswith("log"):
        return False
    root = root_name(func)
    if root is None or root == "self":
        return False
    qual = ctx.qualname(func) or ""
    if qual.split(".")[0] in _DEVICE_LIBRARIES:
        return False
    return ctx.kind(func.value) is None


@per_node
def _bound_values(loop: ast.AST) -> frozenset[int]:
    """The ids of the values the loop's assignments bind, found once per loop."""
    return frozenset(
        id(n.value) for n in ast.walk(loop) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
    )


def _computed_with_on_the_host(ctx: Context, loop: ast.AST, call: ast.Call) -> bool:
    """The host copy goes, in the same pass, into a host library's computation whose result the
    pass goes on with (`_, ids = index.search(f.cpu().numpy(), 1)`, `m = csc_matrix.dot(v.cpu()
    .numpy(), r)`, also through a name bound to the copy): the library needs the values on the
    host now, so there is nothing to keep on the device."""
    bound = _bound_values(loop)
    value, holder = _consumer(ctx, call)
    if isinstance(holder, ast.keyword):
        at = next((i for i, n in enumerate(ctx.stack) if n is holder), 0)
        holder = ctx.stack[at - 1] if at > 0 else None
    if isinstance(holder, ast.Call) and holder is not call and _host_library_call(ctx, holder, bound):
        return any(a is value for a in holder.args) or any(k.value is value for k in holder.keywords)
    name = _bound_name(ctx, value, holder)
    if name is None or not isinstance(holder, ast.Assign):
        return False
    return any(
        isinstance(sub, ast.Call)
        and sub.lineno > holder.lineno
        and any(
            isinstance(a, ast.Name) and a.id == name for a in [*sub.args, *(k.value for k in sub.keywords)]
        )
        and _host_library_call(ctx, sub, bound)
        for sub in ast.walk(loop)
    )


def _waits_for_a_person(ctx: Context) -> bool:
    """The innermost loop waits for someone on each pass: it reads the keyboard (`input(...)`),
    opens a window that stays until it is closed (`o3d.visualization.draw_geometries`,
    `cv2.waitKey(0)`), or calls a function of this source that does. An interactive loop, not a
    hot path. Worked out once per loop, not once per read in it."""
    info = ctx.loops[-1]
    if _WAITS_FOR_A_PERSON not in info.facts:
        blocks = functools.partial(_blocks_for_a_person, ctx)
        info.facts[_WAITS_FOR_A_PERSON] = any(
            isinstance(n, ast.Call) and (blocks(n) or _helper_that(ctx, n, blocks))
            for n in ast.walk(info.node)
        )
    return info.facts[_WAITS_FOR_A_PERSON]


_WAITS_FOR_A_PERSON = "TM301.waits_for_a_person"  # LoopInfo.facts: `_waits_for_a_person`, once per loop


def _helper_of_this_source(ctx: Context, func: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The definition of the function a plain name calls, where this source defines it."""
    fn = ctx.origin(func) if isinstance(func, ast.Name) else None
    return fn if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _makes_a_call(fn: ast.AST, matches: Callable[[ast.Call], bool]) -> bool:
    return any(isinstance(n, ast.Call) and matches(n) for n in ast.walk(fn))


def _helper_that(ctx: Context, call: ast.Call, matches: Callable[[ast.Call], bool]) -> bool:
    """`display_open3d(...)`: a call of a function of this source whose body makes a call that
    `matches` (draws, opens a window, synchronizes)."""
    fn = _helper_of_this_source(ctx, call.func)
    return fn is not None and _makes_a_call(fn, matches)


def _blocks_for_a_person(ctx: Context, call: ast.Call) -> bool:
    if isinstance(call.func, ast.Name) and call.func.id == "input":
        return True
    name = ctx.qualname(call.func) or ""
    if name in _MODAL_WINDOWS:
        return True
    # `cv2.waitKey(0)` (or no argument) waits for a key press; `cv2.waitKey(1)` only polls
    return name == "cv2.waitKey" and (
        not call.args or (isinstance(call.args[0], ast.Constant) and call.args[0].value == 0)
    )


# calls that open a window and return only when someone closes it
_MODAL_WINDOWS = frozenset(
    {"open3d.visualization.draw_geometries", "open3d.visualization.draw_geometries_with_editing"}
)


# receivers of drawing calls: `plt.plot(...)`, `ax.scatter(...)`, `sns.lineplot(...)`
_PLOT_ROOTS = frozenset({"plt", "pyplot", "ax", "axs", "axes", "fig", "sns"})
# methods that build an object while it is created or restored: once per object, not per step
_LIFECYCLE_METHODS = frozenset(
    {"__init__", "__setstate__", "__getstate__", "__reduce__", "_load_from_state_dict", "__post_init__"}
)


def _drawn_each_pass(ctx: Context, call: ast.Call) -> bool:
    """The read's host copy is an argument of a drawing call in the same statement (`plt.plot(
    acts[:, i].cpu().numpy(), ...)`, `ax.imshow(img.cpu())`): a figure needs the values on the
    host, and drawing it takes far longer than the wait. Not one number per element
    (`ax.text(j, i, f"{sim[i, j].item():.3f}")`), which one `.tolist()` before the loop reads."""
    if terminal_name(call.func) == "item":
        return False
    return inside_a_call(ctx, call, lambda up: root_name(up.func) in _PLOT_ROOTS or _draws(ctx, up))


def _draws(ctx: Context, call: ast.Call) -> bool:
    """`display_open3d(src.cpu().numpy(), ...)`: a function of this source that draws what it is
    given (`o3d.visualization.draw_geometries`, `plt.imshow`, `cv2.imshow`)."""
    return _helper_that(
        ctx,
        call,
        lambda n: (
            root_name(n.func) in _PLOT_ROOTS or (ctx.qualname(n.func) or "").startswith(_DRAWING_MODULES)
        ),
    )


_DRAWING_MODULES = ("open3d.visualization.", "matplotlib.pyplot.", "cv2.imshow", "PIL.ImageShow.")


def _written_out_each_pass(ctx: Context, loop: ast.AST, call: ast.Call) -> bool:
    """What the read brings to the host is written to a file in the same pass (`save_image(x.cpu(),
    f"{i}.png")`, `sf.write(path, wav.cpu().numpy(), sr)`, through names bound from it): the file
    needs the values of this pass on the host, so there is nothing to keep on the device."""
    if inside_a_call(ctx, call, writes_a_file):
        return True
    stmt = ctx.statement()
    if stmt is None or not isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return False
    body = [n for n in ast.walk(loop) if isinstance(n, ast.stmt) and n.lineno > stmt.lineno]
    names = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for later in sorted(body, key=lambda n: n.lineno):
        used = {n.id for n in ast.walk(later) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if not used & names:
            continue
        if isinstance(later, (ast.Assign, ast.AnnAssign)):
            names |= {
                n.id for n in ast.walk(later) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
        for n in ast.walk(later):
            if (
                isinstance(n, ast.Call)
                and writes_a_file(n)
                and any(isinstance(a, ast.Name) and a.id in names for arg in n.args for a in ast.walk(arg))
            ):
                return True
    return False


@check("TM301", calls=_SYNC_METHODS | {"synchronize", "print"}, loops=True, finish=True)
def sync_in_loop(call: ast.Call | LoopInfo | ast.Module, ctx: Context) -> None:
    if isinstance(call, ast.Module):
        note_cell_functions(ctx, call, _SYNCHRONIZERS, lambda fn: _calls_synchronize(ctx, fn))
        return
    if isinstance(call, LoopInfo):
        _withdraw_where_the_host_waits(ctx, call)
        return
    if not ctx.in_loop or ctx.loops[-1].inner_loop_seen:
        return  # after the inner batch loop: once per epoch is the fix, not the problem
    loop = ctx.loops[-1].node
    if _is_epoch_loop(loop) or _once_per_training_run(ctx) or _stops_early(ctx):
        return
    if _few_iterations_alone(ctx, loop) and not _repeated_by_an_outer_loop(ctx):
        return
    if libraries.forward_waits_each_call(ctx):
        return  # GPyTorch's forward reads GPU values on every call: one more read adds no wait
    if _walks_parameters_once(ctx, loop):
        return  # `for p in model.parameters(): print(p)` after training: a report, not a hot path
    value_read = call.func.value if isinstance(call.func, ast.Attribute) else None
    if value_read is not None and _walks_a_mapping(ctx, loop, value_read):
        return  # `for k in totals: log += f"{k}: {totals[k].item()}"`: a few named values, read out
    if _breaks_after(ctx, loop, call):
        return  # `if done: r = info["r"][i].item(); ...; break`: once per pass, as after the loop
    if _per_dimension(ctx, loop):
        return  # `[k.tolist() for k in torch.where(mask)]`: one index tensor per dimension, already waited for
    if _converted_by_type(ctx, call):
        return  # `[s.item() if isinstance(s, Tensor) else s for s in splits]`: the Python values an API takes
    if _waits_for_a_person(ctx):
        return  # `while True: text = input(...)`: each pass waits for someone typing, not the GPU
    if _drawn_each_pass(ctx, call):
        return  # `plt.plot(acts[:, i].cpu().numpy(), ...)` per panel: the figure needs the values
    if ctx.method in _LIFECYCLE_METHODS:
        return  # `__setstate__` moving each entry to the CPU: once per object restored, not per step
    if _written_out_each_pass(ctx, loop, call):
        return  # `save_image(img.cpu(), f"{i}.png")`: each result goes to a file in its own pass
    if _over_gathered_values(ctx, loop):
        return  # `dist.all_gather(sizes, mine)` then `[s.item() for s in sizes]`: the sizes the host allocates by
    if _computed_with_on_the_host(ctx, loop, call):
        # `_, ids = index.search(f.cpu().numpy(), 1)`: a host library needs this pass's values
        _note_a_wait_the_host_needs(
            ctx, call, call.func.value if isinstance(call.func, ast.Attribute) else None
        )
        return
    func = call.func
    value: ast.AST | None = None
    if isinstance(func, ast.Name):
        if _synchronizes(ctx, func):
            if _times_next(ctx, call):
                _note_a_wait_the_host_needs(ctx, call, None)  # `synchronize()` of this source, then a clock
            return
        if func.id != "print":
            return
        value = _tensor_in_print(ctx, call)
        if value is None:
            return
        label = f"print({unparse(value, 40)})"
    elif isinstance(func, ast.Attribute):
        if func.attr == "synchronize":
            if ctx.qualname(func) != "torch.cuda.synchronize":
                return
            if _times_next(ctx, call):
                # `torch.cuda.synchronize()` then `t0 = time.time()`: a timing barrier, and the
                # iteration's wait in any case
                _note_a_wait_the_host_needs(ctx, call, None)
                return
            label = "torch.cuda.synchronize()"
        elif func.attr in _SYNC_METHODS:
            if call.args and func.attr in ("item", "tolist", "numpy", "cpu"):
                return  # not the tensor method (e.g. a dict's or a custom object's)
            kind = ctx.kind(func.value)
            if kind in _NOT_TENSOR:
                return
            if func.attr in ("nonzero", "tolist") and kind not in TENSOR_KINDS:
                return  # also pandas/numpy methods: only flagged on known tensors
            if isinstance(func.value, ast.Constant):
                return
            if func.attr == "cpu" and _a_module(ctx, func.value):
                return  # `model.cpu()`: a module offloaded to free the GPU, not a value read out
            value = func.value
            label = f"{unparse_operand(func.value, 40)}.{func.attr}()"
        else:
            return
    else:
        return
    if (
        (_host_needs_it(ctx, call) and not _reads_each_element(ctx, loop, value))
        # `fo.write(struct.pack("!f", scale.item()))`: a number of the file being written
        or _packed_into_bytes(ctx, call)
        # `a, n = [t.cpu() for t in policy(s)]; env.step(a.numpy())`
        or _unpacked_for_the_host(ctx, call)
    ):
        _note_a_wait_the_host_needs(ctx, call, value)
        return
    if value is not None and _group_key(ctx, loop, value):
        return  # `key = int(stratum.item())` per `torch.unique` group: its size was waited for already
    if value is not None and _joins_collected_results(ctx, loop, value):
        return  # `[torch.cat(x).cpu() for x in zip(*stats)]`: the one read after the batch loop
    if _decoding_loop(ctx) or _read_decides_the_stop(ctx, loop):
        return  # one read per decoded token or search step is part of the algorithm
    if guard_kind(ctx, call) is not None:
        # `if i == 0:` runs once; `if step % N == 0:` is the advice itself, already followed
        return
    if value is not None:
        before = _before_in_iteration(ctx, _statement_loop(ctx) if isinstance(loop, COMPREHENSIONS) else loop)
        keys = _read_keys(ctx, value)
        if before is not None and (
            _read_earlier_in_iteration(ctx, before, keys) or _right_after_a_read(ctx, before, value, keys)
        ):
            _join_the_first_read(ctx, call, label, before)
            return  # the first read of the iteration is the finding
        if before is not None and (
            _waits_earlier_for_a_shape(ctx, before)
            or _drained_before_inner_loop(ctx, value, keys)
            or _after_a_read_in_statement(ctx, call, value)
        ):
            return  # the first read of the iteration is the finding
    if value is not None and _loop_queues_nothing(ctx, loop, value, call):
        return  # only the first iteration's read waits: nothing is queued after it
    if _on_a_fresh_stream(ctx):
        return  # `with torch.cuda.stream(torch.cuda.Stream()):` the copy waits for nothing queued
    if offloads_on_request(ctx, call):
        return  # `if cpu_offload: shard = shard.cpu()`: freeing device memory is the point
    place = accelerator.ACCELERATOR if value is None else accelerator.where(ctx, value)
    if place != accelerator.ACCELERATOR and devices.in_data_worker_code(ctx) is not None:
        return  # a Dataset's `__getitem__` or a collate function: the dataset's CPU tensors
    if place == accelerator.CPU or accelerator.in_cpu_branch(ctx, call):
        return  # a CPU tensor: reading it waits for no GPU
    if (
        place is None
        and value is not None
        and accelerator.batches_stay_on_host(ctx, loop, _roots(ctx, value))
    ):
        return  # unmoved batches where the code moves them for the GPU elsewhere: a CPU loop
    if place == accelerator.ACCELERATOR and isinstance(func, ast.Attribute) and func.attr == "numpy":
        return  # `.numpy()` on a GPU tensor raises rather than waits: not this rule's message
    roots = _roots(ctx, value) if value is not None else {label}
    if _other_branch_reads(ctx, loop, roots):
        return  # `if distributed: v = reduce(loss).item() else: v = loss.item()`: one runs
    _note_branch_read(ctx, loop, call, roots)
    tests = _tests_of_the_value(ctx, call, loop)
    if _decides_the_update(loop, tests):
        # `if loss.item() < threshold: loss.backward()`: whether this batch trains at all
        _note_a_wait_the_host_needs(ctx, call, value)
        return
    if _feeds_a_guard(tests):
        given = ctx.flag(
            call,
            f"`{label}` inside a loop waits for the GPU on every iteration, to check the value"
            " before going on.",
            "A per-step check (stop on a NaN loss, stop early on a threshold) needs the value each"
            " step; if it can wait, check it every N steps, or keep the test on the device"
            " (`bad |= ~torch.isfinite(loss)`) and read it once in a while.",
            severity="info",
            needs_accelerator=place is None,
        )
        _record_given(ctx, given)
        return
    copies_out = isinstance(func, ast.Attribute) and func.attr == "cpu"
    given = ctx.flag(
        call,
        f"`{label}` inside a loop makes the CPU wait for the GPU on every iteration.",
        "Keep the results on the device and move them once after the loop; to offload as you go,"
        " copy without waiting (`x.to('cpu', non_blocking=True)`) and call `torch.cuda.synchronize()`"
        " once after the loop, before reading them."
        if copies_out
        else "Accumulate on the device (`total += loss.detach()`) and read the value once after the"
        " loop, or only every N steps.",
        needs_accelerator=place is None,
    )
    _record_given(ctx, given)


_GIVEN = "TM301.given"  # LoopInfo.facts: the findings given in the loop's iteration
_HOST_WAITS = "TM301.host_waits"  # LoopInfo.facts: every iteration waits for a value the host needs


def _record_given(ctx: Context, given: Finding | None) -> None:
    """Keep the finding with its loop, and with the statement loop around a comprehension it is
    in (`stats |= {k: v.item() for k, v in losses.items()}` in a batch loop): a wait that
    iteration has in any case withdraws it too."""
    if given is None:
        return
    for info in reversed(ctx.loops):
        info.facts.setdefault(_GIVEN, []).append(given)
        if not isinstance(info.node, COMPREHENSIONS):
            break


_FOLLOWERS = "TM301.followers"  # LoopInfo.facts: the first read's finding, and the reads after it


def _join_the_first_read(ctx: Context, call: ast.Call, label: str, before: list[ast.AST]) -> None:
    """A read that waits for nothing new goes with the iteration's first read: that finding's
    fix names it, so fixing the first read does not just move the finding to the next line.
    Only a finding on what runs before it in the same iteration (`before`) is that read."""
    info = ctx.loops[-1]
    given = info.facts.get(_GIVEN)
    if not given or given[-1].line is None:
        return
    first = given[-1]
    if not any(
        getattr(n, "lineno", 0) <= first.line <= (getattr(n, "end_lineno", None) or 0) for n in before
    ):
        return
    first_hint, followers = info.facts.get(_FOLLOWERS, {}).get(id(first), (first.hint, []))
    followers = [*followers, f"line {call.lineno} `{label}`"]
    shown = ", ".join(followers[:4]) + (f" and {len(followers) - 4} more" if len(followers) > 4 else "")
    new = ctx.amend(
        first,
        hint=f"{first_hint} The reads after it in the same iteration wait only for it; treat them"
        f" the same way: {shown}.",
    )
    given[-1] = new
    info.facts.setdefault(_FOLLOWERS, {})[id(new)] = (first_hint, followers)


def _note_a_wait_the_host_needs(ctx: Context, call: ast.Call, value: ast.AST | None) -> None:
    """The read is one the host needs to go on (an action for `env.step`, a token fed back as
    the next input, a number packed into a file): if it runs in every iteration, on a tensor
    that may be on the GPU, the iteration waits for the GPU there whatever else it does."""
    info = ctx.loops[-1]
    if not _always_runs(ctx, info.node):
        return
    if value is not None and accelerator.where(ctx, value) == accelerator.CPU:
        return
    if accelerator.in_cpu_branch(ctx, call):
        return
    info.facts[_HOST_WAITS] = True


def _withdraw_where_the_host_waits(ctx: Context, info: LoopInfo) -> None:
    """`losses.append(loss.item())` in an online RL loop that reads every step's action for
    `env.step`: the iteration waits for the GPU at the action in any case, so keeping the loss
    on the device removes no wait. The advice holds only where the read is the iteration's
    one wait."""
    if info.facts.get(_HOST_WAITS):
        for given in info.facts.get(_GIVEN, ()):
            ctx.withdraw(given)


def _always_runs(ctx: Context, loop: ast.AST) -> bool:
    """The node being checked runs in every iteration of `loop` that gets to it: it is not in
    a branch (`if`, a conditional expression, the right of `and`/`or`), a nested loop or
    function, a handler, or the loop's `else`."""
    path = ctx.stack
    start = next((i for i, n in enumerate(path) if n is loop), None)
    if start is None or isinstance(loop, COMPREHENSIONS):
        return False
    for k in range(start, len(path) - 1):
        anc, child = path[k], path[k + 1]
        if isinstance(child, ast.stmt):
            found = block_of(anc, child)
            if found is None:
                return False
            if anc is loop:
                if found[0] is not loop.body:  # type: ignore[attr-defined]
                    return False
            elif not isinstance(anc, (ast.With, ast.AsyncWith, ast.Try)):
                return False
        elif isinstance(anc, ast.IfExp) and child is not anc.test:
            return False
        elif isinstance(anc, ast.BoolOp) and child is not anc.values[0]:
            return False
        elif isinstance(anc, (ast.Lambda, *COMPREHENSIONS)):
            return False
    return True


def _group_key(ctx: Context, loop: ast.AST, value: ast.AST) -> bool:
    """`for stratum in torch.unique(strata): ... results[int(stratum.item())] = ...`: the read is of
    the loop's own element, one distinct value of a `torch.unique` whose output size the CPU had to
    wait for. A handful of keys, each needed on the host to name its group's result."""
    return (
        isinstance(value, ast.Name)
        and value.id in _loop_names(loop)
        and over_unique_groups(ctx, _iterable(loop))
    )


def _per_dimension(ctx: Context, loop: ast.AST) -> bool:
    """A walk over `torch.where(mask)` (one argument) or `x.nonzero(as_tuple=True)`: a tuple of
    one index tensor per dimension (two or three), whose size the call had to wait for, so the
    reads of its parts wait for nothing new. Not a walk over the indices themselves."""
    it = _unenumerated(_iterable(loop))
    if not isinstance(it, ast.Call):
        return False
    q = ctx.qualname(it.func) or ""
    if q == "torch.where":
        return len(it.args) == 1 and not it.keywords
    as_tuple = keyword(it, "as_tuple")
    return (
        terminal_name(it.func) == "nonzero" and isinstance(as_tuple, ast.Constant) and as_tuple.value is True
    )


def _converted_by_type(ctx: Context, call: ast.Call) -> bool:
    """`v.item() if isinstance(v, Tensor) else v`, `v.item() if isinstance(spec, int) else v`: a
    read chosen by a type test, in the only loop of the function, normalises what it walks to the
    Python values an API takes (`torch.split` sizes, ints handed back for ints): each value is
    needed on the host. Inside a batch loop the read still waits once per step."""
    if len(ctx.loops) != 1:
        return False
    walked = _iteration_names(ctx.loops[-1].node)
    for anc in reversed(ctx.stack):
        if isinstance(anc, (ast.IfExp, ast.If)):
            tested = _type_tested(anc.test)
            # a test of what the loop walks, not of a model
            if tested is not None and tested in walked and _within_branch(anc, call):
                return True
        if anc is ctx.loops[-1].node:
            return False
    return False


def _type_tested(test: ast.AST) -> str | None:
    """The plain name of `isinstance(v, Tensor)` or `torch.is_tensor(v)`."""
    tested = isinstance_test(test)
    if tested is not None:
        return tested[0]
    if (
        isinstance(test, ast.Call)
        and terminal_name(test.func) == "is_tensor"
        and len(test.args) == 1
        and isinstance(test.args[0], ast.Name)
    ):
        return test.args[0].id
    return None


def _within_branch(branch: ast.If | ast.IfExp, node: ast.AST) -> bool:
    """`node` sits in the taken branch of the test (anywhere below it), not in its `else`."""
    body = [branch.body] if isinstance(branch, ast.IfExp) else branch.body
    return any(node is n for part in body for n in ast.walk(part))


# calls that run a function they are handed once in each process they start
_STARTERS = frozenset({"spawn", "start_processes", "Process"})
_CLOCKS = frozenset({"time", "perf_counter", "monotonic", "process_time", "perf_counter_ns", "time_ns"})


_SYNCHRONIZERS = "TM301.synchronizers"  # ctx.notes key: module-level functions that synchronize


def _a_module(ctx: Context, value: ast.AST) -> bool:
    """`model.eval().cpu()`, `deepcopy(model.eval()).cpu()`, or `model.cpu()` where the function
    calls `model.eval()` (or `.parameters()`, `.train()`, ...): a module, which only modules
    answer to, not a tensor."""
    if any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in io.MODULE_ONLY
        for n in ast.walk(value)
    ):
        return True
    return isinstance(value, ast.Name) and io.used_as_module(ctx, value.id)


def _on_a_fresh_stream(ctx: Context) -> bool:
    """Inside `with torch.cuda.stream(torch.cuda.Stream()):` (detectron2's metric copies): the
    block runs on a stream made for it, where nothing else is queued, so a read there does not
    wait for the step's work on the default stream."""
    for n in ctx.stack:
        if not isinstance(n, (ast.With, ast.AsyncWith)):
            continue
        for item in n.items:
            e = item.context_expr
            if isinstance(e, ast.Call) and ctx.qualname(e.func) == "torch.cuda.stream" and e.args:
                if any(
                    isinstance(c, ast.Call) and ctx.qualname(c.func) == "torch.cuda.Stream"
                    for c in ast.walk(e.args[0])
                ):
                    return True
    return False


def _synchronizes(ctx: Context, func: ast.Name) -> bool:
    """`synchronize()`: a function of this source, of an earlier cell or of the kernel that calls
    `torch.cuda.synchronize`."""
    if ctx.origin(func) is None:  # not bound in this source: an earlier cell's or the kernel's
        if ctx.notes.get(_SYNCHRONIZERS, {}).get(func.id):
            return True
        fn = live_function(ctx, func.id)
    else:
        fn = _helper_of_this_source(ctx, func)
    return fn is not None and _calls_synchronize(ctx, fn)


def _calls_synchronize(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return _makes_a_call(fn, lambda n: ctx.qualname(n.func) == "torch.cuda.synchronize")


def _times_next(ctx: Context, call: ast.Call) -> bool:
    """The statement after the synchronising one (after its `if torch.cuda.is_available():`
    when it is the last of that block) reads a clock: the wait is there to time the GPU's work."""
    for parent, stmts, k in enclosing_blocks([*ctx.stack, call]):
        if k + 1 < len(stmts):
            return any(
                isinstance(c, ast.Call)
                and terminal_name(c.func) in _CLOCKS
                and (ctx.qualname(c.func) or "").startswith("time.")
                for c in ast.walk(stmts[k + 1])
            )
        if not isinstance(parent, ast.If):
            return False
        # the last statement of an `if`: look after the `if`
    return False


def _repeated_by_an_outer_loop(ctx: Context) -> bool:
    """A short loop (`for task in range(meta_batch_size)`, 16 tasks) nested in a step loop
    that goes round many times (`for iteration in range(num_iterations)`): its reads repeat on
    every step, a few at a time (the caller has ruled out loops that stop after a count)."""
    return any(
        is_step_loop(outer.node)
        and not _is_epoch_loop(outer.node)
        and not _few_iterations_alone(ctx, outer.node)
        for outer in ctx.loops[:-1]
    )


_MODEL_STATE = frozenset(
    {"parameters", "named_parameters", "buffers", "named_buffers", "state_dict", "param_groups"}
)


def _breaks_after(ctx: Context, loop: ast.AST, call: ast.Call) -> bool:
    """The read sits in a block of the loop that ends with `break` (or `return`, `sys.exit()`, or
    a `raise` no `try` of the loop catches: `except: print(t); raise ValueError`), or in that
    `raise`: it runs at most once per pass over the loop, like a read after it."""
    stack = [*ctx.stack, call]
    start = next((i for i, n in enumerate(stack) if n is loop), None)
    if start is None:
        return False
    caught = any(
        isinstance(n, ast.Try) and any(stack[i + 1] is b for b in n.body)
        for i, n in enumerate(stack[start:-1], start)
    )
    ends = (ast.Break, ast.Return) if caught else (ast.Break, ast.Return, ast.Raise)

    def leaves(last: ast.stmt) -> bool:
        # `print(loss); sys.exit(1)`: the run ends there
        return isinstance(last, ends) or (
            isinstance(last, ast.Expr)
            and isinstance(last.value, ast.Call)
            and terminal_name(last.value.func) in _STOPS
        )

    return any(
        leaves(block[-1])
        # `raise FloatingPointError(f"loss {loss.item()}")`: the read is the way out
        and (k < len(block) - 1 or isinstance(block[-1], ast.Raise))
        and not any(_continues(s) for s in block[k:])
        for _, block, k in enclosing_blocks(stack, start)
    )


def _continues(stmt: ast.stmt) -> bool:
    """`stmt` may `continue` the loop it is in (not one nested in it)."""
    todo: list[ast.AST] = [stmt]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Continue):
            return True
        if not isinstance(n, (ast.For, ast.AsyncFor, ast.While, *SCOPES)):
            todo.extend(ast.iter_child_nodes(n))
    return False


def _joins_collected_results(ctx: Context, loop: ast.AST, value: ast.AST) -> bool:
    """`torch.cat(x, 0).cpu()` with `x` the loop's own variable: the loop walks lists of
    per-batch results gathered earlier (`zip(*stats)`, one per column), and each read copies a
    whole joined column once. That is the read once after the batch loop, not a read per batch."""
    node = value
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr not in ("cat", "stack")
    ):
        node = node.func.value
    if not (
        isinstance(node, ast.Call)
        and terminal_name(node.func) in ("cat", "stack", "concatenate")
        and (ctx.qualname(node.func) or "").startswith("torch.")
        and node.args
        and isinstance(node.args[0], ast.Name)
    ):
        return False
    return node.args[0].id in _iteration_names(loop)


def _walks_parameters_once(ctx: Context, loop: ast.AST) -> bool:
    """A loop over a model's parameters, buffers or state dict that is in no other loop and
    runs once per run: at the top level of a script or cell, or in a module-level function
    that is only called from the top level, outside loops (`main()`). It waits once per tensor
    of the model, once: printing or summarising the trained weights is what it is for."""
    if len(ctx.loops) != 1:
        return False
    it = getattr(loop, "iter", None)
    while (
        isinstance(it, ast.Call)
        and terminal_name(it.func) in ("enumerate", "list", "sorted", "zip")
        and it.args
    ):
        it = it.args[0]
    if (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Attribute)
        and it.func.attr in ("items", "values")
    ):
        it = it.func.value  # `model.state_dict().items()`
    if not (isinstance(it, ast.Call) and terminal_name(it.func) in _MODEL_STATE) and not (
        isinstance(it, ast.Attribute) and it.attr == "param_groups"
    ):
        return False
    func = ctx.frame.node
    if func is None:
        return True
    tree = ctx.stack[0] if ctx.stack else None
    return tree is not None and _runs_once_per_run(tree, func, 0)


def _walks_a_mapping(ctx: Context, loop: ast.AST, value: ast.AST) -> bool:
    """`for key, value in metrics.items()`, `for key in totals: totals[key].item()` (or walks of
    nested dicts, `for layer, rec in per_layer.items()` in a walk of the outer one), in no other
    loop of a function that runs no model (nor of the loop, at top level): a walk over the
    entries of dicts of named values (losses, metrics, recorders) that already exist. It runs
    once per call; there is no stream of steps to stall, as with the same reads written out
    one by one."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or not all(
        isinstance(info.node, (ast.For, ast.AsyncFor)) and _over_entries(info.node) for info in ctx.loops
    ):
        return False
    if not _an_entry(loop, value):
        return False
    # in a training step the first read waits for that step's backward
    return not _runs_a_model(ctx, loop if ctx.frame.node is None else ctx.frame.node)


def _entries_walked(loop: ast.For | ast.AsyncFor) -> ast.AST:
    """`enumerate(sorted(d.items()))` -> `d.items()`: what the loop walks, in whatever order."""
    it = loop.iter
    while isinstance(it, ast.Call) and terminal_name(it.func) in ("enumerate", "list", "sorted") and it.args:
        it = it.args[0]
    return it


def _an_entry(loop: ast.For | ast.AsyncFor, value: ast.AST) -> bool:
    """The read is of an entry as the walk hands it (`v`, `d[key]`, `d[key].detach()`, a field of
    it, `rec.counts`), not of something the body computes from it."""
    if not _launches_no_work(value):
        return False
    while isinstance(value, ast.Attribute) or (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
    ):
        value = value.func.value if isinstance(value, ast.Call) else value.value  # type: ignore[attr-defined]
    if isinstance(value, ast.Subscript) and isinstance(loop.target, ast.Name):
        it = _entries_walked(loop)
        mapping = it.func.value if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) else it
        return ast.unparse(value.value) == ast.unparse(mapping)
    return (
        isinstance(value, ast.Name)
        and value.id in _rebinds(loop.target)
        and not any(value.id in _rebinds(stmt) for stmt in loop.body)
    )


def _over_entries(loop: ast.For | ast.AsyncFor) -> bool:
    """The loop walks `d.items()`, `d.values()`, `d.keys()`, or `d` itself when the body looks
    up `d[key]` with the key the loop binds."""
    it = _entries_walked(loop)
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and not it.args:
        return (
            it.func.attr in ("items", "values", "keys") and terminal_name(it.func.value) not in _MODEL_STATE
        )
    if not isinstance(it, (ast.Name, ast.Attribute)) or not isinstance(loop.target, ast.Name):
        return False
    held, key = ast.unparse(it), loop.target.id
    return any(
        isinstance(n, ast.Subscript) and is_name(n.slice, key) and ast.unparse(n.value) == held
        for stmt in loop.body
        for n in ast.walk(stmt)
    )


def _runs_once_per_run(tree: ast.AST, func: ast.AST, depth: int) -> bool:
    """A module-level function that is only called (or started in a process, `mp.spawn(f)`,
    `Process(target=f)`) at the top level outside loops, or from another such function."""
    calls = top_level_calls(tree, func, _STARTERS) if depth <= 3 else None
    if calls is None:
        return False
    parents = parents_of(tree)
    for call in calls:
        for up in ancestors(parents, call):
            if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if up is func or not _runs_once_per_run(tree, up, depth + 1):
                    return False
                break
            if isinstance(up, (ast.For, ast.AsyncFor, ast.While, ast.Lambda, ast.ClassDef, *COMPREHENSIONS)):
                return False
    return True


def _roots(ctx: Context, value: ast.AST) -> set[str]:
    """The names a read's tensors hang from (`reduce(loss.data)` -> {loss})."""
    return {k.split(".", 1)[0] for k in _read_keys(ctx, value)}


# ctx -> {id(if node): roots read (and reported) in its body}, for the `else` branch
_BRANCH_READS: WeakKeyDictionary[Context, dict[int, set[str]]] = WeakKeyDictionary()


def _branches(ctx: Context, loop: ast.AST, call: ast.AST) -> list[tuple[ast.If, bool]]:
    """The `if`s between the loop and the read, and whether the read is in the `else`."""
    stack = [*ctx.stack, call]
    start = next((i for i, n in enumerate(stack) if n is loop), None)
    if start is None:
        return []
    out = []
    for parent, child in zip(stack[start:], stack[start + 1 :]):
        if isinstance(parent, ast.If) and child is not parent.test:
            out.append((parent, any(child is x for x in parent.orelse)))
    return out


def _note_branch_read(ctx: Context, loop: ast.AST, call: ast.AST, roots: set[str]) -> None:
    seen = _BRANCH_READS.setdefault(ctx, {})
    for node, in_else in _branches(ctx, loop, call):
        if not in_else:
            seen.setdefault(id(node), set()).update(roots)


def _other_branch_reads(ctx: Context, loop: ast.AST, roots: set[str]) -> bool:
    """The `if` branch of an `if`/`else` around this read already reported a read of the same
    tensor: only one of the branches runs in an iteration, so it is the same wait."""
    seen = _BRANCH_READS.get(ctx, {})
    stack = [*ctx.stack]
    return any(
        in_else and bool(seen.get(id(node), set()) & roots)
        for node, in_else in _branches(ctx, loop, stack[-1])
    )


_GUARD_CHECKS = frozenset({"isfinite", "isnan", "isinf"})
_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_STOPS = frozenset({"exit", "_exit", "abort", "quit"})


def _stops(body: list[ast.stmt]) -> bool:
    """The block ends the run: `raise`, `sys.exit(1)`, `break`, `return`."""
    last = body[-1] if body else None
    if isinstance(last, (ast.Raise, ast.Break, ast.Return)):
        return True
    return (
        isinstance(last, ast.Expr)
        and isinstance(last.value, ast.Call)
        and terminal_name(last.value.func) in _STOPS
    )


def _feeds_a_guard(tests: list[ast.If]) -> bool:
    """The host value goes to a check that stops the run (`loss_value = loss.item()` then
    `if not math.isfinite(loss_value): sys.exit(1)`, or `math.isnan(loss.item())` in the test
    itself) or the loop (`if kl > 1.5 * target_kl: break`, early stopping): a deliberate
    per-step wait, for a decision only the host takes. `tests`: `_tests_of_the_value`."""
    return any(_stops(stmt.body) for stmt in tests)


def _decides_the_update(loop: ast.AST, tests: list[ast.If]) -> bool:
    """`if loss.item() < skip_threshold * last_error: loss.backward(); opt.step()`, or `if
    loss.isnan().item(): continue` before the update: the value decides whether this batch
    trains at all. Only the host can skip an update (one with a zeroed loss still moves
    momentum), so the wait is the algorithm, not a read to defer. `tests`: `_tests_of_the_value`."""
    for test in tests:
        if _updates(test.body):
            return True
        if test.body and isinstance(test.body[-1], ast.Continue) and _updates(_after(loop, test)):
            return True
    return False


def _updates(block: list[ast.stmt]) -> bool:
    """The statements run a training update: a `.backward()` or an optimizer's `.step()`."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("backward", "step")
        for stmt in block
        for n in ast.walk(stmt)
    )


def _after(scope: ast.AST, stmt: ast.stmt) -> list[ast.stmt]:
    """The statements that follow `stmt` in its block."""
    parent = parents_of(scope).get(id(stmt))
    found = block_of(parent, stmt) if parent is not None else None
    return found[0][found[1] + 1 :] if found is not None else []


def _tests_of_the_value(ctx: Context, call: ast.Call, loop: ast.AST) -> list[ast.If]:
    """The `if`s of the loop that test the value read by `call` (directly, or through the name
    it is bound to) with `isfinite`/`isnan`/`isinf`, an order comparison, or the read itself
    (`if loss.isnan().item():`)."""
    value, holder = _consumer(ctx, call)
    name = _bound_name(ctx, value, holder) if isinstance(holder, ast.Assign) else None

    def is_value(arg: ast.AST) -> bool:
        if any(a is call for a in ast.walk(arg)):
            return True
        return name is not None and isinstance(arg, ast.Name) and arg.id == name

    def checks(test: ast.AST) -> bool:
        if is_value(test) and isinstance(test, (ast.Call, ast.Name)):
            return True  # `if loss.isnan().item():`, `if bad:` with `bad = ...item()`
        for n in ast.walk(test):
            if isinstance(n, ast.Call) and terminal_name(n.func) in _GUARD_CHECKS and n.args:
                if is_value(n.args[0]):
                    return True
            # early stopping: `if approx_kl > 1.5 * target_kl: break`, or a convergence test
            # on the value's change (`if abs(prev - value) / abs(prev) < tol: break`)
            if isinstance(n, ast.Compare) and isinstance(n.ops[0], _ORDER):
                if any(is_value(part) for part in ast.walk(n.left)):
                    return True
        return False

    return [stmt for stmt in ast.walk(loop) if isinstance(stmt, ast.If) and checks(stmt.test)]


def _test_label(node: ast.AST) -> str:
    if isinstance(node, ast.If):
        return f"if {unparse(node.test, 40)}"
    if isinstance(node, ast.While):
        return f"while {unparse(node.test, 40)}"
    if isinstance(node, ast.Assert):
        return f"assert {unparse(node.test, 40)}"
    return f"... if {unparse(node.test, 40)} else ..."  # type: ignore[attr-defined]


def _tensors_in(ctx: Context, test: ast.AST) -> list[ast.AST]:
    """The tensor operands of a condition (`pred[i] != y[i]` -> `pred[i]`, `y[i]`)."""
    if isinstance(test, ast.Compare):
        parts = [test.left, *test.comparators]
    elif isinstance(test, ast.BoolOp):
        return [t for value in test.values for t in _tensors_in(ctx, value)]
    elif isinstance(test, ast.UnaryOp):
        return _tensors_in(ctx, test.operand)
    else:
        parts = [test]
    return [p for p in parts if ctx.is_tensor(p)]


def _tests_device_value(ctx: Context, test: ast.AST) -> bool:
    """`next_word == eos_idx`, `all(c[-1].item() == eos for c in beams)`: a test on a tensor
    or on a value read from one."""
    for n in ast.walk(test):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("item", "tolist")
        ):
            return True
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and ctx.kind(n) in TENSOR_KINDS:
            return True
    return False


def _decoding_loop(ctx: Context) -> bool:
    """The read is inside a `while` loop that stops on a value it computes (greedy or beam
    decoding until the end token, iterating until a tolerance is met): how many iterations run
    depends on the data, so each one needs the value on the host to decide whether to go on,
    and a read there is part of the algorithm, not a wait to defer."""
    for info in ctx.loops:
        loop = info.node
        if not isinstance(loop, ast.While):
            continue
        if _tests_device_value(ctx, loop.test):
            return True
        for n in ast.walk(loop):
            if isinstance(n, ast.If) and _may_leave(n.body) and _tests_device_value(ctx, n.test):
                return True
    return False


def _may_leave(body: list[ast.stmt]) -> bool:
    """The block ends the loop, or ends with an `if` one of whose branches does (`if not
    synced_gpus: break else: this_peer_finished = True`)."""
    if _stops(body):
        return True
    last = body[-1] if body else None
    return isinstance(last, ast.If) and (_may_leave(last.body) or _may_leave(last.orelse))


def _read_decides_the_stop(ctx: Context, loop: ast.AST) -> bool:
    """In a search or decoding loop (a `for` over `range` that trains nothing), the value read
    here, or what the loop derives from it (a token, its string, the list of them), is tested by
    an `if` that leaves the loop (`pred = y.argmax().item()` then `if pred == eos: break`): the
    next iteration cannot be decided without it on the host."""
    if not _stop_test_of_a_search(ctx):
        return False
    stmt = next((up for up in reversed(ctx.stack) if isinstance(up, ast.stmt)), None)
    if not isinstance(stmt, ast.Assign):
        return False
    derived = {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    body = [n for n in ast.walk(loop) if isinstance(n, ast.stmt)]
    for _ in range(4):
        grown = set(derived)
        for n in body:
            used = (
                isinstance(n, (ast.Assign, ast.AugAssign, ast.Expr))
                and {m.id for m in ast.walk(n.value) if isinstance(m, ast.Name)} & derived
            )
            if not used:
                continue
            if isinstance(n, ast.Assign):
                grown |= {m.id for t in n.targets for m in ast.walk(t) if isinstance(m, ast.Name)}
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                grown.add(n.target.id)
            elif (
                isinstance(n, ast.Expr)
                and isinstance(n.value, ast.Call)
                and isinstance(n.value.func, ast.Attribute)
                and n.value.func.attr in ("append", "extend")
                and isinstance(n.value.func.value, ast.Name)
            ):
                grown.add(n.value.func.value.id)
        if grown == derived:
            break
        derived = grown
    return any(isinstance(n, ast.If) and _may_leave(n.body) and _tests_a_token(n.test, derived) for n in body)


def _tests_a_token(test: ast.AST, derived: set[str]) -> bool:
    """The test matches what was read (`pred == eos`, `text.endswith(suffix)`), as a decoder's
    stop does; a tolerance (`abs(prev - cur) < tol`) is a convergence check, which may read
    every N steps instead (TM301 reports it as info)."""
    for n in ast.walk(test):
        touches = {m.id for m in ast.walk(n) if isinstance(m, ast.Name)} & derived
        if isinstance(n, ast.Compare) and touches:
            return all(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in n.ops)
        if isinstance(n, ast.Call) and terminal_name(n.func) in ("endswith", "startswith") and touches:
            return True
    return False


def _stop_test_of_a_search(ctx: Context) -> bool:
    """The innermost loop is a `for` that trains nothing (no `backward()`, no optimizer
    `step()` in it): a search or decoding loop bounded by a maximum length, which an `if` whose
    block leaves the loop stops early on a value it computes (every sequence reached its end
    token). Deciding whether to go on needs that value on the host, as in a `while` loop."""
    if not ctx.loops or not isinstance(ctx.loops[-1].node, (ast.For, ast.AsyncFor)):
        return False
    loop = ctx.loops[-1].node
    if not over_integers(loop.iter):
        return False  # bounded by a maximum length, not a pass over data
    return not any(
        isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr in ("backward", "step")
        for c in ast.walk(loop)
    )


def _in_a_test(ctx: Context) -> bool:
    """A test function (`def test_equivariance(...)`, or a bare `def test():` with no
    parameters, unlike an evaluation `def test(model, loader)`), run once by the test runner."""
    fn = ctx.frame.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    return fn.name.startswith("test_") or (fn.name == "test" and not parameters(fn))


def _validates_input(ctx: Context, test: ast.AST) -> bool:
    """An `assert` that checks what the function was given: in `__init__` (once per object, on
    its construction arguments), or on tensors computed only from the function's parameters
    (`steps = torch.diff(problem.t_eval)` then an assert on `steps`), outside `forward`. A
    precondition that must raise, as `if ...: raise`; not a check of the function's own state
    or results (`self.`...)."""
    fn = ctx.frame.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if fn.name == "__init__":
        return True
    if fn.name == "forward":
        return False  # runs on every step: a check of each batch there is a wait per step
    given = parameters(fn) - {"self", "cls"}
    if not given:
        return False
    line = test.lineno
    for stmt in ast.walk(fn):
        if not isinstance(stmt, ast.Assign) or stmt.lineno >= line:
            continue
        names = {
            n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        if names and all(n in given or n in ctx.imports for n in names):
            given |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
    roots = {n.id for n in ast.walk(test) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - set(
        ctx.imports
    )
    return bool(roots) and roots <= given


def _runs_once(ctx: Context, node: ast.AST) -> bool:
    """A condition at the top level of a script or cell, in no loop and no function (which
    may be called again and again): it waits once per run, to decide on a result the host
    needs; a `while` tests again on each of its own iterations."""
    return not isinstance(node, ast.While) and ctx.at_top_level


_MASK_CALLS = frozenset(
    {
        "gt",
        "ge",
        "lt",
        "le",
        "eq",
        "ne",
        "isnan",
        "isinf",
        "isfinite",
        "logical_and",
        "logical_or",
        "logical_not",
    }
)


def _is_mask(ctx: Context, name: ast.Name, depth: int = 0) -> bool:
    """A name bound to a comparison (`keep = scores > thresh`, `pos = torch.ge(iou, 0.5)`), to
    `~`/`&`/`|` of masks or to `.any(dim=...)`, or a parameter named as a mask (`kpt_mask`)."""
    origin = ctx.origin(name)
    if origin is None:
        fn = ctx.frame.node
        return fn is not None and "mask" in name.id.lower() and name.id in parameters(fn)
    return depth < 4 and _is_mask_expr(ctx, origin, depth + 1)


def _is_mask_expr(ctx: Context, node: ast.AST, depth: int = 0) -> bool:
    if isinstance(node, ast.Compare):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.Not)):
        return _is_mask_expr(ctx, node.operand, depth)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return _is_mask_expr(ctx, node.left, depth) or _is_mask_expr(ctx, node.right, depth)
    if isinstance(node, ast.Call):
        return terminal_name(node.func) in _MASK_CALLS | {"any", "all"}
    return isinstance(node, ast.Name) and _is_mask(ctx, node, depth)


_COUNTING_CALLS = frozenset({"nonzero", "argwhere", "masked_select"})


def _guards_masked_indexing(ctx: Context, node: ast.AST) -> bool:
    """A test, once per call (in no loop), on a boolean mask that the function then indexes
    with (`if keep.sum() == 0: return []` ... `boxes[keep]`, `if not kpt_mask.any()` with the
    mask a parameter, `if torch.any(s < 0):` then `torch.where(s < 0)`): indexing by a mask waits
    for the GPU to count what it selects anyway, so the test adds no wait of its own worth
    removing. In a loop the test is one more wait per iteration, and it is reported."""
    func = ctx.frame.node
    if isinstance(node, ast.While) or ctx.in_loop or func is None:
        return False
    test = node.test  # type: ignore[attr-defined]
    masks = {n.id for n in ast.walk(test) if isinstance(n, ast.Name) and _is_mask(ctx, n)}
    compared = {
        n.id
        for c in ast.walk(test)
        if isinstance(c, ast.Compare)
        for n in ast.walk(c)
        if isinstance(n, ast.Name)
    }
    if not masks and not compared:
        return False

    def names(expr: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}

    for n in own_nodes(func):
        if isinstance(n, ast.Subscript):
            used = names(n.slice)
            if used & masks or (used & compared and _is_mask_expr(ctx, n.slice)):
                return True
        elif isinstance(n, ast.Call) and _counting_call(n) and names(n) & (masks | compared):
            return True
    return False


def _counting_call(call: ast.Call) -> bool:
    """`x.nonzero()`, `torch.masked_select(...)`, one-argument `torch.where(mask)`: a result
    whose size is the count of true values, which the host must wait for."""
    name = terminal_name(call.func)
    return name in _COUNTING_CALLS or (name == "where" and len(call.args) == 1 and not call.keywords)


_PER_STEP_WORDS = ("step", "backward", "batch", "clip", "loss", "forward", "__call__", "hook", "closure")


def _runs_per_step(ctx: Context) -> bool:
    """Whether the function holding a condition (outside any loop of its own) shows that it runs
    again and again: a module's `forward` or a method it calls, a hook, a closure, a function named for
    a step (`training_step`, `clip_gradients`, `compute_loss`, `after_backward`), or one this
    source calls inside a loop, directly or from such a function. A function called once per
    fit, epoch or set-up (`update_state`, `save_model`, `prune_node`) waits once per call."""
    fn = ctx.frame.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return True
    cls = ctx.frame.cls
    if ctx.in_forward or (ctx.in_module_method and cls is not None and fn.name in cls.forward_helpers):
        return True
    if any(up is not fn and isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)) for up in ctx.stack):
        return True  # a function defined inside another: a closure, a callback handed on
    return _registered_as_hook(ctx) or fn.name in _hot_functions(ctx.stack[0])


@per_node
def _hot_functions(tree: ast.AST) -> frozenset[str]:
    """Names of the functions of `tree` that run per step: named for one, or called (by name, or
    as a method of `self`) inside a loop or comprehension, or from a function that runs per step."""
    parents = parents_of(tree)
    defined = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    hot = {name for name in defined if any(w in name.lower() for w in _PER_STEP_WORDS)}
    callers: dict[str, set[str]] = {}
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        own = isinstance(f, ast.Name) or (
            isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls")
        )
        name = terminal_name(f)
        if not own or name not in defined:
            continue  # `model.train()` is not a call of this source's `train`
        for up in ancestors(parents, n):
            if isinstance(up, (*LOOPS, *COMPREHENSIONS)):
                hot.add(name)
                break
            if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)):
                callers.setdefault(name, set()).add(up.name)
                break
    changed = True
    while changed:
        changed = False
        for name, by in callers.items():
            if name not in hot and by & hot:
                hot.add(name)
                changed = True
    return frozenset(hot)


def _registered_as_hook(ctx: Context) -> bool:
    """The enclosing function is handed to `*.register_hook(...)` (or another `register_*hook`):
    it runs on every backward or forward pass, a hot path whatever it does."""
    fn = ctx.frame.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not ctx.stack:
        return False
    return fn.name in _hook_functions(ctx.stack[0])


@per_node
def _hook_functions(tree: ast.AST) -> frozenset[str]:
    """Names handed to a `*hook(...)` call anywhere in `tree`, found once per tree."""
    return frozenset(
        a.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.endswith("hook")
        for a in n.args
        if isinstance(a, ast.Name)
    )


def _answers_the_host(ctx: Context, node: ast.If) -> bool:
    """The block only raises (`raise ValueError("NaNs detected")`, after a log line at most) or
    returns a Python bool from a function declared `-> bool` (`if finished.all(): return False`
    in one that tells its caller whether to go on): a decision only the host can take, which the
    code makes on purpose."""
    body = node.body
    if len(body) == 1 and isinstance(body[0], ast.Return):
        v = body[0].value
        fn = ctx.frame.node
        returns = getattr(fn, "returns", None)
        declared = isinstance(returns, ast.Name) and returns.id == "bool"
        return declared and isinstance(v, ast.Constant) and isinstance(v.value, bool)
    if isinstance(body[-1], ast.Raise) and all(
        isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) for s in body[:-1]
    ):
        return True
    # `if torch.isnan(x).any(): warnings.warn(...)`, `if bad.any(): n = int(bad.sum()); raise ...`:
    # a diagnostic the host prints, logs or raises, and nothing else
    return _reports_only(body) and _reports_only(node.orelse) and _reports_something(body)


def _skips_a_bad_update(ctx: Context, node: ast.If) -> bool:
    """A non-finite check (`isnan`/`isinf`/`isfinite`) that decides whether this step updates
    the model: a branch runs the update (`if not torch.isnan(loss): loss.backward(); opt.step()`,
    `if not torch.isfinite(norm): log(...) else: scaler.step(opt)`), skips the rest of a step
    that does (`continue` or `return` before `backward()`/`step()`; `return None` from a Lightning
    `training_step`), or reports and stops the run (`log.error(...); break`). Only the host can
    skip an update (a zeroed loss still moves momentum and Adam's moments), so the wait is the
    algorithm, as for TM301's `_decides_the_update`."""
    if not any(
        isinstance(n, ast.Call) and terminal_name(n.func) in _GUARD_CHECKS for n in ast.walk(node.test)
    ):
        return False
    if _updates(node.body) or _updates(node.orelse):
        return True
    last = node.body[-1] if node.body else None
    if isinstance(last, (ast.Continue, ast.Return)) and _updates(_rest_of_the_step(ctx, node, last)):
        return True
    fn = ctx.frame.node
    if (
        isinstance(last, ast.Return)
        and (last.value is None or (isinstance(last.value, ast.Constant) and last.value.value is None))
        and getattr(fn, "name", None) == "training_step"
    ):
        return True  # Lightning skips the optimizer step of a batch whose `training_step` returns None
    return ctx.in_loop and _reports_then_leaves(node.body)


def _rest_of_the_step(ctx: Context, node: ast.stmt, leave: ast.stmt) -> list[ast.stmt]:
    """The statements `leave` (a `continue` or `return` ending `node`'s body) skips: those after
    `node` in each enclosing block, up to the innermost loop's body for `continue`, the
    function's for `return`."""
    stop = ctx.loops[-1].node if isinstance(leave, ast.Continue) and ctx.in_loop else ctx.frame.node
    path = [*ctx.stack, node]
    rest: list[ast.stmt] = []
    for k in range(len(path) - 1, 0, -1):
        parent, child = path[k - 1], path[k]
        if isinstance(child, ast.stmt):
            found = block_of(parent, child)
            if found is not None:
                rest.extend(found[0][found[1] + 1 :])
        if parent is stop:
            break
    return rest


def _reports_then_leaves(body: list[ast.stmt]) -> bool:
    """`log.error("loss went to NaN"); break`, also split by an `if` (`if amp: log.warn(...)
    else: log.error(...); break`): the block reports, and may leave the loop, and does nothing
    else."""
    if not _may_leave(body):
        return False

    def reports(block: list[ast.stmt]) -> bool:
        for s in block:
            if isinstance(s, (ast.Break, ast.Continue, ast.Return, ast.Raise, ast.Pass)):
                continue
            if (
                isinstance(s, ast.Expr)
                and isinstance(s.value, ast.Call)
                and (_is_diagnostic(s.value) or terminal_name(s.value.func) in _STOPS)
            ):
                continue
            if isinstance(s, ast.If) and reports(s.body) and reports(s.orelse):
                continue
            return False
        return True

    return reports(body)


def _logs_names_only(stmt: ast.stmt) -> bool:
    """`logger.info("size %s", step_size)`: a log call of constants and plain names, which
    computes nothing on a device."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    return (
        isinstance(call, ast.Call)
        and _is_diagnostic(call)
        and all(
            isinstance(a, (ast.Constant, ast.Name)) for a in [*call.args, *(k.value for k in call.keywords)]
        )
    )


def _is_diagnostic(call: ast.Call) -> bool:
    """`print(...)`, `warnings.warn(...)`, `logger.info(...)`, `metrics.log_scalar(...)`."""
    if isinstance(call.func, ast.Name):
        return call.func.id in ("print", "warn")
    if not isinstance(call.func, ast.Attribute):
        return False
    if call.func.attr.startswith("log_"):
        return True
    owner = (terminal_name(call.func.value) or "").lower()
    return call.func.attr in _LOG_METHODS and ("log" in owner or owner == "warnings")


def _writes_a_summary(call: ast.Call) -> bool:
    """`writer.add_scalar(...)`, `self.sw.add_histogram(...)`: a TensorBoard summary writer."""
    if not isinstance(call.func, ast.Attribute) or not call.func.attr.startswith("add_"):
        return False
    owner = (terminal_name(call.func.value) or "").lower()
    return "writer" in owner or owner in ("sw", "tb", "tb_writer", "summary")


_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical"})


def _host_value(node: ast.AST) -> bool:
    """A Python value for a message or a flag: `True`, `f"..."`, `int(bad.sum().item())`."""
    if isinstance(node, (ast.Constant, ast.JoinedStr)):
        return True
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Name):
        return node.func.id in ("int", "float", "bool", "str", "len", "round")
    return isinstance(node.func, ast.Attribute) and node.func.attr in ("item", "tolist")


def _reports_only(body: list[ast.stmt]) -> bool:
    """Every statement raises, prints, warns or logs, or sets a Python value for that."""
    for s in body:
        if isinstance(s, (ast.Raise, ast.Pass)):
            continue
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and _is_diagnostic(s.value):
            continue
        if (
            isinstance(s, ast.Assign)
            and all(isinstance(t, ast.Name) for t in s.targets)
            and _host_value(s.value)
        ):
            continue
        if isinstance(s, ast.If) and _reports_only(s.body) and _reports_only(s.orelse):
            continue
        return False
    return True


def _reports_something(body: list[ast.stmt]) -> bool:
    return any(
        isinstance(n, ast.Raise) or (isinstance(n, ast.Call) and _is_diagnostic(n))
        for s in body
        for n in ast.walk(s)
    )


def _agreed_with_peers(ctx: Context, test: ast.AST) -> bool:
    """Every tensor the test reads was handed to a `torch.distributed` collective earlier in the
    function, or computed from one (`dist.all_reduce(stop)` then `if stop > 0: break`;
    `max_size = max(sizes)` after `dist.all_gather(sizes, size)`): all processes must take the
    same branch, so the host needs the agreed value, as every peer does."""
    fn = ctx.enclosing_function()
    tensors = _tensors_in(ctx, test)
    if fn is None or not tensors or not all(isinstance(t, ast.Name) for t in tensors):
        return False
    shared: set[str] = set()
    for n in sorted(
        (n for n in ast.walk(fn) if isinstance(n, (ast.Call, ast.Assign)) and n.lineno < test.lineno),
        key=lambda n: (n.lineno, n.col_offset),
    ):
        if isinstance(n, ast.Call):
            shared |= _collective_inputs(n)
        elif (
            isinstance(n, ast.Assign)
            and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name)
            and {m.id for m in ast.walk(n.value) if isinstance(m, ast.Name)} & shared
        ):
            shared.add(n.targets[0].id)
    return all(t.id in shared for t in tensors)  # type: ignore[attr-defined]


def _constant_answers(node: ast.AST) -> bool:
    """`'positive'`, or `'a' if t else 'b' if u else 'c'`: a choice among Python constants."""
    if isinstance(node, ast.IfExp):
        return _constant_answers(node.body) and _constant_answers(node.orelse)
    return isinstance(node, ast.Constant)


def _returns_a_python_answer(ctx: Context, node: ast.IfExp) -> bool:
    """`return 'positive' if label == 1 else 'negative'` in a function, in no loop of it: the
    function's contract is a Python value picked by the tensor, which only the host can pick;
    it waits once per call, on purpose."""
    if ctx.in_loop or ctx.frame.node is None:
        return False
    for up in reversed(ctx.stack):
        if isinstance(up, ast.Return):
            return up.value is not None and _constant_answers(up.value)
        if not isinstance(up, ast.IfExp):
            return False
    return False


def _once_per_process(ctx: Context) -> bool:
    """The code sits under `if "k" not in seen:` (or `if not "k" in seen:`) in a function that
    stores `seen["k"] = ...`: a check memoised on a flag, made on the first call only."""
    fn = ctx.frame.node
    if fn is None:
        return False
    for up in ctx.stack:
        if not isinstance(up, ast.If):
            continue
        test = up.test
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        cmp = test.operand if negated else test  # type: ignore[attr-defined]
        if not (isinstance(cmp, ast.Compare) and len(cmp.ops) == 1 and isinstance(cmp.left, ast.Constant)):
            continue
        if not isinstance(cmp.ops[0], ast.In if negated else ast.NotIn):
            continue
        holder = ast.unparse(cmp.comparators[0])
        key = cmp.left.value
        if any(
            isinstance(n, ast.Assign)
            and any(
                isinstance(t, ast.Subscript)
                and ast.unparse(t.value) == holder
                and isinstance(t.slice, ast.Constant)
                and t.slice.value == key
                for t in n.targets
            )
            for n in ast.walk(fn)
        ):
            return True
    return False


def _read_by_the_statement_before(ctx: Context, node: ast.AST, test: ast.AST) -> bool:
    """The statements just before this one printed or copied to the host every tensor the test
    reads (`print(f"error: {err:.2e}")` then `assert err < 1e-4`; `improve = float(gain) - ...`,
    a log of `float(kl)`, then `if not torch.isfinite(gain):` and `elif` tests of the same
    chain), and the test computes nothing new: the wait happened there, and the test finds the
    GPU queue empty. Looks back over the run of statements that each read something to the
    host; a statement that reads nothing may have queued new work, and ends the run."""
    tensors = _tensors_in(ctx, test)
    wanted: set[str] = set()
    todo = list(tensors)
    while todo:  # the values the test reads, through calls on them (`torch.isfinite(gain)`)
        t = todo.pop()
        if isinstance(t, (ast.Name, ast.Attribute)):
            wanted.add(ast.unparse(t))
        elif isinstance(t, ast.Call) and not t.keywords:
            todo.extend(t.args)
            if isinstance(t.func, ast.Attribute) and ctx.resolve_import(root_name(t.func) or "") is None:
                todo.append(t.func.value)  # `gain.isfinite()`
        elif isinstance(t, (ast.Compare, ast.BinOp, ast.UnaryOp, ast.BoolOp)):
            todo.extend(ast.iter_child_nodes(t))
        elif not isinstance(t, (ast.Constant, ast.cmpop, ast.operator, ast.unaryop, ast.boolop)):
            return False  # a subscript, a comprehension: not a value read whole
    if not wanted:
        return False
    at, depth = node, len(ctx.stack) - 1
    found = block_of(ctx.stack[depth], at) if depth >= 0 else None
    while found is not None and found[1] == 0 and depth >= 1:
        owner = ctx.stack[depth]
        if not (isinstance(owner, ast.If) and owner.orelse == [at]):
            return False
        at, depth = owner, depth - 1  # an `elif`: what ran before the chain ran before it
        found = block_of(ctx.stack[depth], at)
    if found is None:
        return False
    synced: set[str] = set()
    for before in reversed(found[0][: found[1]]):
        if not isinstance(before, _SIMPLE):
            return False
        if _rebinds(before) & wanted - synced:
            return False  # bound anew here, after any read further up
        here = _synced_by(ctx, before)
        for call in (n for n in ast.walk(before) if isinstance(n, ast.Call)):
            if is_name(call.func, "float") and len(call.args) == 1:
                here.add(ast.unparse(call.args[0]))  # `float(gain)`: its value, copied to the host
            for arg in call.args:
                if isinstance(arg, ast.JoinedStr):
                    here |= {
                        ast.unparse(part.value)
                        for part in arg.values
                        if isinstance(part, ast.FormattedValue)
                        and isinstance(part.value, (ast.Name, ast.Attribute))
                    }
        if not here:
            if _logs_names_only(before):
                continue  # `logger.info("step %s", step_size)`: queues nothing on the GPU
            return False
        synced |= here
        if wanted <= synced:
            return True
    return False


@check("TM302", nodes=(ast.If, ast.While, ast.Assert, ast.IfExp))
def tensor_in_condition(node: ast.If | ast.While | ast.Assert | ast.IfExp, ctx: Context) -> None:
    test = node.test
    if not ctx.is_tensor(test):
        return
    if _runs_once(ctx, node):
        return  # `if argmax == 1: print("positive")` at the top level: one wait, for a result
    if isinstance(node, ast.Assert) and not ctx.in_loop and _in_a_test(ctx):
        return  # `assert err.abs().max() < 1e-10` in `def test_...()`: the check a test makes
    if isinstance(node, ast.Assert) and not ctx.in_loop and _validates_input(ctx, test):
        return  # `assert not torch.any(indices == -1), "..."`: a precondition on what the caller passed
    if _guards_masked_indexing(ctx, node):
        return  # `if keep.sum() == 0: return []` before `boxes[keep]`, which waits anyway
    if not isinstance(node, ast.While) and not ctx.in_loop and not _runs_per_step(ctx):
        return  # once per call of a function run once per fit, epoch or set-up, as far as this source shows
    if isinstance(node, ast.If) and _answers_the_host(ctx, node) and not _registered_as_hook(ctx):
        return  # `if not torch.isfinite(w).all(): raise ValueError(...)`: only the host can raise
    if isinstance(node, ast.If) and _skips_a_bad_update(ctx, node):
        return  # `if not torch.isfinite(loss): continue` before the update: only the host can skip it
    if _agreed_with_peers(ctx, test):
        return  # `dist.all_reduce(stop)` then `if stop > 0: break`: every process needs the agreed answer
    if _once_per_process(ctx):
        return  # `if "checked" not in log: ... log["checked"] = True`: the first call only
    if isinstance(node, ast.IfExp) and _returns_a_python_answer(ctx, node):
        return  # `return 'positive' if label == 1 else 'negative'`: the function answers the host
    if not isinstance(node, ast.While) and _read_by_the_statement_before(ctx, node, test):
        return  # `print(f"{err:.2e}")` then `assert err < 1e-4`: the print already waited
    if ctx.in_loop and ctx.loops[-1].inner_loop_seen and not isinstance(node, ast.While):
        # after the inner batch loop (`if approx_kl > target_kl: break` once per update epoch):
        # one wait per pass over the data, for a decision only the host can take (a `while`
        # there is a loop of its own, testing on each of its iterations)
        return
    if (
        ctx.loops
        and any(_is_epoch_loop(loop.node) for loop in ctx.loops)
        and all(_is_epoch_loop(loop.node) or _few_iterations(ctx, loop.node) for loop in ctx.loops)
    ):
        return  # once per epoch (`if val_acc > best_acc:` after the phases)
    if _decoding_loop(ctx) and (
        isinstance(node, ast.While) or (isinstance(node, ast.If) and _may_leave(node.body))
    ):
        return  # `if next_word == eos_idx: break`: the stop test of a decoding loop is the algorithm
    if (
        isinstance(node, ast.If)
        and node.body
        and isinstance(node.body[-1], (ast.Break, ast.Return))
        and _stop_test_of_a_search(ctx)
    ):
        return  # `if is_eos.any(-1).all(): break` in `for _ in range(max_len):`, as above
    places = {accelerator.where(ctx, t) for t in _tensors_in(ctx, test)} or {None}
    if places == {accelerator.CPU} or accelerator.in_cpu_branch(ctx, node):
        return  # a condition on CPU tensors waits for no GPU
    certain = accelerator.ACCELERATOR in places
    # one finding per loop nest (or per call of a function with no loop): the first wait costs
    # the time the GPU takes to catch up, the tests after it in the same pass mostly a scalar copy
    groups: dict[tuple[int, int], _ConditionGroup] = ctx.__dict__.setdefault("_torchmagic_tm302", {})
    outermost = ctx.loops[0].node if ctx.loops else node if isinstance(node, ast.While) else None
    key = (id(ctx.frame.node), id(outermost) if outermost is not None else 0)
    group = groups.get(key)
    if group is not None:
        group.lines.append(node.lineno)
        more = group.lines[1:]
        where = "call" if key[1] == 0 else "loop"
        listed = ", ".join(str(n) for n in more)
        group.finding = ctx.amend(
            group.finding,
            certain=certain,
            message=f"{group.message[:-1]}; {len(more)} more"
            f" {'test waits' if len(more) == 1 else 'tests wait'} in the same {where}"
            f" (line{'s' if len(more) > 1 else ''} {listed}).",
            hint=f"{_CONDITION_HINT} In this {where}, a single deliberate wait can serve every"
            " decision that needs the host.",
        )
        return
    message = f"`{_test_label(node)}` converts a tensor to a Python bool, which waits for the GPU."
    finding = ctx.flag(
        node if not isinstance(node, ast.IfExp) else test,
        message,
        _CONDITION_HINT,
        needs_accelerator=not certain,
    )
    groups[key] = _ConditionGroup(finding, message, [node.lineno])


_CONDITION_HINT = (
    "Keep the decision on the device (`torch.where`, masks, `torch.clamp`) or synchronise"
    " once, deliberately, outside hot loops."
)


@dataclass
class _ConditionGroup:
    """TM302's finding for one loop nest or loop-free function, and the lines it covers."""

    finding: Finding
    message: str
    lines: list[int]
