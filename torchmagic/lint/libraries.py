"""What the checked code's libraries do that changes a rule's advice, read from its imports.

RPC (`torch.distributed.rpc`): a forward may run on another worker, under its grad mode, and
tensors cross the boundary on the CPU.

GPyTorch: a model's prediction caches tensors on the model (the variational Cholesky factor,
an exact GP's `prediction_strategy`); made under `torch.inference_mode()` they become
inference tensors, and the next grad-enabled call in eval mode raises "Inference tensors
cannot be saved for backward". Its forward passes and marginal log-likelihoods also read GPU
values on every call (Cholesky and conjugate-gradient checks, `.item()` in the variational
strategy), so one more read per step in a GPyTorch loop adds no wait of its own.

Machine-learned interatomic potentials (SevenNet, MACE, NequIP, CHGNet, MatGL, SchNetPack,
TorchANI, DeePMD, fairchem): forces and stresses are gradients of the predicted energy, taken
with `torch.autograd.grad` inside the model's forward, so evaluating them needs grad on.

FSDP (`torch.distributed.fsdp`, `fully_shard`, wrappers named for it): parameters are gathered
and freed around each forward, which `torch.inference_mode()` breaks (tensors made there cannot
be updated in place later, and resharding does), so `no_grad` is the mode to evaluate in.
"""

from __future__ import annotations

from .context import Context


def _imports(ctx: Context, package: str) -> bool:
    return any(v == package or v.startswith(package + ".") for v in ctx.imports.values())


def imports_rpc(ctx: Context) -> bool:
    """The code imports `torch.distributed.rpc`: its modules may run on other workers."""
    return _imports(ctx, "torch.distributed.rpc")


def shards_parameters(ctx: Context) -> bool:
    """The code shards its model with FSDP (`torch.distributed.fsdp`, `fully_shard`, or a
    wrapper named for it: `FSDP2Wrapper`)."""
    return _imports(ctx, "torch.distributed.fsdp") or any(
        v.rsplit(".", 1)[-1] in ("fully_shard", "FullyShardedDataParallel") or "FSDP" in v.rsplit(".", 1)[-1]
        for v in ctx.imports.values()
    )


def quantizes_to_tensor_subclasses(ctx: Context) -> bool:
    """The code quantizes with a library whose weights are tensor subclasses (optimum-quanto's
    `QTensor`, torchao's quantized tensors): views of them made under `inference_mode` raise
    "Cannot set version_counter for inference tensor" (pytorch/pytorch#170419)."""
    return _imports(ctx, "optimum.quanto") or _imports(ctx, "quanto") or _imports(ctx, "torchao")


def caches_predictions(ctx: Context) -> bool:
    """The code uses a library that caches prediction state on its models (GPyTorch)."""
    return _imports(ctx, "gpytorch")


def forward_waits_each_call(ctx: Context) -> bool:
    """The code's models come from a library whose forward already waits for the GPU on every
    call (GPyTorch)."""
    return _imports(ctx, "gpytorch")


# packages whose models take forces as gradients of the energy inside their forward
_FORCE_FIELDS = (
    "sevenn",
    "mace",
    "nequip",
    "allegro",
    "chgnet",
    "matgl",
    "schnetpack",
    "torchani",
    "deepmd",
    "fairchem",
    "ocpmodels",
    "mattersim",
    "orb_models",
)


def forward_needs_autograd(ctx: Context) -> bool:
    """The code's models are interatomic potentials whose forward differentiates the energy
    (forces, stress): evaluating them under `no_grad` breaks their outputs."""
    return any(_imports(ctx, package) for package in _FORCE_FIELDS)
