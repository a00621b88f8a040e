"""explain(): a matrix of real failing cells, one per error kind, raised at top level, inside
nested modules, in functions defined in another file and inside comprehensions. Each checks
the layer named, the exact shapes, the cell line, and that explaining ran no user code (the
harness asserts a counter user code ticks has not moved)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from torchmagic.explain import InFlight, ModuleCall, explain
from torchmagic.explain import frames as fr
from torchmagic.explain import messages as m

HERE = Path(__file__).parent / "fixtures" / "explain"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"explain_fixture_{name}", HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


harness = _load("harness")
userlib = _load("userlib")


def run(source: str):
    return harness.run_cell(source, userlib=userlib)


# (id, cell, line, layer, kind, message parts, hint part, tensors {name: shape}, forward calls). The line
# is the last one in the cell's own code: the failing line of a forward the cell defines.
MATRIX = [
    # ---- matmul / linear
    ("linear-top", """
net = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(64, 10))
x = torch.randn(32, 784)
out = net(x)
""", 4, "net.2", m.MATMUL,
     ["`net.2` (Linear 64→10) got input [32, 128] from `net.1`: mat1 and mat2 shapes cannot be multiplied (32x128 and 64x10)."],
     "build it as `nn.Linear(128, 10)`", {"input": [32, 128], "net.2.weight": [10, 64], "x": [32, 784]}, 0),
    ("linear-sequential-in-sequential", """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU()), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Sequential(nn.Linear(8 * 13 * 13, 64)), nn.Linear(32, 10))
    def forward(self, x):
        hits.tick()
        h = self.encoder(x).flatten(1)
        return self.head(h)
model = Net()
out = model(torch.randn(4, 1, 28, 28))
""", 10, "model.head.1", m.MATMUL,
     ["`model.head.1` (Linear 32→10) got input [4, 64] from `model.head.0`", "(4x64 and 32x10)"],
     "`nn.Linear(64, 10)`", {"input": [4, 64], "h": [4, 1352]}, 1),
    ("linear-needs-flatten", """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU())
        self.head = nn.Linear(8 * 26 * 26, 10)
    def forward(self, x):
        hits.tick()
        return self.head(self.encoder(x))
model = Net()
out = model(torch.randn(4, 1, 28, 28))
""", 9, "model.head", m.MATMUL,
     ["`model.head` (Linear 5408→10) got input [4, 8, 26, 26] from `model.encoder`", "(832x26 and 5408x10)"],
     "`x.flatten(1)`", {"input": [4, 8, 26, 26], "x": [4, 1, 28, 28]}, 1),
    ("linear-in-comprehension", """
net = nn.Sequential(nn.Linear(10, 5))
batches = [torch.randn(2, 10), torch.randn(2, 12)]
outs = [net(xb) for xb in batches]
""", 4, "net.0", m.MATMUL, ["`net.0` (Linear 10→5) got input [2, 12]:"], "`nn.Linear(12, 5)`",
     {"input": [2, 12], "xb": [2, 12]}, 0),
    ("matmul-elsewhere", """
x = torch.randn(8, 16)
w = torch.randn(10, 16)
y = userlib.scores(x, w, hits)
""", 4, None, m.MATMUL, ["`x @ w` in `scores()` multiplies `x` [8, 16] by `w` [10, 16]"], "`x @ w.T`",
     {"x": [8, 16], "w": [10, 16]}, 1),
    # ---- cat / stack
    ("cat-top", """
a = torch.randn(2, 3)
b = torch.randn(2, 4)
c = torch.cat([a, b])
""", 4, None, m.CAT, ["`torch.cat([a, b])` joins `a` [2, 3] and `b` [2, 4]: Sizes of tensors must match"],
     "pass `dim=1`", {"a": [2, 3], "b": [2, 4]}, 0),
    ("cat-in-own-forward", """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8)
        self.register_buffer("extra", torch.zeros(3, 2))
    def forward(self, x):
        hits.tick()
        h = self.a(x)
        return torch.cat([h, self.extra], dim=0)
model = Net()
out = model(torch.randn(3, 4))
""", 10, "model", m.CAT,
     ["`torch.cat([h, self.extra], dim=0)` in the forward of `model` (Net) joins `h` [3, 8] and `self.extra` [3, 2]"],
     "pass `dim=1`", {"h": [3, 8], "self.extra": [3, 2]}, 1),
    ("cat-elsewhere", """
a = torch.randn(2, 3)
b = torch.randn(2, 4)
y = userlib.merge(a, b, hits)
""", 4, None, m.CAT, ["in `merge()` joins `a` [2, 3] and `b` [2, 4]"], "`dim=1`", {"a": [2, 3], "b": [2, 4]}, 1),
    ("cat-in-comprehension", """
base = torch.randn(1, 3)
parts = [torch.randn(1, 3), torch.randn(1, 5)]
rows = [torch.cat([base, p]) for p in parts]
""", 4, None, m.CAT, ["`torch.cat([base, p])` joins `base` [1, 3] and `p` [1, 5]"], "`dim=1`",
     {"base": [1, 3], "p": [1, 5]}, 0),
    ("cat-in-comprehension-name-taken", """
base = torch.randn(1, 3)
p = torch.randn(1, 3)
parts = [torch.randn(1, 3), torch.randn(1, 5)]
rows = [torch.cat([base, p]) for p in parts]
""", 5, None, m.CAT, ["`torch.cat([base, p])` joins `base` [1, 3] and `p` [1, 5]"], "`dim=1`",
     {"base": [1, 3], "p": [1, 5]}, 0),
    ("stack-list", """
xs = [torch.randn(2, 3), torch.randn(2, 4)]
s = torch.stack(xs)
""", 3, None, m.STACK, ["`torch.stack(xs)` stacks `xs[0]` [2, 3] and `xs[1]` [2, 4]"], "pad or crop",
     {"xs[0]": [2, 3], "xs[1]": [2, 4]}, 0),
    ("stack-dataloader", """
from torch.utils.data import DataLoader
class DS(torch.utils.data.Dataset):
    def __len__(self):
        return 4
    def __getitem__(self, i):
        hits.tick()
        return torch.randn(3 + i)
loader = DataLoader(DS(), batch_size=2)
for xb in loader:
    pass
""", 10, None, m.STACK, ["`for xb in loader` batches samples of different shapes ([3] and [4])"], "`collate_fn`", {}, 2),
    # ---- broadcasting
    ("broadcast-top", """
scores = torch.randn(4, 3)
bias = torch.randn(4)
z = scores + bias
""", 4, None, m.BROADCAST, ["`scores + bias` combines `scores` [4, 3] and `bias` [4]: The size of tensor a (3)"],
     "`bias[:, None]`", {"scores": [4, 3], "bias": [4]}, 0),
    ("broadcast-loss", """
crit = nn.MSELoss()
pred = nn.Sequential(nn.Linear(2, 3))
loss = crit(pred(torch.randn(4, 2)), torch.randn(4, 5))
""", 4, "crit", m.BROADCAST, ["`crit` (MSELoss) got input [4, 3] and target [4, 5]"], "the input's shape [4, 3]",
     {"input": [4, 3], "target": [4, 5]}, 0),
    # ---- convolutions
    ("conv-grayscale", """
cnn = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())
out = cnn(torch.randn(4, 1, 28, 28))
""", 3, "cnn.0", m.CONV_CHANNELS,
     ["`cnn.0` (Conv2d 3→8, kernel 3×3) got input [4, 1, 28, 28] with 1 channel where it expects 3"],
     "`nn.Conv2d(1, 8, kernel_size=3)`", {"input": [4, 1, 28, 28], "cnn.0.weight": [8, 3, 3, 3]}, 0),
    ("conv-channels-last", """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Conv2d(16, 32, 3))
    def forward(self, x):
        hits.tick()
        return self.features(x)
model = Net()
out = model(torch.randn(2, 32, 32, 3))
""", 8, "model.features.0", m.CONV_CHANNELS, ["got input [2, 32, 32, 3] with 32 channels where it expects 3"],
     "`x.permute(0, 3, 1, 2)`", {"input": [2, 32, 32, 3]}, 1),
    ("conv-unbatched", """
net = nn.Sequential(nn.Conv2d(3, 8, 3))
out = net(torch.randn(4, 3, 28))
""", 3, "net.0", m.CONV_CHANNELS, ["got input [4, 3, 28] with 4 channels where it expects 3"], "`x.unsqueeze(0)`",
     {"input": [4, 3, 28]}, 0),
    # ---- view
    ("view-elsewhere", """
attn = userlib.Heads(8, 2, hits)
y = attn(torch.randn(2, 5, 8))
""", 3, "attn", m.VIEW_STRIDE,
     ["`q.view(b, self.heads, -1)` in the forward of `attn` (Heads) calls `.view()` on `q` [2, 8, 5]"],
     "`q.reshape(b, self.heads, -1)`", {"q": [2, 8, 5]}, 1),
    ("view-top", """
x = torch.randn(4, 5)
y = x.t().view(20)
""", 3, None, m.VIEW_STRIDE, ["`x.t().view(20)` calls `.view()` on `x.t()`"], "`x.t().reshape(20)`", {"x": [4, 5]}, 0),
    ("view-numel-lenet", """
class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 6, 5)
        self.fc = nn.Linear(16 * 5 * 5, 10)
    def forward(self, x):
        hits.tick()
        x = self.conv(x)
        x = x.view(-1, 16 * 5 * 5)
        return self.fc(x)
net = LeNet()
out = net(torch.randn(2, 1, 32, 32))
""", 10, "net", m.VIEW_NUMEL, ["asks for shape [-1, 400] from `x` [2, 6, 28, 28], which has 9408 elements"],
     "`x.flatten(1)` gives [2, 4704]", {"x": [2, 6, 28, 28]}, 1),
    # ---- dtypes
    ("dtype-numpy-input", """
import numpy as np
net = nn.Sequential(nn.Linear(3, 2))
x = torch.from_numpy(np.ones((5, 3)))
out = net(x)
""", 5, "net.0", m.DTYPE, ["`net.0` (Linear 3→2) got input [5, 3] of dtype float64, but its weights are float32"],
     "`x.float()`", {"input": [5, 3], "x": [5, 3]}, 0),
    ("dtype-ids-into-linear", """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 2)
    def forward(self, x):
        hits.tick()
        return self.proj(x)
model = Net()
out = model(torch.randint(0, 9, (3, 4)))
""", 8, "model.proj", m.DTYPE, ["got input [3, 4] of dtype int64, but its weights are float32"], "`nn.Embedding`",
     {"input": [3, 4]}, 1),
    ("target-dtype-loss-module", """
crit = nn.CrossEntropyLoss()
logits = torch.randn(4, 3)
y = torch.tensor([0.0, 1.0, 2.0, 1.0])
loss = crit(logits, y)
""", 5, "crit", m.TARGET_DTYPE, ["`crit` (CrossEntropyLoss) got input [4, 3] and target [4] (float32)"],
     "`target.long()`", {"input": [4, 3], "target": [4], "y": [4]}, 0),
    ("target-dtype-functional", """
logits = torch.randn(4, 3)
y = torch.tensor([0.0, 1.0, 2.0, 1.0])
loss = F.cross_entropy(logits, y)
""", 4, None, m.TARGET_DTYPE, ["`F.cross_entropy(logits, y)` got input [4, 3] and target [4] (float32)"],
     "`target.long()`", {"input": [4, 3], "target": [4]}, 0),
    # torch words this one "expected scalar type Long but found Float" (so did cross_entropy
    # before torch 2.12): in a loss, the Long it wants is the target's
    ("target-dtype-margin-loss", """
scores = torch.randn(4, 3)
y = torch.tensor([0.0, 1.0, 2.0, 1.0])
loss = F.multi_margin_loss(scores, y)
""", 4, None, m.TARGET_DTYPE, ["`F.multi_margin_loss(scores, y)` got input [4, 3] and target [4] (float32)"],
     "`target.long()`", {"input": [4, 3], "target": [4]}, 0),
    ("target-dtype-bce-long", """
crit = nn.BCEWithLogitsLoss()
loss = crit(torch.randn(8), torch.ones(8, dtype=torch.long))
""", 3, "crit", m.DTYPE, ["`crit` (BCEWithLogitsLoss) got target [8] of dtype int64"], "`target.float()`",
     {"target": [8]}, 0),
    # ---- embeddings and indices
    ("embedding-range", """
class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.rnn = nn.LSTM(16, 32, batch_first=True)
    def forward(self, ids):
        hits.tick()
        h, _ = self.rnn(self.emb(ids))
        return h
lm = LM()
out = lm(torch.arange(14).view(2, 7) * 9)  # ids up to 117
""", 9, "lm.emb", m.INDEX_RANGE, ["`lm.emb` (Embedding 100×16) got indices [2, 7], at least one outside [0, 100)"],
     "takes ids 0…99", {"input": [2, 7], "ids": [2, 7], "lm.emb.weight": [100, 16]}, 1),
    ("embedding-float-ids", """
emb = nn.Embedding(10, 4)
out = emb(torch.tensor([1.0, 2.0]))
""", 3, "emb", m.INDEX_DTYPE, ["`emb` (Embedding 10×4) got indices [2] of dtype float32"], "`idx.long()`",
     {"input": [2]}, 0),
    # ---- cross-entropy target shape, batch size
    ("multi-target", """
crit = nn.CrossEntropyLoss()
logits = torch.randn(4, 3)
labels = torch.zeros(4, 1, dtype=torch.long)
loss = crit(logits, labels)
""", 5, "crit", m.TARGET_SHAPE, ["`crit` (CrossEntropyLoss) got input [4, 3] and target [4, 1]: 0D or 1D target"],
     "`target.squeeze(1)`", {"target": [4, 1], "labels": [4, 1]}, 0),
    ("one-hot-target", """
logits = torch.randn(4, 3)
onehot = torch.eye(3, dtype=torch.long)[torch.tensor([0, 2, 1, 1])]
loss = F.cross_entropy(logits, onehot)
""", 4, None, m.TARGET_DTYPE, ["got input [4, 3] and target [4, 3] (int64)"], "`target.argmax(1)`",
     {"onehot": [4, 3]}, 0),
    ("batch-size", """
crit = nn.CrossEntropyLoss()
model = nn.Sequential(nn.Linear(6, 3))
x = torch.randn(4, 6)
y = torch.zeros(2, 2, dtype=torch.long)
loss = crit(model(x), y)
""", 6, "crit", m.BATCH_SIZE,
     ["`crit` (CrossEntropyLoss) got input [4, 3] and target [2, 2]: Expected input batch_size (4) to match target batch_size (2)."],
     "`target.view(-1)`", {"input": [4, 3], "target": [2, 2], "x": [4, 6], "y": [2, 2]}, 0),
    ("target-range", """
crit = nn.CrossEntropyLoss()
loss = crit(torch.randn(4, 3), torch.tensor([1, 2, 3, 0]))
""", 3, "crit", m.TARGET_RANGE, ["got input [4, 3] (3 classes) and target [4] with a value 3"], "`target - 1`",
     {"input": [4, 3]}, 0),
    # ---- devices (meta vs cpu raise on a CPU-only machine)
    ("device-model-on-meta", """
net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).to("meta")
out = net(torch.randn(5, 3))
""", 3, "net.0", m.DEVICE, ["`net.0` (Linear 3→4) has its weights on meta but got input [5, 3] on cpu"],
     '`x.to("meta")`', {"input": [5, 3], "net.0.weight": [4, 3]}, 0),
    ("device-model-left-on-cpu", """
net = nn.Sequential(nn.Linear(3, 4))
x = torch.randn(5, 3).to("meta")
out = net(x)
""", 4, "net.0", m.DEVICE, ["`net.0` (Linear 3→4) has its weights on cpu but got input [5, 3] on meta"],
     "`net.to(device)`", {"input": [5, 3], "x": [5, 3]}, 0),
    ("device-factory-in-forward", """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
    def forward(self, x):
        hits.tick()
        h = self.fc(x)
        return h + torch.ones(h.shape[0], 3)
model = Net().to("meta")
out = model(torch.randn(2, 3, device="meta"))
""", 9, "model", m.DEVICE, ["in the forward of `model` (Net) mixes `h` on meta with a tensor on cpu"],
     "pass `device=h.device`", {"h": [2, 3]}, 1),
    ("device-top", """
a = torch.randn(2, 3, device="meta")
b = torch.randn(2, 3)
c = torch.cat([a, b])
""", 4, None, m.DEVICE, ["`torch.cat([a, b])` mixes `a` on meta and `b` on cpu"], "`b.to(a.device)`",
     {"a": [2, 3], "b": [2, 3]}, 0),
    # ---- normalisation / recurrent layers
    ("batchnorm", """
net = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(8))
out = net(torch.randn(5, 4))
""", 3, "net.1", m.NORM_FEATURES, ["`net.1` (BatchNorm1d 8) got input [5, 6] from `net.0` with 6 features"],
     "`nn.BatchNorm1d(6)`", {"input": [5, 6]}, 0),
    ("lstm", """
rnn = nn.LSTM(8, 16)
out, _ = rnn(torch.randn(5, 4, 6))
""", 3, "rnn", m.RNN_INPUT, ["`rnn` (LSTM 8→16) got input [5, 4, 6] with 6 features per step"],
     "`nn.LSTM(6, 16)`", {"input": [5, 4, 6]}, 0),
]  # fmt: skip


# Python 3.12 runs a comprehension inline (PEP 709) and unbinds its loop variable when an error
# leaves it: by the time the explainer reads the frame, `xb` and `p` are gone. What is left
# (the layer's own input from the shape tracer; without `p`'s shape, no `dim=` hint):
INLINED_COMPREHENSIONS = {
    "linear-in-comprehension": (
        ["`net.0` (Linear 10→5) got input [2, 12]:"],
        "`nn.Linear(12, 5)`",
        {"input": [2, 12]},
    ),
    "cat-in-comprehension": (["`torch.cat([base, p])` joins `base` [1, 3] and `p`:"], "", {"base": [1, 3]}),
    # the global `p` [1, 3] is another tensor: not named as the failing item
    "cat-in-comprehension-name-taken": (
        ["`torch.cat([base, p])` joins `base` [1, 3] and `p`:"],
        "",
        {"base": [1, 3]},
    ),
}


@pytest.mark.filterwarnings("ignore:Using a target size")  # MSELoss warns before it fails
@pytest.mark.parametrize("case", MATRIX, ids=[c[0] for c in MATRIX])
def test_matrix(case):
    name, source, line, layer, kind, parts, hint, tensors, calls = case
    if sys.version_info >= (3, 12) and name in INLINED_COMPREHENSIONS:
        parts, hint, tensors = INLINED_COMPREHENSIONS[name]
    cell = run(source)
    ex = cell.explanation
    assert ex is not None, f"not explained: {cell.exc!r}"
    assert ex.kind == kind
    assert ex.line == line
    assert ex.layer == layer
    for part in parts:
        assert part in ex.message
    assert hint in ex.hint
    got = cell.tensors
    for name, shape in tensors.items():
        assert got[name].shape == shape, name
    assert cell.hits_at_error == calls  # the forward ran once, and explaining ran nothing


def test_chain_outermost_to_innermost_with_layer_summaries():
    cell = run(MATRIX[1][1])
    chain = [(c.name, c.type, c.summary) for c in cell.explanation.chain]
    assert chain == [
        ("model", "Net", "Net"),
        ("model.head", "Sequential", "Sequential"),
        ("model.head.1", "Linear", "Linear 32→10"),
    ]


def test_tensor_records_carry_dtype_device_and_role():
    ex = run(MATRIX[0][1]).explanation
    first = ex.tensors[0]
    assert (first.name, first.dtype, first.device, first.role) == (
        "input",
        "float32",
        "cpu",
        "argument of `net.2`",
    )
    assert ex.to_dict()["tensors"][0]["shape"] == [32, 128]
    assert ex.code == "net(x)" and ex.location.endswith(":4 in <module>")


def test_finding_is_tm001():
    ex = run(MATRIX[0][1]).explanation
    f = ex.to_finding()
    assert (f.rule, f.name, f.severity, f.line, f.object, f.source) == (
        "TM001",
        "tensor-error",
        "error",
        4,
        "net.2",
        "runtime",
    )
    assert f.message == ex.message and f.hint == ex.hint


def test_not_a_tensor_error_gives_nothing():
    cell = run("d = {}\nd['missing']\n")
    assert isinstance(cell.exc, KeyError) and cell.explanation is None
    cell = run("raise RuntimeError('CUDA driver initialization failed')\n")
    assert cell.explanation is None


def test_without_a_tracer_the_layer_comes_from_the_failing_forward():
    net = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(64, 10))
    with pytest.raises(RuntimeError) as info:
        net(torch.randn(32, 784))
    ex = explain(info.value)  # no tb, no modules, no line
    assert ex.layer is None and ex.line is None
    assert ex.message.startswith("Linear 64→10 got input [32, 128]: mat1 and mat2 shapes")
    assert "`nn.Linear(128, 10)`" in ex.hint
    assert [c.summary for c in ex.chain] == ["Linear 64→10"]


def test_module_calls_from_another_source_are_used_as_given():
    net = nn.Sequential(nn.Linear(8, 4), nn.Linear(5, 2))
    with pytest.raises(RuntimeError) as info:
        net(torch.randn(3, 8))
    calls = [
        ModuleCall(
            net[1], "model.decoder[1]", "Linear", previous="model.decoder[0]", previous_outputs=[[3, 4]]
        ),
        ModuleCall(net, "model.decoder", "Sequential"),
    ]
    ex = explain(info.value, info.value.__traceback__, calls, 7)
    assert ex.message.startswith("`model.decoder[1]` (Linear 5→2) got input [3, 4] from `model.decoder[0]`")
    assert [c.name for c in ex.chain] == ["model.decoder", "model.decoder[1]"]


# ---- nothing of the user's runs ---------------------------------------------------------------


class Trap:
    """Counts every dunder a careless reader could call."""

    count = 0

    def _hit(self, *a, **k):
        Trap.count += 1
        return 0

    __repr__ = __str__ = lambda self: (self._hit(), "trap")[1]  # noqa: E731
    __len__ = __bool__ = __eq__ = __hash__ = __iter__ = __index__ = _hit

    def __getattr__(self, name):
        Trap.count += 1
        raise AttributeError(name)


class Counting(torch.Tensor):
    calls = 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        Counting.calls += 1
        return super().__torch_function__(func, types, args, kwargs or {})


class Hostile(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.trap = Trap()
        self.other = torch.randn(3, 5).as_subclass(Counting)

    @property
    def prop(self):
        Trap.count += 1
        return None

    def __getattr__(self, name):
        Trap.count += 1
        return super().__getattr__(name)

    def forward(self, x):
        trap = Trap()  # noqa: F841  (a local of the failing frame)
        return torch.cat([self.fc(x), self.other], 0 if self.prop is self.trap else 0)


def test_explaining_calls_no_user_code():
    """A property, a class `__getattr__`, an object whose every dunder counts and a tensor
    subclass with `__torch_function__` are all on the failing line: none runs while explaining."""
    model = Hostile()
    with InFlight() as rec:
        with pytest.raises(RuntimeError) as info:
            model(torch.randn(3, 4))
    assert Trap.count > 0 and Counting.calls > 0  # they did run in the forward itself
    Trap.count = Counting.calls = 0
    ex = explain(info.value, info.value.__traceback__, rec.calls(info.value), None)
    assert (Trap.count, Counting.calls) == (0, 0)
    assert ex.kind == m.CAT
    # a call's result is named by its source, never evaluated; `self.other` is read as metadata
    assert "joins `self.fc(x)` and `self.other` [3, 5]" in ex.message
    assert ex.tensors[0].name == "x" and ex.tensors[0].shape == [3, 4]
    assert ("self.other", [3, 5]) in [(t.name, t.shape) for t in ex.tensors]
    assert ex.layer is None and ex.chain[-1].type == "Hostile"


# ---- the same failing op in four places ---------------------------------------------------------

OPS = {
    # kind: (op source, a, b, function in userlib, expected message part)
    m.CAT: ("torch.cat([a, b])", "torch.randn(2, 3)", "torch.randn(2, 4)", "op_cat", "joins `a` [2, 3] and `b` [2, 4]"),
    m.BROADCAST: ("a + b", "torch.randn(4, 3)", "torch.randn(4)", "op_add", "combines `a` [4, 3] and `b` [4]"),
    m.MATMUL: ("a @ b", "torch.randn(8, 16)", "torch.randn(10, 16)", "op_matmul", "multiplies `a` [8, 16] by `b` [10, 16]"),
    m.VIEW_STRIDE: ("a.t().view(-1)", "torch.randn(4, 5)", "None", "op_view", "calls `.view()` on `a.t()`"),
    m.DTYPE: ("a @ b", "torch.randn(3, 4)", "torch.randn(4, 2, dtype=torch.float64)", "op_matmul",
              "mixes `a` (float32) and `b` (float64)"),
    m.DEVICE: ("a + b", "torch.randn(2, 3, device='meta')", "torch.randn(2, 3)", "op_add",
               "mixes `a` on meta and `b` on cpu"),
}  # fmt: skip


def _placed(where: str, op: str, a: str, b: str, fn: str) -> tuple[str, int, str | None]:
    """A cell running `op` at top level, in a nested module's forward, in a function from
    another file, or in a comprehension: (source, cell line, layer)."""
    head = f"a = {a}\nb = {b}\n"
    if where == "top":
        return head + f"out = {op}\n", 3, None
    if where == "comprehension":
        return head + f"outs = [{op} for _ in range(2)]\n", 3, None
    if where == "elsewhere":
        return head + f"out = userlib.{fn}(a, b)\n", 3, None
    return (
        head
        + "class Inner(nn.Module):\n"
        + "    def forward(self, a, b):\n"
        + "        hits.tick()\n"
        + f"        return {op}\n"
        + "class Outer(nn.Module):\n"
        + "    def __init__(self):\n"
        + "        super().__init__()\n"
        + "        self.blocks = nn.Sequential(nn.Identity())\n"
        + "        self.inner = Inner()\n"
        + "    def forward(self, a, b):\n"
        + "        hits.tick()\n"
        + "        return self.inner(self.blocks(a), b)\n"
        + "outer = Outer()\n"
        + "out = outer(a, b)\n",
        6,
        "outer.inner",
    )


@pytest.mark.parametrize("where", ["top", "module", "elsewhere", "comprehension"])
@pytest.mark.parametrize("kind", list(OPS))
def test_each_kind_in_each_place(kind, where):
    op, a, b, fn, part = OPS[kind]
    source, line, layer = _placed(where, op, a, b, fn)
    cell = run(source)
    ex = cell.explanation
    assert ex is not None and ex.kind == kind, cell.exc
    assert ex.line == line and ex.layer == layer
    assert part in ex.message
    if where == "module":
        assert "in the forward of `outer.inner` (Inner)" in ex.message
        assert [c.name for c in ex.chain] == ["outer", "outer.inner"]
        assert cell.hits_at_error == 2  # Outer and Inner ran once each; explaining ran nothing
    if where == "elsewhere":
        assert f"in `{fn}()`" in ex.message and ex.location.split(":")[0].endswith("userlib.py")
    shapes = {t.name: t.shape for t in ex.tensors}
    assert shapes["a"] == list(eval(a).shape)


# ---- InFlight ----------------------------------------------------------------------------------


class Tolerant(nn.Module):
    def __init__(self):
        super().__init__()
        self.bad = nn.Linear(3, 3)
        self.good = nn.Linear(4, 2)

    def forward(self, x):
        try:
            self.bad(x)  # raises, caught here
        except RuntimeError:
            pass
        return self.good(x[:, :3])


def test_inflight_snapshot_belongs_to_the_exception_that_escaped():
    from torch.nn.modules import module as module_mod

    hooks = len(module_mod._global_forward_hooks) + len(module_mod._global_forward_pre_hooks)
    model = Tolerant()
    with InFlight() as rec:
        with pytest.raises(RuntimeError) as info:
            model(torch.randn(2, 4))
    assert len(module_mod._global_forward_hooks) + len(module_mod._global_forward_pre_hooks) == hooks
    calls = rec.calls(info.value, {id(model): "model", id(model.good): "model.good"})
    assert [(c.name, c.type) for c in calls] == [("model.good", "Linear"), ("model", "Tolerant")]
    assert calls[0].inputs[0].shape == [2, 3] and calls[1].inputs[0].shape == [2, 4]
    assert rec.calls(RuntimeError("another")) == []
    rec.clear()
    assert rec.calls(info.value) == []


def test_inflight_ignores_other_threads():
    import threading

    net = nn.Sequential(nn.Linear(2, 2))
    with InFlight() as rec:
        t = threading.Thread(target=lambda: net(torch.randn(1, 2)))
        t.start()
        t.join()
        assert rec._stack == [] and rec._last is None


def test_in_a_real_ipython_cell(shell):
    """IPython's own cell file names and linecache entries; the cell line as TM405 finds it."""
    from torchmagic.explain.inflight import module_names

    shell.run_cell(
        "import torch\nfrom torch import nn\nnet = nn.Sequential(nn.Linear(8, 16), nn.Linear(8, 2))\n"
    )
    rec = InFlight().start()
    try:
        shell.run_cell("x = torch.randn(4, 8)\n\ny = net(x)\n")
    finally:
        rec.stop()
    exc = sys.last_value
    cell_file = next(s.filename for s in fr.sites(exc.__traceback__) if s.frame.f_globals is shell.user_ns)
    line = harness.cell_line(exc.__traceback__, cell_file)
    ex = explain(exc, exc.__traceback__, rec.calls(exc, module_names(net=shell.user_ns["net"])), line)
    rec.clear()
    assert ex.line == 3 and ex.layer == "net.1" and ex.code == "net(x)"
    assert ex.message.startswith("`net.1` (Linear 8→2) got input [4, 16] from `net.0`")
    for name in ("net", "x", "y"):
        shell.user_ns.pop(name, None)


MORE = [
    ("ln = nn.LayerNorm(8)\ny = ln(torch.randn(4, 6))\n", m.NORM_SHAPE,
     "`ln` (LayerNorm [8]) got input [4, 6]: Given normalized_shape=[8]", "`nn.LayerNorm(6)`"),
    ("bn = nn.BatchNorm1d(8)\ny = bn(torch.randn(1, 8))\n", m.BATCH_ONE,
     "`bn` (BatchNorm1d 8) got input [1, 8]: Expected more than 1 value", "`model.eval()`"),
    ("rnn = nn.LSTM(8, 16)\ny = rnn(torch.randn(5, 8, 8, 8))\n", m.RNN_INPUT,
     "`rnn` (LSTM 8→16) got input [5, 8, 8, 8]: LSTM: Expected input to be 2D or 3D", "batch_first=True"),
    ("mha = nn.MultiheadAttention(8, 2)\nq = torch.randn(5, 4, 6)\ny = mha(q, q, q)\n", m.EMBED_DIM,
     "`mha` (MultiheadAttention 8, 2 heads) got query [5, 4, 6]", "`nn.MultiheadAttention(6, 2)`"),
    ("x = torch.randn(3, 4)\ny = x.sum(dim=2)\n", m.DIM_RANGE, "`x.sum(dim=2)` with `x` [3, 4]: Dimension out of range", ""),
    ("import numpy as np\nnet = nn.Sequential(nn.Linear(4, 2))\na = np.zeros((3, 4))\ny = net(a)\n", m.NOT_TENSOR,
     "`net.0` (Linear 4→2) got a numpy.ndarray where a tensor goes", "`torch.from_numpy(a).float()`"),
    ("conv = nn.Conv2d(3, 8, 3)\ny = conv(torch.randn(28, 28))\n", m.CONV_RANK,
     "`conv` (Conv2d 3→8, kernel 3×3) got a 2-D input [28, 28]", "`x[None, None]` is [1, 1, 28, 28]"),
    ("conv = nn.Conv2d(3, 8, 5)\ny = conv(torch.randn(4, 3, 2, 2))\n", m.INPUT_TOO_SMALL,
     "`conv` (Conv2d 3→8, kernel 5×5) got input [4, 3, 2, 2]: Calculated padded input size", "padding"),
    ("x = torch.randn(3, 4)\ny = x[:, 7]\n", m.INDEX_BOUNDS, "`x[:, 7]` with `x` [3, 4]: index 7 is out of bounds", ""),
    ("a = torch.randn(2, 3)\nb = torch.randn(2, 1, 3)\ny = torch.cat([a, b])\n", m.CAT,
     "`torch.cat([a, b])` joins `a` [2, 3] and `b` [2, 1, 3]", "`a.unsqueeze(1)`"),
    ("q = torch.randn(2, 5, 8)\nk = torch.randn(2, 5, 8)\ny = q @ k\n", m.MATMUL,
     "`q @ k` multiplies `q` [2, 5, 8] by `k` [2, 5, 8]", "`q @ k.transpose(-2, -1)`"),
    ("x = torch.zeros(4, 3)\nx[0] = torch.randn(5)\n", m.BROADCAST,
     "`x[0] = torch.randn(5)` assigns a tensor of shape [5] to a slice of shape [3]", "the slice's shape [3]"),
    ("y = F.cross_entropy(torch.randn(4, 3, 5), torch.zeros(4, 6, dtype=torch.long))\n", m.TARGET_SHAPE,
     "got input [4, 3, 5] and target [4, 6]: Expected target size [4, 5], got [4, 6].", "[4, 5] here"),
]  # fmt: skip


@pytest.mark.parametrize("source,kind,start,hint", MORE, ids=[c[1] + str(i) for i, c in enumerate(MORE)])
def test_more_kinds(source, kind, start, hint):
    ex = run(source).explanation
    assert ex.kind == kind and start in ex.message and hint in ex.hint


def test_a_comprehension_variable_is_not_read_from_the_enclosing_frame(tmp_path):
    """What Python 3.12 shows the explainer (PEP 709): the error inside `[torch.cat([base, p])
    for p in parts]` is reported in the enclosing frame, where `p` is a global from an earlier
    cell holding another tensor. Naming that `p` [1, 3] would blame the wrong shape. The
    enclosing frame is reached here as it is on 3.12, on any version."""
    src = tmp_path / "cell.py"
    src.write_text(
        "import torch\n"
        "base = torch.randn(1, 3)\n"
        "p = torch.randn(1, 3)\n"
        "parts = [torch.randn(1, 3), torch.randn(1, 5)]\n"
        "rows = [torch.cat([base, p]) for p in parts]\n"
    )
    ns: dict = {}
    try:
        exec(compile(src.read_text(), str(src), "exec"), ns)
    except RuntimeError as e:
        tb = e.__traceback__
    sites = [s for s in fr.sites(tb) if s.filename == str(src)]
    enclosing = next(s for s in sites if s.function == "<module>")
    assert enclosing.lineno == 5
    named = fr.expression_tensors(enclosing, None, "line 5", tree=fr.parse("torch.cat([base, p])"))
    assert [(t.name, t.shape) for t in named] == [("base", [1, 3])]
    if sys.version_info < (3, 12):  # the comprehension's own frame still names its `p`
        own = next(s for s in sites if s.function == "<listcomp>")
        outer = fr.expression_tensors(own, enclosing, "line 5", tree=fr.parse("torch.cat([base, p])"))
        assert [(t.name, t.shape) for t in outer] == [("base", [1, 3]), ("p", [1, 5])]
