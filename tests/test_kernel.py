"""%%torchcheck in a real ipykernel driven by jupyter_client: what a notebook receives."""

from __future__ import annotations

import queue
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

from torchmagic.views.html import REPORT_MIMETYPE

TIMEOUT = 60


@pytest.fixture(scope="module")
def kernel():
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def execute(kc: Any, code: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run `code`; return the execute_reply content and the iopub messages of that request."""
    msg_id = kc.execute(code)
    reply = kc.get_shell_msg(timeout=TIMEOUT)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=TIMEOUT)
    msgs = []
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=TIMEOUT)
        except queue.Empty:
            break
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
        msgs.append(msg)
    return reply["content"], msgs


def reports(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        m["content"]["data"]
        for m in msgs
        if m["msg_type"] == "display_data" and REPORT_MIMETYPE in m["content"].get("data", {})
    ]


CELL = """%%torchcheck
import torch
import torch.nn as nn

class Net(nn.Module):
    def forward(self, x):
        return x * torch.ones(x.shape[-1])

net = Net()
print("ran")
net(torch.randn(2, 3)).shape
"""


def test_kernel_sends_inline_report_after_cell_output(kernel) -> None:
    reply, _ = execute(kernel, "%load_ext torchmagic\n%config TorchCheck.display = 'html'")
    assert reply["status"] == "ok"
    reply, msgs = execute(kernel, CELL)
    assert reply["status"] == "ok"
    kinds = [m["msg_type"] for m in msgs if m["msg_type"] != "status"]
    # the cell's own outputs first (stdout, Out), then the report
    assert kinds.index("stream") < kinds.index("execute_result") < kinds.index("display_data")
    result = next(m for m in msgs if m["msg_type"] == "execute_result")
    assert result["content"]["data"]["text/plain"] == "torch.Size([2, 3])"
    (data,) = reports(msgs)
    report = data[REPORT_MIMETYPE]
    assert [(f["rule"], f["line"]) for f in report["findings"]] == [("TM101", 7)]
    assert "TM101" in data["text/html"] and "line 7" in data["text/html"]
    assert "torchcheck: 1 warning" in data["text/plain"]


def test_kernel_error_cell_still_errors_and_reports(kernel) -> None:
    reply, msgs = execute(kernel, "%%torchcheck\nx = 1\nraise KeyError('k')\n")
    assert reply["status"] == "error" and reply["ename"] == "KeyError"
    tb = "\n".join(reply["traceback"])
    assert "line 3" in tb
    assert len(reports(msgs)) == 1


def test_kernel_escapes_user_text_in_html(kernel) -> None:
    cell = "%%torchcheck\nimport torch\nclass Evil(torch.nn.Module):\n    def forward(self, x):\n        return x.to('cuda:<script>alert(1)</script>')\n"
    reply, msgs = execute(kernel, cell)
    (data,) = reports(msgs)
    assert "<script>" not in data["text/html"]
    assert "&lt;script&gt;" in data["text/html"]


def test_kernel_auto_mode_reports_with_the_frontend_cell_id(kernel) -> None:
    execute(kernel, "%torchcheck on")
    code = (
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return torch.zeros(1)\n"
    )
    # JupyterLab sends the cell's id in the request metadata; the report carries it back.
    msg = kernel.session.msg(
        "execute_request",
        {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False},
        metadata={"cellId": "cell-abc"},
    )
    kernel.shell_channel.send(msg)
    reply = kernel.get_shell_msg(timeout=TIMEOUT)
    assert reply["content"]["status"] == "ok"
    execute(kernel, "%torchcheck off")
    reply, msgs = execute(
        kernel,
        "import torchmagic\nr = torchmagic.last_report()\n(r.cell_id, [(f.rule, f.line) for f in r.findings])",
    )
    (result,) = [m for m in msgs if m["msg_type"] == "execute_result"]
    assert result["content"]["data"]["text/plain"] == "('cell-abc', [('TM101', 4)])"
