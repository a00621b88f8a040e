"""Advice of the autograd, training, checkpoint and indexing rules on patterns reduced from real
code (issue 11): never a hint that would change what a correct program computes."""

from __future__ import annotations

from torchmagic import check_source


def findings(code: str, rule: str):
    return [f for f in check_source(code) if f.rule == rule]


STYLE_TRANSFER = """
import torch
import torch.nn.functional as F
image = torch.rand(1, 3, 8, 8, requires_grad=True)
opt = torch.optim.Adam([image])
for step in range(10):
    feats = [image * 2, image * 3]
    style_loss = 0
    for f in feats:
        layer_loss = F.mse_loss(f, torch.zeros_like(f))
        style_loss += layer_loss
    content_loss = F.mse_loss(image, torch.zeros_like(image))
    total = content_loss + 1e3 * style_loss
    opt.zero_grad()
    total.backward()
    opt.step()
"""


def test_TM401_never_advises_item_on_a_term_of_the_loss_that_is_back_propagated() -> None:
    assert findings(STYLE_TRANSFER, "TM401") == []


def test_TM401_silent_under_no_grad_and_in_functions_only_called_under_it() -> None:
    code = """
import torch
import torch.nn as nn
model, crit = nn.Linear(2, 1), nn.MSELoss()
def score(data):
    acc = 0
    for x, y in data:
        batch_loss = crit(model(x), y)
        acc += batch_loss
    print(acc)
with torch.no_grad():
    score(val)
with torch.inference_mode():
    s = 0
    for x, y in val:
        inf_loss = crit(model(x), y)
        s += inf_loss
"""
    assert findings(code, "TM401") == []


def test_TM401_flags_a_loss_accumulated_after_its_backward_with_the_item_hint() -> None:
    code = """
import torch
import torch.nn as nn
model, crit = nn.Linear(2, 1), nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
total = 0
for x, y in data:
    opt.zero_grad()
    loss = crit(model(x), y)
    loss.backward()
    opt.step()
    total += loss
"""
    (f,) = findings(code, "TM401")
    assert f.line == 12 and "loss.item()" in f.hint


def test_TM403_writes_get_the_write_fix_never_detach() -> None:
    code = """
import torch.nn as nn
def weights_init(m):
    if isinstance(m, nn.Conv2d):
        m.weight.data.normal_(0.0, 0.02)
        m.bias.data.fill_(0)
net = nn.Sequential(nn.Conv2d(3, 3, 3))
net.apply(weights_init)
"""
    found = findings(code, "TM403")
    assert [f.line for f in found] == [5, 6]
    assert all("detach" not in f.hint and "writes" in f.message for f in found)
    assert "nn.init.normal_(m.weight, 0.0, 0.02)" in found[0].hint
    assert "nn.init.constant_(m.bias, 0)" in found[1].hint


def test_TM403_resize_through_data_is_never_told_detach() -> None:
    code = """
import torch
buf = torch.empty(8, 3)
for real in batches:
    buf.data.resize_(real.size()).copy_(real)
    buf.data.set_(real)
"""
    found = findings(code, "TM403")
    assert len(found) == 2
    for f in found:
        assert "detach" not in f.hint and "keeps its old shape" in f.message
    assert "buf.resize_(real.size())" in found[0].hint


def test_TM403_loss_data_index_0_hints_item() -> None:
    code = """
import torch
import torch.nn as nn
out = torch.randn(2, 3, requires_grad=True)
crit = nn.CrossEntropyLoss()
loss = crit(out, y)
print(loss.data[0])
rows = out.data[0]
"""
    first, second = findings(code, "TM403")
    assert first.hint == "Read the number with `loss.item()`."
    assert "detach" in second.hint  # a batch row is a read, not a scalar


def test_TM403_is_silent_on_gradients_and_flags_the_parameter_write_beside_them() -> None:
    code = """
for group in optimizer.param_groups:
    for p in group["params"]:
        p.grad.data.clamp_(-1, 1)
        p.data.add_(p.grad, alpha=-0.1)
"""
    (f,) = findings(code, "TM403")
    assert f.line == 5 and "with torch.no_grad(): p.add_(p.grad, alpha=-0.1)" in f.hint


def test_TM408_reports_the_loop_once_and_points_to_no_grad() -> None:
    code = """
import torch.nn as nn
model = nn.Linear(4, 2)
def test(loader):
    model.eval()
    for epoch in range(1):
        for x, y in loader:
            out = model(x)
"""
    (f,) = findings(code, "TM408")
    assert f.line == 7 and f.severity == "warning"
    assert f.message.startswith("`for x, y in loader` runs `model(...)` after `model.eval()`")
    assert "torch.no_grad()" in f.hint


def test_TM408_is_explained_by_the_cli() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    r = subprocess.run(
        [sys.executable, "-m", "torchmagic", "explain", "TM408"],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stderr
    assert "eval-without-no-grad" in r.stdout and "## Not flagged" in r.stdout


def test_TM403_data_assignment_hints_copy_only_when_it_computes_the_same() -> None:
    code = """
import torch.nn as nn
model = nn.Linear(2, 2)
for p in model.parameters():
    p.data = p.data.clamp(-0.01, 0.01)
    p.data = p.data.half()
    p.data = saved[p].clone()
"""
    same, other = findings(code, "TM403")
    assert same.line == 5 and same.hint == "Write under no_grad: `with torch.no_grad(): p.copy_(...)`."
    assert other.line == 7 and "same shape, dtype and device" in other.hint
