"""TM001 explanations of tensor errors, and meta-device dry runs (no IPython needed).

- `classify(exc)`: the structured form of a PyTorch shape/dtype/device error message.
- `explain(exc, tb, modules, cell_line)`: which layer, which tensors, what to change.
- `InFlight`: global forward hooks that record the modules in flight when a forward raises.
- `dry_run(model, *inputs)`: per-layer shapes of a forward on meta copies, and where it stops.
"""

from __future__ import annotations

from .dryrun import DryRun, DryRunFailure, dry_run, dry_run_as, format_dry_run
from .explainer import Explanation, explain
from .inflight import InFlight
from .messages import TensorError, classify
from .records import ChainEntry, ModuleCall, TensorInfo

__all__ = [
    "ChainEntry",
    "DryRun",
    "DryRunFailure",
    "Explanation",
    "InFlight",
    "ModuleCall",
    "TensorError",
    "TensorInfo",
    "classify",
    "dry_run",
    "dry_run_as",
    "explain",
    "format_dry_run",
]
