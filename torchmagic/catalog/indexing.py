"""TM7xx — vectorisation and indexing."""

from .model import Rule

RULES = [
    Rule(
        "TM701",
        "python-loop-over-tensor",
        "warning",
        evidence=("static",),
        what="""
            Flags `for i in range(len(x))` (or `x.size(0)`, `x.shape[0]`, or a name bound to one:
            `n = x.size(0)`) whose body indexes `x[i]` or writes `out[i] = ...` element by element,
            `for v in x:` directly over a tensor, and any `for i in range(...)` that fills a tensor
            on an accelerator one element at a time (`X[i] = ...`: one small copy per iteration).
            Reported at the `for` line. A body that reads a sliding window (`X[i:i + h, j:j + w]`,
            as a hand-written convolution or pooling does) gets the `unfold` that takes every
            window at once (`X.unfold(0, h, 1).unfold(1, w, 1)`) and the convolution it is.
            """,
        why="""
            Every iteration launches tiny kernels (and often syncs): a Python loop over a tensor's
            rows is orders of magnitude slower than the one vectorised operation.
            """,
        example="""
            for i in range(x.shape[0]):
                out[i] = x[i].max()
            """,
        fix="out = x.max(dim=1).values      # or broadcasting, gather, torch.where",
        not_flagged="""
            loops over batches from a DataLoader, epochs, layers; a sweep over a setting, where each
            element only goes, as a Python number, into a call that runs a whole computation for it
            (`for z in z_scan: system.measure_at_z(field, z.item())`); a loop in the branch where an
            `isinstance` test says the name holds a Python container (`if isinstance(data, (list,
            tuple)): for d in data:`, whatever its annotation says; all rules read names this
            way); bodies that run a model or
            submodule per item (a forward pass per value: `self.cell(...)`, `dec(z)` with
            `dec = self.net.decoder`, or a method of a model, `agent.act(obs)`); recurrences
            (`h = cell(x[t], h)`), rollouts whose body reads a name before a later line of it assigns
            it (`obs[step] = next_obs` ... `next_obs, r, done, info = envs.step(action)`; a counter
            `k += 1` does not count)
            and loops that carry state across iterations (`taken[j] = 1` read again: greedy
            matching); bodies that only draw, plot, print, show, log or write files per item, on the host or an
            accelerator (PIL boxes, figures, `display(Audio(a))`, `sw.add_figure(..., plot(x[i].cpu()))`,
            a function named for the effect: `audio_write`, `save_audio`, `show_images`; each item's
            copy out of an accelerator is TM301's to report; appending to a list is no such effect); a loop whose body tests that each element
            is a Python container (`assert isinstance(fmap, list)`); `range(K)` with a literal `K <= 32`;
            a loop over the distinct values of `torch.unique(x)` (a name bound to it too: one pass per group,
            each over a masked subset of its own size, a stratified loss); over the first few entries, `x[:k]` with
            a literal `k <= 16` (candidates tried in turn); a body that only turns each element into a Python number
            for a list (`shape.append(int(el))`: `.tolist()` is the fix, TM301's when it waits); a body that reads an
            attribute no tensor has from each element (`tree.nodes`): the loop walks objects, whatever the name was
            guessed to hold; a loop whose element is only handed to functions and whose body adds an operation over
            whole dimensions of other tensors into an accumulator built before it (`for offset in offsets:
            coef, ind = weights(tm, offset); out += coef * image[:, :, ind]`): a sum over one short dimension (kernel
            taps) whose every step is already vectorised;
            bodies that only copy a block per iteration whose bounds move with the loop
            (`folded[k] = x[:, lo:hi]` per fold, `parts.append(dets[first:last])` per image), with
            integer bookkeeping: one copy per block, not work element by element
            """,
    ),
    Rule(
        "TM702",
        "arange-index-for-slice",
        "info",
        evidence=("static",),
        what="""
            Flags `x[torch.arange(x.shape[0]), k]` where `k` is a scalar (a literal, a name bound to
            a number, or live: an `int`).
            """,
        why="""
            It is `x[:, k]` written as an advanced-indexing gather: it allocates an index tensor and
            copies instead of returning a view.
            """,
        example="col = x[torch.arange(x.shape[0]), 3]",
        fix="""
            col = x[:, 3]
            # a per-row index tensor k is a real gather: x[torch.arange(len(x)), k] is right
            """,
        not_flagged="`k` a per-row index tensor/list (that is a gather, and `x[:, k]` would be wrong)",
        autofix="""
            Unsafe. `x[torch.arange(len(x)), c]` becomes `x[:, c]`: the same values, but a
            slice is a view where the gather made a copy, so an in-place write to the result now reaches
            `x`.
            """,
    ),
    Rule(
        "TM703",
        "view-after-transpose",
        "error",
        evidence=("static",),
        what="""
            Flags `.view(...)` applied directly to the result of `.transpose()`, `.permute()`, `.t()`,
            `.T` or `.mT` when the view must merge dimensions the transpose took out of memory order:
            it asks for fewer sizes than the transposed tensor has runs of dimensions still in their
            original order (`x.permute(0, 2, 3, 1).view(b, -1)`), or names the sizes in another order
            or grouping than the transposed tensor has them (`b, c, t = x.shape` then
            `x.transpose(1, 2).view(b, c, t)`).
            """,
        why="""
            A transposed tensor is not contiguous, so `.view` raises "view size is not compatible
            with input tensor's size and stride" (except in the rare shapes where it happens to work).
            """,
        example="y = x.transpose(1, 2).view(b, -1)",
        fix="y = x.transpose(1, 2).reshape(b, -1)    # or .contiguous().view(b, -1)",
        not_flagged="""
            `.contiguous()` in between; `.view` on other results; a view that can keep every run of
            dimensions still in original order whole, splitting or keeping them, which works on a
            contiguous tensor (`x.permute(0, 2, 3, 1).view(b, h * w, c)`, `x.transpose(1, 2).view(b, t, c)`);
            a leading `1` of the view at a dimension the permutation leaves in place is read as that
            dimension's size, a batch of one (`grid.permute(0, 2, 3, 1).view(1, -1, dim)` works when the
            batch is 1, which is what the `1` says); a view whose number of sizes is not known
            (`view(shape)`, `view(*dims)`)
            """,
        autofix="""
            Safe. `.view(...)` becomes `.reshape(...)` where the arguments can only be sizes
            (several of them, a tuple, or a size expression): wherever `view` succeeds, `reshape` returns
            the same view; where it raised, `reshape` copies. No edit for `view(size=...)` (reshape spells
            it `shape=`) or a single name that might hold a dtype.
            """,
    ),
]
