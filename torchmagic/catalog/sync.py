"""TM3xx — CPU-GPU synchronisation."""

from .model import Rule

RULES = [
    Rule(
        "TM301",
        "sync-in-loop",
        "warning",
        evidence=("static",),
        what="""
            Flags `.item()`, `.tolist()`, `.cpu()`, `.nonzero()`, `print(<tensor>)` and
            `torch.cuda.synchronize()` inside a `for`/`while` loop (or comprehension), on values
            that are (or may be) on a GPU, once per statement and once per tensor and iteration
            (the first read; later reads of the same tensor in the iteration wait for nothing new
            until it is rebound). A read whose value feeds a guard that stops the run
            (`v = loss.item()` then `if not math.isfinite(v): sys.exit(1)`) or the loop (early
            stopping: `if kl > 1.5 * target_kl: break`, or a convergence test on its change:
            `if abs(prev - value) / abs(prev) < tol: break`) is reported as info: the
            wait is deliberate, and only worth removing if the guard can run every N steps. The
            runtime probe (TM303) measures what such waits cost when the cell runs.
            """,
        why="""
            Each of these copies a value to the CPU, so the CPU waits until the GPU has finished all
            queued work — on every iteration. The GPU then idles while Python prepares the next step.
            """,
        example="""
            for x, y in loader:
                loss = step(x, y)
                total += loss.item()
            """,
        fix="""
            total = torch.zeros((), device=device)
            for x, y in loader:
                total += step(x, y).detach()
            print(total.item())          # one sync, after the loop
            """,
        not_flagged="""
            the same calls outside loops; `.item()` on an obvious Python number; `.cpu()` of a module
            (`member.cpu()` where the code calls `member.eval()`, `deepcopy(model.eval()).cpu()`): an
            ensemble member offloaded to free the GPU, not a value read out; reads in a
            Dataset's `__getitem__` or a collate function, on tensors not moved to an accelerator
            there (the dataset's CPU tensors); a read whose values
            are written to a file in the same pass (`save_image(img.cpu(), f"{i}.png")`,
            `sf.write(path, wav.cpu().numpy(), sr)`, `Image.fromarray(a).save(p)`, `print(line,
            file=fp)` to a file other than the console, also through names bound from it): the file
            needs them on the host in that pass; a read whose host copy goes, in the same pass, into
            a host library's computation whose result the pass binds and goes on with (`_, ids =
            index.search(f.cpu().numpy(), 1)`, `csc_matrix.dot(v.cpu().numpy(), r)`, a function
            imported from a host library, `total += pesq(16000, ref, deg)`, a detokenizer
            given `tokens=hypo["tokens"].cpu()`; not a method of the class itself, torch or NumPy,
            nor one that stores the value: `append`, `update`, `log_*`): the library needs the
            values now, so the pass waits there in any case; a read that is an argument of a
            drawing call (`plt.plot(acts[:, i].cpu().numpy())`, `ax.imshow(img.cpu())`, a function of
            this source that draws, `show(src.cpu().numpy())` with `o3d.visualization.draw_geometries`: the figure
            needs the values, and drawing takes far longer than the wait; not `.item()` per element,
            `ax.text(j, i, f"{sim[i, j].item():.3f}")`, which one `.tolist()` before the loop reads); reads in `__init__`,
            `__setstate__`, `__getstate__`, `__reduce__` or `_load_from_state_dict` (once per object
            built or restored, not per step); reads in a loop that calls
            `input()`, or opens a window that stays until it is closed
            (`o3d.visualization.draw_geometries`, `cv2.waitKey(0)`, also in a helper of this source): it waits for a person on each pass;
            reads inside `with torch.cuda.stream(torch.cuda.Stream()):`, a stream made for them where
            nothing the step queued waits; a timing loop's own barrier (`torch.cuda.synchronize()`,
            or a helper of this source, an earlier cell or the kernel that calls it, followed by a
            clock read): every pass waits there on purpose, so the loop's other reads are withdrawn;
            a read that follows the iteration's first read and waits for nothing new (no GPU work
            queued in between) is named in that finding's hint, not reported again (a comprehension
            right after a read too: `loss = loss.item()` then `[c.item() for c in parts]`); reads of the values a `torch.distributed`
            collective filled earlier in the function (`dist.all_gather(sizes, mine)` then
            `[s.item() for s in sizes]`): the first waits for the collective, the rest for nothing,
            and the host needs them to size its buffers; reads already
            guarded as the fix suggests (`if step % N == 0:`, also around a walk over the named parts the
            object holds, `if (step + 1) % N == 0: for name in self.saes: ... .item()`, or around the
            outermost loop of a method called once per step, `if self.steps % self.validate_every == 0:
            for _ in range(n_valid): ... .item()`, a validation pass every N calls (inside an epoch loop
            of the function, each batch of the pass is still reported), also through a name bound to that test earlier in
            the loop, `reg = step % N == 0` then `if reg:`; a counter the block resets,
            `if step % N: continue`) or when an environment's episode ends (`if done:`, `if d and
            info["lives"][i] == 0:` with `d` over the done flags, `if "episode" in info:`: once per
            episode, as logging every N steps) or run on one iteration (`if i == 0:`, also within an `and`, `if i == 0 and log_samples:`, `len(shown) < 5`,
            `if i == len(loader) - 1 or self.terminate:`, the `else` of `if i < len(loader) - 1:`, a block that
            ends with `break`, `return` or `sys.exit()` and cannot `continue` first, or with a `raise` no `try` in the loop catches,
            `except IndexError: print(h.sum().item()); raise`, also a read in that `raise`, `raise
            RuntimeError(f"loss {loss.item()}")`: once per pass, as after the loop);
            reads under a switch the user turns on to watch every step (`if debug:`, `if self.verbose:`,
            `if args.verbose > 1:`): when it is on, the wait is what was asked for;
            a loop over lists of per-batch results gathered earlier that reads each joined column once
            (`[torch.cat(x, 0).cpu() for x in zip(*stats)]`: the read once after the batch loop);
            reads after the inner batch loop (once per epoch) and in an epoch loop's own body (also a loop that
            runs a whole training per item, `for exp in stream: strategy.train(exp)`, and one whose own
            body counts or runs epochs, `while True: self.epoch_num += 1; ... = self.train_epoch()`; a loop over a
            tensor's elements, `for d in flags:`, is part of one step, not the batch loop; a
            loop whose own body calls `backward()` or an optimizer's `step()` is the step loop, and
            a loop nested in it, averaging samples or summing heads, is part of one step: a read
            after it is still per step);
            a guard around a loop that is part of one step (`if step % N == 0:` then
            `for name, p in model.named_parameters(): writer.add_histogram(name, p.cpu()...)`, or a
            loop over lists the source builds itself, `for ref in kept:` with `kept = []` filled by
            `.append`: results kept in memory, not a pass over a loader);
            loops that run a handful of times, unless a step loop around them repeats them (16 tasks in
            each of 10,000 meta-steps are still reported) (`range(4)`, a short list or dict, also by index or
            by its items, `range(1, len(sizes) + 1)`, `for k, v in outputs.items()`, unless the code grows
            it, a loop over a tensor's
            dimensions, `for d in range(ndim)` with `ndim = len(x.shape)`, `range(x.dim())`, `enumerate(x.shape)`
            (not `range(x.shape[0])`, which counts rows), a loop that stops on a
            count (also a command-line option's small default: `if i == args.n_samples - 1: break`
            with `add_argument("--n_samples", type=int, default=8)`), a DataLoader over a handful of rows written out in the source: a
            `TensorDataset` or a Dataset class whose `__len__` counts a constructor argument
            such as `torch.tensor([[...], ...])`, also when a function of this source returns
            the loader, `train_loader, _ = prepare_dataset()`); a batch element its loop never moves while
            it moves another (`for x, y in loader:` with only `x.to(device)`: `y` is on the host), also an item an
            inner loop or comprehension walks (`for p, m in zip(points, masks):` with only `p.to(device)`: `m` is on
            the host), and a batch or an item of it read before the loop body moves it (`[p.cpu().numpy() for p in
            points]` above `p = p.to(device)`: the loader's host copy); code with no path to an accelerator (nothing moved to CUDA/`device` anywhere
            in the file, notebook or kernel; in a notebook, a cell's top-level code only counts the moves of that
            cell and the cells before it, which ran first, while code in its functions counts every cell's, since a
            later cell may call them; a device named on the command line, `torch.device(args.device)`, is a path; a
            parameter whose default is the CPU, `def make_data(n, device="cpu")`, is not when every call of the
            function in the source leaves the default or passes a CPU device, a literal or a name only ever bound to one; the device of another
            tensor, `torch.zeros(1, device=values.device)` or `.to(rewards.device)`, is not: it moves nothing); a walk over
            a model's parameters, buffers or state dict in no other loop that runs once per run (at the top level, or in a
            module-level function only called from the top level outside loops, such as `main()`): printing the trained
            weights is a report, not a hot path; a `torch.cuda.synchronize()` whose next statement reads a clock
            (`start = time.time()`, also after the `if torch.cuda.is_available():` it sits in): a barrier for timing; loops in code using GPyTorch, whose forward passes and marginal
            log-likelihoods already read GPU values on every call (Cholesky and conjugate-gradient checks), so one
            more read per step adds no wait of its own; values known to be on the CPU (live device,
            `.cpu()`-ed, also when later updates of the name by itself keep it there, `sim = sim.squeeze(0).cpu()`
            then `sim = sim[1:-1, 1:-1]` and `sim = (sim - b) / (1 - b)`; also items of a host copy walked through `zip`/`reversed`/`enumerate` when
            every sequence given is on the CPU, what a `read_*` function returns given no device, a factory without a device, batches from a DataLoader that were never
            moved, values computed from the unpacked batches of a loop that moves nothing (no `.to`/`.cuda`,
            no `device`, no call of a function of the file that moves) in code whose other batch loops move
            their batches (`X = X.to(device)`): a GPU model would raise on such batches, so this loop runs
            on the CPU (a book's early-chapter trainer next to its GPU trainer), a function's argument that it combines with a CPU tensor of one dimension or
            more, `torch.max(boxes[:, :2], crop[:2])` with `crop = torch.FloatTensor([...])`,
            since mixing devices raises, and what a helper of this source that moves nothing and
            reads no global data returns from CPU tensors, a parameter that every call of its
            function in this source is given from the host: `lengths.cpu()` or a value computed
            from it by tensor methods, arithmetic or a method of the caller's class, for a module's
            `forward` called through the one name or `self.` attribute holding the module, or a
            function called by name and never passed around, and a name the same function moves to the
            accelerator itself only after the read, with no binding in between (`if lens.max() < k: return`
            before `model(lens.to(self.device))`, or a `.clone()` of it that is moved later, `work = feats.clone()`
            then `if self.use_gpu: work = work.cuda()`): until the move it holds the caller's host data; a read after
            the move is flagged); what a method of the same class returns when its every `return` gives a copy it
            made on the host (`p = net(x).to("cpu")`, `p += net(x).to("cpu")`, `p /= len(nets)`, `return p`),
            wherever its inputs are (one `return` of a device value keeps the read flagged); what a
            property of this source returns (defined once, never stored into) when its every `return`
            is a factory without a device or a `torch.cat`/`torch.stack` that joins one,
            `torch.cat((torch.zeros(1), steps.cumsum(0)))`: joining two devices raises; the CPU-only branch of `x.cpu().numpy() if x.is_cuda else x.numpy()` (also
            `x.numpy() if not on_gpu else ...`, where the other branch is flagged); a value the
            host needs to go on: `env.step(a.item())` or `env.step(a.cpu().numpy())` (also an element of it,
            `env.step(a.cpu().numpy()[0])`, and through
            a name, `actions = q.argmax(1).cpu().numpy(); env.step(actions)`, or unpacked from a
            comprehension's copies of a call's outputs, `a, n = [t.cpu() for t in policy(s)]` then
            `env.step(a.numpy())`), a number packed into the bytes of a file as the loop writes it
            (`struct.pack("!f", scale.item())`), an index, a greedy
            token fed back as the next input (`tok = logits.argmax(-1).item()` with
            `torch.tensor([tok])`, `x.new([tok])` or `torch.tensor([ids[-1]])` in the loop), a result told
            back with its candidate to the object that proposes the next one (`config =
            searcher.suggest()` ... `searcher.update(config, float(error.cpu()))`), a copy to the host
            under a switch that asks for offloading (`if cpu_offload: shard = shard.cpu()`, `if
            self.cpu_cache:` around a loop of `feat.cpu()` copies: each tensor leaves device memory
            as soon as it is ready, which is the point), except when the loop
            walks a tensor's elements (`[vocab[i.item()] for i in ids]`: one `.tolist()` would do);
            any other read in an iteration that always makes such a read (the action for
            `env.step` on every step, then `losses.append(loss.item())` after the update): the
            iteration waits for the GPU there anyway, so keeping the loss on the device removes no
            wait (where the needed read is only on some steps, an epsilon-greedy branch, the other
            read is still flagged);
            a read chosen by a type test in the only loop of a function (`[s.item() if isinstance(s, Tensor)
            else s for s in sizes]` for `torch.split`, ints handed back for ints): a conversion to the Python
            values an API takes, needed on the host (inside a batch loop it is still flagged, once per step);
            an id the host files results under (`{t["image_id"].item(): out for ...}`,
            `f"{idx.item():06d}.png"`, also through a name: a key of a dict display or
            comprehension, or a value formatted into a string with no spaces that ends in a file
            extension or holds a `/`; a logged number is still flagged); a loop that breaks on its own `enumerate`/`range` index
            reaching a small number (`if i == 4: break`, up to 16), or that walks a short list written
            out in the source (`for k in range(len(ids))` with `ids = torch.tensor([1, 2, 3])`),
            or a few values built with `torch.linspace`/`torch.arange` from small numbers (a
            parameter's default counts: `edges = torch.linspace(0, 1, n_bins + 1)` with
            `n_bins=15`; a slice of it, a `self.` attribute stored once from it, and `zip` over
            it, which stops at its shortest); a plain tensor attribute of a class of this source
            (`self.edges`, stored once in the source, as `self.edges = ...` in one of its methods,
            from a factory without a device or a slice of one, the class defining no `_apply`/`to`/
            `cuda`/`cpu` of its own): `module.to(device)` moves only parameters and buffers, so it
            stays on the CPU (a `register_buffer` moves, and is still flagged); a value copied out
            that a loop later in the iteration goes round (`labels = dets[:, -1].cpu().unique()`
            then `for c in labels:`, per-class NMS): the host needs it to know how many times
            to go round;
            a second read of a tensor already read earlier in the same iteration (a test on it
            counts as a read: `if torch.isnan(loss): raise ...` then `losses.append(loss.item())`,
            also after `loss = loss / accum_steps`, a scale by a host number); reads in a loop
            over the parts of one step (a dict's items, such as a logger's `for k, v in
            kwargs.items(): if isinstance(v, torch.Tensor): v = v.item()`, a walk over parameters
            that yields `p.grad.cpu().numpy()` when `p.grad is not None`, or a comprehension over a
            list of stored activations, `[a.cpu().numpy() for a in self.activations]`, or over a
            model's state, `{k: v.detach().cpu() for k, v in model.state_dict().items()}`, or over the
            names of a distribution's parameters, `{n: getattr(d, n).cpu() for n in d.arg_constraints.keys()}`, or over
            the positions of a list, `[embs[i][run].cpu().numpy() for i in range(len(embs))]`, or over
            the tuple of one index tensor per dimension that `torch.where(mask)` or `x.nonzero(as_tuple=True)`
            returns, whose size the call already waited for, or the key of each group of a `torch.unique`
            (`for g in torch.unique(groups): results[int(g.item())] = ...`: the loop's own element, a value
            the call already waited for; a statistic of the group read there is still flagged), not
            over a tensor's rows, `[t[i].cpu() for i in range(len(t))]`; or a loop, in no other
            loop, over values a name already holds, such as a detector's outputs, `for pred in
            predictions: boxes = pred["boxes"].detach().cpu().numpy()`, when it calls nothing but
            such copies, container methods and builtins) that reads tensors which
            already exist and queues no GPU work: the first read drains the queue and the others
            wait for nothing (a read that computes, `v.float().mean().item()`, is still flagged); a read after
            another read earlier in the same statement that computes nothing itself (`if pred.item()
            != target.item():`: the first read is the finding, also where the first is not reported); a read right
            after another read of a GPU value, of a tensor that already exists and with nothing
            computed in between (`total += loss.item()` then `correct += acc.item()`: the queue
            is already drained, the first read is the finding; also when the first read rebinds the
            tensor's name to its host copy, `best = best.cpu().numpy()` then `scores = scores.cpu()`; statements on host values only,
            such as a progress bar's `bar.set_description("loss %.3f" % (total / n))`, or appends of
            values already on the host, `preds.append(out)` after `out = out.cpu().numpy()`, may stand
            between them, and `x.to("cpu")` counts as a read; the second read may reduce or cast a
            tensor that already exists, `parts.mean(1).cpu()`, `z.norm().item()`, which waits only for
            that one small kernel on a drained GPU (in a step's loop; in a walk over the parameters,
            `p.grad.norm().item()` then `p.norm().item()`, each round trip per parameter is the cost and both
            are flagged); a tensor computed after the first read, or an
            optimizer step in between, or a read that runs a module, `model(probe).mean(1).cpu()`, is
            still flagged); per-item
            copies in an inner loop over one batch's items (`for i in range(len(images)): img =
            images[i].detach().cpu()`) after the batch's predictions were already read, when
            nothing since, in between or in the inner loop, computes on the GPU; reads in
            iterations a collection picks (`if i in sample_ids:`); a value computed by a method
            handed only tensors copied to the CPU (`loss, eer = model.loss(embeds.to(loss_device))`
            with `loss_device = torch.device("cpu")`); reads in a `while` loop that stops on a
            value it computes (greedy or beam decoding until the end token, `if token == eos:
            break`): how many steps run depends on the data, so each step's read is the algorithm; likewise
            a read in a `for` over `range(max_len)` that trains nothing when the value read, or what the
            loop derives from it (a sampled index, its character, the text so far), is tested by an `if`
            that leaves the loop by matching it (`pred = y.argmax().item()` then `if pred == eos: break`,
            `text.endswith(suffix)`; a tolerance test is a convergence check, reported as info); the same
            read in the `else` of an `if`/`else` whose first branch was reported (one of them runs
            per iteration); `.numpy()` on
            its own (a CPU tensor waits for nothing, a GPU tensor raises; the wait in
            `x.cpu().numpy()` is the `.cpu()`)
            """,
    ),
    Rule(
        "TM302",
        "tensor-in-condition",
        "warning",
        evidence=("static",),
        what="""
            Flags `if`/`while`/`assert`/conditional expressions whose test is a tensor expression
            (`(t != 0).all()`, `loss < best`, `t.any()`), in a loop or a function: a test the code
            may run on every step. The tests of one loop nest (or of one call of a function with no
            loop) make one finding, at the first, that names the lines of the others: the first wait
            costs the time the GPU takes to catch up, the ones after it in the same pass little more
            than a scalar copy, and one deliberate wait can serve them all.
            """,
        why="""
            Python needs a `bool`, so the tensor is copied to the CPU: an implicit synchronisation
            that waits for all queued GPU work, hidden in an innocent-looking `if`.
            """,
        example="""
            for x in batches:
                if (mask != 0).any():
                    x = x[mask]
            """,
        fix="""
            x = torch.where(mask != 0, x, fill)     # keep the decision on the device
            # or sync once, deliberately: if bool((mask != 0).any()): ...
            """,
        not_flagged="""
            a test whose block only raises, warns, prints or logs (`if not torch.isfinite(w).all():
            raise ValueError(...)`, `if torch.isnan(x).any(): warnings.warn(...)`, after setting
            Python values for the message or a flag at most: an opt-in diagnostic only the host can
            act on; still flagged in a function handed to `register_hook`, which runs on every
            backward, and when the block also changes tensors); a non-finite check (`isnan`,
            `isinf`, `isfinite`) that decides whether the step updates the model: a branch runs
            the update, or skips the rest of a step that runs it (`if not torch.isfinite(loss):
            continue` before `loss.backward(); opt.step()`, `return None` from a Lightning
            `training_step`), or reports and stops the run (only the host can skip an update: a
            zeroed loss still moves momentum; a check that only filters what is averaged or
            logged is still flagged); a test on tensors handed to a
            `torch.distributed` collective earlier in the function, or computed from them
            (`dist.all_reduce(stop)` then `if stop > 0: break`: every process must take the same
            branch, so each needs the agreed value on the host); a test whose block only returns
            a Python bool from a function declared `-> bool` (its callers need the answer on the host);
            a conditional expression, in no loop of its function, that returns one of Python
            constants (`return "positive" if label == 1 else "negative"`: the function's answer is
            a host value, picked once per call); a test on tensors that the statement just before
            printed or copied to the host (`print(f"{err:.2e}")` then `assert err < 1e-4`: that
            statement waited, and the test finds the queue empty); a check memoised on a flag
            (`if "checked" not in seen:` ... `seen["checked"] = True`: the first call only);
            tests on `.shape`, `.dim()`, `.numel()`, `len()`, `is None`, `== None`/`!= None` (a
            tensor compared with None answers a Python bool without reading data), Python numbers
            (also a `forward` parameter the body uses only as a count, a `range()`/`torch.arange()`
            bound or compared with a `len()`: `assert 0 < stage <= len(self.stages)`, or named as one:
            `stage_number`, `layer_idx`, `num_steps`, `n_heads`);
            conditions on CPU tensors (live device, code with no accelerator path, a value a later
            `.numpy()` of the function reads with no `.cpu()`/`.to()` in between or anywhere on
            it, a torch function of a 0-dim CPU tensor such as `torch.pow(2, torch.log2(m))`, an
            attribute set to `None` before the method that builds it on the CPU, what a property of this
            source returns when it joins a tensor made without a device, as for TM301; a name read between
            two of its bindings is the earlier one: `m = torch.tensor(k)`, `torch.log2(m)`, then
            `m = low * v`), e.g. a colour
            chosen per image in a plotting loop; conditions once per epoch: in an epoch loop's own
            body, or after the inner batch loop (not a loop over a tensor's elements, which is part of
            one step) (`if approx_kl > target_kl: break` once per update
            epoch, a decision only the host can take; a `while` there still is, as it tests on every
            iteration of its own); a condition at the top level of a script or cell, in no loop and
            no function (`if out.argmax() == 1: print("positive")`): it waits once per run, to act
            on a result the host needs, as TM301 leaves the same reads outside loops (a function's
            conditions are still flagged, since it may be called on every step, and so is a
            top-level `while`); an `assert` outside loops in a test function (`def test_...()`, or a
            bare `def test():` without parameters; an evaluation `def test(model, loader)` is not one),
            the check the test makes once per run; an `assert` outside loops that checks what the
            function was given, on its arguments or on tensors computed from them alone (`steps =
            torch.diff(t_eval)` then `assert (steps - steps[0]).abs().max() < 1e-8, "..."`), or in
            `__init__` on the object's construction: a precondition that must raise, as `if ...:
            raise` (one in `forward`, which runs on every step, and one on the function's own
            state or results, `assert weights.sum() - 1 < 1e-5` with `weights` from `self.`, are
            still flagged); the stop test of a `while` loop that stops on a value it computes
            (`if token == eos_idx: break` in greedy decoding, also when the block ends with an `if` one of whose
            branches leaves, `if not synced: break` / `else: peer_done = True` for peers generating in lockstep):
            the loop cannot go on without it; likewise an `if`
            whose block ends with `break`/`return` in a `for` loop over `range(...)` that trains nothing (no
            `backward()`, no `step()`), such as
            `for _ in range(max_len):` with `if (out == eos).any(-1).all(): break` (an early stop in a training
            loop is still flagged);
            a test in no loop of a function on a boolean mask that the function then indexes with
            (`if keep.sum() == 0: return []` before `boxes[keep]`; the mask may also be a parameter named
            as one, `kpt_mask`, or built with `~`, `&`, `|` or `.any(dim=...)`), or on values it then
            selects by a mask or counts (`if torch.any(s < 0):` then `torch.where(s < 0)`, `.nonzero()`):
            mask indexing waits for the GPU anyway, so the test adds no wait worth removing (in a loop it
            is still reported); a test in no loop of a function that, as far as the file or cell shows, does not run per step:
            not a module's `forward` or a method it calls, not a hook or a closure, not named for a step
            (`*step*`, `*batch*`, `*loss*`, `*backward*`, `clip*`), and not called (by name or as a
            `self.` method) inside a loop or from such a function (`update_state` once per optimisation
            round, `_setup_train`, `compute()` once per evaluation): it waits once per call, beside work
            that takes far longer
            """,
    ),
    Rule(
        "TM303",
        "measured-sync-stall",
        "warning",
        evidence=("runtime",),
        what="""
            Reports a cell line whose CPU-GPU synchronisations, measured while the cell ran, waited
            longer than the threshold (default: 10% of the cell's time and at least 5 ms). The
            message gives the number of synchronisations and the time waited.
            """,
        why="""
            While the CPU waits, it cannot queue more work: the GPU idles between kernels and the
            whole loop runs at the speed of the round trip.
            """,
        example="""
            for x in batches:
                if model(x).max() > 0.5:     # 500 syncs, 0.9 s waited
                    hits += 1
            """,
        fix="""
            hits = sum((model(x).max() > 0.5) for x in batches)   # stays on the device
            print(int(hits))                                       # one sync
            """,
        not_flagged="""
            lines that never synchronised; a line outside loops and functions that only
            displays values (`print(loss)`, `f"{acc:.3f}"`, tensors as the cell's result): the
            user asked to see them, and on a GPU the first display mostly loads the printing
            kernels. Its wait stays in the cell's sync table. The same display in a loop or in a
            function is reported
            """,
    ),
]
