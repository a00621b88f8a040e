"""`torch.jit.trace` in a checked cell works as it does in a plain one.

The tracer records every `size()` it sees: a hook that read a shape on one of the trace
check's runs and not on the next made the check fail ("Graphs differed across invocations")
in a checked cell only. The hooks and the sync probe stay out while the tracer records.
"""

from __future__ import annotations

import pytest

SETUP = """
import torch
from torch import nn

class WithProbabilities(nn.Module):
    def __init__(self, trained):
        super().__init__()
        self.model = trained

    def forward(self, x):
        return torch.softmax(self.model(x), dim=-1)

net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
x = torch.rand(4, 3)
"""


@pytest.fixture
def ip(scratch_shell):
    scratch_shell.run_cell(SETUP)
    return scratch_shell


def test_a_module_traces_in_a_checked_cell(ip):
    import torchmagic

    shell = ip
    result = shell.run_cell(
        "%%torchcheck\n"
        "traced = torch.jit.trace(WithProbabilities(net), torch.rand(1, 3))\n"
        "same = torch.equal(traced(x), WithProbabilities(net)(x))\n"
        "mask = torch.jit.trace(lambda t: t[t > 0.5].sum() * t.shape[0], torch.rand(5))\n"
    )
    assert result.success, result.error_in_exec
    assert shell.user_ns["same"] is True
    report = torchmagic.last_report()
    assert not report.errors
    # the module's own forward pass, run after the trace, is still traced for its shapes
    assert {"net", "net.0"} <= {s.module for s in report.shape_trace}
