"""Dynamo's texts in user terms: guard failures (why it compiled again) and graph-break records."""

from __future__ import annotations

import pytest

from torchmagic.runtime.dynamo_messages import (
    break_cause,
    break_fix,
    describe_guard_failure,
    parse_graph_break,
    parse_limit_warning,
    recompile_fix,
    resumed_function,
)


@pytest.mark.parametrize(
    ("reason", "kind", "text"),
    [
        (
            "0/0: tensor 'x' size mismatch at index 0. expected 8, actual 9",
            "shape",
            "`x.shape[0]` changed 8 → 9",
        ),
        ("0/1: tensor 'x' rank mismatch. expected 1, actual 2", "rank", "`x` rank changed 1 → 2"),
        (
            "0/0: tensor 'x' dtype mismatch. expected Float, actual Double",
            "dtype",
            "`x.dtype` changed float32 → float64",
        ),
        (
            "0/2: tensor 'x' requires_grad mismatch. expected requires_grad=0",
            "requires_grad",
            "`x.requires_grad` changed False → True",
        ),
        ("0/3: GLOBAL_STATE changed: grad_mode ", "grad_mode", "grad mode changed"),
        (
            "4/0: self.flag == True                         # return y * 2 if self.flag else y  # <ipython>:8 in forward\n"
            "User stack trace:\n  File ...",
            "value",
            "`self.flag` changed (was True)",
        ),
        (
            "1/0: fn._modules['1'].training == True    # return F.dropout(...)",
            "training",
            "`model[1].training` changed",
        ),
        ("0/0: L['self'].training == False", "training", "`self.training` changed"),
        ("2/0: len(xs) == 2      # return x * n + len(xs)", "length", "`len(xs)` changed (was 2)"),
        ("2/1: G['i'] == 1       # def inner(x): ...", "value", "`i` changed (was 1)"),
        ("3/0: s == -5.101468086242676   # ...", "value", "`s` changed (was -5.101)"),
        (
            "1/1: ___stack2 == 0.12113   # ...",
            "value",
            "a Python number carried across a graph break changed (was 0.1211)",
        ),
        (
            "0/0: BACKEND_MATCH failure: torch.compile detected different backend callables.",
            "backend",
            "different backend",
        ),
        (
            "0/0: ___check_obj_id(G['torch'].where, 140333593435232)",
            "object",
            "`torch.where` is a different object",
        ),
        ("0/0: something Dynamo says that nobody parses", "other", "guard `something Dynamo says"),
    ],
)
def test_guard_failures_in_user_terms(reason, kind, text):
    failure = describe_guard_failure(reason)
    assert failure.kind == kind
    assert text in failure.text


def test_mode_switches_and_fixes():
    assert describe_guard_failure("0/0: L['self'].training == True").mode_switch
    assert describe_guard_failure("0/1: GLOBAL_STATE changed: grad_mode").mode_switch
    assert not describe_guard_failure(
        "0/0: tensor 'x' size mismatch at index 0. expected 8, actual 9"
    ).mode_switch
    assert "mark_dynamic" in recompile_fix({"shape"})
    assert "Python numbers" in recompile_fix({"value"})
    assert "same objects" in recompile_fix({"object"})


FULL = """Graph break in user code at <ipython-input-3-abc>:5
Graph Break Reason: Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):

Unsupported Tensor.item() call with capture_scalar_outputs=False
  Explanation: Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False.
  Hint: Set `torch._dynamo.config.capture_scalar_outputs = True` or `export TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS=1` to include these operations in the captured graph.

  Developer debug context: call_method TensorVariable() item () {}

User code traceback:
  File "<ipython-input-4-def>", line 2, in <module>
    out = step(x)
  File "<ipython-input-3-abc>", line 5, in step
    s = y.sum().item()
"""

DUPLICATE = """Graph break (user stack suppressed due to duplicate graph break) in user code at /tmp/m.py:15
Graph Break Reason: Data-dependent branching
  Explanation: Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`). Dynamo does not support tracing dynamic control flow.

      The branch condition involves a tensor computed as follows:
        # File "/tmp/m.py", line 15, in f, code: if y.sum() > 0:
        gt = gt(sum_1, 0)

  Hint: Use `torch.cond` to express dynamic control flow.
"""


def test_graph_break_record_with_its_stack():
    gb = parse_graph_break(FULL)
    assert (gb.file, gb.line, gb.kind) == ("<ipython-input-3-abc>", 5, "item")
    assert gb.title == "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    assert [(f.file, f.line, f.name) for f in gb.stack] == [
        ("<ipython-input-4-def>", 2, "<module>"),
        ("<ipython-input-3-abc>", 5, "step"),
    ]
    assert "Tensor.item()" in break_cause(gb) and "capture_scalar_outputs" in break_fix(gb)


def test_duplicate_graph_break_record_without_stack():
    gb = parse_graph_break(DUPLICATE)
    assert (gb.file, gb.line, gb.kind, gb.stack) == ("/tmp/m.py", 15, "branch", [])
    assert "torch.where" in break_fix(gb)


def test_print_skipped_and_unknown_breaks():
    printed = parse_graph_break(
        "Graph break in user code at f.py:3\nGraph Break Reason: Failed to trace builtin operator\n"
        "  Explanation: Dynamo does not know how to trace builtin operator `print` with argument types ['str'] (has_kwargs False)\n"
    )
    assert printed.kind == "print"
    skipped = parse_graph_break(
        "Graph break in user code at f.py:3\nGraph Break Reason: Attempted to call function marked as skipped\n"
        "  Explanation: Dynamo does not know how to trace the builtin `time.sleep.` This function is a builtin.\n"
        "  Hint: If it is a Python builtin, please file an issue on GitHub.\n"
    )
    assert skipped.kind == "skipped" and "`time.sleep`" in break_cause(skipped)
    odd = parse_graph_break(
        "Graph break in user code at f.py:3\nGraph Break Reason: Some new kind of break\n"
        "  Explanation: Something Dynamo cannot do yet. More words.\n  Hint: Do it differently.\n"
    )
    assert odd.kind == "other"
    assert (
        break_cause(odd)
        == "Dynamo stopped tracing here (Some new kind of break): Something Dynamo cannot do yet"
    )
    assert break_fix(odd) == "Do it differently."
    assert parse_graph_break("Recompiling function f") is None
    backward = parse_graph_break(
        "Graph break in user code at f.py:7\nGraph Break Reason: Unsupported Tensor.backward() call\n"
        "  Explanation: Dynamo currently does not support tracing `Tensor.backward()` when trace_autograd_ops is off.\n"
    )
    assert backward.kind == "backward" and "AOTAutograd" in break_fix(backward)


def test_limit_warning_and_resume_functions():
    msg = (
        "torch._dynamo hit config.recompile_limit (8)\n   function: 'step' (/tmp/a.py:12)\n"
        "   last reason: 0/7: tensor 'x' size mismatch at index 0. expected 7, actual 8\n"
    )
    assert parse_limit_warning(msg) == ("recompile_limit", 8, "step", "/tmp/a.py", 12)
    assert resumed_function("torch_dynamo_resume_in_step_at_15") == "step"
    assert resumed_function("torch_dynamo_resume_in_torch_dynamo_resume_in_f_at_3_at_7") == "f"
    assert resumed_function("forward") == "forward"
