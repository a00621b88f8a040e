"""Details the fixture markers do not show: severities, locations, hints and suppression."""

from __future__ import annotations

from torchmagic import check_source


def only(code: str, rule: str):
    found = [f for f in check_source(code) if f.rule == rule]
    assert len(found) == 1, found
    return found[0]


def _rules(code: str) -> list[str]:
    return [f.rule for f in check_source(code)]


def test_TM301_every_n_steps_is_the_advice_itself_and_every_step_is_flagged() -> None:
    code = (
        "import torch\n"
        "for step, x in enumerate(torch.randn(5, 3).cuda().unbind()):\n"
        "    if step % 100 == 0:\n"
        "        print(x.sum().item())\n"
        "    else:\n"
        "        v = x.mean().item()\n"
    )
    found = {(f.line, f.severity) for f in check_source(code) if f.rule == "TM301"}
    assert found == {(6, "warning")}
    ternary = (
        "loss = loss.cuda()\nfor step in range(steps):\n    print(loss.item()) if step % 50 == 0 else None\n"
    )
    assert check_source(ternary, select=["TM301"]) == []


def test_TM301_one_finding_per_statement_at_its_first_line() -> None:
    code = (
        "x = x.cuda()\n"
        "for step in range(steps):\n"
        "    print(\n"
        "        x.sum().item(),\n"
        "        x.mean().item(),\n"
        "    )\n"
    )
    (f,) = check_source(code, select=["TM301"])
    assert f.line == 3 and "x.sum().item()" in f.message and "x.mean().item()" in f.notes[0]


def test_TM301_is_silent_without_a_path_to_an_accelerator() -> None:
    loop = "for step in range(steps):\n    print(loss.item())\n"
    assert check_source(loop) == []
    # the same loop where the loss may live on a GPU
    assert [f.line for f in check_source("loss = loss.to(device)\n" + loop)] == [3]
    assert [f.line for f in check_source("model = model.cuda()\n" + loop, select=["TM301"])] == [3]


def test_TM301_quotes_the_else_branch_only_when_it_can_sync() -> None:
    code = (
        "import torch\n"
        "out = torch.randn(3).cuda()\n"
        "for _ in range(steps):\n"
        "    arr = out.cpu().numpy() if out.is_cuda else out.numpy()\n"
    )
    (f,) = check_source(code, select=["TM301"])
    assert "out.cpu()" in f.message
    assert not any("`out.numpy()`" in n for n in f.notes)


def test_TM301_a_read_that_feeds_a_stop_guard_is_info() -> None:
    code = (
        "import math\n"
        "import torch\n"
        "model = model.cuda()\n"
        "for batch in loader:\n"
        "    err = model(batch.cuda()).mean()\n"
        "    err_value = err.item()\n"
        "    if math.isnan(err_value):\n"
        "        raise RuntimeError(f'diverged at {err_value}')\n"
        "    for_log = err.detach()\n"
    )
    f = only(code, "TM301")
    assert (f.line, f.severity) == (6, "info")
    assert "check the value" in f.message and "every N steps" in f.hint
    inline = "import math\nm = m.cuda()\nfor b in data:\n    l = m(b.cuda()).sum()\n    if not math.isfinite(l.item()):\n        break\n"
    assert only(inline, "TM301").severity == "info"
    # without the stop, it is a plain per-step read
    plain = code.replace("        raise RuntimeError(f'diverged at {err_value}')\n", "        print('nan')\n")
    assert only(plain, "TM301").severity == "warning"


def test_TM301_a_read_that_decides_an_early_stop_is_info() -> None:
    code = (
        "import torch\n"
        "policy = policy.cuda()\n"
        "for epoch in range(n_epochs):\n"
        "    for obs, old_logp in batches:\n"
        "        logp = policy(obs.cuda())\n"
        "        with torch.no_grad():\n"
        "            drift = (old_logp.cuda() - logp).mean().item()\n"
        "        if limit is not None and drift > 2.0 * limit:\n"
        "            print('stopping early', drift)\n"
        "            break\n"
        "        logp.sum().backward()\n"
    )
    f = only(code, "TM301")
    assert (f.line, f.severity) == (7, "info")
    assert "check the value" in f.message and "stop early" in f.hint
    # the same read that only feeds a log, or a test that does not leave the loop, stays a warning
    logged = code.replace("            break\n", "            history.append(drift)\n")
    assert only(logged, "TM301").severity == "warning"
    equal = code.replace("drift > 2.0 * limit", "drift == limit")
    assert only(equal, "TM301").severity == "warning"


def test_TM301_a_read_that_decides_a_convergence_stop_is_info() -> None:
    code = (
        "import torch\n"
        "a = a.cuda()\n"
        "estimate = None\n"
        "for _ in range(steps):\n"
        "    w = a @ v\n"
        "    current = torch.dot(w, v).item()\n"
        "    v = w / w.norm()\n"
        "    if estimate is not None and abs(estimate - current) / abs(estimate) < tol:\n"
        "        break\n"
        "    estimate = current\n"
    )
    f = only(code, "TM301")
    assert (f.line, f.severity) == (6, "info")
    assert "check the value" in f.message
    # a change that is only logged, with no stop, is a plain per-step wait
    logged = code.replace("        break\n", "        history.append(current)\n")
    assert only(logged, "TM301").severity == "warning"


def test_TM403_indexing_a_full_reduction_says_it_raises() -> None:
    head = "import torch\nx = torch.randn(4, 3, requires_grad=True)\n"
    f = only(head + "print(torch.sum(x * 2).data[0])\n", "TM403")
    assert "indexes a 0-dim tensor" in f.message and ".item()" in f.hint
    f = only(head + "m = x.mean()\nprint(m.data[0])\n", "TM403")
    assert "`m.data[0]` indexes a 0-dim tensor" in f.message
    # a reduction over one dimension still has a dimension to index
    f = only(head + "print(x.sum(1).data[0])\n", "TM403")
    assert "behind autograd's back" in f.message


def test_TM501_points_at_the_optimizer_step_and_names_it() -> None:
    code = "for x in xs:\n    model(x).sum().backward()\n    optimizer.step()\n"
    f = only(code, "TM501")
    assert (f.line, f.col, f.severity) == (3, 4, "error")
    assert "`optimizer.step()`" in f.message and "optimizer.zero_grad(set_to_none=True)" in f.hint


def test_TM502_points_at_the_early_scheduler_step() -> None:
    code = "for x in xs:\n    scheduler.step()\n    optimizer.zero_grad()\n    optimizer.step()\n"
    assert only(code, "TM502").line == 2


def test_TM701_points_at_the_for_line() -> None:
    code = "import torch\nx = torch.randn(3, 4)\nfor i in range(len(x)):\n    x[i] = x[i] * 2\n"
    f = only(code, "TM701")
    assert (f.line, f.col) == (3, 0)


def test_hints_name_the_fix_as_code() -> None:
    f = only("import torch\nm = torch.load('ckpt.pt')\n", "TM203")
    assert "map_location=device" in f.hint
    f = only("import torch\nx = torch.randn(2, 3)\ny = x.t().view(6)\n", "TM703")
    assert "x.t().reshape(...)" in f.hint


def test_suppression_comments_silence_new_rules() -> None:
    code = "import torch\nm = torch.load('a')  # torchcheck: ignore[TM203]\nn = torch.load('b')  # torchcheck: ignore\n"
    assert check_source(code) == []
    assert [f.rule for f in check_source("import torch\nm = torch.load('a')\n", ignore=["TM2"])] == []
    assert [f.rule for f in check_source("import torch\nm = torch.load('a')\n", select=["TM203"])] == [
        "TM203"
    ]


def test_more_specific_rule_wins_on_the_same_line() -> None:
    code = (
        "import torch\nfrom torch.utils.data import Dataset\n"
        "class D(Dataset):\n"
        "    def __getitem__(self, i):\n"
        "        return self.x[i].to('cuda')\n"
    )
    assert [f.rule for f in check_source(code)] == ["TM204"]


def test_messages_keep_the_parentheses_an_attribute_needs() -> None:
    from torchmagic import check_source

    code = "import torch\nxs = torch.randn(3, requires_grad=True)\ny = (xs ** 2).data\n"
    (f,) = [f for f in check_source(code) if f.rule == "TM403"]
    assert "`(xs ** 2).data`" in f.message and "`(xs ** 2).detach()`" in f.hint


def test_TM101_hint_names_only_factories_pytorch_has() -> None:
    import re

    import torch

    from torchmagic.lint.rules.modules import FACTORIES

    for name in sorted(FACTORIES):
        args = "0.0, 1.0, size=(3,)" if name == "normal" else "3"
        code = f"import torch\nimport torch.nn as nn\nclass N(nn.Module):\n    def forward(self, x):\n        return torch.{name}({args})\n"
        hint = only(code, "TM101").hint
        for method in re.findall(r"x\.(new_\w+)\(", hint):
            assert hasattr(torch.Tensor, method), (name, method)
        for func in re.findall(r"torch\.(\w+)\(", hint):
            assert hasattr(torch, func), (name, func)


def test_TM101_fix_never_names_a_variable_out_of_scope() -> None:
    """The `device=` fix goes outside the call's comprehension: its variable is not bound there,
    and the sequence it iterates has no `.device`."""
    head = "import torch\nimport torch.nn as nn\nclass N(nn.Module):\n    def forward(self, x):\n"
    inner = head + "        w = torch.tensor([t.shape[-1] for t in x])\n        return w * 2\n"
    assert only(inner, "TM101").fix is None
    mapped = head + "        w = torch.tensor(list(map(lambda t: t.shape[0], x)))\n        return w * 2\n"
    assert only(mapped, "TM101").fix is None
    lam = head + "        f = lambda t: torch.zeros(t.size(0))\n        return f(x)\n"
    fix = only(lam, "TM101").fix  # inside the lambda, `t` is in scope
    assert fix is not None and "device=t.device" in str(fix.to_dict())
    plain = head + "        w = torch.zeros(x.size(0))\n        return w * 2\n"
    fix = only(plain, "TM101").fix
    assert fix is not None and "device=x.device" in str(fix.to_dict())


def test_TM106_parameter_conversions_agree_with_pytorch() -> None:
    """Flagged exactly when the attribute really ends up a plain tensor (checked by building it)."""
    import numpy as np
    import torch
    from torch import nn

    cases = [
        "nn.Parameter(torch.randn(3, 2)).type(torch.FloatTensor)",
        "nn.Parameter(torch.randn(3, 2)).type('torch.FloatTensor')",
        "nn.Parameter(torch.zeros(3)).float()",
        "nn.Parameter(torch.Tensor(3).uniform_(-1, 1)).to(torch.float32)",
        "nn.Parameter(torch.ones(3)).cpu()",
        "nn.Parameter(torch.randn(3)).double()",
        "nn.Parameter(torch.randn(3)).to(torch.float64)",
        "nn.Parameter(torch.from_numpy(np.zeros(3))).float()",
    ]
    for expr in cases:
        code = (
            "import numpy as np\nimport torch\nimport torch.nn as nn\n"
            f"class N(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = {expr}\n"
        )
        flagged = any(f.rule == "TM106" for f in check_source(code))
        namespace = {"np": np, "torch": torch, "nn": nn}
        exec(code, namespace)
        registered = "w" in dict(namespace["N"]().named_parameters())
        assert flagged == (not registered), expr


def test_TM701_a_sliding_window_gets_the_unfold_that_computes_it() -> None:
    code = (
        "import torch\n"
        "def corr(X, K):\n"
        "    h, w = K.shape\n"
        "    Y = torch.zeros((X.shape[0] - h + 1, X.shape[1] - w + 1))\n"
        "    for i in range(Y.shape[0]):\n"
        "        for j in range(Y.shape[1]):\n"
        "            Y[i, j] = (X[i:i + h, j:j + w] * K).sum()\n"
        "    return Y\n"
    )
    f = only(code, "TM701")
    assert "slides the window `X[i:i + h, j:j + w]`" in f.message
    assert "`X.unfold(0, h, 1).unfold(1, w, 1)`" in f.hint and "conv2d" in f.hint
    # the spelling the hint gives computes what the loop computes
    import torch

    scope: dict = {}
    exec(code, scope)
    X, K = torch.randn(6, 7), torch.randn(2, 3)
    windows = eval("X.unfold(0, h, 1).unfold(1, w, 1)", {"X": X, "h": 2, "w": 3})
    assert torch.allclose(scope["corr"](X, K), (windows * K).sum((-2, -1)), atol=1e-5)


def test_TM701_an_element_loop_without_windows_keeps_the_general_hint() -> None:
    code = "import torch\nx = torch.randn(4, 3)\nout = torch.empty(4)\nfor i in range(x.shape[0]):\n    out[i] = x[i, 1:3].sum()\n"
    f = only(code, "TM701")
    assert "element by element" in f.message and "unfold" not in f.hint


def test_TM203_code_on_the_default_gpu_only_restores_its_checkpoints_where_they_belong() -> None:
    code = (
        "import torch\n"
        "net = Net().cuda()\n"
        "net.load_state_dict(torch.load(path))\n"
        "ckpt = torch.load(other)\n"
        "for x in loader:\n"
        "    net(x.cuda() * ckpt['scale'])\n"
    )
    assert _rules(code).count("TM203") == 0
    assert (
        _rules(code.replace("net = Net().cuda()", "device = 'cuda'\nnet = Net().to(device)")).count("TM203")
        == 0
    )
    # anything that lets the code run on the CPU makes a GPU checkpoint a hazard again
    for cpu_path in (
        "if args.cuda:\n    net = net.cuda()\n",
        "use_cuda = torch.cuda.is_available()\n",
        "cpu = torch.device('cpu')\n",
        "device = args.device\n",
        "def step(net, device):\n    pass\n",
        "parser.add_argument('--no-cuda', action='store_true')\n",
        "if args.ngpu > 0:\n    net = nn.DataParallel(net)\n",
        "if args.gpu >= 0:\n    net = net.cuda(args.gpu)\n",
        "if x.device.type == 'cuda':\n    pass\n",
    ):
        other = code.replace("net = Net().cuda()\n", "net = Net().cuda()\n" + cpu_path)
        assert [f.severity for f in check_source(other) if f.rule == "TM203"] == ["warning", "warning"], (
            cpu_path
        )
    # which GPU, or how many, is not whether: still no CPU path
    for which in (
        "if torch.cuda.device_count() > 1:\n    net = nn.DataParallel(net)\n",
        "if args.gpu != 0:\n    quiet()\n",
    ):
        assert (
            _rules(code.replace("net = Net().cuda()\n", "net = Net().cuda()\n" + which)).count("TM203") == 0
        )


def test_TM203_code_that_picks_its_gpus_hears_of_the_index_and_of_one_process_per_gpu() -> None:
    code = (
        "import torch\n"
        "torch.cuda.set_device(args.gpu)\n"
        "net = Net().cuda(args.gpu)\n"
        "net.load_state_dict(torch.load(path))\n"
    )
    f = only(code, "TM203")
    assert f.severity == "info" and "picks its GPU" in f.message and "`cuda:1`" in f.message
    assert f.fix is not None and 'map_location="cuda"' in f.hint  # set_device: "cuda" is this process's GPU
    ddp = code.replace("torch.cuda.set_device", "dist.init_process_group('nccl')\ntorch.cuda.set_device")
    f = only(ddp, "TM203")
    assert f.severity == "warning" and "every process puts its copy" in f.message
    # the same file is loaded with `map_location` on the other branch: this is the default-GPU case
    mapped = ddp.replace(
        "net.load_state_dict(torch.load(path))\n",
        "if args.gpu is None:\n    net.load_state_dict(torch.load(path))\n"
        "else:\n    net.load_state_dict(torch.load(path, map_location=f'cuda:{args.gpu}'))\n",
    )
    assert [f for f in check_source(mapped) if f.rule == "TM203"] == []
    # no `set_device` and no `device` name: "cuda" would be GPU 0, not the picked one: no edit
    assert only(code.replace("torch.cuda.set_device(args.gpu)\n", ""), "TM203").fix is None


def test_TM601_a_module_reloaded_whole_gets_a_hint_for_both_lines() -> None:
    code = "import torch\nnet = Net()\nnet.train()\ntorch.save(net, 'best.pt')\nnet = torch.load('best.pt')\n"
    f = only(code, "TM601")
    assert "line 5" in f.hint and "`net.load_state_dict(torch.load('best.pt'))`" in f.hint
    assert "load them into the model" in f.hint and f.fix is None
    # reloaded under another name: that model is built from its class first
    other = code.replace("net = torch.load", "restored = torch.load")
    assert "build `restored` from its class" in only(other, "TM601").hint
    # nothing reloads it: the plain hint
    plain = code.replace("net = torch.load('best.pt')\n", "")
    assert only(plain, "TM601").hint == "Save the weights: `torch.save(net.state_dict(), f)`."


def test_TM504_a_schedule_written_in_the_source_is_its_own_contract() -> None:
    import importlib.util
    import warnings
    from pathlib import Path

    import torch

    path = Path(__file__).parent / "fixtures" / "rules" / "TM504_ok_schedule_written_here.py"
    spec = importlib.util.spec_from_file_location("own_schedule", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-5)
    schedule = mod.GeometricSweep(opt, 10.0, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(5):
            # what the silence rests on: its get_lr() is the rate in use at every step
            assert schedule.get_lr()[0] == schedule.get_last_lr()[0] == opt.param_groups[0]["lr"]
            opt.step()
            schedule.step()
    assert [f for f in check_source(path.read_text()) if f.rule == "TM504"] == []
    torch_schedule = path.read_text().replace(
        "GeometricSweep(opt, end_lr, len(batches))", "torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)"
    )
    assert [f.rule for f in check_source(torch_schedule) if f.rule == "TM504"] == ["TM504"]


def test_tests_in_one_loop_nest_make_one_TM302_finding_that_names_every_line() -> None:
    code = (
        "import torch\n"
        "device = torch.device('cuda')\n"
        "def step_all(n, lo, hi):\n"
        "    for _ in range(n):\n"
        "        x = torch.randn(8, device=device)\n"
        "        if x.max() > hi:\n"
        "            x = x / 2\n"
        "        assert x.isfinite().all()\n"
        "    while torch.rand(1, device=device) > lo:\n"
        "        hi = hi / 2\n"
    )
    found = [f for f in check_source(code) if f.rule == "TM302"]
    assert [f.line for f in found] == [6, 9]
    loop, other = found
    assert loop.message == (
        "`if x.max() > hi` converts a tensor to a Python bool, which waits for the GPU; 1 more test"
        " waits in the same loop (line 8)."
    )
    assert "a single deliberate wait can serve every decision" in loop.hint
    assert other.message.endswith("waits for the GPU.")


def test_TM301_reads_after_the_first_go_with_its_fix() -> None:
    # `loss_aux.item() if use_aux else 0` reads a value that exists: it waits for nothing new,
    # and neither do the reads after it; the first read's fix names them, so fixing the first
    # read does not move the finding to the next line
    code = (
        "import torch\n"
        "model = model.cuda()\n"
        "for x in loader:\n"
        "    loss, loss_aux, loss_rec = model(x.cuda())\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    total += loss.item()\n"
        "    total_aux += loss_aux.item() if cfg.use_aux else 0.0\n"
        "    total_rec += loss_rec.item()\n"
    )
    f = only(code, "TM301")
    assert f.line == 7
    assert "line 8 `loss_aux.item()`" in f.hint and "line 9 `loss_rec.item()`" in f.hint
    # new work between the reads: the second is a wait of its own, and keeps its finding
    code = code.replace(
        "    total_rec += loss_rec.item()\n", "    total_rec += model(x.cuda())[2].sum().item()\n"
    )
    assert [g.line for g in check_source(code) if g.rule == "TM301"] == [7, 9]
