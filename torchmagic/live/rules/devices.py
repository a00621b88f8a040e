"""TM205 live: one model whose parameters, buffers or tensor state sit on several devices."""

from __future__ import annotations

from collections.abc import Iterator

from ...catalog import Rule
from .. import meta
from ..namespace import ModuleTree
from ..registry import LiveFinding, LiveView, live_check
from ..tensors import device_name
from .buffers import is_plain_tensor_state


@live_check("TM205")
def mixed_device_model(view: LiveView, rule: Rule) -> Iterator[LiveFinding]:
    for tree in view.trees:
        strays = []
        for qual, m, attr, v in view.attributes(tree):
            if is_plain_tensor_state(m, attr, v):
                try:
                    strays.append((f"{qual}.{attr}", device_name(meta.device(v))))
                except Exception:
                    continue
        f = _finding(rule, tree, strays, view)
        if f is not None:
            yield f, tree.root


def _finding(rule: Rule, tree: ModuleTree, attr_devices: list[tuple[str, str]], view: LiveView):  # type: ignore[no-untyped-def]
    devices = tree.first_on
    all_devices = dict.fromkeys(devices)
    strays = [(n, dev) for n, dev in attr_devices if devices and dev not in devices]
    for _, dev in strays:
        all_devices.setdefault(dev, None)
    if len(all_devices) < 2:
        return None
    listed = " and ".join(sorted(all_devices))
    line = view.cell.line_of(tree.name)
    if strays:
        names = ", ".join(f"`{n}` ({dev})" for n, dev in strays[:3])
        return rule.finding(
            f"`{tree.name}` has tensors on {listed}: plain tensor attribute {names} stayed behind.",
            "Register it (`register_buffer`) so that `model.to(device)` moves it too.",
            line=line,
            object=tree.name,
            source="live",
        )
    if tree.split_ok:
        return rule.finding(
            f"`{tree.name}` is split across {listed}, each submodule on one device (pipeline split).",
            "If the split is deliberate, nothing to do; otherwise `model.to(device)`.",
            line=line,
            object=tree.name,
            source="live",
            severity="info",
        )
    examples = "; ".join(f"{dev}: `{q}.{p}`" for dev, (q, p) in sorted(devices.items()))
    return rule.finding(
        f"`{tree.name}` has parameters/buffers on {listed} ({examples}).",
        f"`{tree.name}.to(device)` once, after building the model.",
        line=line,
        object=tree.name,
        source="live",
    )
