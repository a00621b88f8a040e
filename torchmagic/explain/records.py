"""The records the explainer reads and writes: tensors, in-flight module calls, the chain."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import safe


@dataclass
class TensorInfo:
    """One tensor involved in an error: metadata only, never values."""

    name: str  # as the user would type it (`x`, `net.2.weight`) or the layer's argument (`input`)
    shape: list[int]
    dtype: str
    device: str
    role: str = ""  # where it came from: "input of `net.2`", "line 4", ...
    contiguous: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "device": self.device,
            "role": self.role,
            "contiguous": self.contiguous,
        }


def tensor_info(name: str, t: Any, role: str = "") -> TensorInfo | None:
    shape = safe.shape(t)
    if shape is None:
        return None
    return TensorInfo(
        name=name,
        shape=shape,
        dtype=safe.dtype(t) or "?",
        device=safe.device(t) or "?",
        role=role,
        contiguous=safe.contiguous(t),
    )


@dataclass
class ModuleCall:
    """One module whose forward was running when the error was raised (the chain is given
    innermost first). `module` is a strong reference: keep these only while explaining."""

    module: Any
    name: str | None  # the user's name (`net.2`, `model.encoder.layers[0]`), None if unknown
    type: str
    inputs: list[TensorInfo] = field(default_factory=list)  # positional tensor inputs, as traced
    # The module that returned last before this call started, and its output shapes: the
    # likely producer of this call's input (only named when the shapes agree).
    previous: str | None = None
    previous_outputs: list[list[int]] = field(default_factory=list)


@dataclass
class ChainEntry:
    """One module of the chain that led to the error, outermost first."""

    name: str
    type: str
    summary: str  # "Linear 64→10"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "summary": self.summary}


# ---- module configuration, from plain instance attributes --------------------------------------


def config(module: Any, key: str) -> Any:
    """A constructor setting stored as a plain attribute (`in_features`); None if absent or
    not a plain int / tuple of ints / bool."""
    d = safe.instance_dict(module)
    if d is None or key not in d:
        return None
    v = dict.__getitem__(d, key)
    if type(v) in (int, bool):
        return v
    if type(v) in (tuple, list) and all(type(x) is int for x in v):
        return tuple(v)
    return None


def _dims(v: Any) -> str:
    if isinstance(v, tuple):
        return "×".join(str(x) for x in v)
    return str(v)


def summary(module: Any, type_name: str | None = None) -> str:
    """`Linear 64→10`, `Conv2d 3→8, kernel 3×3`, `Embedding 10×4`... or just the type name."""
    tp = type_name or type(module).__name__
    c = lambda k: config(module, k)  # noqa: E731
    if c("in_features") is not None and c("out_features") is not None:
        return f"{tp} {c('in_features')}→{c('out_features')}"
    if c("in_channels") is not None and c("out_channels") is not None:
        text = f"{tp} {c('in_channels')}→{c('out_channels')}"
        if c("kernel_size") is not None:
            text += f", kernel {_dims(c('kernel_size'))}"
        groups = c("groups")
        if groups not in (None, 1):
            text += f", groups {groups}"
        return text
    if c("num_embeddings") is not None and c("embedding_dim") is not None:
        return f"{tp} {c('num_embeddings')}×{c('embedding_dim')}"
    if c("input_size") is not None and c("hidden_size") is not None:
        return f"{tp} {c('input_size')}→{c('hidden_size')}"
    if c("embed_dim") is not None and c("num_heads") is not None:
        return f"{tp} {c('embed_dim')}, {c('num_heads')} heads"
    if c("num_features") is not None:
        return f"{tp} {c('num_features')}"
    if c("normalized_shape") is not None:
        return f"{tp} {list(c('normalized_shape'))}"
    if c("num_groups") is not None and c("num_channels") is not None:
        return f"{tp} {c('num_groups')} groups, {c('num_channels')} channels"
    return tp


def own_tensors(module: Any, owner: str | None) -> list[TensorInfo]:
    """The module's own parameters and buffers (not its submodules'), named `owner.weight`."""
    out = []
    prefix = f"{owner}." if owner else ""
    for key, role in (("_parameters", "parameter"), ("_buffers", "buffer")):
        for k, v in safe.items(safe.module_store(module, key), 32):
            if v is None or not safe.is_tensor(v):
                continue
            name = k[2:-2] if k.startswith("['") else k
            info = tensor_info(f"{prefix}{name}", v, role)
            if info is not None:
                out.append(info)
    return out
