"""dry_run(): per-layer shapes of a forward on meta copies; the user's model is untouched."""

from __future__ import annotations

import gc
import sys
import threading
import time
import weakref

import pytest
import torch
from torch import nn
from torch.nn.modules import module as module_mod

from torchmagic.explain import dry_run, dry_run_as, format_dry_run
from torchmagic.explain import messages as m
from torchmagic.explain.metacopy import MetaMemo, deep_meta_copy


def _global_hooks() -> int:
    return len(module_mod._global_forward_hooks) + len(module_mod._global_forward_pre_hooks)


def by_name(result):
    return {r.module: r for r in result.records}


def test_cnn_records_in_first_call_order_with_user_names():
    net = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Sequential(nn.Conv2d(16, 32, 3), nn.ReLU()),
        nn.Flatten(),
        nn.Linear(32 * 110 * 110, 10),
    )
    r = dry_run_as("net", net, torch.randn(8, 3, 224, 224))
    assert r.ok and r.outputs == [[8, 10]]
    assert [x.module for x in r.records] == [
        "net",
        "net.0",
        "net.1",
        "net.2",
        "net.3",
        "net.3.0",
        "net.3.1",
        "net.4",
        "net.5",
    ]
    rows = by_name(r)
    assert rows["net.0"].inputs == [[8, 3, 224, 224]] and rows["net.0"].outputs == [[8, 16, 224, 224]]
    assert rows["net.3.0"].outputs == [[8, 32, 110, 110]] and rows["net.3.0"].depth == 2
    assert rows["net.4"].outputs == [[8, 387200]]
    assert rows["net.5"].type == "Linear" and rows["net.5"].calls == 1
    assert all(x.device == "meta" and x.dtype == "float32" for x in r.records)
    text = format_dry_run(r)
    assert "net.3.0" in text and "[8, 32, 110, 110]" in text and "output: [8, 10]" in text


class Block(nn.Module):
    """A pre-norm transformer block: attention via scaled_dot_product_attention, then an MLP."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


def test_transformer_block_and_torch_encoder():
    block = Block(64, 4)
    r = dry_run_as("block", block, torch.randn(2, 16, 64))
    assert r.ok and r.outputs == [[2, 16, 64]]
    rows = by_name(r)
    assert rows["block.qkv"].outputs == [[2, 16, 192]]
    assert rows["block.mlp.0"].outputs == [[2, 16, 256]]

    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), num_layers=2).eval()
    mask = torch.zeros(2, 10, dtype=torch.bool)
    r = dry_run_as("enc", enc, torch.randn(2, 10, 64), src_key_padding_mask=mask)  # keyword inputs too
    assert r.ok and r.outputs == [[2, 10, 64]]
    assert by_name(r)["enc.layers.1.linear1"].outputs == [[2, 10, 128]]
    assert torch.backends.mha.get_fastpath_enabled()  # restored


class Big(nn.Module):
    def __init__(self, d: int = 8192, n: int = 18, vocab: int = 50_000) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
            for _ in range(n)
        )
        self.head = nn.Linear(d, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        for layer in self.layers:
            x = x + layer(x)
        return self.head(x)


def test_ten_billion_parameter_meta_model_dry_runs_in_about_a_second():
    dry_run(nn.Linear(2, 2), torch.randn(1, 2))  # torch imports its meta kernels on first use (~2 s)
    with torch.device("meta"):
        big = Big()
    params = sum(p.numel() for p in big.parameters())
    assert params > 10e9
    start = time.perf_counter()
    r = dry_run_as("big", big, torch.randint(0, 50_000, (4, 2048)))
    elapsed = time.perf_counter() - start
    print(f"\n10B-parameter dry run ({params / 1e9:.1f}B params, {len(r.records)} modules): {elapsed:.3f} s")
    assert r.ok and r.outputs == [[4, 2048, 50_000]]
    assert by_name(r)["big.layers.17.1"].outputs == [[4, 2048, 32768]]
    assert elapsed < 10  # generous: ~0.2 s here


class Gate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        if x.sum() > 0:
            return self.fc(x)
        return x


class Gated(nn.Module):
    def __init__(self, gate: nn.Module) -> None:
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.gate = gate
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        return self.out(self.gate(self.inp(x)))


def test_data_dependent_control_flow_is_named_not_thrown():
    net = Gated(Gate())
    r = dry_run_as("net", net, torch.randn(3, 4))
    assert not r.ok
    f = r.failure
    assert f.module == "net.gate" and f.type == "Gate" and f.code == "if x.sum() > 0"
    assert f.kind == m.META_VALUES
    assert f.reason == (
        "`net.gate` (Gate) uses the tensor's values (`if x.sum() > 0`), which the meta device cannot compute: "
        "shapes after this layer are unknown."
    )
    assert f.error == "RuntimeError: Tensor.item() cannot be called on meta tensors"
    assert [x.module for x in r.records] == ["net", "net.inp", "net.gate"]
    assert by_name(r)["net.inp"].outputs == [[3, 8]] and by_name(r)["net.gate"].outputs == []
    assert "stopped: `net.gate` (Gate) uses the tensor's values" in format_dry_run(r)


class Select(nn.Module):
    def forward(self, x):
        return x[x > 0]


def test_value_dependent_shapes_and_missing_kernels():
    net = nn.Sequential(nn.Linear(4, 4), Select())
    f = dry_run_as("net", net, torch.randn(3, 4)).failure
    assert f.module == "net.1" and f.code == "return x[x > 0]"
    assert "calls an op whose output shape depends on the tensor's values (`return x[x > 0]`)" in f.reason


class Pinned(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        return self.fc(x) + torch.ones(3, device="cpu")


def test_tensor_on_a_fixed_device_in_forward():
    f = dry_run(nn.Sequential(Pinned()), torch.randn(2, 3)).failure
    assert f.module == "model.0"  # no variable of the caller's module holds it: "model"
    assert "combines a meta tensor with a tensor on cpu" in f.reason and "device=x.device" in f.reason


def test_a_real_shape_bug_is_explained():
    bad = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(16, 2))
    f = dry_run_as("bad", bad, torch.randn(3, 4)).failure
    assert f.module == "bad.2" and f.kind == m.MATMUL
    assert f.reason.startswith(
        "The forward fails for these shapes: `bad.2` (Linear 16→2) got input [3, 8] from `bad.1`"
    )
    assert "`nn.Linear(8, 2)`" in f.explanation.hint


def test_user_model_and_inputs_are_untouched_and_not_kept():
    class Holder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 4))
            self.scale = torch.full((4,), 2.0)  # a plain tensor attribute (TM106)
            self.extras = [torch.ones(4)]  # a tensor in a list attribute

        def forward(self, x):
            return self.body(x) * self.scale + self.extras[0]

    model = Holder().train()
    x = torch.randn(8, 16)
    tensors = [*model.parameters(), *model.buffers(), model.scale, model.extras[0], x]
    before = [(t.data_ptr(), t._version, t.device, sys.getrefcount(t)) for t in tensors]
    grads_before = [p.grad for p in model.parameters()]
    hooks = _global_hooks()

    r = dry_run(model, x)
    assert r.ok and r.outputs == [[8, 4]]
    assert [(t.data_ptr(), t._version, t.device, sys.getrefcount(t)) for t in tensors] == before
    assert [p.grad for p in model.parameters()] == grads_before
    assert int(model.body[1].num_batches_tracked) == 0  # the copy's BatchNorm counted, not the user's
    assert _global_hooks() == hooks

    refs = [weakref.ref(model), *(weakref.ref(t) for t in tensors)]
    del model, x, tensors
    gc.collect()
    assert all(ref() is None for ref in refs)  # `r` holds nothing of the user's
    assert r.records


def test_every_tensor_in_the_copy_is_a_fresh_meta_tensor():
    class Config:
        def __init__(self) -> None:
            self.table = torch.arange(6.0)

    model = nn.Sequential(nn.Linear(4, 4))
    model.cfg = Config()
    model.cache = {"k": torch.zeros(2, 2)}
    memo = MetaMemo()
    copy = deep_meta_copy(model, memo)
    found = [copy[0].weight, copy[0].bias, copy.cfg.table, copy.cache["k"]]
    originals = [model[0].weight, model[0].bias, model.cfg.table, model.cache["k"]]
    for new, old in zip(found, originals):
        assert new.device.type == "meta" and new is not old
        assert new.shape == old.shape and new.dtype == old.dtype and new.stride() == old.stride()
    assert isinstance(copy[0].weight, nn.Parameter) and copy[0].weight.requires_grad
    assert model[0].weight.device.type == "cpu"


def test_a_model_deepcopy_cannot_copy_falls_back_to_a_structural_copy():
    net = nn.Sequential(nn.Linear(4, 6), nn.Linear(6, 2))
    net.lock = threading.Lock()
    w = net[0].weight
    ptr, version = w.data_ptr(), w._version
    r = dry_run_as("net", net, torch.randn(5, 4))
    assert r.copy == "structural" and r.ok and r.outputs == [[5, 2]]
    assert by_name(r)["net.1"].inputs == [[5, 6]]
    assert (w.data_ptr(), w._version, w.device.type) == (ptr, version, "cpu")


def test_hooks_are_removed_when_the_forward_fails_and_names_can_be_given():
    hooks = _global_hooks()
    r = dry_run_as("encoder", nn.Sequential(nn.Linear(4, 8), nn.Linear(3, 2)), torch.randn(2, 4))
    assert not r.ok and r.failure.module == "encoder.1"
    assert _global_hooks() == hooks


def test_names_come_from_the_notebook_namespace():
    ns = {"torch": torch, "nn": nn, "dry_run": dry_run}
    exec("encoder = nn.Sequential(nn.Linear(4, 4), nn.ReLU())\nr = dry_run(encoder, torch.randn(2, 4))\n", ns)
    assert [x.module for x in ns["r"].records] == ["encoder", "encoder.0", "encoder.1"]


def test_rejects_what_is_not_a_module():
    with pytest.raises(TypeError):
        dry_run(lambda x: x, torch.randn(2))


def test_module_names_follow_registered_and_plain_list_children():
    from torchmagic.explain.names import module_names

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(2, 2), nn.ModuleList([nn.ReLU()]))
            self.heads = [nn.Linear(2, 1)]  # unregistered (TM105), but it runs in forward

        def named_modules(self, *a, **k):  # never called
            raise AssertionError("user code ran")

    net = Net()
    names = module_names({"net": net})
    assert names[id(net.encoder[0])] == "net.encoder.0"
    assert names[id(net.encoder[1][0])] == "net.encoder.1.0"
    assert names[id(net.heads[0])] == "net.heads[0]"
