"""The sync probe in a real ipykernel: cells are temp files (/tmp/ipykernel_N/HASH.py) there."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from kernels import execute as run_in_kernel
from kernels import running_kernel


@pytest.fixture(scope="module")
def kernel():
    with running_kernel() as kc:
        yield kc


def execute(kc: Any, code: str) -> tuple[dict[str, Any], str]:
    """Run `code`; return the execute_reply content and the cell's stdout."""
    ex = run_in_kernel(kc, code)
    return ex.reply, ex.stdout


def last_report(kc: Any) -> dict[str, Any]:
    reply, out = execute(kc, "import json, torchmagic\nprint(json.dumps(torchmagic.last_report().to_dict()))")
    assert reply["status"] == "ok", reply
    return json.loads(out.strip().splitlines()[-1])


def test_kernel_reports_item_loop_and_earlier_cell_function(kernel) -> None:
    setup = (
        "%load_ext torchmagic\n%config TorchCheck.display = 'none'\n"
        "%config TorchCheck.sync_devices = ['cpu']\n"
    )
    reply, _ = execute(kernel, setup)
    assert reply["status"] == "ok", reply
    reply, _ = execute(kernel, "import torch\ndef as_list(t):\n    return t.tolist()\n")
    assert reply["status"] == "ok"
    cell = (
        "%%torchcheck\nx = torch.randn(64)\ntotal = 0.0\nfor i in range(50):\n"
        "    total += x[i].item()\nvals = as_list(x)\nprint('done')\n"
    )
    for _ in range(2):  # a re-run has the same temp-file name in ipykernel
        reply, out = execute(kernel, cell)
        assert reply["status"] == "ok", reply
        assert out == "done\n"
        syncs = last_report(kernel)["syncs"]
        assert [(s["line"], s["count"], s["ops"], s["code"]) for s in syncs] == [
            (5, 50, {"Tensor.item": 50}, "total += x[i].item()"),
            (6, 1, {"Tensor.tolist": 1}, "vals = as_list(x)"),
        ]
    # nothing left active in the kernel after the checked cell
    reply, out = execute(kernel, "print(torch._C._is_torch_function_mode_enabled())")
    assert out.strip() == "False"


def test_kernel_error_cell_reports_syncs_and_cleans_up(kernel) -> None:
    reply, _ = execute(kernel, "%%torchcheck\nx = torch.ones(3)\nx[0].item()\nraise ValueError('x')\n")
    assert reply["status"] == "error"
    assert [(s["line"], s["count"]) for s in last_report(kernel)["syncs"]] == [(3, 1)]
    reply, out = execute(kernel, "print(torch._C._is_torch_function_mode_enabled())")
    assert out.strip() == "False"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_call_that_starts_cuda_is_not_charged_as_a_wait() -> None:
    """The notebook's first `.cuda()` takes CUDA's start-up (hundreds of ms), but no GPU work can
    be queued before CUDA starts: it is no wait, and no TM303. The next read is one."""
    with running_kernel() as kc:
        reply, _ = execute(kc, "%load_ext torchmagic\n%config TorchCheck.display = 'none'\nimport torch\n")
        assert reply["status"] == "ok", reply
        cell = (
            "%%torchcheck\nprint(torch.cuda.is_initialized())\nw = torch.randn(2048, 2048).cuda()\n"
            "for _ in range(20):\n    w = w @ w / 2048\nv = w.sum().item()\n"
        )
        reply, out = execute(kc, cell)
        assert reply["status"] == "ok", reply
        assert out == "False\n"
        report = last_report(kc)
        assert [(s["line"], s["ops"]) for s in report["syncs"]] == [(6, {"Tensor.item": 1})]
        assert not [f for f in report["findings"] if f["rule"] == "TM303" and f["line"] == 3]
