"""A compiled cell in a real ipykernel whose user runs with `TORCH_LOGS=graph_breaks,recompiles`:
the report arrives with the Compile section, and the user's own log output is unchanged."""

from __future__ import annotations

import os

import pytest
from kernels import execute, running_kernel

from torchmagic.views.html import REPORT_MIMETYPE

CELL = """%%torchcheck
import torch

@torch.compile(backend="eager")
def step(x):
    y = x * 2
    print("inside")
    return y.sum()

for n in (4, 5):
    out = step(torch.randn(n))
"""


@pytest.fixture(scope="module")
def kernel():
    with running_kernel(env={**os.environ, "TORCH_LOGS": "graph_breaks,recompiles"}) as kc:
        yield kc


def stderr(msgs) -> str:
    return "".join(
        m["content"]["text"] for m in msgs if m["msg_type"] == "stream" and m["content"]["name"] == "stderr"
    )


STATE = """
import logging, torch, torch._dynamo
from torch._logging._internal import log_registry, log_state

def logging_state():
    names = sorted(log_registry.get_artifact_log_qnames()) + ["torch", "torch._dynamo", "torch._dynamo.convert_frame"]
    loggers = [(n, logging.getLogger(n).level, logging.getLogger(n).propagate, tuple(logging.getLogger(n).handlers)) for n in names]
    callbacks = (list(torch._dynamo.callback_handler.start_callbacks), list(torch._dynamo.callback_handler.end_callbacks))
    return loggers, sorted(log_state.artifact_names), dict(log_state.log_qname_to_level), callbacks

before = logging_state()
"""


def test_compiled_cell_under_user_torch_logs(kernel) -> None:
    ex = execute(kernel, "%load_ext torchmagic\n%config TorchCheck.display = 'html'")
    assert ex.reply["status"] == "ok"
    ex = execute(kernel, STATE)
    assert ex.reply["status"] == "ok"
    ex = execute(kernel, CELL)
    assert ex.reply["status"] == "ok"
    assert ex.stdout.count("inside") == 2
    # the user's TORCH_LOGS output, as without torchmagic
    assert "Graph break" in stderr(ex.msgs) and "Recompiling function" in stderr(ex.msgs)
    (data,) = [
        m["content"]["data"] for m in ex.of_type("display_data") if REPORT_MIMETYPE in m["content"]["data"]
    ]
    report = data[REPORT_MIMETYPE]
    (rec,) = report["compile"]
    assert rec["name"] == "step" and rec["breaks"] >= 1 and rec["line"] == 11
    assert ("TM950", 7) in [(f["rule"], f["line"]) for f in report["findings"]]
    assert "Compile (1)" in data["text/html"]
    # every logger that existed before (compiling imports more of torch, with loggers of its own)
    ex = execute(
        kernel,
        "after = logging_state()\nprint(set(before[0]) <= set(after[0]) and before[1:] == after[1:], before[1])",
    )
    assert ex.stdout.strip() == "True ['graph_breaks', 'recompiles']"  # TORCH_LOGS as the user set it

    # a later unchecked cell: the user's logging still prints, torchmagic adds nothing
    ex = execute(
        kernel,
        "@torch.compile(backend='eager')\ndef g(x):\n    print('g')\n    return x + 1\nout = g(torch.randn(3))\n",
    )
    assert ex.reply["status"] == "ok" and "Graph break" in stderr(ex.msgs)
    assert not [m for m in ex.of_type("display_data") if REPORT_MIMETYPE in m["content"]["data"]]
