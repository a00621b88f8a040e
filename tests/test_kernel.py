"""%%torchcheck in a real ipykernel driven by jupyter_client: what a notebook receives."""

from __future__ import annotations

from typing import Any

import pytest
from kernels import execute, running_kernel

from torchmagic.views.html import REPORT_MIMETYPE


@pytest.fixture(scope="module")
def kernel():
    with running_kernel() as kc:
        yield kc


def run(kc: Any, code: str, **kw: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    ex = execute(kc, code, **kw)
    return ex.reply, ex.msgs


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
    reply, _ = run(kernel, "%load_ext torchmagic\n%config TorchCheck.display = 'html'")
    assert reply["status"] == "ok"
    reply, msgs = run(kernel, CELL)
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
    reply, msgs = run(kernel, "%%torchcheck\nx = 1\nraise KeyError('k')\n")
    assert reply["status"] == "error" and reply["ename"] == "KeyError"
    tb = "\n".join(reply["traceback"])
    assert "line 3" in tb
    assert len(reports(msgs)) == 1


def test_kernel_escapes_user_text_in_html(kernel) -> None:
    cell = "%%torchcheck\nimport torch\nclass Evil(torch.nn.Module):\n    def forward(self, x):\n        return x.to('cuda:<script>alert(1)</script>')\n"
    reply, msgs = run(kernel, cell)
    (data,) = reports(msgs)
    assert "<script>" not in data["text/html"]
    assert "&lt;script&gt;" in data["text/html"]


def test_kernel_auto_mode_reports_with_the_frontend_cell_id(kernel) -> None:
    run(kernel, "%torchcheck on")
    code = (
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return torch.zeros(1)\n"
    )
    # JupyterLab sends the cell's id in the request metadata; the report carries it back.
    reply, _ = run(kernel, code, metadata={"cellId": "cell-abc"})
    assert reply["status"] == "ok"
    run(kernel, "%torchcheck off")
    reply, msgs = run(
        kernel,
        "import torchmagic\nr = torchmagic.last_report()\n(r.cell_id, [(f.rule, f.line) for f in r.findings])",
    )
    (result,) = [m for m in msgs if m["msg_type"] == "execute_result"]
    assert result["content"]["data"]["text/plain"] == "('cell-abc', [('TM101', 4)])"


HELPER_MODEL = """%%torchcheck
import torch
import torch.nn as nn

def make_layers(n):
    return [nn.Linear(8, 8) for _ in range(n)]

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = make_layers(2)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)

net = Net()
batch = torch.randn(5, 8)
out = net(batch)
"""


def test_kernel_live_view_of_a_helper_built_model(kernel) -> None:
    """Issue #4's 'done when': TM105 names the attribute, tensors and per-layer shapes shown."""
    run(kernel, "%load_ext torchmagic")
    reply, msgs = run(kernel, HELPER_MODEL)
    assert reply["status"] == "ok"
    (data,) = reports(msgs)
    report = data[REPORT_MIMETYPE]
    tm105 = [f for f in report["findings"] if f["rule"] == "TM105"]
    # static analysis cannot see what make_layers returns; the live scan can, and points at
    # the assignment in __init__, where the fix goes
    assert [(f["object"], f["source"], f["line"]) for f in tm105] == [
        ("net.layers", "live", 11)  # `self.layers = make_layers(2)`
    ]  # `net = Net()`
    tensors = {t["name"]: (t["shape"], t["device"], t["changed"]) for t in report["tensors"]}
    assert tensors["batch"] == ([5, 8], "cpu", True) and tensors["out"] == ([5, 3], "cpu", True)
    trace = {s["module"]: (s["inputs"], s["outputs"], s["calls"]) for s in report["shape_trace"]}
    assert trace["net.layers[0]"] == ([[5, 8]], [[5, 8]], 1)
    assert trace["net.head"] == ([[5, 8]], [[5, 3]], 1)
    assert trace["net"][1] == [[5, 3]]


LOOP = """%%torchcheck
from IPython.display import clear_output
import torch
from torch.autograd import Variable
x = Variable(torch.ones(2))
for step in range(3):
    print(f"loss {step}")
    clear_output(wait=True)
"""


def test_a_pending_clear_output_does_not_let_the_report_erase_the_last_line(kernel) -> None:
    """`clear_output(wait=True)` clears when the next output arrives: the report must not be
    that output, or the user's final progress line disappears. It still reaches the sidebar."""
    run(kernel, "%load_ext torchmagic\n%config TorchCheck.display = 'html'")
    reply, msgs = run(kernel, LOOP)
    assert reply["status"] == "ok"
    kinds = [m["msg_type"] for m in msgs if m["msg_type"] not in ("status", "comm_msg", "comm_open")]
    assert kinds[-1] == "clear_output" and not reports(msgs)
    sidebar = [m["content"]["data"] for m in msgs if m["msg_type"] == "comm_msg"]
    assert any(d.get("type") == "report" and d["report"]["findings"] for d in sidebar)
    # output after the clear consumes it: then the report is shown as usual
    reply, msgs = run(kernel, LOOP + 'print("done")\n')
    assert len(reports(msgs)) == 1
    reply, msgs = run(kernel, LOOP.replace("wait=True", "wait=False"))
    assert len(reports(msgs)) == 1
