"""Small AST helpers shared by the rule families (no rules here)."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
import types
from collections.abc import Callable
from typing import Any

from ..context import Context
from ..kinds import DEVICE, TENSOR_KINDS
from ..nodes import is_atom, isinstance_test, keyword, move_target, per_node, terminal_name

CUDA_PREFIX = "cuda"


def unparse(node: ast.AST, limit: int = 60) -> str:
    """Source of `node` for a message, never cut in the middle of an expression: past `limit`,
    the arguments of inner calls become `...` (`nn.Sequential(...).to(self.device)`), then the
    outer call's too, then long displays; what is still too long ends at a token boundary."""
    text = ast.unparse(node)
    if len(text) <= limit:
        return text
    for depth in (1, 0):
        short = ast.unparse(_abbreviate(node, depth))
        if len(short) <= limit:
            return short
    short = ast.unparse(_abbreviate(node, 0))
    cut = short[: limit - 1]
    boundary = max(cut.rfind(c) for c in " ,.([")
    return (cut[:boundary] if boundary > limit // 2 else cut).rstrip(" ,.([") + "…"


def over_unique_groups(ctx: Context, it: ast.AST | None) -> bool:
    """`for stratum in torch.unique(strata)` (or a name bound to it): one pass per distinct
    value, each over a masked subset of its own size (a stratified loss, per-class NMS), not an
    element-wise loop that one operation replaces."""
    value = ctx.origin(it) if isinstance(it, ast.Name) else it
    return isinstance(value, ast.Call) and terminal_name(value.func) in ("unique", "unique_consecutive")


def unparse_operand(node: ast.AST, limit: int = 60) -> str:
    """`unparse` of a node that a message follows with `.attr`: `(xs ** 2).data`, not `xs ** 2.data`."""
    text = unparse(node, limit)
    if is_atom(node):
        return text
    return f"({text})"


_ELLIPSIS = ast.Constant(value=...)


def _abbreviate(node: ast.AST, keep_depth: int) -> ast.AST:
    """A copy of `node` whose calls below `keep_depth` (the outermost call is depth 0) have
    `...` for arguments, and whose long list/tuple/dict displays are `[...]`-like."""

    class Shorten(ast.NodeTransformer):
        def __init__(self) -> None:
            self.depth = 0

        def visit_Call(self, call: ast.Call) -> ast.AST:
            call = ast.Call(func=call.func, args=call.args, keywords=call.keywords)
            # `a(x).b(y)`: the receiver's arguments go before the outer call's
            self.depth += 1
            call.func = self.visit(call.func)
            self.depth -= 1
            if self.depth >= keep_depth and (call.args or call.keywords):
                call.args, call.keywords = [_ELLIPSIS], []
            else:
                self.depth += 1
                call.args = [self.visit(a) for a in call.args]
                call.keywords = [self.visit(k) for k in call.keywords]
                self.depth -= 1
            return call

        def visit_List(self, node: ast.List) -> ast.AST:
            return (
                ast.List(elts=[_ELLIPSIS], ctx=node.ctx) if len(node.elts) > 2 else self.generic_visit(node)
            )

        def visit_Tuple(self, node: ast.Tuple) -> ast.AST:
            return (
                ast.Tuple(elts=[_ELLIPSIS], ctx=node.ctx) if len(node.elts) > 3 else self.generic_visit(node)
            )

        def visit_Dict(self, node: ast.Dict) -> ast.AST:
            return (
                ast.Dict(keys=[None], values=[ast.Name(id="...", ctx=ast.Load())])
                if len(node.keys) > 2
                else node
            )

    import copy

    return Shorten().visit(copy.deepcopy(node))


def receiver(call: ast.Call) -> ast.AST | None:
    """`x` in `x.method(...)`; None for plain function calls."""
    return call.func.value if isinstance(call.func, ast.Attribute) else None


def is_cuda_literal(ctx: Context, node: ast.AST | None) -> bool:
    """`"cuda"`, `"cuda:1"`, `torch.device("cuda")`, `torch.device("cuda", 0)`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.split(":", 1)[0] == CUDA_PREFIX
    if isinstance(node, ast.Call) and node.args and ctx.qualname(node.func) == "torch.device":
        return is_cuda_literal(ctx, node.args[0])
    return False


def mentions_cuda(node: ast.AST | None) -> bool:
    if node is None:
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.startswith("cuda"):
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "cuda":
            return True
    return False


def is_cuda_move(ctx: Context, call: ast.Call) -> bool:
    """`.cuda()`, `.to("cuda")`, or `.to(device)` where `device` is CUDA (or a device chosen
    elsewhere: a name spelled like a device that the cell did not bind to a CPU/tensor/dtype)."""
    if not isinstance(call.func, ast.Attribute):
        return False
    if call.func.attr == "cuda":
        return ctx.qualname(call.func) != "torch.cuda"
    if call.func.attr != "to":
        return False
    target = move_target(call)
    if target is None:
        return False
    if is_cuda_literal(ctx, target):
        return True
    if isinstance(target, ast.Name):
        origin = ctx.origin(target)
        if origin is not None:
            return mentions_cuda(origin)
        kind = ctx.lookup(target.id)
        if kind in TENSOR_KINDS or (kind is not None and kind != DEVICE):
            return False
        low = target.id.lower()
        return "cuda" in low or "gpu" in low or "device" in low or low == "dev"
    return False


def note_cell_functions(
    ctx: Context, tree: ast.Module, key: str, summary: Callable[[ast.FunctionDef | ast.AsyncFunctionDef], Any]
) -> None:
    """For the next cells of a notebook (`Context.notes[key]`): `summary` of each function this
    cell defines at its top level, by name; a later definition replaces an earlier one."""
    if not ctx.feeds_later_cells:
        return
    known = ctx.notes.setdefault(key, {})
    for fn in tree.body:
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            known[fn.name] = summary(fn)


def word_of(node: ast.AST, strings: bool = False) -> str:
    """The name a node spells (`cfg.fix_emb` -> "fix_emb", `loader` -> "loader"), with `strings`
    also a string constant's text; "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if strings and isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ""


def name_like(node: ast.AST | None, *words: str) -> bool:
    """The expression's last name part contains one of `words`: `self.optimizer` ~ "opt"."""
    low = word_of(node).lower() if node is not None else ""
    return bool(low) and any(w in low for w in words)


def call_chain(node: ast.AST) -> list[str]:
    """Method names along a chain, innermost first: `a.detach().cpu()` -> ["detach", "cpu"]."""
    names: list[str] = []
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            names.append(node.func.attr)
            node = node.func.value
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            break
    return list(reversed(names))


def chain_nodes(node: ast.AST) -> list[ast.AST]:
    """The nodes of a method/attribute/subscript chain, outermost first: `x.detach().data` ->
    `x.detach().data`, `x.detach()`, `x`."""
    out: list[ast.AST] = []
    while True:
        out.append(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        else:
            return out


def chain_root(node: ast.AST) -> ast.AST:
    """The innermost value of a method/attribute/subscript chain: `model(x).cpu()` -> `model(x)`."""
    return chain_nodes(node)[-1]


def root_name(node: ast.AST) -> str | None:
    """The name a method/attribute/subscript chain hangs from: `y[0].clamp_` -> "y"."""
    root = chain_root(node)
    return root.id if isinstance(root, ast.Name) else None


def switches_grad_off(node: ast.AST) -> bool:
    """`m.requires_grad_(False)`: the module or tensor stops recording gradients."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "requires_grad_"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value is False
    )


def format_template(node: ast.AST | None) -> str | None:
    """The fixed text of a string built by formatting (`f"ckpt_{step}.pt"`,
    `"{}.pkl".format(epoch)`, `"net_%d.pth" % i`), each filled-in part written `{}`; None for
    anything else."""
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        return re.sub(r"\{[^{}]*\}", "{}", node.func.value.value)
    if (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Mod)
        and isinstance(node.left, ast.Constant)
        and isinstance(node.left.value, str)
    ):
        return re.sub(r"%[-+ #0-9.]*[a-zA-Z]", "{}", node.left.value)
    return None


def live_function(ctx: Context, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The definition of a plain Python function of the kernel (defined in an earlier cell),
    parsed from its source, which IPython keeps in `linecache`; None for anything else or
    without source. Parsed once per lint; reading the source runs no user code."""
    obj = ctx.namespace.get(name) if ctx.namespace is not None else None
    if type(obj) is not types.FunctionType:
        return None
    cache: dict[str, ast.AST | None] = ctx.__dict__.setdefault("_torchmagic_live_fns", {})
    if name not in cache:
        cache[name] = None
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
        except Exception:
            return None
        fn = tree.body[0] if tree.body else None
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == name:
            cache[name] = fn
    return cache[name]  # type: ignore[return-value]


@per_node
def declared_options(tree: ast.AST) -> dict[str, list[ast.expr | None]]:
    """`parser.add_argument("--n-samples", type=int, default=8)` -> {"n_samples": [<8>]}: for
    each command-line option a source declares, under the name argparse stores it by (`dest=`,
    or the long flag with `-` read as `_`), the `default=` of each declaration in order (None
    where one has none). Found once per tree."""
    out: dict[str, list[ast.expr | None]] = {}
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Call) and terminal_name(n.func) == "add_argument" and n.args):
            continue
        flags = [a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        long = next((f for f in flags if f.startswith("--")), None)
        dest_kw = keyword(n, "dest")
        if isinstance(dest_kw, ast.Constant) and isinstance(dest_kw.value, str):
            dest = dest_kw.value
        elif long is not None:
            dest = long[2:].replace("-", "_")
        else:
            continue
        out.setdefault(dest, []).append(keyword(n, "default"))
    return out


# functions that write one image, sound or array file from host memory
_FILE_WRITERS = frozenset(
    {"save_image", "imwrite", "imsave", "write_video", "write_png", "write_jpeg", "savefig", "write_wav"}
)
_FILE_MODULES = frozenset(
    {"sf", "soundfile", "wavfile", "imageio", "iio", "cv2", "np", "numpy", "torchaudio"}
)


# a helper named for writing something out (`save_mels`, `write_ply`, `dump_json`)
_WRITER_NAME = re.compile(r"^(?:save|write|dump|export)_[a-z0-9_]+$")
_FILE_NAME = re.compile(r"\.[A-Za-z][A-Za-z0-9]{1,4}$")
_PATH_WORDS = ("path", "file", "fname", "filename")


def _names_a_file(call: ast.Call) -> bool:
    """The call's first argument (or its `path=`/`file=` keyword) names a file: a string
    ending in an extension, a call or f-string holding one (`get_path(".png")`,
    `f"{i}.wav"`), or a name such as `out_path`."""
    first = call.args[:1] + [k.value for k in call.keywords if k.arg in _PATH_WORDS]
    for arg in first:
        if isinstance(arg, (ast.Name, ast.Attribute)) and any(
            w in terminal_name(arg).lower() for w in _PATH_WORDS
        ):
            return True
        for n in ast.walk(arg):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and _FILE_NAME.search(n.value):
                return True
    return False


def writes_a_file(call: ast.Call) -> bool:
    """`save_image(x, path)`, `sf.write(path, wav, sr)`, `Image.fromarray(a).save(p)`,
    `print(line, file=fp)`: one call writes host values to a file."""
    func = call.func
    name = terminal_name(func)
    if name in _FILE_WRITERS:
        return True
    if name is not None and _WRITER_NAME.match(name) and _names_a_file(call):
        return True  # `save_mels(get_path(".png"), mel=m.cpu().numpy())`: a helper of the program
    if name == "print":
        # `print(line, file=fp)`: a line of an output file (the console streams are a log)
        target = next((k.value for k in call.keywords if k.arg == "file"), None)
        return target is not None and root_name(target) != "sys"
    if not isinstance(func, ast.Attribute) or name not in ("write", "save", "savez", "savetxt"):
        return False
    if root_name(func.value) in _FILE_MODULES:
        return True
    # `Image.fromarray(arr).save(path)`
    return (
        name == "save" and isinstance(func.value, ast.Call) and terminal_name(func.value.func) == "fromarray"
    )


_PACKERS = ("pack_padded_sequence", "pack_sequence")


def packed_sequence(ctx: Context, node: ast.AST) -> bool:
    """`x` in `x.data` is a `PackedSequence`, whose `.data` is a field (the packed tensor), not
    `Tensor.data`: the enclosing function tests `isinstance(x, PackedSequence)`, or `x` was
    built by `pack_padded_sequence`/`pack_sequence`."""
    if not isinstance(node, ast.Name):
        return False
    value = ctx.origin(node)
    if isinstance(value, ast.Call) and terminal_name(value.func) in _PACKERS:
        return True
    scope = ctx.enclosing_function()
    if scope is None:
        return False
    for n in ast.walk(scope):
        tested = isinstance_test(n)
        if tested is not None and tested[0] == node.id:
            if any(terminal_name(t) == "PackedSequence" for t in tested[1]):
                return True
    return False


def inside_a_call(ctx: Context, call: ast.AST, matches: Callable[[ast.Call], bool]) -> bool:
    """`call` is inside an argument of an enclosing call of the same statement that `matches`
    (`save_image(x.cpu(), path)`, `torch.save({"steps": s.cpu()}, p)`)."""
    for up in reversed(ctx.stack):
        if isinstance(up, ast.Call) and up is not call and matches(up):
            return True
        if isinstance(up, ast.stmt):
            return False
    return False
