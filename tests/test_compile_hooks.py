"""The collectors' hooks never change what `torch.compile` compiles.

Dynamo traces global module and optimizer hooks and guards on them, guards on the identity of
the `torch.*` functions a compiled function calls, and compiles any Python frame it meets in a
compiled region. A checked cell installs hooks and wrappers: code compiled there must run in
the next unchecked cell without compiling again (and the other way round), and none of
torchmagic's own functions may ever be compiled.
"""

from __future__ import annotations

import pytest

# Dynamo puts `__builtins_dict___N` globals in the namespace and deletes them when the compiled
# code dies; in IPython one is sometimes deleted twice (also without torchmagic).
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

SETUP = """
import torch
import torch._dynamo.utils as du
from torch import nn

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.1)
    def forward(self, x):
        return self.drop(self.lin(x)).relu()

net = Block()
seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
opt = torch.optim.SGD(net.parameters(), lr=0.1)

@torch.compile(backend="eager")
def step(x):
    return net(x).sum() + seq(x).sum() + torch.where(x > 0, x, 0).sum() + x.nonzero().shape[0]

@torch.compile(backend="eager")
def opt_step():
    opt.step()

cnet = torch.compile(net, backend="eager")
cseq = torch.compile(seq, backend="eager")

def compiled():
    return [(str(c.compile_id), c.co_name, c.co_filename) for c in du._compilation_metrics]
"""

BODY = (
    "loss = step(torch.randn(2, 4))\n"
    "loss.backward()\n"
    "opt_step()\n"
    "out = cnet(torch.randn(2, 4)) + cseq(torch.randn(2, 4))\n"
)


@pytest.fixture
def ip(scratch_shell):
    # the sync-prone calls are timed on the CPU too: their wrappers are installed in the checked cells
    scratch_shell.run_cell(SETUP)
    return scratch_shell


def _compiled_by(ip, cell: str) -> list[tuple[str, str, str]]:
    n = len(ip.user_ns["compiled"]())
    result = ip.run_cell(cell)
    assert result.success, result.error_in_exec
    return ip.user_ns["compiled"]()[n:]


def test_compiled_in_a_checked_cell_runs_unchecked_without_compiling_again(ip):
    first = _compiled_by(ip, "%%torchcheck\n" + BODY)
    assert {name for _, name, _ in first} >= {"step", "opt_step", "forward"}
    assert _compiled_by(ip, BODY) == []
    assert _compiled_by(ip, "%%torchcheck\n" + BODY) == []


def test_compiled_unchecked_runs_in_a_checked_cell_without_compiling_again(ip):
    assert _compiled_by(ip, BODY)
    assert _compiled_by(ip, "%%torchcheck\n" + BODY) == []
    assert _compiled_by(ip, BODY) == []


def test_dynamo_never_compiles_torchmagic_code(ip):
    frames = _compiled_by(ip, "%%torchcheck\n" + BODY) + _compiled_by(
        ip, "%%torchcheck\nout = cnet(torch.randn(3, 4))\n"
    )
    assert frames
    assert not [f for f in frames if "torchmagic" in (f[2] or "")], frames


def test_shape_trace_still_sees_compiled_modules(ip):
    import torchmagic

    ip.run_cell("%%torchcheck\nout = cnet(torch.randn(2, 4))\n")
    report = torchmagic.last_report()
    assert "cnet" in {s.module for s in report.shape_trace}
    assert not report.errors
