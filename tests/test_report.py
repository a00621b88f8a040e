"""The report contract: Report.to_dict() shapes and the capped copy saved in notebooks."""

from __future__ import annotations

import json

from torchmagic.report import Finding, Report, ShapeRecord, SyncRecord, TensorRecord
from torchmagic.views.html import REPORT_MIMETYPE, mimebundle


def tensor(name: str, changed: bool, storage: str | None = None, nbytes: int = 24) -> TensorRecord:
    return TensorRecord(
        name, [2, 3], "float32", "cpu", nbytes, False, None, False, changed, storage_key=storage
    )


def test_to_dict_has_the_contract_keys_and_is_json() -> None:
    r = Report(
        cell_id="c1",
        execution_count=3,
        findings=[Finding("TM301", "sync-in-loop", "warning", 3, 13, "m.", "h", None, "static")],
        syncs=[SyncRecord(3, 50, 0.88, {"Tensor.item": 50}, "total += x[i].item()")],
        tensors=[tensor("a", True)],
        shape_trace=[ShapeRecord("net.0", "Linear", 1, [[5, 8]], [[5, 16]], "cpu")],
    )
    d = json.loads(json.dumps(r.to_dict()))
    for key in (
        "cell_id",
        "execution_count",
        "elapsed_s",
        "sync_s",
        "findings",
        "syncs",
        "tensors",
        "modules",
        "shape_trace",
        "memory",
        "errors",
    ):
        assert key in d
    assert d["findings"][0] == {
        "rule": "TM301",
        "name": "sync-in-loop",
        "severity": "warning",
        "line": 3,
        "col": 13,
        "message": "m.",
        "hint": "h",
        "object": None,
        "source": "static",
        "evidence": ["static"],
        "notes": [],
        "fix": None,
    }
    assert d["syncs"][0]["ops"] == {"Tensor.item": 50}
    assert d["tensors"][0]["shape"] == [2, 3] and d["tensors"][0]["changed"] is True
    assert d["shape_trace"][0]["outputs"] == [[5, 16]]
    assert "truncated" not in d


def test_capped_dict_keeps_changed_rows_first_and_says_how_many_there_were() -> None:
    rows = [tensor(f"t{i}", changed=(i % 10 == 0)) for i in range(1000)]
    d = Report(tensors=rows).to_dict(max_rows=150)
    names = [t["name"] for t in d["tensors"]]
    assert len(names) == 150 and d["truncated"] == {"tensors": 1000}
    assert {f"t{i}" for i in range(0, 1000, 10)} <= set(names)  # all 100 changed rows kept
    assert names == sorted(names, key=lambda n: int(n[1:]))  # namespace order kept


def test_memory_totals_count_every_tensor_and_each_storage_once() -> None:
    rows = [
        tensor("a", False, "cpu:0x10", 100),
        tensor("a_view", False, "cpu:0x10", 40),
        tensor("b", False, "cpu:0x20", 8),
    ]
    rows += [tensor(f"x{i}", False, f"cpu:{i}", 1) for i in range(500)]
    d = Report(tensors=rows).to_dict(max_rows=10)
    assert d["memory_by_device"] == {"cpu": 100 + 8 + 500}


def test_notebook_copy_of_the_report_is_capped() -> None:
    r = Report(tensors=[tensor(f"t{i}", False) for i in range(5000)])
    bundle = mimebundle(r, max_rows=200)
    assert len(bundle[REPORT_MIMETYPE]["tensors"]) == 200
    assert bundle[REPORT_MIMETYPE]["truncated"] == {"tensors": 5000}
