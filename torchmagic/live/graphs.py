"""How much memory autograd graphs still keep: the tensors their nodes saved for backward.

A graph that `.backward()` already went through has released its saved tensors (unless
`retain_graph=True`): what is left is a handful of small node objects. One that was never
back-propagated keeps every activation it saved. Reading this must not run user code: a
saved tensor's `unpack` may run a hook (under `torch.utils.checkpoint` it re-runs the
forward), so only `SavedTensor.data` is read, the stored value as it is, which is None once
freed. Tensor sizes come from metadata readers; no value is read.

Several roots are walked one after the other, and roots whose graphs share a node (other than
a leaf's `AccumulateGrad`, which every step on the same parameters shares) form one graph:
the loss terms of one forward pass, or the tuple one forward returns, are one graph; the
outputs of three forward passes are three.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import meta

MAX_NODES = 5000  # graph nodes looked at per question
_SAVED: dict[type, tuple[str, ...]] = {}  # node type -> its `_raw_saved_*` attributes
_LEAF: dict[type, bool] = {}  # node type -> is it a leaf's AccumulateGrad


@dataclass
class SavedState:
    saved_bytes: int = 0  # saved activations still held, each storage once, parameters aside
    freed: int = 0  # saved tensors already released by a backward pass
    nodes: int = 0
    # saved bytes per separate graph (roots whose graphs share a node are one graph)
    graphs: list[int] = field(default_factory=list)

    @property
    def beyond_largest(self) -> int:
        """What the graphs keep beyond the biggest one: the memory that grows with each step."""
        return self.saved_bytes - max(self.graphs, default=0)


def _saved_attributes(node: Any) -> tuple[str, ...]:
    tp = type(node)
    names = _SAVED.get(tp)
    if names is None:
        names = _SAVED[tp] = tuple(a for a in dir(tp) if a.startswith("_raw_saved_"))
    return names


def _is_leaf(node: Any) -> bool:
    tp = type(node)
    leaf = _LEAF.get(tp)
    if leaf is None:
        leaf = _LEAF[tp] = tp.__name__ == "AccumulateGrad"
    return leaf


def storage_key(t: Any) -> int | None:
    """The data pointer of the storage a tensor's memory belongs to (its base's for a view)."""
    try:
        b = meta.base(t)
        return meta.data_ptr(b if b is not None else t)
    except Exception:
        return None


def saved_state(roots: list[Any], limit: int = MAX_NODES, held: Iterable[int] = ()) -> SavedState:
    """What the graphs behind `roots` (grad_fn nodes) keep, walking at most `limit` nodes.

    `held`: storages (`storage_key`) that something else keeps alive anyway, such as the
    tensors the container itself holds (a `sigmoid` saves its own output) or namespace
    tensors: not counted as memory the graphs keep."""
    state = SavedState()
    seen_storage: set[int] = set(held)
    owner: dict[int, int] = {}  # id(node) -> index of the root whose walk reached it first
    keep: list[Any] = []  # node wrappers stay alive during the walk, so that ids stay unique
    parent = list(range(len(roots)))
    per_root = [0] * len(roots)

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, root in enumerate(roots):
        if root is None:
            continue
        stack = [root]
        while stack and state.nodes < limit:
            node = stack.pop()
            first = owner.get(id(node))
            if first is not None:
                if not _is_leaf(node):
                    a, b = find(i), find(first)
                    if a != b:
                        parent[a] = b
                continue
            owner[id(node)] = i
            keep.append(node)
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
                    per_root[i] += _count(t, seen_storage)
            try:
                stack.extend(nf for nf, _ in node.next_functions if nf is not None)
            except Exception:
                continue
    groups: dict[int, int] = {}
    for i, root in enumerate(roots):
        if root is not None:
            r = find(i)
            groups[r] = groups.get(r, 0) + per_root[i]
    state.graphs = [b for b in groups.values() if b > 0]
    state.saved_bytes = sum(per_root)
    return state


def _count(t: Any, seen_storage: set[int]) -> int:
    try:
        if meta.requires_grad(t) and meta.grad_fn(t) is None:
            return 0  # a parameter (or another leaf): kept alive by its owner anyway
        base = meta.base(t)
        owner = base if base is not None else t
        if meta.requires_grad(owner) and meta.grad_fn(owner) is None:
            return 0  # a view of a parameter (`weight.t()`)
        ptr = meta.data_ptr(owner)
        if ptr in seen_storage:
            return 0
        seen_storage.add(ptr)
        return meta.numel(owner) * meta.element_size(owner)
    except Exception:
        return 0
