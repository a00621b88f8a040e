"""The namespace scan against hostile and unusual objects: it must neither crash nor touch
them beyond `type()`, must not read tensor values, and must keep nothing alive."""

from __future__ import annotations

import gc
import time
import warnings
import weakref

import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from torchmagic.live.scan import LiveScan, scan_namespace
from torchmagic.run import CellRun


def analyze(scan: LiveScan, ns: dict, raw_cell: str = ""):
    """What the pipeline does after a cell: scan records and live findings, objects released."""
    run = CellRun(ns, raw_cell)
    try:
        findings = scan.analyze(run, [])
    finally:
        run.release()
    return run.report, findings


TOUCHED: list[str] = []


class Hostile:
    """Every protocol a careless inspector might use records the touch, then raises or sleeps."""

    def __getattribute__(self, name):
        TOUCHED.append(f"getattribute:{name}")
        raise RuntimeError("do not touch")

    def __getattr__(self, name):
        TOUCHED.append(f"getattr:{name}")
        raise RuntimeError("do not touch")

    def __repr__(self):
        TOUCHED.append("repr")
        time.sleep(1)
        return "Hostile"

    def __str__(self):
        TOUCHED.append("str")
        raise RuntimeError("do not touch")

    def __len__(self):
        TOUCHED.append("len")
        time.sleep(1)
        return 1

    def __eq__(self, other):
        TOUCHED.append("eq")
        raise RuntimeError("do not touch")

    def __hash__(self):
        return 7

    def __bool__(self):
        TOUCHED.append("bool")
        raise RuntimeError("do not touch")

    def __iter__(self):
        TOUCHED.append("iter")
        raise RuntimeError("do not touch")


class LyingClass:
    """Claims to be a tensor through `__class__`: `isinstance` would believe it."""

    @property
    def __class__(self):
        TOUCHED.append("__class__")
        return torch.Tensor


class HostileList(list):
    def __iter__(self):
        TOUCHED.append("list-subclass-iter")
        raise RuntimeError("do not touch")

    def __len__(self):
        TOUCHED.append("list-subclass-len")
        raise RuntimeError("do not touch")


class CountingSubclass(torch.Tensor):
    """A tensor subclass whose `__torch_function__` records every call that reaches it."""

    calls: list[str] = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


class HostileModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        # nn.Module.__setattr__ itself calls isinstance (which reads __class__): bypass it
        self.__dict__["weird"] = Hostile()
        self.__dict__["weird_list"] = [Hostile(), Hostile()]

    def __getattr__(self, name):  # nn.Module defines one; a hostile override must not run
        TOUCHED.append(f"module-getattr:{name}")
        raise RuntimeError("do not touch")


class OpCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


class CallCounter(TorchFunctionMode):
    """Python-level tensor methods (`tolist` reads memory without reaching the dispatcher)."""

    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


BANNED = (
    "_local_scalar_dense",
    "item",
    "tolist",
    "numpy",
    "to_dense",
    "copy_",
    "_to_copy",
    "__bool__",
    "__repr__",
)


def _gen():
    yield 1
    yield 2


def hostile_namespace() -> dict:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake = torch.empty(3, 4)
    with torch.inference_mode():
        inference = torch.ones(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantized = torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.qint8)
        nested = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)])
        jagged = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], layout=torch.jagged)
        csr = torch.randn(4, 4).to_sparse_csr()
    rec_list: list = []
    rec_list.append(rec_list)
    rec_dict: dict = {}
    rec_dict["self"] = rec_dict
    sub = torch.randn(3).as_subclass(CountingSubclass)
    return {
        "hostile": Hostile(),
        "liar": LyingClass(),
        "hostile_list": HostileList([torch.ones(1)]),
        "in_list": [Hostile(), torch.ones(2), LyingClass()],
        "in_dict": {Hostile(): torch.ones(3), "ok": Hostile()},
        "rec_list": rec_list,
        "rec_dict": rec_dict,
        "gen": _gen(),
        "coo": torch.randn(4, 4).to_sparse(),
        "csr": csr,
        "nested": nested,
        "jagged": jagged,
        "meta": torch.empty(8, 8, device="meta"),
        "fake": fake,
        "sub": sub,
        "param": nn.Parameter(torch.randn(2, 2)),
        "inference": inference,
        "quantized": quantized,
        "empty": torch.empty(0),
        "zero_d": torch.tensor(3.0),
        "view": torch.randn(4, 4)[:, 1],
        "hmod": HostileModule(),
        "typ": torch.Tensor,  # a class, not an instance
    }


def test_scan_survives_hostile_objects_without_touching_them():
    ns = hostile_namespace()
    TOUCHED.clear()
    CountingSubclass.calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the scan must not emit warnings either
        scan = LiveScan()
        first, _ = analyze(scan, ns, "x = 1\n")
        # the next cell's scan takes the cached path for the same objects
        result, _ = analyze(scan, ns)
    assert [r.to_dict() for r in result.tensors] == [{**r.to_dict(), "changed": False} for r in first.tensors]
    assert TOUCHED == []
    assert CountingSubclass.calls == []
    names = {t.name: t for t in result.tensors}
    for expected in [
        "coo",
        "csr",
        "nested",
        "jagged",
        "meta",
        "fake",
        "sub",
        "param",
        "inference",
        "quantized",
        "empty",
        "zero_d",
        "view",
        "in_list[1]",
        "in_dict['<Hostile #0>']".replace("'", ""),
    ]:
        if expected.startswith("in_dict"):
            assert any(n.startswith("in_dict[<Hostile") for n in names)
            continue
        assert expected in names, expected
    assert names["coo"].kind == "sparse_coo" and names["coo"].nbytes > 0
    assert names["csr"].kind == "sparse_csr"
    assert names["nested"].kind == "nested"
    assert names["jagged"].kind == "nested" and names["jagged"].shape == (2, -1, 3)
    assert names["meta"].device == "meta" and names["meta"].storage_key is None
    assert names["fake"].shape == (3, 4) and names["fake"].storage_key is None
    assert names["param"].kind == "parameter"
    assert names["quantized"].kind == "quantized"
    assert names["view"].is_view and names["view"].contiguous is False and names["view"].strides == (4,)
    assert names["zero_d"].shape == ()
    # the HostileList is a list subclass: not entered
    assert not any(n.startswith("hostile_list[") for n in names)
    assert "hmod" in {m.name for m in result.modules}
    # the generator was not advanced
    assert next(ns["gen"]) == 1


def test_scan_caps_huge_containers():
    t = torch.ones(2)
    ns = {"huge": [t] * 1_000_000, "ints": list(range(1_000_000)), "big_dict": {i: t for i in range(200_000)}}
    result, _ = scan_namespace(ns)
    # only the first 1,000 items of a container are looked at (speed: bench/scan_speed.py)
    assert sum(1 for r in result.tensors if r.name.startswith("huge[")) == 1000
    assert sum(1 for r in result.tensors if r.name.startswith("big_dict[")) == 1000


def test_scan_handles_modules_with_thousands_of_submodules():
    big = nn.Sequential(*[nn.Sequential(nn.Linear(2, 2), nn.ReLU()) for _ in range(2500)])
    result, _ = scan_namespace({"big": big})
    (rec,) = result.modules
    assert rec.submodules == 7500
    assert rec.params == 2500 * 6


def test_scan_reads_no_values():
    """No `item`/`_local_scalar_dense`/`tolist` (or any other aten op) on plain tensors."""
    ns = {
        "a": torch.randn(3, 3, requires_grad=True) * 2,
        "b": [torch.randn(2), torch.randn(4)],
        "c": {"w": torch.randn(5)},
        "net": nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3)),
        "p": nn.Parameter(torch.randn(3)),
        "v": torch.randn(4, 4).t(),
    }
    with OpCounter() as counter, CallCounter() as calls:
        analyze(LiveScan(), ns, "a = 1\n")
    assert counter.ops == []
    assert not [c for c in calls.calls if any(b in c for b in BANNED)], calls.calls


def test_scan_reads_no_values_from_unusual_tensors():
    ns = hostile_namespace()
    with OpCounter() as counter, CallCounter() as calls:
        analyze(LiveScan(), ns)
    assert not [op for op in counter.ops if any(b in op for b in BANNED)], counter.ops
    assert not [c for c in calls.calls if any(b in c for b in BANNED)], calls.calls


def test_value_read_detectors_work():
    """The two counters above do see value reads: the tests are not vacuous."""
    t = torch.randn(3)
    with OpCounter() as counter, CallCounter() as calls:
        t[0].item()
        t.tolist()
    assert any("_local_scalar_dense" in op for op in counter.ops)
    assert "tolist" in calls.calls


def test_scan_keeps_no_reference(shell):
    shell.run_cell("import torch\nfrom torch import nn\n")
    shell.run_cell(
        "%%torchcheck\n"
        "kept_t = torch.randn(3)\n"
        "kept_m = nn.Sequential(nn.Linear(2, 2))\n"
        "kept_m.layers = [nn.Linear(2, 2)]\n"  # a TM105 finding remembers its object weakly
        "kept_l = [torch.randn(2) * torch.ones(2, requires_grad=True) for _ in range(3)]\n"
    )
    refs = [weakref.ref(shell.user_ns[n]) for n in ("kept_t", "kept_m")]
    refs.append(weakref.ref(shell.user_ns["kept_l"][0]))
    shell.run_cell("%%torchcheck\ndel kept_t, kept_m, kept_l\n")
    shell.run_cell("1", store_history=True)  # moves `_` and friends on
    for name in ("_", "__", "___"):
        shell.user_ns.pop(name, None)
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


def test_analyzer_keeps_no_reference_directly():
    t = torch.randn(3)
    m = nn.Linear(2, 2)
    m.extra = torch.ones(1)  # TM106: remembered weakly
    ns = {"t": t, "m": m, "xs": [t, t * 2]}
    _, findings = analyze(LiveScan(), ns, "m.extra = torch.ones(1)\n")
    assert any(f.rule == "TM106" for f in findings)
    refs = [weakref.ref(t), weakref.ref(m)]
    del t, m
    ns.clear()
    gc.collect()
    assert [r() for r in refs] == [None, None]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_scan_never_synchronises_cuda():
    """With the sync debug mode set to error, any device synchronisation raises."""
    ns = {
        "a": torch.randn(64, 64, device="cuda", requires_grad=True) * 2,
        "xs": [torch.randn(8, device="cuda") for _ in range(4)],
        "net": nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8)).cuda(),
        "split": nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2).cuda()),
    }
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        scan = LiveScan()
        result, findings = analyze(scan, ns, "a = 1\n")
        analyze(scan, ns)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    recs = {r.name: r for r in result.tensors}
    assert recs["a"].device.startswith("cuda") and recs["a"].storage_key.startswith("cuda")
    assert any(f.rule == "TM205" and f.severity == "info" for f in findings)
