"""Live-namespace resolution: names the cell did not define are resolved from real objects
(by `type()` only), so findings depend on what the names hold in the kernel."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from torchmagic import check_source  # noqa: E402


def rules(code: str, ns: dict | None = None) -> list[tuple[int, str]]:
    return [(f.line, f.rule) for f in check_source(code, namespace=ns)]


def test_TM601_flags_saving_a_module_from_an_earlier_cell() -> None:
    code = "torch.save(net, 'net.pt')\n"
    assert rules(code, {"torch": torch, "net": nn.Linear(2, 2)}) == [(1, "TM601")]
    assert rules(code, {"torch": torch, "net": nn.Linear(2, 2).state_dict()}) == []
    assert rules(code, {"torch": torch, "net": torch.zeros(2)}) == []
    assert rules(code) == []  # unknown without the namespace: precision first


def test_TM702_resolves_a_scalar_column_index() -> None:
    code = "col = x[torch.arange(x.shape[0]), k]\n"
    x = torch.randn(4, 3)
    assert rules(code, {"torch": torch, "x": x, "k": 2}) == [(1, "TM702")]
    assert rules(code, {"torch": torch, "x": x, "k": torch.tensor([0, 1, 2, 0])}) == []
    assert rules(code, {"torch": torch, "x": x, "k": [0, 1, 2, 0]}) == []


def test_TM403_depends_on_whether_the_owner_is_a_tensor() -> None:
    code = "d = ds.data\n"
    assert rules(code, {"ds": torch.utils.data.TensorDataset(torch.zeros(2))}) == []
    assert rules(code, {"ds": torch.zeros(2, requires_grad=True)}) == [(1, "TM403")]
    assert rules(code, {"ds": nn.Parameter(torch.zeros(2))}) == [(1, "TM403")]


def test_TM301_item_on_a_python_number_is_not_a_sync() -> None:
    code = "x = x.to(device)\nfor i in range(steps):\n    v = value.item()\n"
    assert rules(code, {"value": 3}) == []
    assert rules(code, {"value": torch.tensor(3.0, device="meta")}) == [(3, "TM301")]


def test_TM301_and_TM302_know_a_live_cpu_tensor_waits_for_no_gpu() -> None:
    code = "x = x.to(device)\nfor i in range(steps):\n    v = zz[i].item()\n    if zz[i] > 0:\n        pass\n"
    assert rules(code, {"zz": torch.zeros(3, 7)}) == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_TM301_knows_a_live_cuda_tensor_without_a_path_in_the_cell() -> None:
    code = "for i in range(steps):\n    v = zz[i].item()\n"
    assert rules(code, {"zz": torch.zeros(3, 7, device="cuda")}) == [(2, "TM301")]


def test_TM302_test_on_a_live_tensor() -> None:
    code = "loss = loss.to(device)\nfor step in range(1000):\n    if loss < best:\n        best = 0\n"
    assert rules(code, {"loss": torch.tensor(0.5, device="meta"), "best": 1.0}) == [(3, "TM302")]
    assert rules(code, {"loss": 0.5, "best": 1.0}) == []
    # once, at the cell's top level: one wait per run
    once = "loss = loss.to(device)\nif loss < best:\n    best = 0\n"
    assert rules(once, {"loss": torch.tensor(0.5, device="meta"), "best": 1.0}) == []


def test_TM501_knows_a_live_optimizer_by_its_type() -> None:
    model = nn.Linear(2, 1)
    code = "for x in xs:\n    model(x).sum().backward()\n    sgd.step()\n"
    ns = {"model": model, "sgd": torch.optim.SGD(model.parameters(), lr=0.1), "xs": []}
    assert rules(code, ns) == [(3, "TM501")]
    assert rules(code.replace("    sgd.step()", "    sgd.zero_grad()\n    sgd.step()"), ns) == []


def test_TM503_tells_plateau_schedulers_apart() -> None:
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)
    code = "sched.step(3)\n"
    assert rules(code, {"sched": torch.optim.lr_scheduler.StepLR(opt, 2)}) == [(1, "TM503")]
    assert rules(code, {"sched": torch.optim.lr_scheduler.ReduceLROnPlateau(opt)}) == []


def test_TM904_resolves_a_live_loss_module() -> None:
    code = "loss = crit(F.softmax(logits, dim=1), y)\n"
    assert rules(code, {"crit": nn.CrossEntropyLoss()}) == [(1, "TM904")]
    assert rules(code, {"crit": nn.NLLLoss()}) == [(1, "TM904")]
    assert rules(code.replace("F.softmax", "F.log_softmax"), {"crit": nn.NLLLoss()}) == []


def test_TM405_on_a_live_model_output() -> None:
    code = "preds = net(x).cpu().numpy()\n"
    assert rules(code, {"net": nn.Linear(2, 2), "x": torch.zeros(1, 2)}) == [(1, "TM405")]
    assert rules(code, {"net": lambda t: t, "x": torch.zeros(1, 2)}) == []


def test_TM405_asks_a_live_module_whether_it_holds_weights() -> None:
    class Inversion(nn.Module):  # a numerical method packaged as a module: no parameters
        def forward(self, t: torch.Tensor) -> torch.Tensor:
            return torch.cos(t)

    frozen = nn.Linear(2, 2).requires_grad_(False)
    code = "out = inverse(x)\nerr = nn.MSELoss()(out, x).cpu().numpy()\n"
    ns = {"nn": nn, "x": torch.zeros(1, 2)}
    assert rules(code, {**ns, "inverse": Inversion()}) == []
    assert rules(code, {**ns, "inverse": frozen}) == []
    assert rules(code, {**ns, "inverse": nn.Sequential(frozen, nn.Linear(2, 2))}) == [(2, "TM405")]


def test_live_objects_are_never_touched_beyond_their_type() -> None:
    touched: list[str] = []

    class Trap:
        def __getattribute__(self, name: str):
            touched.append(name)
            raise RuntimeError("attribute read")

        def __bool__(self) -> bool:
            touched.append("__bool__")
            raise RuntimeError("bool")

        def __len__(self) -> int:
            touched.append("__len__")
            raise RuntimeError("len")

    code = "torch.save(obj, 'f')\nfor i in range(2):\n    obj.item()\nif obj:\n    obj.data\n"
    check_source(code, {"torch": torch, "obj": Trap()})
    assert touched == []


def test_names_bound_in_the_cell_win_over_the_namespace() -> None:
    code = "net = {'w': 1}\ntorch.save(net, 'f')\n"
    assert rules(code, {"torch": torch, "net": nn.Linear(2, 2)}) == []


def test_TM801_live_loader_from_an_earlier_cell_flagged_at_the_for_line() -> None:
    from torch.utils.data import DataLoader

    code = "for xb, yb in loader:\n    xb, yb = xb.cuda(), yb.cuda()\n"
    data = [(torch.zeros(2), torch.zeros(1))] * 4
    unpinned = {"torch": torch, "loader": DataLoader(data, batch_size=2)}
    pinned = {"torch": torch, "loader": DataLoader(data, batch_size=2, pin_memory=True)}
    assert (1, "TM801") in rules(code, unpinned)
    assert (1, "TM801") not in rules(code, pinned)
    # batches that stay on the CPU need no pinned memory
    assert (1, "TM801") not in rules("for xb, yb in loader:\n    print(xb.shape)\n", unpinned)


def test_TM801_live_loader_handed_to_a_function_of_an_earlier_cell(shell) -> None:
    """In a kernel: the loader and the function that moves its batches are live objects of
    earlier cells; the function's source is read back from IPython's cell cache."""
    from torchmagic.lint import lint

    shell.run_cell(
        "import torch\n"
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "rows = TensorDataset(torch.randn(8, 2), torch.randn(8, 1))\n"
        "plain = DataLoader(rows, batch_size=4)\n"
        "pinned = DataLoader(rows, batch_size=4, pin_memory=True)\n"
        "def fit(model, dev, loader):\n"
        "    for x, y in loader:\n"
        "        model(x.to(dev)).sub(y.to(dev)).pow(2).mean().backward()\n"
        "def peek(loader):\n"
        "    for x, y in loader:\n"
        "        print(x.shape)\n"
    )
    ns = shell.user_ns

    def tm801(code: str, accelerator: bool) -> list[tuple[int, str]]:
        found = lint(code, ns, accelerator_hint=accelerator).resolved(accelerator)
        return [(f.line, f.message) for f in found if f.rule == "TM801"]

    [(line, message)] = tm801("net = torch.nn.Linear(2, 1)\nfit(net, 'cuda', plain)\n", True)
    assert line == 2 and "`plain`" in message and "`fit` copies to the GPU" in message
    assert tm801("net = torch.nn.Linear(2, 1)\nfit(net, 'cuda', pinned)\n", True) == []
    assert tm801("peek(plain)\n", True) == []  # its batches stay on the CPU
    # a kernel with no accelerator never copies to one
    assert tm801("net = torch.nn.Linear(2, 1)\nfit(net, 'cuda', plain)\n", False) == []
