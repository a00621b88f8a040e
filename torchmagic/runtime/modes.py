"""ModeRecorder: train/eval and cuDNN facts seen while the cell runs (records, no findings).

- Dropout/BatchNorm (`_DropoutNd`, `_BatchNorm`) layers that ran forward with
  `training=True` while grad was disabled (`no_grad`/`inference_mode`), and how many times:
  TM505's evidence.
- Such layers that ran forward with `training=False`, that a `.backward()` then reached, and
  after which an optimizer stepped while the layer was still in eval mode: TM506's. The
  forward pre-hook puts a tensor hook on that layer's input (it fires only if a backward pass
  flows through it); a global optimizer step pre-hook confirms the training step. Gradients
  taken in eval mode without an optimizer step (saliency maps, adversarial examples) leave
  no record.
- The distinct input shapes each convolution on a cuDNN device saw, and whether
  `torch.backends.cudnn.benchmark` was on: TM901's.

The rules (`runtime/rules/train_eval.py`, `cudnn.py`) name the layers and their root modules
from the cell's namespace snapshot.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.conv import _ConvNd
from torch.nn.modules.dropout import _DropoutNd
from torch.optim.optimizer import register_optimizer_step_pre_hook

from ..live import meta
from .hooks import keep_out_of_dynamo, remove_handles

if TYPE_CHECKING:
    from ..run import CellRun

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


def training(module: Any) -> bool:
    """`module.training`, read from the instance dict (no property or `__getattr__` runs)."""
    d = object.__getattribute__(module, "__dict__")
    return bool(d.get("training", True)) if type(d) is dict else True


class LayerEvent:
    """One layer that misbehaved, the first time it did (`calls`: how many times in the cell)."""

    __slots__ = ("calls", "line", "ref", "type")

    def __init__(self, ref: Any, type_name: str, line: int | None) -> None:
        self.ref = ref
        self.type = type_name
        self.line = line
        self.calls = 1

    @classmethod
    def of(cls, module: Any, line: int | None) -> LayerEvent:
        return cls(weakref.ref(module), type(module).__name__, line)


@dataclass
class ModeRecords:
    """What the recorder saw in one cell. Weak references to the layers only."""

    train_no_grad: list[LayerEvent] = field(default_factory=list)  # TM505
    eval_step: list[LayerEvent] = field(default_factory=list)  # TM506
    # (convolution, distinct input shapes, line where it passed the limit)
    conv_shapes: list[tuple[Any, set[Any], int | None]] = field(default_factory=list)
    cudnn_benchmark: bool = False
    shape_limit: int = 8


class ModeRecorder:
    """Collector of the records TM505, TM506 and TM901 read."""

    name = "mode_checks"

    def __init__(self, *, cudnn_devices: tuple[str, ...] = ("cuda",)) -> None:
        self.cudnn_devices = cudnn_devices
        self._handles: list[Any] = []
        self._tensor_hooks: list[Any] = []
        self._reset(None)

    def _reset(self, run: CellRun | None) -> None:
        self._line = run.locator.line if run is not None else _no_line
        self._kinds: dict[type, int] = {}
        self._train_no_grad: dict[int, LayerEvent] = {}
        self._eval_forward: dict[int, LayerEvent] = {}  # TM506 candidates
        self._eval_backward: dict[int, LayerEvent] = {}  # ... that a backward reached
        self._eval_step: dict[int, LayerEvent] = {}  # ... and an optimizer stepped after
        self._conv_shapes: dict[int, tuple[Any, set[Any], int | None]] = {}
        # the limit comes from the options as given: 0 is a real limit (any new shape counts)
        self._limit = max(0, int(run.options.cudnn_shape_limit)) if run is not None else 8
        self._benchmark_at_start = False

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self, run: CellRun) -> None:
        """The forward pre-hook is the shape tracer's (one global hook for both): it calls
        `observe` for the layers `kind_of` marks. Here only the optimizer step hook, and only
        once a backward pass went through an eval-mode layer: a global optimizer hook makes
        Dynamo specialise a compiled optimizer step on it (it guards on the hook count), so
        a cell that trains normally must not have one."""
        self.stop(run)
        self._reset(run)
        try:
            self._benchmark_at_start = bool(torch.backends.cudnn.benchmark)
        except Exception:
            self._benchmark_at_start = False
        keep_out_of_dynamo(self._on_step, self._on_backward(0))

    def _install(self) -> None:
        if not self._handles:
            self._handles = [register_optimizer_step_pre_hook(self._on_step)]

    def _uninstall(self) -> None:
        handles, self._handles = self._handles, []
        remove_handles(handles)

    def stop(self, run: CellRun | None = None) -> None:
        self._uninstall()
        hooks, self._tensor_hooks = self._tensor_hooks, []
        remove_handles(hooks)

    def collect(self, run: CellRun) -> None:
        try:
            benchmark = self._benchmark_at_start or bool(torch.backends.cudnn.benchmark)
        except Exception:
            benchmark = self._benchmark_at_start
        run.records.modes = ModeRecords(
            train_no_grad=[e for e in self._train_no_grad.values() if e.ref() is not None],
            eval_step=[e for e in self._eval_step.values() if e.ref() is not None],
            conv_shapes=[v for v in self._conv_shapes.values() if len(v[1]) > self._limit],
            cudnn_benchmark=benchmark,
            shape_limit=self._limit,
        )
        self._reset(None)

    # ---- what the shape tracer's forward pre-hook passes on (must never raise) ---------------
    def kind_of(self, tp: type) -> int:
        """OTHER for most modules (nothing to record), NORM_OR_DROPOUT or CONV."""
        k = self._kinds.get(tp)
        if k is None:
            k = self._kinds[tp] = _kind(tp)
        return k

    def observe(self, module: Any, args: Any, k: int) -> None:
        try:
            if k == NORM_OR_DROPOUT:
                if training(module):
                    if not torch.is_grad_enabled():
                        event = self._train_no_grad.get(id(module))
                        if event is not None:
                            event.calls += 1  # repeated sampling tells MC dropout (TM505)
                        elif not _is_deliberate(module):
                            self._train_no_grad[id(module)] = LayerEvent.of(module, self._line())
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
                            self._conv_shapes[id(module)] = (entry[0], shapes, self._line())
        except Exception:
            pass

    def _watch_backward(self, module: Any, x: Any) -> None:
        """TM506: a hook on the eval-mode layer's input fires only when a backward pass
        computes the gradient there, i.e. flows back through this layer. (Hooking the input
        in the pre-hook spares a second global hook on every module call.)"""
        if not issubclass(type(x), _Tensor) or not _requires_grad(x):
            return
        key = id(module)
        if key not in self._eval_forward:
            self._eval_forward[key] = LayerEvent.of(module, self._line())
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
                if layer is not None and not training(layer) and key not in self._eval_step:
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
                        line = self._line()
                        self._eval_backward[key] = LayerEvent(event.ref, event.type, line or event.line)
                        self._install()  # now an optimizer step after this backward is TM506
            except Exception:
                pass
            return None

        return hook


def _no_line() -> int | None:
    return None


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
