"""How much memory an autograd graph still keeps: the tensors its nodes saved for backward.

A graph that `.backward()` already went through has released its saved tensors (unless
`retain_graph=True`): what is left is a handful of small node objects. One that was never
back-propagated keeps every activation it saved. Reading this must not run user code: a
saved tensor's `unpack` may run a hook (under `torch.utils.checkpoint` it re-runs the
forward), so only `SavedTensor.data` is read, the stored value as it is, which is None once
freed. Tensor sizes come from metadata readers; no value is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import meta

MAX_NODES = 5000  # graph nodes looked at per question
_SAVED: dict[type, tuple[str, ...]] = {}  # node type -> its `_raw_saved_*` attributes


@dataclass
class SavedState:
    saved_bytes: int = 0  # saved activations still held, each storage once, parameters aside
    freed: int = 0  # saved tensors already released by a backward pass
    nodes: int = 0


def _saved_attributes(node: Any) -> tuple[str, ...]:
    tp = type(node)
    names = _SAVED.get(tp)
    if names is None:
        names = _SAVED[tp] = tuple(a for a in dir(tp) if a.startswith("_raw_saved_"))
    return names


def saved_state(roots: list[Any], limit: int = MAX_NODES) -> SavedState:
    """What the graphs behind `roots` (grad_fn nodes) keep, walking at most `limit` nodes."""
    state = SavedState()
    seen_nodes: set[int] = set()
    seen_storage: set[int] = set()
    stack = [r for r in roots if r is not None]
    while stack and state.nodes < limit:
        node = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        state.nodes += 1
        for attr in _saved_attributes(node):
            try:
                raw = getattr(node, attr)
            except Exception:
                continue
            for saved in raw if isinstance(raw, (list, tuple)) else (raw,):
                try:
                    t = saved.data
                except Exception:
                    continue
                if t is None:
                    state.freed += 1
                    continue
                _count(t, state, seen_storage)
        try:
            stack.extend(nf for nf, _ in node.next_functions if nf is not None)
        except Exception:
            continue
    return state


def _count(t: Any, state: SavedState, seen_storage: set[int]) -> None:
    try:
        if meta.requires_grad(t) and meta.grad_fn(t) is None:
            return  # a parameter (or another leaf): kept alive by its owner anyway
        base = meta.base(t)
        owner = base if base is not None else t
        if meta.requires_grad(owner) and meta.grad_fn(owner) is None:
            return  # a view of a parameter (`weight.t()`)
        ptr = meta.data_ptr(owner)
        if ptr in seen_storage:
            return
        seen_storage.add(ptr)
        state.saved_bytes += meta.numel(owner) * meta.element_size(owner)
    except Exception:
        return
