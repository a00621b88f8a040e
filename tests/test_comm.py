"""The sidebar's kernel side: SidebarChannel over the `torchmagic` comm target.

Unit tests use a stand-in comm layer; the last tests drive a real ipykernel through
jupyter_client and look at the comm messages a JupyterLab frontend would receive.
"""

from __future__ import annotations

import json
import queue
import time
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from torchmagic.report import Finding, Report, TensorRecord
from torchmagic.views import comm as sidebar
from torchmagic.views.comm import TARGET, SidebarChannel, report_message


class FakeComm:
    def __init__(self, target_name: str = TARGET, data: Any = None, comm_id: str | None = None) -> None:
        self.target_name = target_name
        self.comm_id = comm_id or uuid.uuid4().hex
        self.open_data = data
        self.sent: list[dict[str, Any]] = []
        self.closed = False
        self._on_msg = None
        self._on_close = None
        self.fail = False

    def send(self, data: dict[str, Any]) -> None:
        if self.fail:
            raise RuntimeError("websocket gone")
        json.dumps(data, allow_nan=False)  # what Jupyter's packer insists on
        self.sent.append(data)

    def on_msg(self, cb: Any) -> None:
        self._on_msg = cb

    def on_close(self, cb: Any) -> None:
        self._on_close = cb

    def close(self) -> None:
        self.closed = True
        if self._on_close:
            self._on_close({})

    def receive(self, data: dict[str, Any]) -> None:
        self._on_msg({"content": {"comm_id": self.comm_id, "data": data}})


class FakeManager:
    def __init__(self) -> None:
        self.targets: dict[str, Any] = {}

    def register_target(self, name: str, f: Any) -> None:
        self.targets[name] = f

    def unregister_target(self, name: str, f: Any) -> Any:
        return self.targets.pop(name)


@pytest.fixture
def comms(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    import comm

    ns = SimpleNamespace(created=[], manager=FakeManager())

    def create_comm(target_name: str = "", data: Any = None, **kw: Any) -> FakeComm:
        c = FakeComm(target_name, data)
        ns.created.append(c)
        return c

    monkeypatch.setattr(comm, "create_comm", create_comm)
    monkeypatch.setattr(comm, "get_comm_manager", lambda: ns.manager)
    return ns


KERNEL_SHELL = SimpleNamespace(kernel=object())


def a_report(cell_id: str | None = "cell-1", **kw: Any) -> Report:
    return Report(
        cell_id=cell_id,
        execution_count=3,
        findings=[Finding("TM101", "tensor-created-in-forward", "warning", 4, 15, "m <b>", "h")],
        tensors=[TensorRecord("x", [3, 4], "float32", "cpu", 48, False, None, False, True)],
        **kw,
    )


def test_outside_a_kernel_the_channel_is_a_no_op(comms) -> None:
    channel = SidebarChannel(SimpleNamespace())  # terminal IPython has no `kernel`
    assert not channel.enabled
    channel.send(a_report())
    channel.close()
    assert comms.created == [] and comms.manager.targets == {}


def test_in_terminal_ipython_it_does_nothing() -> None:
    from IPython.testing.globalipapp import start_ipython

    channel = SidebarChannel(start_ipython() or SimpleNamespace())
    channel.send(a_report())
    channel.close()


def test_load_opens_a_comm_with_hello_and_registers_the_target(comms) -> None:
    channel = SidebarChannel(KERNEL_SHELL)
    (c,) = comms.created
    assert c.target_name == TARGET
    assert c.open_data["type"] == "hello" and c.open_data["channel"] == channel.channel
    assert comms.manager.targets[TARGET] == channel._on_open
    # the panel explains a rule from the catalog the kernel sends
    rules = {r["id"]: r for r in c.open_data["catalog"]}
    assert rules["TM301"]["name"] == "sync-in-loop" and rules["TM301"]["fix"]
    assert rules["TM106"]["evidence"] == ["static", "live"]


def test_send_posts_the_report_dict(comms) -> None:
    SidebarChannel(KERNEL_SHELL).send(a_report())
    (msg,) = comms.created[0].sent
    assert msg["type"] == "report"
    assert msg["report"] == json.loads(json.dumps(a_report().to_dict()))
    assert msg["seq"] == 1


def test_send_replaces_non_finite_numbers(comms) -> None:
    SidebarChannel(KERNEL_SHELL).send(a_report(sync_s=float("nan"), elapsed_s=float("inf")))
    report = comms.created[0].sent[0]["report"]
    assert report["sync_s"] is None and report["elapsed_s"] is None


def test_send_caps_long_lists_and_says_so() -> None:
    report = a_report()
    report.tensors = report.tensors * 12
    msg = report_message(report, max_rows=10)
    assert len(msg["report"]["tensors"]) == 10
    assert msg["truncated"] == {"tensors": 12}


def test_send_never_raises_when_the_frontend_is_gone(comms) -> None:
    channel = SidebarChannel(KERNEL_SHELL)
    comms.created[0].fail = True
    channel.send(a_report())
    channel.close()


def test_a_panel_that_attaches_later_gets_hello_and_recent_reports(comms) -> None:
    channel = SidebarChannel(KERNEL_SHELL)
    channel.send(a_report("a"))
    channel.send(a_report("b"))
    channel.send(a_report("a"))  # checked again: moves to the end, one entry per cell
    late = FakeComm(data={"type": "request"})
    comms.manager.targets[TARGET](late, {"content": {"data": {"type": "request"}}})
    assert [m["type"] for m in late.sent] == ["hello", "report", "report"]
    assert [(m["report"]["cell_id"], m["seq"]) for m in late.sent[1:]] == [("b", 2), ("a", 3)]
    # ... and from then on receives new reports too
    channel.send(a_report("c"))
    assert late.sent[-1]["report"]["cell_id"] == "c"


def test_a_request_message_replays_the_history(comms) -> None:
    channel = SidebarChannel(KERNEL_SHELL)
    channel.send(a_report())
    c = comms.created[0]
    c.receive({"type": "request"})
    assert [m["type"] for m in c.sent] == ["report", "hello", "report"]


def test_history_is_bounded(comms) -> None:
    channel = SidebarChannel(KERNEL_SHELL)
    for i in range(sidebar.HISTORY_SIZE + 5):
        channel.send(a_report(f"cell-{i}"))
    assert len(channel._history) == sidebar.HISTORY_SIZE


def test_close_tells_panels_and_unregisters(comms) -> None:
    channel = SidebarChannel(KERNEL_SHELL)
    c = comms.created[0]
    channel.close()
    assert c.sent[-1]["type"] == "closed" and c.closed
    assert TARGET not in comms.manager.targets
    channel.send(a_report())  # after unload: nothing, no error
    assert c.sent[-1]["type"] == "closed"


def test_a_closed_comm_is_forgotten(comms) -> None:
    channel = SidebarChannel(KERNEL_SHELL)
    comms.created[0].close()  # the frontend closed it (e.g. no panel there)
    channel.send(a_report())
    assert channel._comms == {}


# ---- a real kernel ---------------------------------------------------------------------------
TIMEOUT = 60


@pytest.fixture(scope="module")
def kernel():
    from kernels import running_kernel

    with running_kernel() as kc:
        yield kc


def execute(kc: Any, code: str) -> list[dict[str, Any]]:
    """Run `code`; return the iopub messages up to idle (comm messages have no parent filter)."""
    msg_id = kc.execute(code)
    msgs = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=TIMEOUT)
        except queue.Empty:
            break
        msgs.append(msg)
        if (
            msg["parent_header"].get("msg_id") == msg_id
            and msg["msg_type"] == "status"
            and msg["content"]["execution_state"] == "idle"
        ):
            break
    return msgs


def comm_open_from_frontend(kc: Any, data: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """Open a comm to the kernel's `torchmagic` target, as the panel does after a page reload."""
    comm_id = uuid.uuid4().hex
    msg = kc.session.msg("comm_open", {"comm_id": comm_id, "target_name": TARGET, "data": data})
    kc.shell_channel.send(msg)
    msgs = []
    while True:
        m = kc.get_iopub_msg(timeout=TIMEOUT)
        msgs.append(m)
        if (
            m["parent_header"].get("msg_id") == msg["header"]["msg_id"]
            and m["msg_type"] == "status"
            and m["content"]["execution_state"] == "idle"
        ):
            return comm_id, msgs


CELL = """%%torchcheck
import torch
import torch.nn as nn

class Net(nn.Module):
    def forward(self, x):
        return x * torch.ones(x.shape[-1])

net = Net()
x = torch.randn(3, 4)
net(x).shape
"""


def test_kernel_without_torchmagic_closes_the_panels_comm(kernel) -> None:
    comm_id, msgs = comm_open_from_frontend(kernel, {"type": "request"})
    closes = [m for m in msgs if m["msg_type"] == "comm_close" and m["content"]["comm_id"] == comm_id]
    assert closes, "a kernel without the target must close the comm so the panel can say %load_ext"


def test_kernel_sends_reports_to_the_panel(kernel) -> None:
    msgs = execute(kernel, "%load_ext torchmagic\n%config TorchCheck.display = 'none'")
    (opened,) = [m for m in msgs if m["msg_type"] == "comm_open"]
    assert opened["content"]["target_name"] == TARGET
    assert opened["content"]["data"]["type"] == "hello"
    load_comm = opened["content"]["comm_id"]

    msgs = execute(kernel, CELL)
    sent = [
        m["content"] for m in msgs if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == load_comm
    ]
    (payload,) = [c["data"] for c in sent]
    assert payload["type"] == "report"
    report = payload["report"]
    assert ("TM101", 7) in [(f["rule"], f["line"]) for f in report["findings"]]
    assert isinstance(report["tensors"], list) and isinstance(report["shape_trace"], list)

    # A panel that attaches later (page reload) is answered with hello and the last report.
    comm_id, msgs = comm_open_from_frontend(kernel, {"type": "request"})
    replies = [
        m["content"]["data"]
        for m in msgs
        if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id
    ]
    assert [r["type"] for r in replies] == ["hello", "report"]
    assert replies[1]["seq"] == payload["seq"]

    # Unloading tells both comms, and a later panel is told torchmagic is gone.
    msgs = execute(kernel, "%unload_ext torchmagic")
    closed = {m["content"]["comm_id"] for m in msgs if m["msg_type"] == "comm_close"}
    assert {load_comm, comm_id} <= closed
    comm_id, msgs = comm_open_from_frontend(kernel, {"type": "request"})
    assert any(m["msg_type"] == "comm_close" and m["content"]["comm_id"] == comm_id for m in msgs)


# ---- Apply fix: the widget's button goes through a panel that can edit the cell ------------------
def fixable() -> Finding:
    from torchmagic import check_source

    code = "import torch.nn as nn\nw = nn.Linear(2, 2).weight\nnn.init.normal(w)\n"
    return next(f for f in check_source(code) if f.rule == "TM902")


def test_a_panel_that_announces_apply_fix_makes_the_channel_editable(comms) -> None:
    channel = SidebarChannel(KERNEL_SHELL)
    assert not channel.can_edit  # the comm the kernel opened has announced nothing yet
    opened = comms.created[0]
    opened.receive({"type": "capabilities", "capabilities": ["apply-fix"]})
    assert channel.can_edit
    opened.close()
    assert not channel.can_edit  # its panel went away
    late = FakeComm()
    comms.manager.targets[TARGET](
        late, {"content": {"data": {"type": "request", "capabilities": ["apply-fix"]}}}
    )
    assert channel.can_edit
    channel.close()
    assert not channel.can_edit


def test_apply_fix_sends_the_edits_and_reports_the_panels_answer(comms) -> None:
    channel = SidebarChannel(KERNEL_SHELL)
    viewer, editor = FakeComm(), FakeComm()
    comms.manager.targets[TARGET](viewer, {"content": {"data": {"type": "request"}}})
    comms.manager.targets[TARGET](
        editor, {"content": {"data": {"type": "request", "capabilities": ["apply-fix"]}}}
    )
    answers: list[tuple[bool, str]] = []
    finding = fixable()
    assert channel.apply_fix("cell-9", "CODE", finding, lambda ok, why: answers.append((ok, why)))
    (msg,) = [m for m in editor.sent if m["type"] == "apply-fix"]
    assert not [m for m in viewer.sent if m["type"] == "apply-fix"]  # only to a panel that can edit
    assert msg["cell_id"] == "cell-9" and msg["code"] == "CODE" and msg["rule"] == "TM902"
    assert msg["fix"] == finding.fix.to_dict()  # edits, never code to execute
    assert set(msg) == {"type", "id", "cell_id", "code", "rule", "line", "fix"}
    editor.receive({"type": "fix-result", "id": msg["id"], "ok": False, "reason": "The cell changed"})
    editor.receive({"type": "fix-result", "id": msg["id"], "ok": True})  # a second answer is ignored
    assert answers == [(False, "The cell changed")]


def test_apply_fix_without_an_editing_panel_or_a_cell_id_sends_nothing(comms) -> None:
    channel = SidebarChannel(KERNEL_SHELL)
    assert not channel.apply_fix("cell-1", "CODE", fixable(), lambda ok, why: None)
    comms.created[0].receive({"type": "capabilities", "capabilities": ["apply-fix"]})
    assert not channel.apply_fix(None, "CODE", fixable(), lambda ok, why: None)
    assert not [m for m in comms.created[0].sent if m["type"] == "apply-fix"]
