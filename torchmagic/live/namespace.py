"""One walk of the user namespace per checked cell: which names hold tensors and modules.

Safety rules, because the namespace holds arbitrary user objects:
- an object is classified by `type(obj)` and `issubclass` only: no `isinstance` (it reads
  `__class__`, which a proxy may override), no `getattr`, `repr`, `len`, `==`, `bool`;
- containers are entered one level deep and only when they are exactly `list`, `tuple` or
  `dict`, through the builtin C iterators, and only their first `MAX_ITEMS` items;
- modules are walked through their instance `__dict__` (`_modules` and plain attributes),
  never through methods or properties a subclass could override;
- each object is handled in its own `try`: a weird one is skipped.

A `NamespaceSnapshot` holds strong references while the cell's report is built (the scan,
the live rules and the runtime records that name modules all read the same one) and drops
them in `release()`.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

MAX_ITEMS = 1000  # items looked at inside one list/tuple/dict
MAX_MODULES = 200_000  # submodules walked per snapshot, all roots together

IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})

_Module = nn.Module
# Attributes every nn.Module instance has: not user attributes.
MODULE_INTERNALS = frozenset(nn.Module().__dict__) | {"_compiled_call_impl"}

TENSOR, MODULE, CONTAINER, OTHER = 1, 2, 3, 0
_MISSING = object()


def _kind(tp: type) -> int:
    if tp is list or tp is tuple or tp is dict:
        return CONTAINER
    if issubclass(tp, types.ModuleType):
        return OTHER
    if issubclass(tp, torch.Tensor):
        return TENSOR
    if issubclass(tp, _Module):
        return MODULE
    return OTHER


def instance_dict(obj: Any) -> dict[str, Any]:
    """`obj.__dict__` without running a `__getattr__`/`__getattribute__` the class defines."""
    d = object.__getattribute__(obj, "__dict__")
    return d if type(d) is dict else {}


def _key_repr(k: Any, i: int) -> str:
    tp = type(k)
    if tp is str or tp is int or tp is bool or tp is float or k is None:
        r = repr(k)
        return r if len(r) <= 40 else r[:37] + "..."
    return f"<{tp.__name__} #{i}>"


def iter_items(container: Any, name: str, max_items: int = MAX_ITEMS) -> Iterator[tuple[str, Any]]:
    """`(xs[3], item)` / `(d['w'], value)` for an exact list, tuple or dict, capped."""
    tp = type(container)
    if tp is dict:
        for i, (k, v) in enumerate(dict.items(container)):
            if i >= max_items:
                return
            yield f"{name}[{_key_repr(k, i)}]", v
    else:
        it = list.__iter__(container) if tp is list else tuple.__iter__(container)
        for i, v in enumerate(it):
            if i >= max_items:
                return
            yield f"{name}[{i}]", v


@dataclass
class NamespaceObjects:
    """What one pass over the namespace found, with strong refs: use, then drop."""

    tensors: list[tuple[str, Any]] = field(default_factory=list)
    modules: list[tuple[str, Any]] = field(default_factory=list)
    # name -> tensors found one level inside that list/tuple/dict
    containers: dict[str, list[Any]] = field(default_factory=dict)
    container_objects: dict[str, Any] = field(default_factory=dict)


def collect(
    ns: dict[str, Any], hidden: dict[str, Any] | None = None, max_items: int = MAX_ITEMS
) -> NamespaceObjects:
    found = NamespaceObjects()
    hidden = hidden or {}
    # Per walk, not global: a global cache would keep classes defined in cells alive.
    kinds: dict[type, int] = {}
    try:
        items = list(dict.items(ns)) if isinstance(ns, dict) else []
    except RuntimeError:  # changed size during iteration (another thread)
        items = []
    for name, value in items:
        try:
            tp = type(value)
            k = kinds.get(tp)
            if k is None:
                k = kinds[tp] = _kind(tp)
            if k == OTHER:
                continue
            if type(name) is not str or not name or name[0] == "_" or name in IPYTHON_NAMES:
                continue
            if hidden and hidden.get(name, _MISSING) is value:
                continue
            if k == TENSOR:
                found.tensors.append((name, value))
            elif k == MODULE:
                found.modules.append((name, value))
            else:
                inner = []
                for item_name, item in iter_items(value, name, max_items):
                    itp = type(item)
                    ik = kinds.get(itp)
                    if ik is None:
                        ik = kinds[itp] = _kind(itp)
                    if ik == TENSOR:
                        found.tensors.append((item_name, item))
                        inner.append(item)
                    elif ik == MODULE:
                        found.modules.append((item_name, item))
                if inner:
                    found.containers[name] = inner
                    found.container_objects[name] = value
        except Exception:
            continue
    return found


@dataclass
class ModuleTree:
    """One root module's subtree, walked through instance dicts (strong refs: transient)."""

    name: str
    root: Any
    # (qualified name, module, depth) in definition order
    nodes: list[tuple[str, Any, int]]
    # filled by `live.modules.module_record`, read by the live rules (one pass over the parameters)
    tensor_ids: set[int] = field(default_factory=set)
    first_on: dict[str, tuple[str, str]] = field(default_factory=dict)  # device -> (module, tensor)
    split_ok: bool = True  # every submodule's own tensors sit on one device


def walk_module(root: Any, name: str, budget: list[int]) -> ModuleTree:
    if budget[0] <= 0:  # past the walk's module budget: the root alone
        return ModuleTree(name, root, [(name, root, 0)])
    nodes: list[tuple[str, Any, int]] = []
    seen = {id(root)}
    stack: list[tuple[str, Any, int]] = [(name, root, 0)]
    while stack and budget[0] > 0:
        qual, m, depth = stack.pop()
        budget[0] -= 1
        nodes.append((qual, m, depth))
        try:
            subs = instance_dict(m).get("_modules")
            if not isinstance(subs, dict) or not subs:
                continue
            children = []
            for k, c in dict.items(subs):
                if c is None or id(c) in seen or not issubclass(type(c), _Module):
                    continue
                seen.add(id(c))
                children.append((f"{qual}.{k}", c, depth + 1))
            stack.extend(reversed(children))
        except Exception:
            continue
    return ModuleTree(name, root, nodes)


def module_trees(found: NamespaceObjects, budget: int = MAX_MODULES) -> list[ModuleTree]:
    """Every namespace module's subtree, biggest first so nested names come from the outermost root."""
    left = [budget]
    trees = []
    seen_roots: set[int] = set()
    for name, m in found.modules:
        if id(m) in seen_roots:
            continue
        seen_roots.add(id(m))
        trees.append(walk_module(m, name, left))
    trees.sort(key=lambda t: -len(t.nodes))
    return trees


class NamespaceSnapshot:
    """The namespace's tensors and modules for one checked cell, walked once, on demand."""

    def __init__(
        self, ns: dict[str, Any], hidden: dict[str, Any] | None = None, max_items: int = MAX_ITEMS
    ) -> None:
        self._ns = ns
        self._hidden = hidden
        self._max_items = max_items
        self._objects: NamespaceObjects | None = None
        self._trees: list[ModuleTree] | None = None
        self._names: dict[int, tuple[str, str]] | None = None

    @property
    def objects(self) -> NamespaceObjects:
        if self._objects is None:
            self._objects = (
                collect(self._ns, self._hidden, self._max_items)
                if isinstance(self._ns, dict)
                else NamespaceObjects()
            )
        return self._objects

    @property
    def trees(self) -> list[ModuleTree]:
        if self._trees is None:
            self._trees = module_trees(self.objects)
        return self._trees

    def module_names(self) -> dict[int, tuple[str, str]]:
        """id(module) -> (the name a user would type, the root's name), outermost root first.

        Modules held in a plain list/dict attribute (the TM105 bug) are named too, as
        `net.layers[0]`: they run in forward passes even though PyTorch does not register them.
        """
        if self._names is not None:
            return self._names
        names: dict[int, tuple[str, str]] = {}
        trees = self.trees
        for tree in trees:
            for qual, m, _ in tree.nodes:
                names.setdefault(id(m), (qual, tree.name))
        budget = [MAX_MODULES]
        for tree in trees:
            for qual, m, _ in tree.nodes:
                try:
                    attrs = [(k, v) for k, v in dict.items(instance_dict(m)) if k not in MODULE_INTERNALS]
                except Exception:
                    continue
                for attr, v in attrs:
                    if type(v) not in (list, tuple, dict) or type(attr) is not str:
                        continue
                    for item_name, item in iter_items(v, f"{qual}.{attr}"):
                        if id(item) in names or not issubclass(type(item), _Module):
                            continue
                        for sub_qual, sub, _ in walk_module(item, item_name, budget).nodes:
                            names.setdefault(id(sub), (sub_qual, tree.name))
        self._names = names
        return names

    def uses_accelerator(self) -> bool:
        """A namespace tensor, or a parameter of a namespace module, on a device other than the
        CPU (meta aside)."""
        device = torch._C.TensorBase.__dict__["device"].__get__
        try:
            for _, t in self.objects.tensors:
                if device(t).type not in ("cpu", "meta"):
                    return True
            for tree in self.trees:
                for _, m, _ in tree.nodes:
                    params = instance_dict(m).get("_parameters")
                    first = (
                        next((p for p in dict.values(params) if p is not None), None)
                        if type(params) is dict
                        else None
                    )
                    if first is not None:
                        if device(first).type not in ("cpu", "meta"):
                            return True
                        break  # one parameter tells where this model is
        except Exception:
            return False
        return False

    def roots(self) -> dict[str, Any]:
        """Namespace name -> module, for the modules the user holds by name."""
        return dict(self.objects.modules)

    def release(self) -> None:
        self._objects = None
        self._trees = None
        self._names = None
        self._ns = {}
        self._hidden = None
