"""ModeChecks: train/eval mistakes and cuDNN autotuning seen while the cell runs.

- TM505: a Dropout/BatchNorm (`_DropoutNd`, `_BatchNorm`) runs forward with `training=True`
  while grad is disabled (`no_grad`/`inference_mode`): evaluation with dropout on and the
  running statistics updated.
- TM506: `.backward()` reaches a Dropout/BatchNorm that ran forward with `training=False`,
  and an optimizer then steps while that layer is still in eval mode: `model.train()` was
  forgotten after validation. The forward pre-hook puts a tensor hook on that layer's input
  (it fires only if a backward pass actually flows through it); a global optimizer
  step pre-hook confirms the training step. Gradients taken in eval mode without an
  optimizer step (saliency maps, adversarial examples generated before `model.train()`)
  are not flagged.
- TM901: `torch.backends.cudnn.benchmark` is on while a convolution sees more than
  `cudnn_shape_limit` distinct input shapes on a cuDNN device: the autotuner reruns for
  every new shape.

Both findings name the root module the user holds (`net`, not `net.block.3.drop`). A layer
whose root module is in the other mode is left alone: `model.eval()` followed by re-enabling
dropout layers (MC dropout) or freezing BatchNorm layers of a training model is deliberate.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.nn.modules import module as _module_mod
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.conv import _ConvNd
from torch.nn.modules.dropout import _DropoutNd
from torch.optim.optimizer import register_optimizer_step_pre_hook

from ..live import meta
from ..live.cell import current_cell_line
from .shapes import quiet_compile_warning, remove_after_cell, restore_warnings

_device = meta.device
_is_compiling = meta.is_compiling
_requires_grad = meta.requires_grad
_size = meta.size
_Tensor = torch.Tensor

OTHER, NORM_OR_DROPOUT, CONV = 0, 1, 2
MAX_TENSOR_HOOKS = 1000  # TM506 output hooks per cell
MAX_SHAPES = 1000  # distinct shapes remembered per convolution


def _kind(tp: type) -> int:
    if issubclass(tp, (_DropoutNd, _BatchNorm)):
        return NORM_OR_DROPOUT
    if issubclass(tp, _ConvNd):
        return CONV
    return OTHER


def _training(module: Any) -> bool:
    d = object.__getattribute__(module, "__dict__")
    return bool(d.get("training", True)) if type(d) is dict else True


class _Event:
    """One layer that misbehaved, the first time it did."""

    __slots__ = ("line", "ref", "type")

    def __init__(self, ref: Any, type_name: str, line: int | None) -> None:
        self.ref = ref
        self.type = type_name
        self.line = line

    @classmethod
    def of(cls, module: Any, line: int | None) -> _Event:
        return cls(weakref.ref(module), type(module).__name__, line)


class ModeChecks:
    """Collector for TM505, TM506 and TM901."""

    name = "mode_checks"

    def __init__(self, config: Any = None, *, cudnn_devices: tuple[str, ...] = ("cuda",)) -> None:
        self.config = config
        self.cudnn_devices = cudnn_devices
        self._handles: list[Any] = []
        self._warning_filter: Any = None
        self._tensor_hooks: list[Any] = []
        self._reset(None)

    def _reset(self, run: Any) -> None:
        self._ns = getattr(getattr(run, "shell", None), "user_ns", None)
        self._kinds: dict[type, int] = {}
        self._train_no_grad: dict[int, _Event] = {}  # TM505
        self._eval_forward: dict[int, _Event] = {}  # TM506 candidates
        self._eval_backward: dict[int, _Event] = {}  # TM506 candidates a backward reached
        self._eval_step: dict[int, _Event] = {}  # TM506: ... and an optimizer stepped after
        self._conv_shapes: dict[int, tuple[Any, set[Any], int | None]] = {}
        self._limit = int(getattr(getattr(run, "config", None), "cudnn_shape_limit", 8) or 8)
        self._benchmark_at_start = False

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self, run: Any) -> None:
        self._remove()
        self._reset(run)
        try:
            self._benchmark_at_start = bool(torch.backends.cudnn.benchmark)
        except Exception:
            self._benchmark_at_start = False
        self._warning_filter = quiet_compile_warning()
        self._handles = [
            _module_mod.register_module_forward_pre_hook(self._pre),
            register_optimizer_step_pre_hook(self._on_step),
        ]
        remove_after_cell(run.shell, self._remove)

    def stop(self, run: Any) -> None:
        self._remove()
        try:
            benchmark = self._benchmark_at_start or bool(torch.backends.cudnn.benchmark)
        except Exception:
            benchmark = self._benchmark_at_start
        try:
            run.report.findings.extend(self.findings(run, benchmark))
        finally:
            self._reset(None)

    def _remove(self) -> None:
        entry, self._warning_filter = self._warning_filter, None
        if entry is not None:
            restore_warnings(entry)
        handles = self._handles + self._tensor_hooks
        self._handles, self._tensor_hooks = [], []
        for h in handles:
            try:
                h.remove()
            except Exception:
                pass

    # ---- hooks (must never raise into the user's forward) ------------------------------------
    def _kind_of(self, module: Any) -> int:
        tp = type(module)
        k = self._kinds.get(tp)
        if k is None:
            k = self._kinds[tp] = _kind(tp)
        return k

    def _pre(self, module: Any, args: Any) -> None:
        if _is_compiling():  # inside torch.compile tracing: stay out of the graph (no breaks)
            return None
        try:
            k = self._kind_of(module)
            if k == OTHER:
                return None
            if k == NORM_OR_DROPOUT:
                if _training(module):
                    if (
                        id(module) not in self._train_no_grad
                        and not torch.is_grad_enabled()
                        and not _is_deliberate(module)
                    ):
                        self._train_no_grad[id(module)] = _Event.of(module, current_cell_line(self._ns))
                elif args and torch.is_grad_enabled():
                    self._watch_backward(module, args[0])
            elif k == CONV and args:
                x = args[0]
                if issubclass(type(x), _Tensor) and _device(x).type in self.cudnn_devices:
                    entry = self._conv_shapes.get(id(module))
                    if entry is None:
                        entry = self._conv_shapes[id(module)] = (weakref.ref(module), set(), None)
                    shapes = entry[1]
                    if len(shapes) < MAX_SHAPES:
                        shapes.add(tuple(_size(x)))
                        if len(shapes) == self._limit + 1 and entry[2] is None:
                            self._conv_shapes[id(module)] = (entry[0], shapes, current_cell_line(self._ns))
        except Exception:
            pass
        return None

    def _watch_backward(self, module: Any, x: Any) -> None:
        """TM506: a hook on the eval-mode layer's input fires only when a backward pass
        computes the gradient there, i.e. flows back through this layer. (Hooking the input
        in the pre-hook spares a second global hook on every module call.)"""
        if not issubclass(type(x), _Tensor) or not _requires_grad(x):
            return
        key = id(module)
        if key not in self._eval_forward:
            self._eval_forward[key] = _Event.of(module, current_cell_line(self._ns))
        if (
            key in self._eval_backward
            or key in self._eval_step
            or len(self._tensor_hooks) >= MAX_TENSOR_HOOKS
        ):
            return
        self._tensor_hooks.append(x.register_hook(self._on_backward(key)))

    def _on_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        try:
            if _is_compiling() or not self._eval_backward:
                return None
            for key, event in list(self._eval_backward.items()):
                layer = event.ref()
                if layer is not None and not _training(layer) and key not in self._eval_step:
                    self._eval_step[key] = event
            self._eval_backward.clear()
        except Exception:
            pass
        return None

    def _on_backward(self, key: int) -> Any:
        # The closure holds an id, not the module: nothing of the user's is kept alive.
        def hook(grad: Any) -> None:
            try:
                if key not in self._eval_backward:
                    event = self._eval_forward.get(key)
                    if event is not None:
                        line = current_cell_line(self._ns)
                        self._eval_backward[key] = _Event(event.ref, event.type, line or event.line)
            except Exception:
                pass
            return None

        return hook

    # ---- findings ------------------------------------------------------------------------------
    def findings(self, run: Any, benchmark: bool) -> list[Any]:
        from ..live.rules import finding

        events = [
            e for e in (*self._train_no_grad.values(), *self._eval_step.values()) if e.ref() is not None
        ]
        convs = {k: v for k, v in self._conv_shapes.items() if len(v[1]) > self._limit} if benchmark else {}
        if not events and not convs:
            return []
        names, roots = _names_and_roots(run.shell)
        out = []
        seen: set[tuple[str, str]] = set()
        for rule, store, want_root_training in (
            ("TM505", self._train_no_grad, True),
            ("TM506", self._eval_step, False),
        ):
            for event in store.values():
                layer = event.ref()
                if layer is None:
                    continue
                qual, root_label = names.get(id(layer), (None, f"<{event.type}>"))
                root = roots.get(root_label)
                if root is not None and _training(root) is not want_root_training:
                    continue  # deliberate: MC dropout, frozen BatchNorm
                if (rule, root_label) in seen:
                    continue
                seen.add((rule, root_label))
                out.append(_mode_finding(finding, rule, root_label, qual or event.type, event.line))
        if convs:
            key, (ref, shapes, line) = max(convs.items(), key=lambda kv: len(kv[1][1]))
            conv = ref()
            qual = names.get(id(conv), (None, None))[0] if conv is not None else None
            label = qual or "a convolution"
            out.append(
                finding(
                    "TM901",
                    f"`torch.backends.cudnn.benchmark` is on and `{label}` saw {len(shapes)} distinct input "
                    f"shapes (limit {self._limit}): cuDNN re-runs its autotuner for every new shape.",
                    "Pad or bucket inputs to a few fixed shapes, or set `torch.backends.cudnn.benchmark = False`.",
                    line=line,
                    object=qual,
                    source="runtime",
                )
            )
        return out


def _is_deliberate(module: Any) -> bool:
    """Train mode under no_grad that is not a mistake: dropout with p=0 (a no-op), and
    BatchNorm with `momentum=None` (cumulative statistics: BN recalibration such as
    `torch.optim.swa_utils.update_bn`, which runs the model in train mode under no_grad)."""
    d = object.__getattribute__(module, "__dict__")
    if type(d) is not dict:
        return False
    tp = type(module)
    if issubclass(tp, _DropoutNd):
        p = d.get("p")
        return type(p) in (int, float) and p == 0
    if issubclass(tp, _BatchNorm):
        return "momentum" in d and d["momentum"] is None
    return False


def _mode_finding(finding: Any, rule: str, root: str, layer: str, line: int | None) -> Any:
    if rule == "TM505":
        return finding(
            "TM505",
            f"`{root}` ran with grad disabled while `{layer}` was in training mode: dropout stays on and "
            "BatchNorm updates its running statistics during evaluation.",
            f"`{root}.eval()` before evaluating (and `{root}.train()` again before training).",
            line=line,
            object=root,
            source="runtime",
        )
    return finding(
        "TM506",
        f"`.backward()` went through `{layer}` while it was in eval mode: `{root}` is training without "
        "dropout and with frozen BatchNorm statistics.",
        f"`{root}.train()` at the top of each training epoch (after validation).",
        line=line,
        object=root,
        source="runtime",
    )


def _names_and_roots(shell: Any) -> tuple[dict[int, tuple[str, str]], dict[str, Any]]:
    """id(module) -> (qualified name, root name); root name -> root module (transient)."""
    from ..live.scan import collect, module_trees

    ns = getattr(shell, "user_ns", None)
    if not isinstance(ns, dict):
        return {}, {}
    hidden = getattr(shell, "user_ns_hidden", None)
    found = collect(ns, hidden if isinstance(hidden, dict) else None)
    names: dict[int, tuple[str, str]] = {}
    for tree in module_trees(found):
        for qual, m, _ in tree.nodes:
            names.setdefault(id(m), (qual, tree.name))
    return names, dict(found.modules)
