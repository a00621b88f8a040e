"""The message and hint of each error kind. Each builder reads the `Context` (what the layer
got, its configuration, the tensors on the failing expression) and returns (message, hint);
a hint is given only where one fix is likely."""

from __future__ import annotations

import ast
import dataclasses
import math
from collections.abc import Callable

from ..lint.kinds import NEW_TENSOR_FUNCS
from . import frames as fr
from . import messages as m
from .explainer import Context
from .records import TensorInfo, config

Builder = Callable[[Context], "tuple[str, str]"]
_BUILDERS: dict[str, Builder] = {}


def build(ctx: Context) -> tuple[str, str]:
    builder = _BUILDERS.get(ctx.err.kind, _generic)
    try:
        return builder(ctx)
    except Exception:  # a builder's guess must never hide the error itself
        return _generic(ctx)


def _kind(*kinds: str) -> Callable[[Builder], Builder]:
    def register(fn: Builder) -> Builder:
        for k in kinds:
            _BUILDERS[k] = fn
        return fn

    return register


# ---- wording -----------------------------------------------------------------------------------


def shp(shape: object) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]" if shape is not None else "?"  # type: ignore[attr-defined]


def named(t: TensorInfo) -> str:
    return f"`{t.name}` {shp(t.shape)}"


def sentence(head: str, text: str) -> str:
    text = text.strip()
    if not text.endswith((".", "!")):
        text += "."
    return f"{head}: {text}"


def _prod(xs: object) -> int:
    return math.prod(xs)  # type: ignore[arg-type]


def _ksize(k: object) -> str:
    if isinstance(k, tuple) and k and all(x == k[0] for x in k):
        return str(k[0])
    return str(k)


def _got(ctx: Context, t: TensorInfo | None, what: str = "input") -> str:
    """'`net.2` (Linear 64→10) got input [32, 128] from `net.1`'."""
    head = ctx.subject()
    if t is None:
        return head
    return f"{head} got {what} {shp(t.shape)}{ctx.producer(t.shape)}"


def _with_operands(ctx: Context, head: str, limit: int = 3) -> str:
    ops = ctx.operands()[:limit]
    if not ops or ctx.builtin():
        return head
    return f"{head} with " + ", ".join(named(t) for t in ops)


def _generic(ctx: Context) -> tuple[str, str]:
    if ctx.builtin():
        return sentence(_got(ctx, ctx.layer_input()), ctx.err.text), ""
    return sentence(_with_operands(ctx, ctx.subject()), ctx.err.text), ""


def _loss_args(ctx: Context) -> tuple[TensorInfo | None, TensorInfo | None]:
    """(input, target) of a loss: the layer's forward arguments or F.*'s."""
    return ctx.layer_arg("input"), ctx.layer_arg("target")


def _loss_head(ctx: Context) -> str:
    x, y = _loss_args(ctx)
    head = ctx.subject() if (ctx.builtin() or ctx.functional_site is None) else _functional_subject(ctx)
    parts = []
    if x is not None:
        parts.append(f"input {shp(x.shape)}")
    if y is not None:
        parts.append(
            f"target {shp(y.shape)}"
            + (f" ({y.dtype})" if ctx.err.kind in (m.TARGET_DTYPE, m.INDEX_DTYPE) else "")
        )
    return f"{head} got " + " and ".join(parts) if parts else head


def _functional_subject(ctx: Context) -> str:
    s = ctx.functional_site
    code = ctx.code()
    if code:
        return f"`{code}`{ctx.context()}"
    return f"`F.{s.function}`" if s is not None else ctx.subject()


# ---- matmul / linear ---------------------------------------------------------------------------


@_kind(m.MATMUL)
def _matmul(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    layer = ctx.layer
    if ctx.builtin() and layer is not None and config(layer.module, "in_features") is not None:
        x = ctx.layer_input()
        return sentence(_got(ctx, x), err.text), _linear_hint(ctx, x)
    if err.detail == "bmm":
        return _bmm(ctx)
    a, b = _mm_operands(ctx)
    head = ctx.subject()
    if a is not None and b is not None:
        head += f" multiplies {named(a)} by {named(b)}"
    elif not ctx.builtin():
        head = _with_operands(ctx, head)
    hint = ""
    if a is not None and b is not None and len(b.shape) == 2 and len(a.shape) >= 1:
        if list(b.shape) == list(err.shapes[1]) and a.shape[-1] == b.shape[1]:
            hint = f"`{b.name}` is {shp(b.shape)}: transpose it, `{a.name} @ {b.name}.T`, so the shared size {a.shape[-1]} meets."
        elif list(b.shape[::-1]) == list(err.shapes[1]):  # F.linear(x, w): w is [out, in]
            hint = f"`{b.name}` {shp(b.shape)} takes inputs whose last size is {b.shape[1]}; `{a.name}`'s is {a.shape[-1]}."
    if not hint and len(err.shapes) == 2 and len(err.shapes[0]) == 2 and len(err.shapes[1]) == 2:
        s1, s2 = err.shapes
        hint = f"The inner sizes must agree: the left operand's last size is {s1[1]}, the right one's first is {s2[0]}."
    return sentence(head, err.text), hint


def _linear_hint(ctx: Context, x: TensorInfo | None) -> str:
    layer = ctx.layer
    assert layer is not None
    fin, fout = config(layer.module, "in_features"), config(layer.module, "out_features")
    me = ctx.short()
    tp = layer.type if layer.type in ("Linear", "LazyLinear") else "Linear"
    if x is None or not x.shape:
        return f"{me} takes {fin} input features."
    shape = x.shape
    if len(shape) >= 3:
        per = _prod(shape[1:])
        if per == fin:
            return (
                f"Flatten the input first: `x.flatten(1)` (or an `nn.Flatten()` before {me}) turns "
                f"{shp(shape)} into [{shape[0]}, {fin}]."
            )
        if len(shape) >= 4:
            return (
                f"Flatten the input (`x.flatten(1)` turns {shp(shape)} into [{shape[0]}, {per}]) and build "
                f"{me} as `nn.{tp}({per}, {fout})`."
            )
    last = shape[-1]
    if last != fin:
        return (
            f"{me} takes {fin} features but gets {last}: build it as `nn.{tp}({last}, {fout})`, or make "
            f"the layer before it output {fin}."
        )
    return ""


def _mm_operands(ctx: Context) -> tuple[TensorInfo | None, TensorInfo | None]:
    err = ctx.err
    if len(err.shapes) != 2:
        return None, None
    s1, s2 = list(err.shapes[0]), list(err.shapes[1])
    ops = ctx.operands()

    def fits1(t: TensorInfo) -> bool:
        if t.shape == s1:
            return True
        if err.detail == "" and len(t.shape) >= 2 and t.shape[-1] == s1[-1]:
            return _prod(t.shape[:-1]) == s1[0]
        return err.detail == "" and len(t.shape) == 1 and [1, *t.shape] == s1

    def fits2(t: TensorInfo) -> bool:
        return t.shape == s2 or (err.detail == "" and t.shape[::-1] == s2)

    a = next((t for t in ops if fits1(t)), None)
    b = next((t for t in ops if t is not a and fits2(t)), None)
    return a, b


def _bmm(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    expected, got = list(err.shapes[0]), list(err.shapes[1])
    ops = [t for t in ctx.operands() if len(t.shape) == 3]
    a = next((t for t in ops if t.shape[0] == expected[0] and t.shape[2] == expected[1]), None)
    b = next((t for t in ops if t is not a and t.shape[:2] == got), None)
    head = ctx.subject()
    if a is not None and b is not None:
        head += f" multiplies {named(a)} by {named(b)}"
    else:
        head = _with_operands(ctx, head)
    hint = ""
    if b is not None and b.shape[2] == expected[1] and b.shape[0] == expected[0]:
        hint = (
            f"`{b.name}.transpose(-2, -1)` is [{b.shape[0]}, {b.shape[2]}, {b.shape[1]}], which fits: "
            f"`{a.name if a else 'a'} @ {b.name}.transpose(-2, -1)`."
        )
    elif got[0] != expected[0]:
        hint = (
            f"The batch sizes differ ({expected[0]} vs {got[0]}): both operands need the same leading size."
        )
    return sentence(head, err.text), hint


# ---- cat / stack -------------------------------------------------------------------------------


def _list_operands(ctx: Context) -> list[tuple[str, TensorInfo | None]]:
    """The failing call's first argument, element by element: (source, tensor or None)
    (`torch.cat([a, f(b)])` -> [("a", a), ("f(b)", None)]; `torch.cat(xs)` -> the items of `xs`)."""
    tree = fr.parse(ctx.code())
    call = next((n for n in ast.walk(tree) if isinstance(n, ast.Call)), None) if tree else None
    if call is None or not call.args:
        return []
    arg = call.args[0]
    if isinstance(arg, (ast.List, ast.Tuple)):
        if any(isinstance(e, ast.Starred) for e in arg.elts):
            return []
        out: list[tuple[str, TensorInfo | None]] = []
        for elt in arg.elts:
            found = ctx.tensors_in(elt) if fr.reference(elt) is not None else []
            out.append((ast.unparse(elt), found[0] if len(found) == 1 else None))
        return out
    if fr.reference(arg) is not None:
        return [(t.name, t) for t in ctx.tensors_in(arg)]
    return []


def _known(ops: list[tuple[str, TensorInfo | None]]) -> list[TensorInfo]:
    return [t for _, t in ops if t is not None]


def _listed(ops: list[tuple[str, TensorInfo | None]], limit: int = 3) -> str:
    parts = [named(t) if t is not None else f"`{src}`" for src, t in ops[:limit]]
    return " and ".join(parts) if len(parts) <= 2 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _norm_dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


@_kind(m.CAT)
def _cat(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    ops = _list_operands(ctx)
    known = _known(ops)
    head, hint = ctx.subject(), ""
    if err.detail == "rank":
        r1, r2 = err.sizes
        lo = next((t for t in known if len(t.shape) == min(r1, r2)), None)
        hi = next((t for t in known if len(t.shape) == max(r1, r2)), None)
        if lo is not None and hi is not None:
            head += f" joins {named(lo)} and {named(hi)}"
            for i in range(len(hi.shape)):
                if hi.shape[i] == 1 and hi.shape[:i] + hi.shape[i + 1 :] == lo.shape:
                    hint = f"`{lo.name}.unsqueeze({i})` gives it {len(hi.shape)} dimensions like `{hi.name}`."
                    break
        return sentence(head, err.text), hint
    d, idx = err.dim, int(err.argument or 0)
    expected, got = err.sizes
    t0, ti = (ops[0][1], ops[idx][1]) if len(ops) > idx else (None, None)
    if t0 is not None and ti is not None and len(t0.shape) == len(ti.shape):
        rank = len(t0.shape)
        diff = [k for k in range(rank) if t0.shape[k] != ti.shape[k]]
        dd = _norm_dim(d or 0, rank)
        if any(t0.shape[k] == expected and ti.shape[k] == got for k in diff if k != dd):
            head += f" joins {named(t0)} and {named(ti)}"
            if len(diff) == 1 and diff[0] != dd:
                hint = f"They differ only in dimension {diff[0]}: to join along it, pass `dim={diff[0]}`."
    if not head.endswith("]") and known:
        head += " joins " + _listed(ops)
    return sentence(head, err.text), hint


@_kind(m.STACK)
def _stack(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    s0, s1 = (*err.shapes, None)[:2]  # the meta kernel names only the first shape
    e0, e1 = (*err.sizes, 1)[:2]
    if ctx.in_collate() and s1 is not None:
        head = ctx.subject() + (
            f" batches samples of different shapes ({shp(s0)} and {shp(s1)}) with the DataLoader's default collate"
        )
        hint = (
            "Make the Dataset return one shape (resize or crop), or pad each batch in a `collate_fn` "
            "(`torch.nn.utils.rnn.pad_sequence` for sequences)."
        )
        return sentence(head, err.text), hint
    ops = _list_operands(ctx)
    head = ctx.subject()
    a, b = (ops[e0][1], ops[e1][1]) if len(ops) > max(e0, e1) else (None, None)
    if a is not None and b is not None and s1 is not None and a.shape == list(s0) and b.shape == list(s1):
        head += f" stacks {named(a)} and {named(b)}"
    elif _known(ops):
        head += " stacks " + _listed(ops)
    hint = "`torch.stack` needs equal shapes: pad or crop them to one size, or use `torch.cat` to join along an existing dimension."
    return sentence(head, err.text), hint


# ---- broadcasting ------------------------------------------------------------------------------


def _at(t: TensorInfo, dim: int, rank: int) -> int | None:
    k = dim - (rank - len(t.shape))
    return t.shape[k] if 0 <= k < len(t.shape) else None


@_kind(m.BROADCAST)
def _broadcast(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    if err.detail == "expand":
        target, tensor = err.shapes
        line = ctx.user_site.line_text() if ctx.user_site is not None else ""
        tree = fr.parse(line)
        if tree is not None and any(
            isinstance(n, (ast.Assign, ast.AugAssign))
            and any(isinstance(t, ast.Subscript) for t in getattr(n, "targets", [getattr(n, "target", None)]))
            for n in ast.walk(tree)
        ):  # `x[0] = y`: the position is the slice alone, the line says what went in
            head = f"`{line}`{ctx.context()} assigns a tensor of shape {shp(tensor)} to a slice of shape {shp(target)}"
            hint = f"The value must have the slice's shape {shp(target)} (or broadcast to it)."
            return sentence(head, err.text), hint
        head = ctx.subject() + f" expands a tensor of shape {shp(tensor)} to {shp(target)}"
        return sentence(head, err.text), ""
    a_size, b_size = err.sizes
    dim = err.dim or 0
    if ctx.is_loss():
        x, y = _loss_args(ctx)
        hint = f"The target must have the input's shape {shp(x.shape)}." if x is not None else ""
        return sentence(_loss_head(ctx), err.text), hint
    ops = ctx.operands()
    pair = None
    for ta in ops:
        for tb in ops:
            if ta is tb:
                continue
            rank = max(len(ta.shape), len(tb.shape))
            if _at(ta, dim, rank) == a_size and _at(tb, dim, rank) == b_size:
                pair = (ta, tb)
                break
        if pair:
            break
    head = ctx.subject()
    hint = ""
    if pair is not None:
        ta, tb = pair
        head += f" combines {named(ta)} and {named(tb)}"
        for big, small in ((ta, tb), (tb, ta)):
            if len(small.shape) == 1 and len(big.shape) >= 2 and small.shape[0] == big.shape[0]:
                hint = (
                    f"`{small.name}[:, None]` (or `.unsqueeze(1)`) makes it a column that broadcasts "
                    f"across the rows of `{big.name}`."
                )
    else:
        head = _with_operands(ctx, head)
    return sentence(head, err.text), hint


# ---- convolutions ------------------------------------------------------------------------------


@_kind(m.CONV_CHANNELS)
def _conv(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    layer = ctx.layer
    x = ctx.layer_input() if ctx.builtin() else None
    if not err.shapes:  # the meta kernel names nothing: the layer's configuration does
        return _conv_from_config(ctx, x)
    weight, msg_input = err.shapes
    expected, got = err.sizes
    if x is None or layer is None:
        head = ctx.subject() + f" passes input {shp(msg_input)} to a convolution whose weight {shp(weight)}"
        return sentence(head + f" expects {expected} channels", err.text), ""
    return _conv_text(ctx, x, expected, got, len(weight) - 2, list(msg_input))


def _conv_from_config(ctx: Context, x: TensorInfo | None) -> tuple[str, str]:
    layer = ctx.layer
    k = config(layer.module, "kernel_size") if layer is not None else None
    cin = config(layer.module, "in_channels") if layer is not None else None
    if x is None or layer is None or not isinstance(k, tuple) or cin is None or len(x.shape) < len(k) + 1:
        return _generic(ctx)
    nd = len(k)
    batched = len(x.shape) == nd + 2
    got = x.shape[1] if batched else x.shape[0]
    if got == cin:  # the channels fit: something else (groups) did not
        return _generic(ctx)
    return _conv_text(ctx, x, cin, got, nd, x.shape if batched else [1, *x.shape])


def _conv_text(
    ctx: Context, x: TensorInfo, expected: int, got: int, nd: int, msg_input: list[int]
) -> tuple[str, str]:
    err = ctx.err
    layer = ctx.layer
    assert layer is not None
    head = _got(ctx, x) + f" with {got} channel{'s' if got != 1 else ''} where it expects {expected}"
    tp = layer.type
    cout = config(layer.module, "out_channels")
    k = _ksize(config(layer.module, "kernel_size"))
    shape = x.shape
    me = ctx.short()
    if len(shape) == nd + 1 and len(msg_input) == nd + 2 and msg_input[0] == 1:
        hint = (
            f"{tp} takes [N, C, ...] or one unbatched [C, ...] sample: the {len(shape)}-D input {shp(shape)} "
            f"was read as one sample with {shape[0]} channels. Add the batch dimension (`x.unsqueeze(0)`), "
            f"or use the layer that fits {len(shape) - 1}-D samples."
        )
    elif len(shape) == nd + 2 and shape[-1] == expected:
        order = ", ".join(str(i) for i in (0, nd + 1, *range(1, nd + 1)))
        hint = f"The input looks channels-last: `x.permute({order})` puts the channels at dimension 1."
    elif got == 1 and expected == 3:
        hint = (
            f"Grayscale input into a layer built for RGB: build it as `nn.{tp}(1, {cout}, kernel_size={k})`, "
            f"or repeat the channel: `x.expand(-1, 3{', -1' * nd})`."
        )
    else:
        hint = (
            f"{me} expects {expected} channels but gets {got}: build it as `nn.{tp}({got}, {cout}, "
            f"kernel_size={k})`, or make the layer before it output {expected} channels."
        )
    return sentence(head, err.text), hint


@_kind(m.CONV_RANK)
def _conv_rank(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    (shape,) = err.shapes
    unbatched, batched = err.sizes
    head = ctx.subject() + f" got a {len(shape)}-D input {shp(shape)}"
    if len(shape) == unbatched - 1:
        hint = f"Add the batch and channel dimensions: `x[None, None]` is {shp([1, 1, *shape])}."
    elif len(shape) > batched:
        hint = f"The input has {len(shape) - batched} dimension(s) too many: merge them into the batch or squeeze size-1 dimensions."
    else:
        hint = ""
    return sentence(head, err.text), hint


@_kind(m.INPUT_TOO_SMALL)
def _too_small(ctx: Context) -> tuple[str, str]:
    x = ctx.layer_input() if ctx.builtin() else None
    hint = (
        "The input is smaller than this layer's window by the time it gets here: use larger inputs, "
        "padding, or fewer downsampling layers before it."
    )
    return sentence(_got(ctx, x) if x else ctx.subject(), ctx.err.text), hint


# ---- view / reshape ----------------------------------------------------------------------------


def _method_call(ctx: Context, names: tuple[str, ...]) -> tuple[str | None, str | None, TensorInfo | None]:
    """(receiver source, argument source, receiver tensor) of `recv.view(args)` on the
    failing expression."""
    tree = fr.parse(ctx.code())
    if tree is None:
        return None, None, None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names:
            recv = node.func.value
            args = ", ".join(ast.unparse(a) for a in node.args)
            info = None
            if fr.reference(recv) is not None:
                found = (
                    fr.expression_tensors(ctx.user_site, None, "receiver", tree=recv) if ctx.user_site else []
                )
                info = found[0] if found else None
            return ast.unparse(recv), args, info
    return None, None, None


@_kind(m.VIEW_STRIDE)
def _view(ctx: Context) -> tuple[str, str]:
    recv, args, info = _method_call(ctx, ("view",))
    head = ctx.subject()
    if recv is None:
        return sentence(head, ctx.err.text), "Use `.reshape(...)`, or `.contiguous().view(...)`."
    what = f"`{recv}`" + (f" {shp(info.shape)}" if info else "")
    head += f" calls `.view()` on {what}, which is not contiguous (a transpose, permute or slice of another tensor)"
    hint = (
        f"Use `{recv}.reshape({args})` (it copies only when it must), or `{recv}.contiguous().view({args})`."
    )
    return sentence(head, ctx.err.text), hint


@_kind(m.VIEW_NUMEL)
def _view_numel(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    (target,) = err.shapes
    (numel,) = err.sizes
    recv, _, info = _method_call(ctx, ("view", "reshape"))
    head = ctx.subject()
    if recv is not None:
        what = f"`{recv}`" + (f" {shp(info.shape)}" if info else "")
        head += f" asks for shape {shp(target)} from {what}, which has {numel} elements"
    known = _prod(d for d in target if d != -1)
    if info is not None and -1 in target and len(info.shape) >= 3:
        per = _prod(info.shape[1:])
        hint = (
            f"Per sample `{recv}` has {per} elements: `{recv}.flatten(1)` gives [{info.shape[0]}, {per}]; size "
            f"the next layer for {per} features."
        )
    elif -1 in target:
        hint = f"{numel} elements cannot be split into {shp(target)}: {numel} is not a multiple of {known}."
    else:
        hint = f"{shp(target)} holds {known} elements, not {numel}."
    return sentence(head, err.text), hint


# ---- devices -----------------------------------------------------------------------------------


@_kind(m.DEVICE)
def _device(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    if err.detail == "numpy":
        return sentence(ctx.subject(), err.text), "Copy it to the CPU first: `t.detach().cpu().numpy()`."
    root = ctx.root_name()
    if ctx.builtin():
        x = ctx.layer_input()
        pdevs = sorted({p.device for p in ctx.params()})
        if len(pdevs) > 1:
            head = ctx.subject() + f" has its parameters on {' and '.join(pdevs)}"
            hint = (
                f"Move the whole model to one device: `{root}.to(device)` (a tensor attribute that is not a "
                "registered buffer stays behind: `self.register_buffer(...)`)."
            )
            return sentence(head, err.text), hint
        if x is not None and pdevs and x.device != pdevs[0]:
            head = (
                ctx.subject() + f" has its weights on {pdevs[0]} but got input {shp(x.shape)} on {x.device}"
            )
            if pdevs[0] == "cpu":  # the batch went to the accelerator, the model stayed behind
                hint = f"Move the model to the input's device: `{root}.to(device)` (`device` = {x.device!r} here)."
            else:
                hint = (
                    f'Move the input to the model\'s device: `x.to("{pdevs[0]}")` (better: one `device` for the '
                    "model and every batch, `.to(device)`)."
                )
            return sentence(head, err.text), hint
    ops = ctx.operands()
    by_dev: dict[str, TensorInfo] = {}
    for t in ops:
        by_dev.setdefault(t.device, t)
    head = ctx.subject()
    hint = "Put every tensor of this op on one device: `.to(device)`."
    if len(by_dev) >= 2:
        first = list(by_dev.values())
        head += " mixes " + " and ".join(f"`{t.name}` on {t.device}" for t in first[:3])
        cpu = by_dev.get("cpu")
        other = next((t for t in first if t.device != "cpu"), None)
        if cpu is not None and other is not None:
            hint = f"Move `{cpu.name}` to `{other.name}`'s device: `{cpu.name}.to({other.name}.device)`."
    if len(by_dev) == 1 and len(set(err.devices)) == 2:
        (t,) = by_dev.values()
        other = next((d for d in err.devices if d != t.device), None)
        if other is not None:
            head += f" mixes `{t.name}` on {t.device} with a tensor on {other}"
    factory = _factory_without_device(ctx)
    if factory and not ctx.builtin():
        anchor = next((t.name for t in ops if t.device != "cpu"), "x")
        hint = (
            f"`torch.{factory}(...)` creates its tensor on the CPU: pass `device={anchor}.device`, or build it "
            "once as a buffer (`self.register_buffer`) so `.to(device)` moves it."
        )
    return sentence(head, err.text), hint


def _factory_without_device(ctx: Context) -> str | None:
    tree = fr.parse(ctx.code())
    if tree is None:
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "torch"
            and node.func.attr in NEW_TENSOR_FUNCS
            and not any(k.arg == "device" for k in node.keywords)
        ):
            return node.func.attr
    return None


# ---- dtypes ------------------------------------------------------------------------------------

_FLOATS = {"float32", "float64", "float16", "bfloat16"}


@_kind(m.DTYPE)
def _dtype(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    if ctx.is_loss():
        if err.dtypes[:1] == ("int64",) and not err.detail:
            # torch before 2.12 words a float class-index target "expected scalar type Long but
            # found Float": in a loss, the Long it wants is the target's
            ctx.err = dataclasses.replace(err, kind=m.TARGET_DTYPE)
            return _target_dtype(ctx)
        x, y = _loss_args(ctx)
        if err.detail == "cast" and y is not None and y.dtype not in _FLOATS:
            head = ctx.subject() + f" got target {shp(y.shape)} of dtype {y.dtype}"
            return sentence(head, err.text), "This loss takes float targets: `target.float()`."
        if err.detail == "unsupported" and x is not None and x.dtype not in _FLOATS:
            head = ctx.subject() + f" got input {shp(x.shape)} of dtype {x.dtype}"
            return sentence(
                head, err.text
            ), "The loss takes float scores (logits): pass the model's float output, or `.float()`."
    if ctx.builtin():
        x = ctx.layer_input()
        w = ctx.param("weight") or next(iter(ctx.params()), None)
        if x is not None and w is not None and x.dtype != w.dtype:
            head = _got(ctx, x) + f" of dtype {x.dtype}, but its weights are {w.dtype}"
            return sentence(head, err.text), _input_dtype_hint(x.dtype, w.dtype)
    ops = ctx.operands()
    by_dtype: dict[str, TensorInfo] = {}
    for t in ops:
        by_dtype.setdefault(t.dtype, t)
    head, hint = ctx.subject(), ""
    if len(by_dtype) >= 2:
        a, b = list(by_dtype.values())[:2]
        head += f" mixes `{a.name}` ({a.dtype}) and `{b.name}` ({b.dtype})"
        convert, keep = (a, b) if a.dtype == "float64" or a.dtype not in _FLOATS else (b, a)
        hint = f"Convert one: `{convert.name}.to({keep.name}.dtype)`."
    return sentence(head, err.text), hint


def _input_dtype_hint(got: str, want: str) -> str:
    if got == "float64" and want == "float32":
        return "Convert the input: `x.float()` (NumPy arrays become float64 tensors: `torch.from_numpy(a).float()`)."
    if got not in _FLOATS and want in _FLOATS:
        return "Convert the input: `x.float()` (token ids go through an `nn.Embedding` instead)."
    if got == "float32" and want in ("float16", "bfloat16"):
        return f"The model is {want}: `x.to(torch.{want})`, or keep it in float32 and run under `torch.autocast`."
    if got in ("float16", "bfloat16") and want == "float32":
        return "`x.float()`, or run the model under `torch.autocast`, which casts per op."
    return f"`x.to(torch.{want})`."


@_kind(m.TARGET_DTYPE)
def _target_dtype(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    x, y = _loss_args(ctx)
    head = _loss_head(ctx)
    if err.detail == "probabilities":
        hint = (
            "A target with the input's shape is read as class probabilities, which must be float: one-hot "
            "labels → `target.argmax(1)` (class indices), or `target.float()`."
        )
    else:
        hint = "Class-index targets must be int64: `target.long()`."
    return sentence(head, err.text), hint


# ---- indices -----------------------------------------------------------------------------------


@_kind(m.INDEX_DTYPE)
def _index_dtype(ctx: Context) -> tuple[str, str]:
    if ctx.is_loss():  # the meta kernel of cross_entropy complains about gather's index
        return _target_dtype(ctx)
    if ctx.builtin():
        x = ctx.layer_input()
        head = _got(ctx, x, "indices") + (f" of dtype {x.dtype}" if x else "")
    else:
        head = _with_operands(ctx, ctx.subject())
    return sentence(head, ctx.err.text), "Indices must be integers: `idx.long()`."


@_kind(m.INDEX_RANGE)
def _index_range(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    layer = ctx.layer
    n = config(layer.module, "num_embeddings") if (layer is not None and ctx.builtin()) else None
    if n is None:
        return _generic(ctx)
    x = ctx.layer_input()
    head = _got(ctx, x, "indices") + f", at least one outside [0, {n})"
    if err.sizes:
        head += f" (the value {err.sizes[0]})"
    hint = (
        f"`nn.{layer.type}({n}, …)` takes ids 0…{n - 1}: build it with num_embeddings ≥ the largest id + 1 "
        "(the vocabulary size, with padding and special tokens), or check the ids (off by one, or labels "
        "or raw values used as ids)."
    )
    return sentence(head, err.text), hint


@_kind(m.TARGET_RANGE)
def _target_range(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    x, y = _loss_args(ctx)
    (v,) = err.sizes
    if x is None or not x.shape:
        return sentence(_loss_head(ctx), err.text), ""
    classes = x.shape[1] if len(x.shape) >= 2 else x.shape[0]
    head = _loss_head(ctx).replace(f"input {shp(x.shape)}", f"input {shp(x.shape)} ({classes} classes)", 1)
    head += f" with a value {v}"
    hint = (
        f"Targets must be class indices in [0, {classes}): if there are {v + 1} or more classes give the last "
        "layer that many outputs; if the labels start at 1, use `target - 1`."
    )
    return sentence(head, err.text), hint


# ---- losses ------------------------------------------------------------------------------------


@_kind(m.TARGET_SHAPE)
def _target_shape(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    x, y = _loss_args(ctx)
    head = _loss_head(ctx)
    hint = ""
    if x is not None and y is not None:
        xs, ys = x.shape, y.shape
        if err.detail == "multi-target":
            if len(ys) == 2 and ys[1] == 1:
                hint = "Class-index targets are [N]: `target.squeeze(1)`."
            elif ys == xs:
                hint = "One-hot targets: `target.argmax(1)` gives class indices (or `target.float()` to pass them as probabilities)."
            else:
                hint = f"cross_entropy takes class indices of shape [{xs[0]}] for an input {shp(xs)}."
        elif ys + [1] == xs:
            hint = "`target.unsqueeze(1)` (or squeeze the output: `out.squeeze(1)`)."
        elif xs + [1] == ys:
            hint = "`target.squeeze(1)`."
        elif len(xs) >= 3 and ys[:1] == xs[:1]:
            hint = f"For an input [N, C, d1, …] the target is [N, d1, …]: {shp([xs[0], *xs[2:]])} here."
        else:
            hint = f"The target must have the input's shape {shp(xs)}."
    return sentence(head, err.text), hint


@_kind(m.BATCH_SIZE)
def _batch_size(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    x, y = _loss_args(ctx)
    a, b = err.sizes
    head = _loss_head(ctx)
    if x is not None and y is not None and len(y.shape) > 1 and _prod(y.shape) == x.shape[0]:
        hint = f"Flatten the target like the input: `target.view(-1)` ({shp(y.shape)} → [{x.shape[0]}])."
    else:
        hint = (
            f"The output has {a} rows and the target {b}: check for a `view(-1, …)`/`reshape` in the model that "
            "merged the batch with another dimension, and that both come from the same batch."
        )
    return sentence(head, err.text), hint


# ---- normalisation, recurrent and attention layers ---------------------------------------------


@_kind(m.NORM_FEATURES)
def _norm_features(ctx: Context) -> tuple[str, str]:
    expected, got = ctx.err.sizes
    x = ctx.layer_input() if ctx.builtin() else None
    tp = ctx.layer.type if ctx.layer is not None else "BatchNorm1d"
    head = _got(ctx, x) + f" with {got} features where it was built for {expected}"
    hint = f"Build it as `nn.{tp}({got})`, or make the layer before it output {expected} features."
    return sentence(head, ctx.err.text), hint


@_kind(m.NORM_SHAPE)
def _norm_shape(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    x = ctx.layer_input() if ctx.builtin() else None
    head = _got(ctx, x)
    hint = ""
    shape = x.shape if x is not None else list(err.shapes[1])
    if err.detail == "channels" and ctx.layer is not None and len(shape) >= 2:
        groups = config(ctx.layer.module, "num_groups")
        hint = f"Build it as `nn.GroupNorm({groups}, {shape[1]})`, or make the layer before it output {err.shapes[0][0]} channels."
    elif len(err.shapes[0]) == 1 and shape:
        hint = f"Build it as `nn.LayerNorm({shape[-1]})`, or make the layer before it output {err.shapes[0][0]} features."
    return sentence(head, err.text), hint


@_kind(m.BATCH_ONE)
def _batch_one(ctx: Context) -> tuple[str, str]:
    x = ctx.layer_input() if ctx.builtin() else None
    hint = (
        "Batch norm in training mode needs more than one value per channel: call `model.eval()` to predict "
        "single samples, or drop a last batch of one (`DataLoader(..., drop_last=True)`)."
    )
    return sentence(_got(ctx, x), ctx.err.text), hint


@_kind(m.RNN_INPUT)
def _rnn(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    x = ctx.layer_input() if ctx.builtin() else None
    layer = ctx.layer
    tp = layer.type if layer is not None else "LSTM"
    if err.detail == "rank":
        hint = (
            f"`nn.{tp}` takes [T, N, F] ([N, T, F] with batch_first=True) or one unbatched [T, F] sequence."
        )
        return sentence(_got(ctx, x), err.text), hint
    expected, got = err.sizes
    hidden = config(layer.module, "hidden_size") if layer is not None else None
    head = _got(ctx, x) + f" with {got} features per step where it was built for {expected}"
    hint = f"Build it as `nn.{tp}({got}, {hidden})`, or project the input to {expected} features first."
    return sentence(head, err.text), hint


@_kind(m.EMBED_DIM)
def _embed_dim(ctx: Context) -> tuple[str, str]:
    expected, got = ctx.err.sizes
    x = ctx.layer_input() if ctx.builtin() else None
    heads = config(ctx.layer.module, "num_heads") if ctx.layer is not None else None
    hint = f"Build it as `nn.MultiheadAttention({got}, {heads or 'num_heads'})`, or project the inputs to {expected} features."
    return sentence(_got(ctx, x, "query"), ctx.err.text), hint


@_kind(m.NOT_TENSOR)
def _not_tensor(ctx: Context) -> tuple[str, str]:
    err = ctx.err
    head = ctx.subject() + f" got a {err.detail} where a tensor goes"
    if err.detail.endswith("ndarray"):
        hint = "Convert it: `torch.from_numpy(a).float()` (or `torch.as_tensor(a, dtype=torch.float32)`)."
    elif err.detail in ("list", "tuple"):
        hint = "Convert it: `torch.tensor(values)` (or `torch.stack(list_of_tensors)`)."
    else:
        hint = ""
    return sentence(head, err.text), hint
