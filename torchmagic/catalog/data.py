"""TM8xx — data loading."""

from .model import Rule

RULES = [
    Rule(
        "TM801",
        "dataloader-pin-memory",
        "info",
        evidence=("static",),
        what="""
            Flags a `DataLoader(...)` without `pin_memory=True` whose batches are moved to CUDA (or to
            `torch.accelerator.current_accelerator()`, or to `torch.device(args.device)` or `DEVICE = args.device` chosen at run time, unless the option defaults to `"cpu"`) in the loop that iterates over it, in a function
            that loop hands the batch to, or in a function the loader is passed to. Loaders in a dict or
            list (`loaders[phase]`) count. Reported at the `DataLoader(...)` call; for a loader built in
            an earlier notebook cell, once, at the `for` line that moves its batches or at the call
            that hands it to a function (of this or an earlier cell, in a kernel read back from its
            source) that does (`train(model, DEVICE, train_loader)`).
            """,
        why="""
            Copies from pageable memory are synchronous and slower; pinned batches can be copied
            with `non_blocking=True` while the GPU is still busy with the previous step.
            """,
        example="""
            loader = DataLoader(ds, batch_size=64)
            for x, y in loader:
                x, y = x.cuda(), y.cuda()
            """,
        fix="""
            loader = DataLoader(ds, batch_size=64, pin_memory=True)
            for x, y in loader:
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            """,
        not_flagged="""
            loaders whose batches stay on the CPU; loaders of NumPy batches, which the loop turns into
            tensors itself (`torch.from_numpy(batch.data).to(device)`: pinning applies to tensors
            only); loaders whose batches a plain function of the code turns into new tensors before the
            copy (`video = preprocess(video)` then `video[a:b].cuda()`: pinning would pin tensors that are
            thrown away; also the items of what such a function returned, `n_id, size, adjs = sample(edge_index,
            seeds)` then `adjs = [adj.to(device) for adj in adjs]`, a loader of seed ids for a graph sampler),
            or copies on the host first (`x = x.transpose(1, 0).contiguous()` or
            `x.clone()`, then `x = x.to(device)`); loaders over a `TensorDataset` of tensors already moved to the
            GPU (`TensorDataset(x.to(device), y.to(device))`: nothing is copied from host memory, and
            pinning would raise); loaders built with `**kwargs` (the options are not
            visible); code with no path to an accelerator, and a kernel that has none (`.to(device)`
            there copies nothing to a GPU)
            """,
        autofix="""
            Unsafe. Adds `pin_memory=True` to the `DataLoader(...)` call (or turns `False` into
            `True`): the same batches, but page-locked host memory is scarcer than pageable memory.
            """,
    ),
]
