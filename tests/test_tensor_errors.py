"""TM001 and the dry run in a real IPython shell: a failing cell is explained under its own,
unchanged traceback; `%torchshape` and `torchmagic.dry_run` show shapes on the meta device."""

from __future__ import annotations

import pytest
import torch
from IPython.utils.capture import capture_output
from torch.nn.modules import module as nn_module

import torchmagic

MODEL = (
    "import torch\nfrom torch import nn\n"
    "net = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(64, 10))\n"
)


@pytest.fixture
def ip(shell):
    before = set(shell.user_ns)
    shell.run_cell(MODEL, store_history=True)
    yield shell
    for name in set(shell.user_ns) - before:
        shell.user_ns.pop(name, None)


def run(shell, code: str):
    with capture_output() as cap:
        result = shell.run_cell(code, store_history=True)
    return result, cap


def tm001(report):
    return [f for f in report.findings if f.rule == "TM001"]


def test_a_shape_error_names_the_layer_its_input_and_the_fix(ip):
    result, _ = run(ip, "%%torchcheck\nx = torch.randn(32, 1, 28, 28)\nout = net(x)\n")
    (f,) = tm001(torchmagic.last_report())
    assert f.line == 3 and f.severity == "error" and f.object == "net.3"
    assert "`net.3` (Linear 64→10) got input [32, 128] from `net.2`" in f.message
    assert "nn.Linear(128, 10)" in f.hint
    assert any("`x` [32, 1, 28, 28] float32 on cpu" in n for n in f.notes)
    assert isinstance(result.error_in_exec, RuntimeError)


def test_the_traceback_and_error_are_the_ones_of_the_plain_cell(ip):
    plain, _ = run(ip, "x = torch.randn(32, 1, 28, 28)\nout = net(x)\n")
    checked, _ = run(ip, "%%torchcheck\nx = torch.randn(32, 1, 28, 28)\nout = net(x)\n")
    assert type(plain.error_in_exec) is type(checked.error_in_exec)
    assert str(plain.error_in_exec) == str(checked.error_in_exec)
    assert not nn_module._global_forward_hooks and not nn_module._global_forward_pre_hooks


def test_an_error_in_a_forward_from_an_earlier_cell_names_that_cell(ip):
    run(
        ip,
        "class Head(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.proj = nn.Linear(16, 4)\n"
        "        self.calls = 0\n"
        "    def forward(self, x):\n"
        "        self.calls += 1\n"
        "        h = torch.cat([x, x], dim=1)\n"
        "        return self.proj(h)\n"
        "head = Head()\n",
    )
    defined_in = ip.execution_count - 1
    run(ip, "%%torchcheck\ny = head(torch.randn(4, 16))\n")
    (f,) = tm001(torchmagic.last_report())
    assert f.line == 2 and "`head.proj` (Linear 16→4) got input [4, 32]" in f.message
    assert any(f"cell [{defined_in}]" in n and "`forward`" in n for n in f.notes), f.notes
    assert ip.user_ns["head"].calls == 1  # explaining ran nothing of the user's again


def test_device_and_dtype_errors_are_explained_too(ip):
    run(ip, "%%torchcheck\nout = net(torch.randn(8, 784, dtype=torch.float64).view(8, 1, 28, 28))\n")
    (f,) = tm001(torchmagic.last_report())
    assert "float64" in f.message and ".float()" in f.hint
    run(ip, "%%torchcheck\nlayer = nn.Linear(3, 4, device='meta')\ny = layer(torch.randn(2, 3))\n")
    (f,) = tm001(torchmagic.last_report())
    assert "meta" in f.message and "cpu" in f.message and f.line == 3


def test_errors_that_are_not_about_tensors_get_no_TM001(ip):
    run(ip, "%%torchcheck\nd = {}\nd['missing']\n")
    assert tm001(torchmagic.last_report()) == []


def test_without_the_shape_trace_the_frames_still_explain_it(ip):
    run(ip, "%%torchcheck --no-trace\nout = net(torch.randn(32, 1, 28, 28))\n")
    (f,) = tm001(torchmagic.last_report())
    assert "[32, 128]" in f.message


def test_torchshape_runs_on_meta_and_stops_at_the_bad_layer(ip):
    weight = ip.user_ns["net"][1].weight
    ptr, version = weight.data_ptr(), weight._version
    with capture_output() as cap:
        ip.run_cell("%torchshape net(torch.randn(100_000, 1, 28, 28))", store_history=True)
    (shown,) = cap.outputs
    text = shown.data["text/plain"]
    assert "<table>" in shown.data["text/html"]
    assert "net.1" in text and "[100000, 784]" in text
    assert "stopped:" in text and "`net.3` (Linear 64→10)" in text
    assert (weight.data_ptr(), weight._version) == (ptr, version) and weight.device.type == "cpu"


def test_dry_run_api_displays_and_reads_through(ip):
    ok = torchmagic.dry_run(torch.nn.Sequential(torch.nn.Linear(4, 2)), torch.randn(3, 4))
    assert ok.ok and ok.outputs == [[3, 2]] and ok.records[0].device == "meta"
    bundle = ok._repr_mimebundle_()
    assert "text/html" in bundle and "<table>" in bundle["text/html"]


def test_a_dry_run_inside_a_checked_cell_leaves_the_cells_trace_alone(ip):
    run(
        ip,
        "%%torchcheck\ninfo = torchmagic.dry_run(net, torch.randn(2, 784))\n".replace(
            "torchmagic.", "__import__('torchmagic')."
        ),
    )
    trace = torchmagic.last_report().shape_trace
    assert trace == []  # the meta copy's modules are not the user's forward passes


def test_torchshape_usage_errors_are_one_line(ip):
    with capture_output() as cap:
        ip.run_cell("%torchshape not a call", store_history=True)
    assert cap.stderr.strip().startswith("usage: %torchshape")


def _user_frames(exc: BaseException) -> list[tuple[str, int, str, str]]:
    """The frames a user reads as theirs: cells and functions defined in cells, not torch's."""
    import traceback

    out = []
    for fs in traceback.extract_tb(exc.__traceback__):
        if "site-packages" in fs.filename or "/torch/" in fs.filename:
            continue
        cell = "cell" if ("ipython-input" in fs.filename or fs.filename.startswith("<")) else fs.filename
        out.append((cell, fs.lineno, fs.name, fs.line or ""))
    return out


def test_an_error_inside_forward_keeps_type_message_and_every_user_frame(ip):
    """Global forward hooks (the shape trace) send module calls through PyTorch's hooked path,
    which adds one torch-internal frame (`Module._call_impl.<locals>.inner`): the traceback is
    not byte-identical, so this is the promise, and README says so."""
    run(
        ip,
        "class Block(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(8, 8)\n"
        "    def forward(self, x):\n"
        "        h = self.fc(x)\n"
        "        return h.view(3, 5)\n"
        "deep = nn.Sequential(nn.Sequential(Block()))\n",
    )
    plain, _ = run(ip, "y = deep(torch.randn(2, 8))\n")
    checked, _ = run(ip, "%%torchcheck\ny = deep(torch.randn(2, 8))\n")
    a, b = plain.error_in_exec, checked.error_in_exec
    assert type(a) is type(b) and str(a) == str(b)
    frames_plain, frames_checked = _user_frames(a), _user_frames(b)
    # the checked cell's own first line is the `%%torchcheck` line: its code is one line down
    assert [(n, code) for _, _, n, code in frames_plain] == [(n, code) for _, _, n, code in frames_checked]
    assert [ln for _, ln, n, _ in frames_plain if n != "<module>"] == [
        ln for _, ln, n, _ in frames_checked if n != "<module>"
    ]
    torch_frames = [
        fs.name for fs in __import__("traceback").extract_tb(b.__traceback__) if "/torch/" in fs.filename
    ]
    assert set(torch_frames) <= {"_wrapped_call_impl", "_call_impl", "inner", "forward", "view"}
