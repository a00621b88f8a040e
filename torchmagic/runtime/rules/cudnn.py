"""TM901: cuDNN autotuning on while a convolution saw many input shapes (mode records)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...catalog import Rule
from ...report import Finding
from ..registry import runtime_rule

if TYPE_CHECKING:
    from ...run import CellRun


@runtime_rule("TM901")
def cudnn_benchmark_variable_shapes(run: CellRun, rule: Rule) -> Iterator[Finding]:
    modes = run.records.modes
    if modes is None or not modes.cudnn_benchmark or not modes.conv_shapes:
        return
    ref, shapes, line = max(modes.conv_shapes, key=lambda entry: len(entry[1]))
    conv = ref()
    qual = run.snapshot().module_names().get(id(conv), (None, None))[0] if conv is not None else None
    label = qual or "a convolution"
    yield rule.finding(
        f"`torch.backends.cudnn.benchmark` is on and `{label}` saw {len(shapes)} distinct input "
        f"shapes (limit {modes.shape_limit}): cuDNN re-runs its autotuner for every new shape.",
        "Pad or bucket inputs to a few fixed shapes, or set `torch.backends.cudnn.benchmark = False`.",
        line=line,
        object=qual,
        source="runtime",
    )
