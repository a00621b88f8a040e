"""The sync probe in a real InteractiveShell with real torch.

`sync_devices = ["cpu"]` makes CPU tensors stand in for device tensors, so the function mode
and the whole attribution/report path run here. The CUDA side's explicit syncs
(`torch.cuda.synchronize`, `Stream`/`Event.synchronize`) are stood in by fakes that sleep:
the probe wraps whatever is there for the cell and puts it back.
"""

from __future__ import annotations

import threading
import time
import warnings
from contextlib import contextmanager

import pytest
import torch
from IPython.utils.capture import capture_output

import torchmagic
from torchmagic.extension import TorchCheck
from torchmagic.pipeline import CellCheck
from torchmagic.run import CellRun, CheckOptions
from torchmagic.runtime.sync import OP_NAMES, SyncProbe, sync_device


@contextmanager
def configured(shell, **values):
    """`%config TorchCheck.<name> = <value>` for each, as a user types it; each back to its
    default afterwards."""
    for name, value in values.items():
        shell.run_cell(f"%config TorchCheck.{name} = {value!r}", store_history=False)
    try:
        yield shell
    finally:
        for name in values:
            default = TorchCheck.class_traits()[name].default_value
            shell.run_cell(f"%config TorchCheck.{name} = {default!r}", store_history=False)


@pytest.fixture
def cpu_shell(shell):
    with configured(shell, sync_devices=["cpu"]):
        shell.run_cell("import torch", store_history=True)
        yield shell


def checked(shell, body: str):
    """Run `body` as a %%torchcheck cell; its line N is body line N - 1."""
    with capture_output() as cap:
        result = shell.run_cell("%%torchcheck\n" + body, store_history=True)
    return result, torchmagic.last_report(), cap


def syncs_by_line(report) -> dict[int, object]:
    return {s.line: s for s in report.syncs}


def assert_probe_gone() -> None:
    """Nothing of the probe is left: every wrapped entry point is the original again."""
    for name in OP_NAMES.values():
        owner, attr = name.split(".", 1)
        assert not hasattr(getattr(torch.Tensor if owner == "Tensor" else torch, attr), "__wrapped__"), name
    assert "item" not in torch.Tensor.__dict__ and "__bool__" not in torch.Tensor.__dict__
    assert not hasattr(torch.cuda.synchronize, "__wrapped__")


# --- attribution -------------------------------------------------------------------------------


def test_item_in_loop_reports_count_50_at_its_line(cpu_shell) -> None:
    _, report, _ = checked(
        cpu_shell,
        "x = torch.randn(100)\ntotal = 0.0\nfor i in range(50):\n    total += x[i].item()\ntotal\n",
    )
    rec = syncs_by_line(report)[5]
    assert rec.count == 50
    assert rec.ops == {"Tensor.item": 50}
    assert rec.code == "total += x[i].item()"
    assert [s.line for s in report.syncs] == [5]
    assert report.sync_s == pytest.approx(rec.seconds)
    assert rec.seconds > 0
    assert report.to_dict()["syncs"][0]["count"] == 50


def test_print_in_loop_attributed_to_the_print_line(cpu_shell) -> None:
    _, report, cap = checked(cpu_shell, "t = torch.arange(3)\nfor _ in range(4):\n    print(t)\n")
    assert cap.stdout.count("tensor([0, 1, 2])") == 4
    assert [(s.line, s.count, s.ops) for s in report.syncs] == [(4, 4, {"Tensor.__repr__": 4})]


def test_function_from_earlier_cell_is_attributed_to_the_calling_line(cpu_shell) -> None:
    cpu_shell.run_cell("def as_list(t):\n    out = t.tolist()\n    return out\n", store_history=True)
    _, report, _ = checked(cpu_shell, "x = torch.ones(3)\n\nvals = as_list(x)\n")
    assert [(s.line, s.count, s.ops, s.code) for s in report.syncs] == [
        (4, 1, {"Tensor.tolist": 1}, "vals = as_list(x)")
    ]


def test_function_defined_in_the_cell_is_attributed_to_its_own_line(cpu_shell) -> None:
    _, report, _ = checked(cpu_shell, "def f(t):\n    return t.sum().item()\n\nf(torch.ones(2))\n")
    assert [(s.line, s.count) for s in report.syncs] == [(3, 1)]


def test_magic_called_programmatically_attributes_to_body_lines(cpu_shell) -> None:
    body = "x = torch.ones(3)\nfor i in range(3):\n    x[i].item()\n"
    cpu_shell.run_cell(f"get_ipython().run_cell_magic('torchcheck', '', {body!r})", store_history=True)
    report = torchmagic.last_report()
    assert [(s.line, s.count, s.code) for s in report.syncs] == [(4, 3, "x[i].item()")]


def test_rerun_of_the_same_cell_is_attributed_again(cpu_shell) -> None:
    body = "x = torch.ones(3)\nfor i in range(3):\n    x[i].item()\n"
    for _ in range(2):
        _, report, _ = checked(cpu_shell, body)
        assert [(s.line, s.count) for s in report.syncs] == [(4, 3)]


def test_auto_mode_cells_are_attributed_like_magic_cells(cpu_shell) -> None:
    cpu_shell.run_cell("%torchcheck on", store_history=False)
    try:
        with capture_output():
            cpu_shell.run_cell("x = torch.ones(3)\nfor i in range(3):\n    x[i].item()\n", store_history=True)
    finally:
        cpu_shell.run_cell("%torchcheck off", store_history=False)
    assert [(s.line, s.count) for s in torchmagic.last_report().syncs] == [(3, 3)]


def test_cell_without_syncs_reports_none(cpu_shell) -> None:
    _, report, _ = checked(
        cpu_shell,
        "a = torch.randn(8, 8)\nb = (a @ a).relu()\nc = a[0] + a[1:3].sum(0)\n"
        "d = a.to(torch.float64)\ne = torch.where(a > 0, a, -a)\nf = a.repeat_interleave(2)\n"
        "g = a[torch.tensor([0, 2])]\n",
    )
    assert report.syncs == []
    assert report.sync_s == 0.0
    assert not [f for f in report.findings if f.rule == "TM303"]


COVERAGE = """\
x = torch.tensor([3.0, -1.0, 2.0, 2.0])
m = x > 0
a = float(x[0])
b = int(x[0])
c = bool(x[0])
if x[0] > 0:
    pass
n = 0
while x[n] > 0:
    n += 1
assert x.sum() > 0
d = x.tolist()
e = x.cpu()
f = x.to("cpu")
g = x.nonzero()
h = x[m]
i = x.masked_select(m)
y = x.clone()
y[m] = 0.0
y.index_put_((m,), torch.tensor(1.0))
j = torch.unique(x)
k = x.repeat_interleave(torch.tensor([1, 2, 1, 1]))
r = repr(x)
s = f"{x[0]:.1f}"
t = torch.nonzero(m)
u = torch.where(m)
v = "%s" % x
"""


def test_each_sync_prone_call_is_seen_at_its_line(cpu_shell) -> None:
    _, report, _ = checked(cpu_shell, COVERAGE)
    ops = {s.line: s.ops for s in report.syncs}
    expected = {
        4: "Tensor.__float__",
        5: "Tensor.__int__",
        6: "Tensor.__bool__",
        7: "Tensor.__bool__",
        10: "Tensor.__bool__",
        12: "Tensor.__bool__",
        13: "Tensor.tolist",
        14: "Tensor.cpu",
        15: "Tensor.to",
        16: "Tensor.nonzero",
        17: "Tensor.__getitem__",
        18: "Tensor.masked_select",
        20: "Tensor.__setitem__",
        21: "Tensor.index_put_",
        22: "torch.unique",
        23: "Tensor.repeat_interleave",
        24: "Tensor.__repr__",
        25: "Tensor.__format__",
        26: "torch.nonzero",
        27: "torch.where",
        28: "Tensor.__repr__",
    }
    for line, op in expected.items():
        assert op in ops.get(line, {}), (line, op, ops.get(line))
    assert ops[10] == {"Tensor.__bool__": 2}  # one iteration true, then false
    assert set(ops) == set(expected)  # nothing charged to lines that do not sync


def test_results_are_unchanged(cpu_shell) -> None:
    code = "x = torch.linspace(-1, 1, 7)\nres = (x[x > 0].tolist(), float(x.sum()), repr(x), x.unique().tolist())\n"
    cpu_shell.run_cell("# plain\n" + code, store_history=True)
    plain = cpu_shell.user_ns["res"]
    checked(cpu_shell, code)
    assert cpu_shell.user_ns["res"] == plain


# --- TM303 ------------------------------------------------------------------------------------

SLOW = "x = torch.randn(2_000_000)\nfor _ in range(3):\n    u = torch.unique(x)\ny = x.sum()\n"


def test_TM303_flags_line_that_waits_long(cpu_shell) -> None:
    _, report, _ = checked(cpu_shell, SLOW)
    rec = syncs_by_line(report)[4]
    assert rec.seconds > 0.005
    stalls = [f for f in report.findings if f.rule == "TM303"]
    assert [f.line for f in stalls] == [4]
    f = stalls[0]
    assert f.source == "runtime" and f.severity == "warning"
    assert "3 times" in f.message and "ms" in f.message and "torch.unique(x)" in f.message


def test_TM303_ignores_lines_below_threshold(cpu_shell) -> None:
    with configured(cpu_shell, sync_threshold_s=10.0):
        _, report, _ = checked(cpu_shell, SLOW)
    assert report.syncs
    assert not [f for f in report.findings if f.rule == "TM303"]


@pytest.fixture
def every_wait(cpu_shell):
    """TM303 with no threshold: every line that synchronised is a candidate."""
    with configured(cpu_shell, sync_threshold_s=0.0, sync_fraction=0.0):
        yield cpu_shell


def test_TM303_leaves_a_one_off_display_alone_but_keeps_its_record(every_wait) -> None:
    body = "x = torch.randn(100_000)\nprint(x)\ns = f'{x.sum():.3f}'\n[x[:2], x[-2:]]\n"
    _, report, cap = checked(every_wait, body)
    by_line = syncs_by_line(report)
    assert by_line[3].ops == {"Tensor.__repr__": 1} and by_line[4].ops == {"Tensor.__format__": 1}
    assert by_line[5].ops == {"Tensor.__repr__": 2}  # the cell's result, shown by the shell
    assert "tensor(" in cap.stdout
    assert not [f for f in report.findings if f.rule == "TM303"]


def test_TM303_flags_a_display_that_repeats(every_wait) -> None:
    body = (
        "x = torch.randn(100_000)\n"
        "for i in range(3):\n"
        "    print(f'{i}: {x.mean():.3f}')\n"
        "def show(t):\n"
        "    print(t)\n"
        "show(x)\n"
        "print(x.sum().item())\n"
    )
    _, report, _ = checked(every_wait, body)
    stalls = sorted(f.line for f in report.findings if f.rule == "TM303")
    # the loop's display, the function's (its callers are not known), and a one-off `.item()`,
    # which is not a display
    assert stalls == [4, 6, 8]


def test_TM303_ignores_quick_syncs(cpu_shell) -> None:
    _, report, _ = checked(cpu_shell, "x = torch.ones(3)\nfor i in range(3):\n    x[i].item()\n")
    assert report.syncs and not [f for f in report.findings if f.rule == "TM303"]


# --- never left behind ------------------------------------------------------------------------


def test_exception_leaves_no_probe_and_warnings_filters_unchanged(cpu_shell) -> None:
    filters = list(warnings.filters)
    result, report, _ = checked(cpu_shell, "x = torch.ones(2)\nx[0].item()\nraise ValueError('boom')\n")
    assert isinstance(result.error_in_exec, ValueError)
    assert [(s.line, s.count) for s in report.syncs] == [(3, 1)]
    assert_probe_gone()
    assert warnings.filters == filters


def test_error_inside_sync_op_propagates_unchanged(cpu_shell) -> None:
    result, report, _ = checked(cpu_shell, "x = torch.ones(2)\nbool(x)\n")
    assert isinstance(result.error_in_exec, RuntimeError)
    assert "ambiguous" in str(result.error_in_exec)
    assert_probe_gone()


def test_keyboard_interrupt_during_sync_loop_leaves_no_probe(cpu_shell) -> None:
    filters = list(warnings.filters)
    result, report, _ = checked(
        cpu_shell,
        "import _thread, threading\nx = torch.ones(4)\n"
        "threading.Timer(0.05, _thread.interrupt_main).start()\n"
        "while True:\n    x[1].item()\n",
    )
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert syncs_by_line(report)[6].count > 10
    assert_probe_gone()
    assert warnings.filters == filters
    assert torch.ones(2).tolist() == [1.0, 1.0]


def test_user_mode_left_on_stack_is_kept(cpu_shell) -> None:
    _, report, _ = checked(
        cpu_shell,
        "from torch.overrides import TorchFunctionMode\n"
        "class Mine(TorchFunctionMode):\n"
        "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
        "        return func(*args, **(kwargs or {}))\n"
        "mine = Mine()\nmine.__enter__()\ntorch.ones(1).item()\n",
    )
    try:
        stack = torch.overrides._get_current_function_mode_stack()
        assert stack == [cpu_shell.user_ns["mine"]]
    finally:
        cpu_shell.user_ns["mine"].__exit__(None, None, None)
    assert_probe_gone()
    # the probe wraps `Tensor.item` itself: it sees the call at the user's line (8), before
    # Mine's mode passes it on
    assert [(s.line, s.count) for s in report.syncs] == [(8, 1)]


def test_default_cuda_devices_install_nothing_without_a_gpu(shell) -> None:
    shell.run_cell("import torch", store_history=True)
    seen = []
    cell = "%%torchcheck\nimport torch\nseen.append(torch._C._is_torch_function_mode_enabled())\ntorch.ones(2).sum().item()\n"
    shell.user_ns["seen"] = seen
    shell.run_cell(cell, store_history=True)
    if not torch.cuda.is_available():
        assert seen == [False]
        assert torchmagic.last_report().syncs == []


def test_probe_is_active_only_during_checked_cells(cpu_shell) -> None:
    seen = []
    cpu_shell.user_ns["seen"] = seen
    cpu_shell.run_cell("seen.append(hasattr(torch.Tensor.item, '__wrapped__'))", store_history=True)
    checked(cpu_shell, "seen.append(hasattr(torch.Tensor.item, '__wrapped__'))\n")
    assert seen == [False, True]
    assert_probe_gone()


def test_printing_a_tensor_counts_once_not_each_read_inside(cpu_shell) -> None:
    _, report, cap = checked(cpu_shell, "t = torch.randn(4)\nprint(t)\n")
    assert [(s.line, s.count, s.ops) for s in report.syncs] == [(3, 1, {"Tensor.__repr__": 1})]


def test_other_torch_calls_are_left_untouched(cpu_shell) -> None:
    seen = []
    cpu_shell.user_ns["seen"] = seen
    checked(cpu_shell, "seen.append(torch.matmul is torch._C._VariableFunctions.matmul)\n")
    assert seen == [True]


# --- explicit CUDA syncs, stood in by fakes -------------------------------------------------


class FakeCuda:
    """`torch.cuda.synchronize` and `Stream`/`Event` that 'wait' `wait_s` each; CUDA has started
    (`started=False`: the first sync call starts it)."""

    def __init__(self, monkeypatch, wait_s: float = 0.002, started: bool = True) -> None:
        self.calls: list[str] = []
        self.started = started
        fake = self

        def synchronize(device=None):
            fake.calls.append("device")
            fake.started = True
            time.sleep(wait_s)

        class Stream:
            def synchronize(self):
                fake.calls.append("stream")
                time.sleep(wait_s)

        class Event:
            def synchronize(self):
                fake.calls.append("event")
                time.sleep(wait_s)

        self.synchronize, self.Stream, self.Event = synchronize, Stream, Event
        monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
        monkeypatch.setattr(torch.cuda, "Stream", Stream)
        monkeypatch.setattr(torch.cuda, "Event", Event)
        monkeypatch.setattr(torch.cuda, "is_initialized", lambda: fake.started)
        # the GPU trace must never be switched on: it cannot be switched off again
        monkeypatch.setattr(torch._C, "_activate_gpu_trace", lambda: pytest.fail("GPU trace activated"))


def cuda_run(shell, body: str, **config):
    """Run `body` as a cell under a SyncProbe with CUDA on (stood in: no GPU here)."""
    opts = CheckOptions(sync_devices=("cuda",), scan=False, trace_shapes=False, **config)
    check = CellCheck(collectors=[SyncProbe(cuda_available=lambda: True)])
    check.begin(
        shell.user_ns,
        body,
        options=opts,
        execution_count=shell.execution_count,
        known_files=lambda: shell.compile._filename_map,
    )
    try:
        with capture_output():
            result = shell.run_cell(body, store_history=True)
    finally:
        report = check.end()
    return result, report


CUDA_CELL = """\
import torch
for _ in range(5):
    torch.cuda.current = torch.cuda.Stream(); torch.cuda.current.synchronize()
torch.cuda.synchronize()
torch.cuda.Event().synchronize()
"""


def test_explicit_syncs_are_timed_at_their_lines(shell, monkeypatch) -> None:
    fake = FakeCuda(monkeypatch)
    result, report = cuda_run(shell, CUDA_CELL)
    assert result.error_in_exec is None
    recs = {s.line: s for s in report.syncs}
    assert sorted(recs) == [3, 4, 5]
    assert recs[3].count == 5 and recs[3].ops == {"Stream.synchronize": 5}
    assert recs[4].ops == {"torch.cuda.synchronize": 1}
    assert recs[5].ops == {"Event.synchronize": 1}
    assert recs[3].seconds >= 5 * 0.002
    assert fake.calls == ["stream"] * 5 + ["device", "event"]  # the user's calls ran, once each
    assert report.sync_s == pytest.approx(sum(s.seconds for s in report.syncs))
    # everything put back: the fakes themselves, not wrappers
    assert torch.cuda.synchronize is fake.synchronize
    assert fake.Stream.__dict__["synchronize"].__name__ == "synchronize"
    assert not hasattr(fake.Stream.__dict__["synchronize"], "__wrapped__")
    assert_probe_gone()


def test_the_call_that_starts_cuda_is_not_charged(shell, monkeypatch) -> None:
    """No GPU work can be queued before CUDA starts: the call that starts it waits for none
    (its time is CUDA's start-up); the calls after it are timed."""
    fake = FakeCuda(monkeypatch, started=False)
    result, report = cuda_run(shell, "import torch\ntorch.cuda.synchronize()\ntorch.cuda.synchronize()\n")
    assert result.error_in_exec is None
    assert fake.calls == ["device", "device"]
    assert [(s.line, s.count) for s in report.syncs] == [(3, 1)]


def test_explicit_syncs_flag_a_stall_with_TM303(shell, monkeypatch) -> None:
    FakeCuda(monkeypatch, wait_s=0.004)
    # five 4 ms waits on line 3 pass a 10 ms threshold; line 4's single wait does not, even
    # when a loaded machine oversleeps
    _, report = cuda_run(shell, CUDA_CELL, sync_threshold_s=0.010)
    stalls = [f for f in report.findings if f.rule == "TM303"]
    assert [f.line for f in stalls] == [3]
    assert "5 times" in stalls[0].message


def test_explicit_syncs_from_other_threads_are_not_charged(shell, monkeypatch) -> None:
    fake = FakeCuda(monkeypatch, wait_s=0.0)
    body = "import threading\nth = threading.Thread(target=torch.cuda.synchronize)\nth.start(); th.join()\n"
    _, report = cuda_run(shell, body)
    assert report.syncs == [] and fake.calls == ["device"]


def test_explicit_syncs_are_restored_after_an_exception(shell, monkeypatch) -> None:
    fake = FakeCuda(monkeypatch, wait_s=0.0)
    result, report = cuda_run(shell, CUDA_CELL + "1 / 0\n")
    assert isinstance(result.error_in_exec, ZeroDivisionError)
    assert len(report.syncs) == 3
    assert torch.cuda.synchronize is fake.synchronize
    assert_probe_gone()


def test_an_inherited_sync_method_is_removed_again(shell, monkeypatch) -> None:
    fake = FakeCuda(monkeypatch, wait_s=0.0)

    class Base:
        def synchronize(self):
            fake.calls.append("base")

    class Stream(Base):  # inherits `synchronize`: the wrapper must not stay on the subclass
        pass

    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    _, report = cuda_run(shell, "torch.cuda.Stream().synchronize()\n")
    assert [s.ops for s in report.syncs] == [{"Stream.synchronize": 1}]
    assert "synchronize" not in Stream.__dict__ and fake.calls == ["base"]


def test_a_checked_cell_leaves_nothing_that_slows_later_cells(shell, monkeypatch) -> None:
    FakeCuda(monkeypatch, wait_s=0.0)
    cuda_run(shell, CUDA_CELL)
    assert_probe_gone()  # no function mode, no wrappers; and `_activate_gpu_trace` never ran


def test_probe_stop_without_start_is_harmless(shell) -> None:
    run = CellRun(shell.user_ns, "", CheckOptions(sync_devices=("cpu",)))
    probe = SyncProbe()
    probe.stop(run)
    probe.collect(run)
    assert run.report.syncs == []


def test_sync_from_another_thread_is_not_charged(cpu_shell) -> None:
    # Function modes are per thread: a worker's syncs are not the cell's and are not seen.
    _, report, _ = checked(
        cpu_shell,
        "import threading\nx = torch.ones(3)\nth = threading.Thread(target=x.tolist)\nth.start(); th.join()\n",
    )
    assert report.syncs == []
    assert threading.active_count() >= 1


# --- which transfers synchronise (device tensors stood in by "meta"; no data is touched) -------


def test_transfers_that_wait_for_the_device() -> None:
    host, dev = torch.ones(2), torch.empty(2, device="meta")
    T = torch.Tensor
    assert sync_device(T.to, (dev, "cpu"), {}) == "meta"  # D2H
    assert sync_device(T.cpu, (dev,), {}) == "meta"
    assert sync_device(T.to, (dev, "cpu"), {"non_blocking": True}) is None  # into pinned memory
    assert sync_device(T.to, (host, "cuda"), {}) == "cuda"  # blocking H2D
    assert sync_device(T.to, (host, torch.device("cuda", 0)), {"non_blocking": True}) == "cuda"  # pageable
    assert sync_device(T.cuda, (host,), {}) == "cuda"
    assert sync_device(T.copy_, (dev, host), {}) == "meta"
    assert sync_device(T.copy_, (host, dev), {}) == "meta"
    assert sync_device(T.to, (dev, torch.float16), {}) is None  # dtype only
    assert sync_device(T.to, (dev, "meta"), {}) is None  # same device
    assert sync_device(T.copy_, (host, host), {}) is None
    assert sync_device(T.__getitem__, (dev, 0), {}) is None
    assert sync_device(T.__getitem__, (dev, (slice(None), dev > 0)), {}) == "meta"
    assert sync_device(torch.repeat_interleave, (dev, 2), {}) is None
    assert sync_device(torch.repeat_interleave, (torch.ones(2, dtype=torch.long),), {}) == "cpu"
    assert sync_device(torch.where, (dev > 0, dev, dev), {}) is None


def test_pageable_non_blocking_copies_to_the_device_are_timed_as_syncs() -> None:
    host, T = torch.ones(2), torch.Tensor
    # non_blocking from pageable memory still waits: the mode times it like any sync
    assert sync_device(T.to, (host, "cuda"), {"non_blocking": True}) == "cuda"
    assert sync_device(T.to, (host, "cuda"), {}) == "cuda"
    assert sync_device(T.item, (host,), {}) == "cpu"
