"""Dynamo's own texts, read into user terms: graph-break log records and guard failures.

Dynamo reports a graph break as a log record of its `graph_breaks` artifact (what
`TORCH_LOGS=graph_breaks` prints): `Graph break in user code at FILE:LINE`, then
`Graph Break Reason: <type>` with `Explanation:` and `Hint:` lines, then the traced user
stack. It reports why it compiled a function again as guard failures, one per cached
version (`0/1: tensor 'x' size mismatch at index 0. expected 8, actual 9`). These
functions turn both into one short sentence and a fix; anything they do not recognise
keeps Dynamo's own wording, shortened. Pure text in, text out: no torch import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# ---- graph breaks ------------------------------------------------------------------------------

_AT = re.compile(r"in user code at (?P<file>.+?):(?P<line>\d+)\s*$", re.M)
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>[^\n]+)')
_REASON = re.compile(r"Graph Break Reason: (?P<reason>.*?)(?:\n\s*\nUser code traceback:|\Z)", re.S)
_PREFIX = re.compile(r"^Encountered graph break when attempting to trace [^\n]*:\s*\n", re.S)
_EXPLANATION = re.compile(
    r"^\s*Explanation:\s*(?P<text>.+?)(?=^\s*(?:Hint:|Developer debug context:)|\Z)", re.M | re.S
)
_HINT = re.compile(r"^\s*Hint:\s*(?P<text>[^\n]+)", re.M)
_BACKTICKED = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    name: str


@dataclass
class GraphBreak:
    """One graph-break record, as Dynamo logged it."""

    file: str | None  # where Dynamo was tracing when it broke (the innermost traced frame)
    line: int | None
    kind: str  # item | print | branch | dynamic-shape | explicit | logging | skipped | tolist | backward | other
    title: str  # Dynamo's graph-break type, its first line
    explanation: str = ""
    hints: list[str] = field(default_factory=list)
    stack: list[Frame] = field(default_factory=list)  # traced user frames, outermost first
    skipped_frame: bool = False  # Dynamo gave up on the whole frame: it runs uncompiled


def parse_graph_break(message: str) -> GraphBreak | None:
    """A graph-break log record's text, or None when it is not one."""
    if "raph break" not in message:
        return None
    stack_text = ""
    for marker in ("User code traceback:", "The graph break occurred in the following user code:"):
        if marker in message:
            stack_text = message.split(marker, 1)[1].split("Traceback (most recent call last):", 1)[0]
            break
    stack = [Frame(m["file"], int(m["line"]), m["name"].strip()) for m in _FRAME.finditer(stack_text)]
    at = _AT.search(message)
    file, line = (at["file"], int(at["line"])) if at else (None, None)
    skipped = "torch.compile will skip tracing the frame" in message
    if file is None and stack:
        file, line = stack[-1].file, stack[-1].line
    m = _REASON.search(message)
    reason = _PREFIX.sub("", m["reason"].strip()) if m else ""
    if not reason:
        # the "cannot resume" record puts Dynamo's exception after the stack
        tail = message.split("Traceback (most recent call last):")[0]
        reason = tail.split("\n", 1)[0]
    title = next((ln.strip() for ln in reason.splitlines() if ln.strip()), "unsupported code")
    ex = _EXPLANATION.search(reason)
    explanation = " ".join(ex["text"].split()) if ex else ""
    hints = [" ".join(h["text"].split()) for h in _HINT.finditer(reason)]
    return GraphBreak(file, line, _break_kind(title, explanation), title, explanation, hints, stack, skipped)


def _break_kind(title: str, explanation: str) -> str:
    text = f"{title}\n{explanation}"
    if "Tensor.item()" in text or "capture_scalar_outputs" in text:
        return "item"
    if "builtin operator `print`" in text or "`print`" in explanation:
        return "print"
    if "Data-dependent branching" in title or "data-dependent" in title.lower() or "generic_jump" in text:
        return "branch"
    if "Dynamic shape operator" in title or "capture_dynamic_output_shape_ops" in text:
        return "dynamic-shape"
    if "torch._dynamo.graph_break()" in title or "disable()" in title or "disabled function" in text:
        return "explicit"  # asked for: `torch._dynamo.graph_break()`, `torch.compiler.disable`
    if "logging.Logger" in text or "logging" in title.lower():
        return "logging"
    if "tolist()" in text:
        return "tolist"
    if "Tensor.backward()" in title:
        return "backward"
    if "marked as skipped" in title or "does not know how to trace the builtin" in text:
        return "skipped"
    return "other"


def first_sentence(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    end = text.find(". ")
    if 0 < end < limit:
        return text[: end + 1]
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _skipped_callable(explanation: str) -> str | None:
    """`time.sleep` from "does not know how to trace the builtin `time.sleep.`"."""
    for name in _BACKTICKED.findall(explanation):
        name = name.rstrip(".")
        if name and " " not in name and not name.startswith("torch._dynamo"):
            return name
    return None


_CAUSES = {
    "item": "Dynamo cannot put `Tensor.item()` (a Python number read from a tensor) in a graph",
    "print": "Dynamo cannot put `print(...)` in a graph and runs it as Python between two graphs",
    "branch": "an `if` on a tensor's value is data-dependent control flow, which Dynamo cannot trace",
    "dynamic-shape": "the operation's output shape depends on the tensor's values",
    "explicit": "`torch._dynamo.graph_break()` asks for a break here",
    "logging": "Dynamo does not trace calls to a `logging` logger",
    "tolist": "Dynamo cannot trace `.tolist()` on this tensor",
    "backward": "Dynamo does not trace `.backward()` inside a compiled function",
}

_FIXES = {
    "item": (
        "Keep the value a tensor inside the compiled code and call `.item()` after the call returns, "
        "or set `torch._dynamo.config.capture_scalar_outputs = True`."
    ),
    "print": (
        "Move the `print` out of the compiled function (return the value and print it after the call), "
        "or skip it while compiled: `if not torch.compiler.is_compiling(): print(...)`."
    ),
    "branch": (
        "Compute both branches and pick elementwise with `torch.where(cond, a, b)`, "
        "or use `torch.cond(pred, true_fn, false_fn, (x,))`."
    ),
    "dynamic-shape": (
        "Use a fixed-shape form (a mask with `torch.where`), or set "
        "`torch._dynamo.config.capture_dynamic_output_shape_ops = True`."
    ),
    "backward": (
        "Compile the forward pass and the loss only, and call `loss.backward()` and the optimizer step "
        "after the compiled call returns: the backward pass of compiled code is compiled too (AOTAutograd)."
    ),
    "logging": "Log outside the compiled function, or add the method to `torch._dynamo.config.ignore_logging_functions`.",
    "skipped": (
        "Move the call out of the compiled function; if it is a logging call, add it to "
        "`torch._dynamo.config.reorderable_logging_functions`."
    ),
}


def break_cause(gb: GraphBreak) -> str:
    """What Dynamo could not put in the graph, as a sentence fragment."""
    if gb.kind in _CAUSES:
        return _CAUSES[gb.kind]
    if gb.kind == "skipped":
        name = _skipped_callable(gb.explanation)
        what = f"`{name}`" if name else "a function Dynamo does not trace"
        return f"{what} cannot be traced (a builtin or C extension Dynamo skips)"
    detail = first_sentence(gb.explanation) if gb.explanation else ""
    return f"Dynamo stopped tracing here ({gb.title.rstrip('.')})" + (
        f": {detail.rstrip('.')}" if detail else ""
    )


def break_fix(gb: GraphBreak) -> str:
    """The fix, where one is clear; otherwise Dynamo's own first hint."""
    if gb.kind in _FIXES:
        return _FIXES[gb.kind]
    for hint in gb.hints:
        if "file an issue" not in hint.lower() and "report an issue" not in hint.lower():
            return first_sentence(hint, 200)
    return "Move the code Dynamo cannot trace out of the compiled function, or wrap it in `torch.compiler.disable`."


# ---- guard failures (why Dynamo compiled again) --------------------------------------------------

_ID_PREFIX = re.compile(r"^\s*\d+/\d+(?:_\d+)?:\s*")
_LOCALS = re.compile(r"""\b[LG]\[['"]([^'"]+)['"]\]""")
_DTYPES = {
    "Float": "float32",
    "Double": "float64",
    "Half": "float16",
    "BFloat16": "bfloat16",
    "Long": "int64",
    "Int": "int32",
    "Short": "int16",
    "Char": "int8",
    "Byte": "uint8",
    "Bool": "bool",
    "ComplexFloat": "complex64",
    "ComplexDouble": "complex128",
}

_GUARDS: list[tuple[str, re.Pattern[str]]] = [
    (
        "shape",
        re.compile(
            r"tensor '(?P<n>[^']+)' size mismatch at index (?P<i>\d+)\. expected (?P<a>\S+), actual (?P<b>\S+)"
        ),
    ),
    ("rank", re.compile(r"tensor '(?P<n>[^']+)' rank mismatch\. expected (?P<a>\S+), actual (?P<b>\S+)")),
    ("dtype", re.compile(r"tensor '(?P<n>[^']+)' dtype mismatch\. expected (?P<a>\S+), actual (?P<b>\S+)")),
    (
        "requires_grad",
        re.compile(r"tensor '(?P<n>[^']+)' requires_grad mismatch\. expected requires_grad=(?P<a>\d)"),
    ),
    (
        "stride",
        re.compile(
            r"tensor '(?P<n>[^']+)' stride mismatch at index (?P<i>\d+)\. expected (?P<a>\S+), actual (?P<b>\S+)"
        ),
    ),
    ("device", re.compile(r"tensor '(?P<n>[^']+)' (?:device|dispatch key set) mismatch")),
    ("grad_mode", re.compile(r"GLOBAL_STATE changed: .*grad_mode")),
    ("global", re.compile(r"GLOBAL_STATE changed: (?P<what>.+)")),
    ("training", re.compile(r"(?P<expr>[^\s=]*\btraining) == (?P<v>True|False)")),
    ("backend", re.compile(r"BACKEND_MATCH failure")),
    ("object", re.compile(r"___check_obj_id\((?P<expr>[^,]+),")),
    ("type", re.compile(r"___check_type_id\((?P<expr>[^,]+),")),
    ("length", re.compile(r"len\((?P<expr>[^)]+)\) == (?P<v>\d+)")),
    ("carried", re.compile(r"^(?:[LG]\[['\"])?___stack\d+(?:['\"]\])? == (?P<v>[^#\n]+?)\s*(?:#|$)", re.M)),
    ("value", re.compile(r"^(?P<expr>[\w.\[\]'\"]+) == (?P<v>[^#\n]+?)\s*(?:#|$)", re.M)),
    ("symbolic", re.compile(r"(?P<expr>[\w.\[\]'\"()]*size\(\)\[\d+\][^#\n]*)")),
]


@dataclass(frozen=True)
class GuardFailure:
    kind: str  # shape | rank | dtype | requires_grad | stride | device | grad_mode | global | training |
    #            backend | object | type | length | value | symbolic | other
    text: str  # in user terms: "`x.shape[0]` changed 8 → 9"

    @property
    def mode_switch(self) -> bool:
        """A train/eval switch: the model's `training` flag or the grad mode changed."""
        return self.kind in ("training", "grad_mode")


def _name(expr: str) -> str:
    return _LOCALS.sub(r"\1", expr.strip())


def describe_guard_failure(reason: str) -> GuardFailure:
    """One guard failure, as Dynamo wrote it, in user terms."""
    text = _ID_PREFIX.sub("", reason.split("\nUser stack trace:", 1)[0]).strip()
    for kind, pattern in _GUARDS:
        m = pattern.search(text)
        if m is None:
            continue
        g = m.groupdict()
        n = _name(g.get("n") or "")
        if kind == "shape":
            return GuardFailure(kind, f"`{n}.shape[{g['i']}]` changed {g['a']} → {g['b']}")
        if kind == "rank":
            return GuardFailure(kind, f"`{n}` rank changed {g['a']} → {g['b']}")
        if kind == "dtype":
            a, b = _DTYPES.get(g["a"], g["a"]), _DTYPES.get(g["b"], g["b"])
            return GuardFailure(kind, f"`{n}.dtype` changed {a} → {b}")
        if kind == "requires_grad":
            was = g["a"] == "1"
            return GuardFailure(kind, f"`{n}.requires_grad` changed {was} → {not was}")
        if kind == "stride":
            return GuardFailure(
                kind,
                f"`{n}.stride({g['i']})` changed {g['a']} → {g['b']} (a non-contiguous or transposed input)",
            )
        if kind == "device":
            return GuardFailure(kind, f"`{n}` changed device or autograd state")
        if kind == "grad_mode":
            return GuardFailure(
                kind, "grad mode changed (a call under `torch.no_grad()` or `torch.inference_mode()`)"
            )
        if kind == "global":
            return GuardFailure(kind, f"global torch state changed: {g['what'].strip()}")
        if kind == "training":
            return GuardFailure(kind, f"`{_owner(g['expr'])}.training` changed (train/eval switch)")
        if kind == "backend":
            return GuardFailure(kind, "it was compiled again with a different backend or options")
        if kind == "object":
            return GuardFailure(kind, f"`{_name(g['expr'])}` is a different object than when it was compiled")
        if kind == "type":
            return GuardFailure(kind, f"`{_name(g['expr'])}` has a different type than when it was compiled")
        if kind == "length":
            return GuardFailure(kind, f"`len({_name(g['expr'])})` changed (was {g['v'].strip()})")
        if kind == "carried":
            return GuardFailure(
                "value", f"a Python number carried across a graph break changed (was {_value(g['v'])})"
            )
        if kind == "value":
            return GuardFailure(kind, f"`{_name(g['expr'])}` changed (was {_value(g['v'])})")
        if kind == "symbolic":
            return GuardFailure(
                kind, f"a size left the range it was compiled for (`{_name(g['expr']).strip()}`)"
            )
    short = text.split("#", 1)[0].strip() or text
    return GuardFailure("other", f"guard `{_name(short)[:80]}` failed")


def _value(text: str) -> str:
    """A guarded value as written, floats shortened: `-5.101` for `-5.101468086242676`."""
    text = text.strip()
    try:
        number = float(text)
    except ValueError:
        return text if len(text) <= 40 else text[:39] + "…"
    return f"{number:.4g}" if "." in text or "e" in text.lower() else text


def _owner(expr: str) -> str:
    """`self` for `self.training`; `model[1]` for `fn._modules['1'].training`."""
    expr = _name(expr)
    owner = expr.rsplit(".training", 1)[0] or "self"
    owner = re.sub(
        r"\._modules\[['\"]([^'\"]+)['\"]\]", lambda m: f"[{m[1]}]" if m[1].isdigit() else f".{m[1]}", owner
    )
    return owner.replace("fn[", "model[").replace("fn.", "model.") if owner.startswith("fn") else owner


def recompile_fix(kinds: set[str]) -> str:
    """The fix for the main cause among the failed guards."""
    if kinds & {"shape", "symbolic"}:
        return (
            "Mark the size that varies as dynamic before the call (`torch._dynamo.mark_dynamic(x, 0)`) or compile "
            "with `dynamic=True`; or pad/bucket inputs to a few fixed sizes (`drop_last=True` for a short last batch)."
        )
    if kinds & {"rank", "dtype", "stride", "device", "requires_grad"}:
        return (
            "Call it with inputs of one rank, dtype, device and layout (convert once before the loop, "
            "`.contiguous()` for transposed inputs), or compile one function per kind of input."
        )
    if kinds & {"value", "length"}:
        return (
            "Dynamo specialises on Python numbers, lengths and attributes: pass values that change as tensors "
            "(or a buffer), keep them fixed, or compile with `dynamic=True` for changing integers; a number read "
            "with `.item()` at a graph break goes away with the break (TM950)."
        )
    if kinds & {"object", "type"}:
        return "Pass the same objects every call (build them once), or compile once outside the loop and reuse it."
    if "backend" in kinds:
        return "Compile once with one backend and set of options, and reuse the compiled function."
    if kinds & {"training", "grad_mode"}:
        return "Switch train/eval and grad mode once per phase (not per batch); each mode is compiled once."
    return "Keep what the failed guard checks fixed between calls, or compile once outside the loop."


_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<name>.+?)_at_(?P<line>\d+)$")


def resumed_function(co_name: str) -> str:
    """The user function a Dynamo resume function continues (`f` for `torch_dynamo_resume_in_f_at_15`)."""
    while True:
        m = _RESUME.match(co_name)
        if m is None:
            return co_name
        co_name = m["name"]


_LIMIT = re.compile(
    r"hit config\.(?P<kind>\w+) \((?P<limit>\d+)\)\s*\n\s*function: '(?P<name>[^']+)' \((?P<file>.+):(?P<line>\d+)\)"
)


def parse_limit_warning(message: str) -> tuple[str, int, str, str, int] | None:
    """(limit name, limit, function, file, first line) from Dynamo's recompile-limit warning."""
    m = _LIMIT.search(message)
    if m is None:
        return None
    return m["kind"], int(m["limit"]), m["name"], m["file"], int(m["line"])
