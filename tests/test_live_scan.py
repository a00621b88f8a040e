"""Records of the live scan: what a tensor/module row says, names, `changed`, totals."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchmagic.live.cell import cell_names
from torchmagic.live.namespace import NamespaceSnapshot
from torchmagic.live.scan import scan_namespace
from torchmagic.report import Report
from torchmagic.run import CellRun
from torchmagic.runtime.memory import CudaMemoryProbe


def _records(ns, raw_cell="", previous=None):
    result, ids = scan_namespace(ns, raw_cell=raw_cell, previous=previous)
    return {t.name: t for t in result.tensors}, {m.name: m for m in result.modules}, ids


def test_tensor_record_metadata():
    a = torch.randn(3, 4, requires_grad=True)
    b = (a * 2).t()
    tensors, _, _ = _records({"a": a, "b": b, "i": torch.arange(6, dtype=torch.int64)})
    ra, rb, ri = tensors["a"], tensors["b"], tensors["i"]
    assert (ra.shape, ra.dtype, ra.device, ra.nbytes) == ((3, 4), "float32", "cpu", 48)
    assert ra.requires_grad and ra.grad_fn is None and not ra.is_view
    assert ra.strides == (4, 1) and ra.contiguous
    assert rb.shape == (4, 3) and rb.grad_fn == "TBackward0" and rb.is_view and rb.contiguous is False
    assert ri.dtype == "int64" and ri.nbytes == 48


def test_names_inside_containers_are_how_a_user_types_them():
    t = torch.ones(2)
    ns = {"xs": [t, 3, "a", t], "d": {"w": t, 5: t, (1, 2): t}, "tup": (None, t), "_hidden": t, "In": [t]}
    tensors, _, _ = _records(ns)
    assert set(tensors) == {"xs[0]", "xs[3]", "d['w']", "d[5]", "d[<tuple #2>]", "tup[1]"}


def test_module_record():
    net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
    net[2].weight.requires_grad_(False)
    net.eval()
    _, modules, _ = _records({"net": net})
    m = modules["net"]
    assert m.type == "Sequential" and m.submodules == 3
    assert m.params == 4 * 8 + 8 + 8 + 8 + 8 * 2 + 2
    assert m.trainable == m.params - 16
    assert m.devices == ["cpu"] and m.dtypes == ["float32"] and m.training is False
    # parameters + buffers (running_mean, running_var, num_batches_tracked)
    assert m.nbytes == m.params * 4 + 8 * 4 * 2 + 8


def test_tied_weights_counted_once():
    emb = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    _, modules, _ = _records({"lm": nn.Sequential(emb, head)})
    assert modules["lm"].params == 40


def test_changed_first_scan_uses_the_cells_assignments():
    ns = {"old": torch.ones(1), "new": torch.ones(1)}
    tensors, _, _ = _records(ns, raw_cell="%%torchcheck\nnew = torch.ones(1)\n")
    assert tensors["new"].changed and not tensors["old"].changed


def test_changed_compares_identity_with_the_previous_scan():
    keep, swap = torch.ones(1), torch.ones(1)
    ns = {"keep": keep, "swap": swap, "xs": [keep]}
    _, _, ids = _records(ns)
    ns["swap"] = torch.ones(1)
    keep.add_(1)  # in place: same object, not changed
    ns["added"] = torch.ones(1)
    tensors, _, _ = _records(ns, previous=ids)
    assert tensors["swap"].changed and tensors["added"].changed
    assert not tensors["keep"].changed and not tensors["xs[0]"].changed


def test_memory_by_device_counts_shared_storage_once():
    base = torch.zeros(100)
    tensors, _, _ = _records({"base": base, "alias": base, "copy": base.clone()})
    report = Report(tensors=list(tensors.values()))
    assert report.memory_by_device() == {"cpu": 800}


def test_meta_tensors_are_totalled_without_storage_keys():
    tensors, _, _ = _records({"m1": torch.empty(10, device="meta"), "m2": torch.empty(10, device="meta")})
    assert Report(tensors=list(tensors.values())).memory_by_device() == {"meta": 80}


def test_module_names_prefer_the_outermost_root_and_name_plain_list_members():
    enc = nn.Sequential(nn.Linear(2, 2))
    net = nn.Sequential(enc, nn.ReLU())
    net.extra = [nn.Linear(2, 2)]
    names = NamespaceSnapshot({"enc": enc, "net": net}).module_names()
    assert names[id(enc[0])] == ("net.0.0", "net")
    assert names[id(net.extra[0])] == ("net.extra[0]", "net")


def test_cell_names_lines():
    cell = (
        "%%torchcheck\n"
        "net = Net()\n"
        "a, (b, c) = 1, (2, 3)\n"
        "for i in range(3):\n"
        "    losses.append(i)\n"
        "def f():\n"
        "    inner = 1\n"
        "d['k'] = 5\n"
        "!ls\n"
        "total += 1\n"
    )
    names = cell_names(cell)
    assert names.assigned["net"] == 2 and names.assigned["c"] == 3 and names.assigned["i"] == 4
    assert names.line_of("losses") == 5 and names.line_of("d['k']") == 8
    assert "inner" not in names.assigned and names.assigned["f"] == 6
    assert names.assigned["total"] == 10
    assert names.line_of("net.layers") == 2


def test_cell_names_tell_which_lines_ran_before_an_error():
    cell = (
        "a = 1\n"  # 1
        "for i in range(3):\n"  # 2
        "    b = f(i)\n"  # 3: raises (the top-level line the cell stopped at)
        "    outs.append(b)\n"  # 4
        "with ctx:\n"  # 5
        "    c = [\n"  # 6
        "        g(x),\n"  # 7
        "    ]\n"  # 8
        "class K:\n"  # 9
        "    def __init__(self):\n"  # 10
        "        self.t = 1\n"  # 11
    )
    names = cell_names(cell)
    assert names.reached(1, 3)  # before the error
    assert names.reached(2, 3)  # the loop around it: its header ran
    assert names.reached(3, 3) and names.reached(4, 3)  # same loop: earlier iterations may have
    assert not names.reached(5, 3) and not names.reached(9, 3) and not names.reached(11, 3)
    assert names.reached(5, 7)  # the `with` around the statement that raised
    assert not names.reached(6, 7)  # the assignment that raised never bound `c`
    assert names.reached(11, 12) and not names.reached(11, 9)  # a class body that raised: no class


def test_cuda_memory_probe_never_initialises_cuda():
    probe = CudaMemoryProbe()
    run = CellRun({}, "")
    was_initialised = torch.cuda.is_initialized()
    probe.start(run)
    probe.stop(run)
    probe.collect(run)
    assert torch.cuda.is_initialized() == was_initialised
    if not was_initialised:
        assert run.report.memory.allocated_after is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_memory_probe_reports_the_cells_allocation():
    torch.zeros(1, device="cuda")  # initialise
    probe = CudaMemoryProbe()
    run = CellRun({}, "")
    probe.start(run)
    big = torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda")
    probe.stop(run)
    probe.collect(run)
    mem = run.report.memory
    assert mem.device.startswith("cuda") and mem.allocated_after - mem.allocated_before >= 64 * 2**20
    del big


def test_unchanged_tensor_keeps_its_record_until_its_metadata_changes():
    a, b, c, d, e = (torch.zeros(4, 4) for _ in range(5))
    ns = {"a": a, "b": b, "c": c, "d": d, "e": e, "inf": torch.ones(1)}
    first, ids = scan_namespace(ns, raw_cell="a = 1\n")
    assert next(r for r in first.tensors if r.name == "a").changed
    b.t_()  # in place: version bump
    c.data = torch.zeros(2, dtype=torch.float64)  # no version bump: pointer, size, dtype change
    d.requires_grad_()
    e.resize_(2, 8)
    second, _ = scan_namespace(ns, previous=ids, cache=first.cache)
    recs = {r.name: r for r in second.tensors}
    assert recs["b"].strides == (1, 4) and recs["b"].contiguous is False
    assert recs["c"].shape == (2,) and recs["c"].dtype == "float64"
    assert recs["d"].requires_grad
    assert recs["e"].shape == (2, 8)
    assert not recs["a"].changed and recs["a"].shape == (4, 4)  # reused, and no longer "changed"
    assert not any(r.changed for r in second.tensors)


def test_record_refreshed_after_a_same_size_dtype_swap_through_data():
    t = torch.zeros(4)
    ns = {"t": t}
    first, ids = scan_namespace(ns)
    t.data = t.data.view(torch.int32)  # same pointer, sizes, strides and version
    second, _ = scan_namespace(ns, previous=ids, cache=first.cache)
    assert second.tensors[0].dtype == "int32"
