"""Live rules: findings about the objects a scan found (TM105, TM106, TM205, TM401).

They read the same transient objects as the scan, through instance dicts and TensorBase
descriptors only, and return `(finding, object)` pairs so that the caller can remember which
object a finding was about (weakly) and not repeat it for the same object in later cells.

TM405's live part is in `errors.py`: `.numpy()` on a tensor that requires grad raises at
once, so the only live evidence is the cell's own error, not anything left in the namespace.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from torch import nn

from ..report import Finding
from .scan import (
    MAX_ITEMS,
    MODULE_INTERNALS,
    ScanResult,
    _device,
    _device_name,
    _grad_fn,
    instance_dict,
    iter_items,
)

_Module = nn.Module
_Parameter = nn.Parameter


def finding(rule_id: str, message: str, hint: str, **kw: Any) -> Finding:
    """`make_finding`, or an equivalent Finding while the registry lacks the rule."""
    from ..lint.registry import make_finding

    try:
        return make_finding(rule_id, message, hint, **kw)
    except KeyError:
        name, severity = _FALLBACK[rule_id]
        return Finding(
            rule=rule_id,
            name=name,
            severity=kw.get("severity") or severity,
            line=kw.get("line"),
            col=kw.get("col"),
            message=message,
            hint=hint,
            object=kw.get("object"),
            source=kw.get("source", "live"),
        )


_FALLBACK = {
    "TM105": ("unregistered-submodules", "error"),
    "TM106": ("tensor-attribute-not-buffer", "warning"),
    "TM205": ("mixed-device-model", "error"),
    "TM401": ("graph-kept-alive", "warning"),
    "TM505": ("inference-in-train-mode", "warning"),
    "TM506": ("train-in-eval-mode", "warning"),
    "TM901": ("cudnn-benchmark-variable-shapes", "warning"),
}


def live_findings(result: ScanResult, static: list[Finding]) -> list[tuple[Finding, Any, bool]]:
    """`(finding, object, show)`: `object` is what the finding is about (the caller remembers
    it weakly, not to repeat the finding in later cells); `show` is False when a static
    finding in this cell already says the same, which still counts as reported."""
    out: list[tuple[Finding, Any, bool]] = []
    out += module_findings(result, static)
    out += graph_findings(result, static)
    return out


def _static_mentions(static: list[Finding], rule: str, attr: str) -> bool:
    needle = f"`self.{attr}`"
    return any(f.rule == rule and f.source == "static" and needle in f.message for f in static)


def _static_at(static: list[Finding], rule: str, line: int | None) -> bool:
    return line is not None and any(f.rule == rule and f.line == line for f in static)


def _attribute_finding(
    rule_id: str,
    cls: type,
    attr: str,
    hits: list[tuple[str, Any, Any]],
    result: Any,
    static: Any,
    what: str,
    why: str,
    hint: str,
) -> tuple[Any, Any, bool]:
    """One finding per (class, attribute) for TM105/TM106, naming the first instance, and
    hidden when the cell defines the class and the static rule already reported it."""
    show = not (_static_mentions(static, rule_id, attr) and cls.__name__ in result.cell.assigned)
    qual, root, _ = hits[0]
    more = f" (and {len(hits) - 1} more `{cls.__name__}` instances)" if len(hits) > 1 else ""
    name = f"{qual}.{attr}"
    f = finding(
        rule_id,
        f"`{name}` {what}{more}: {why}",
        hint,
        line=result.cell.attribute_line(cls.__name__, attr, qual),
        object=name,
    )
    return f, root, show


def module_findings(result: ScanResult, static: list[Finding]) -> list[tuple[Finding, Any, bool]]:
    """TM105, TM106 per (class, attribute), TM205 per outermost root module."""
    out: list[tuple[Finding, Any, bool]] = []
    covered: set[int] = set()
    containers: dict[tuple[type, str], list[Any]] = {}  # (class, attr) -> [qualname, root, count, kind]
    plain: dict[tuple[type, str], list[Any]] = {}
    for tree in result.trees:
        if id(tree.root) in covered:
            continue  # a submodule of a root already looked at: its names come from that root
        ids = {id(m) for _, m, _ in tree.nodes}
        covered |= ids
        attr_devices: list[tuple[str, str]] = []
        candidates: list[tuple[type, str, str, Any]] = []
        for qual, m, _ in tree.nodes:
            try:
                d = instance_dict(m)
            except Exception:
                continue
            # Set difference in C: most modules have two or three user attributes, all ints.
            for attr in d.keys() - MODULE_INTERNALS:
                v = d.get(attr)
                tp = type(v)
                if tp is int or tp is float or tp is bool or tp is str or v is None or type(attr) is not str:
                    continue
                if tp is list or tp is tuple or tp is dict:
                    candidates.append((type(m), attr, qual, v))
                elif issubclass(tp, torch.Tensor) and not issubclass(tp, _Parameter):
                    if _computed_attribute(d, attr, v):
                        continue
                    plain.setdefault((type(m), attr), []).append((qual, tree.root, v))
                    try:
                        attr_devices.append((f"{qual}.{attr}", _device_name(_device(v))))
                    except Exception:
                        pass
        out += _mixed_devices(tree, tree.first_on, attr_devices, tree.split_ok, result)
        # Judged once the whole tree is known: items registered elsewhere in the same model
        # (a convenience alias of `self.blocks`) do follow `.to()` and the optimizer.
        for cls, attr, qual, v in candidates:
            if _unregistered(v, ids, tree.tensor_ids):
                containers.setdefault((cls, attr), []).append((qual, tree.root, v))
    for (cls, attr), hits in containers.items():
        v = hits[0][2]
        kind = "dict" if type(v) is dict else type(v).__name__
        fix = "nn.ModuleDict" if kind == "dict" else "nn.ModuleList"
        out.append(
            _attribute_finding(
                "TM105",
                cls,
                attr,
                hits,
                result,
                static,
                f"is a plain {kind} of modules/parameters",
                "they are invisible to `.parameters()`, `.to()`, `state_dict()` and the optimizer.",
                f"In `{cls.__name__}.__init__`: `self.{attr} = {fix}(...)` "
                "(`nn.ParameterList`/`nn.ParameterDict` for parameters).",
            )
        )
    for (cls, attr), hits in plain.items():
        out.append(
            _attribute_finding(
                "TM106",
                cls,
                attr,
                hits,
                result,
                static,
                "is a plain tensor attribute",
                "it will not follow `.to(device)` and is missing from `state_dict()`.",
                f'In `{cls.__name__}`: `self.register_buffer("{attr}", tensor)`, or `nn.Parameter(...)` '
                "if it should be trained.",
            )
        )
    return out


# Hooks that recompute a plain tensor attribute from registered parameters before each forward.
_RECOMPUTING_HOOKS = frozenset({"WeightNorm", "SpectralNorm"})


def _computed_attribute(d: dict[str, Any], attr: str, t: Any) -> bool:
    """A plain tensor attribute that is derived, not state: TM106 would be noise.

    `weight_norm`/`spectral_norm` keep `weight` as a plain attribute recomputed from
    registered parameters by a forward pre-hook; a tensor with a `grad_fn` was computed from
    others (a cached activation, a derived weight) rather than created as a constant.
    """
    try:
        if _grad_fn(t) is not None:
            return True
    except Exception:
        pass
    hooks = d.get("_forward_pre_hooks")
    if isinstance(hooks, dict):
        for hook in dict.values(hooks):
            if type(hook).__name__ in _RECOMPUTING_HOOKS:
                try:
                    if instance_dict(hook).get("name") == attr:
                        return True
                except Exception:
                    continue
    return False


def _unregistered(container: Any, module_ids: set[int], param_ids: set[int]) -> bool:
    """Holds a module or Parameter that the owning model does not register anywhere."""
    for _, item in iter_items(container, "", MAX_ITEMS):
        tp = type(item)
        if issubclass(tp, _Module):
            if id(item) not in module_ids:
                return True
        elif issubclass(tp, _Parameter):
            if id(item) not in param_ids:
                return True
    return False


def _mixed_devices(
    tree: Any,
    devices: dict[str, tuple[str, str]],
    attr_devices: list[tuple[str, str]],
    split_ok: bool,
    result: ScanResult,
) -> list[tuple[Finding, Any, bool]]:
    all_devices = dict.fromkeys(devices)
    strays = [(n, dev) for n, dev in attr_devices if devices and dev not in devices]
    for _, dev in strays:
        all_devices.setdefault(dev, None)
    if len(all_devices) < 2:
        return []
    listed = " and ".join(sorted(all_devices))
    line = result.cell.line_of(tree.name)
    if strays:
        names = ", ".join(f"`{n}` ({dev})" for n, dev in strays[:3])
        msg = f"`{tree.name}` has tensors on {listed}: plain tensor attribute {names} stayed behind."
        return [
            (
                finding(
                    "TM205",
                    msg,
                    "Register it (`register_buffer`) so that `model.to(device)` moves it too.",
                    line=line,
                    object=tree.name,
                ),
                tree.root,
                True,
            )
        ]
    if split_ok:
        return [
            (
                finding(
                    "TM205",
                    f"`{tree.name}` is split across {listed}, each submodule on one device (pipeline split).",
                    "If the split is deliberate, nothing to do; otherwise `model.to(device)`.",
                    line=line,
                    object=tree.name,
                    severity="info",
                ),
                tree.root,
                True,
            )
        ]
    examples = "; ".join(f"{dev}: `{q}.{p}`" for dev, (q, p) in sorted(devices.items()))
    return [
        (
            finding(
                "TM205",
                f"`{tree.name}` has parameters/buffers on {listed} ({examples}).",
                f"`{tree.name}.to(device)` once, after building the model.",
                line=line,
                object=tree.name,
            ),
            tree.root,
            True,
        )
    ]


def _static_names(static: list[Finding], rule: str, name: str) -> bool:
    pattern = re.compile(rf"(?<![\w.]){re.escape(name)}(?![\w])")
    return any(f.rule == rule and f.source == "static" and pattern.search(f.message) for f in static)


def graph_findings(result: ScanResult, static: list[Finding]) -> list[tuple[Finding, Any, bool]]:
    """TM401: containers of tensors with `grad_fn` (warning); single outputs (info, one finding)."""
    out: list[tuple[Finding, Any, bool]] = []
    cell = result.cell
    for name, tensors in result.objects.containers.items():
        n = 0
        for t in tensors:
            try:
                if _grad_fn(t) is not None:
                    n += 1
            except Exception:
                continue
        if n < 2:
            continue
        # the line that filled it (`losses.append(loss)`) is where the static rule points too
        line = cell.mutated.get(name) or cell.assigned.get(name)
        show = not (_static_at(static, "TM401", line) or _static_names(static, "TM401", name))
        out.append(
            (
                finding(
                    "TM401",
                    f"`{name}` holds {n} tensors with `grad_fn`: each keeps its whole autograd graph "
                    "(and the activations it saved) in memory.",
                    f"Store `loss.item()` (or `loss.detach()`) in `{name}` instead of the tensor.",
                    line=line,
                    object=name,
                ),
                result.objects.container_objects.get(name),
                show,
            )
        )
    if out or any(f.rule == "TM401" for f in static):
        return out  # the single-output note adds nothing next to a real TM401
    singles: list[tuple[str, Any]] = []
    assigned = cell.assigned
    # only names this cell bound (container items are handled above)
    for name, t in [nt for nt in result.objects.tensors if nt[0] in assigned]:
        try:
            if _grad_fn(t) is not None:
                singles.append((name, t))
        except Exception:
            continue
    if singles:
        name = singles[0][0]
        names = ", ".join(f"`{n}`" for n, _ in singles[:4]) + (" ..." if len(singles) > 4 else "")
        out.append(
            (
                finding(
                    "TM401",
                    f"{names} still hold{'s' if len(singles) == 1 else ''} an autograd graph after the cell "
                    "(fine for the last step's output; a leak if kept across steps).",
                    "Keep `.detach()`ed tensors or `.item()` numbers in variables that outlive the step.",
                    line=cell.line_of(name),
                    object=name,
                    severity="info",
                ),
                None,
                True,
            )
        )
    return out
