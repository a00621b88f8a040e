"""TM4xx — autograd."""

from .model import Rule

RULES = [
    Rule(
        "TM401",
        "graph-kept-alive",
        "warning",
        evidence=("static", "live"),
        what="""
            Flags a loss (or any tensor that was `.backward()`-ed) accumulated into a Python variable
            or list across loop iterations without `.item()`/`.detach()` (`total += loss`,
            `losses.append(loss)`) when its graph is no longer needed: the value was already
            back-propagated, or nothing in the function back-propagates the sum, the list or
            anything built from them, and gradients are on. Live: a list, tuple or dict in the
            namespace whose tensors come from separate graphs (separate forward passes) that still
            hold saved activations after the cell, at least 1 MiB beyond the biggest graph (the
            size is in the message).
            """,
        why="""
            Each stored tensor keeps its whole autograd graph — every activation of that step — in
            memory, so memory grows with every iteration until the process runs out.
            """,
        example="""
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                total += loss
            """,
        fix="    total += loss.item()          # outside hot loops: loss.detach()",
        not_flagged="""
            accumulation of `loss.item()`/`loss.detach()`; parameters collected themselves (`params.append(p)`
            over `named_parameters()`, for a line search: a leaf holds no graph); a sum of loss terms that is back-propagated later as one loss (`style_loss += layer_loss` … `(a*content + b*style_loss).backward()`: `.item()` there would drop the term from training); a sum the function returns (its caller may back-propagate it) unless its terms were already back-propagated; a sum within one optimizer step, in a loop that back-propagates each term and steps no optimizer, into a plain name the function binds before the loop and steps the optimizer after it (`for _ in range(parts): ...; loss.backward(); step_loss += loss`, then `optimizer.step()`: gradient accumulation, whose sum lives for one step and holds graphs already freed); accumulation under `no_grad`/`inference_mode`/`set_grad_enabled(False)`, including in a function the file calls under them; a total of numbers scaled by the loss's weight, when every binding of that weight in the function is built from numbers (`weight = sparse_weight` with `sparse_weight: float`, `weight *= 0.5 * (1 - math.cos(math.pi * step / steps))` with `step` counted by a `range`): back-propagating `weight * penalty` does not make the weight a tensor of the graph; live: graphs whose saved tensors `.backward()` already released, a single tensor (the last step's output, or one the next cell back-propagates through, as tutorials do), tensors that all belong to one graph (the loss terms of one forward pass, the tuple one forward returns), a recurrent hidden state, graphs keeping less than 1 MiB beyond the biggest one, saved tensors that the namespace holds anyway (the container's own tensors, which `sigmoid`/`softmax` save as their output, an input batch bound to a name); a finding never points at a line the cell did not reach because it raised before; saved tensors are read through `SavedTensor.data`, never unpacked (an unpack hook, as under activation checkpointing, would re-run the forward)
            """,
    ),
    Rule(
        "TM402",
        "prefer-inference-mode",
        "info",
        evidence=("static",),
        what="""
            Flags `with torch.no_grad():` around pure inference: no `.backward()`, no
            `requires_grad_`, no parameter updates or initialisation in the block.
            """,
        why="""
            `torch.inference_mode()` also skips version counting and view tracking, so inference
            runs faster and allocates less.
            """,
        example="""
            with torch.no_grad():
                preds = model(x)
            """,
        fix="""
            with torch.inference_mode():
                preds = model(x)
            """,
        not_flagged="""
            code that shards its model with FSDP (`torch.distributed.fsdp`, `fully_shard`, a wrapper
            named for it): parameters are gathered and freed around each forward, which
            `inference_mode` breaks when training resumes;
            blocks that mutate parameters (`p.copy_`, `p -= lr * p.grad`, init code), which need `no_grad`;
            calibration passes, whose forwards make observers or hooks record statistics on the model
            (after `torch.ao.quantization.prepare`/`prepare_fx`/`prepare_pt2e` or a model's own
            `prepare_quantization()` in the same scope, and before `convert`; or over data the loop
            names for calibration: `for x in calib_loader`, `tqdm(loader, desc="Running calibration")`);
            a shape probe, a dry run on a `torch.rand`/`torch.zeros` dummy whose output is read only for
            its size (`y = encoder(torch.rand(2, *shape))`, then `y.shape[1]`): a lazy layer's first
            forward there would create inference-tensor parameters that never train;
            files using `torch.distributed.rpc`, where the forward may run remotely and the local
            grad mode does not govern it; code using GPyTorch, whose models cache prediction tensors on
            themselves (made under `inference_mode`, they make the next grad-enabled call raise); a block inside a loop (or a function) that also calls
            `backward()`: its results may be saved for that backward (a DQN target, a teacher's
            outputs), which tensors made under `inference_mode` cannot be; a block in a function that
            also runs a model with grad on, outside any `no_grad` block (`p = online_net(a)` then
            `with torch.no_grad(): z = target_net(b)` and `cosine_similarity(p, z)`, a
            `compute_loss` with a second forward for a metric): a training step whose backward the
            framework calls, where a stop-gradient target is saved for that backward and
            inference-mode forwards interleaved with training break lazily built caches and
            sharded (FSDP) models; a block whose results are
            changed in place after it (`y.clamp_(0, 1)`, `y[y < 0] = 0`, or through a function of the file
            or of an earlier notebook cell that changes its argument in place, `normalize(y[0])`), which
            inference tensors refuse outside `inference_mode`; a block that also enters a context manager
            handed a model (`with calibration_mode(model):`, in the same `with` or nested), which may write
            the model's parameters or statistics on exit; a block that runs once, at the top level of a
            script or cell with no loop or comprehension inside it (`with torch.no_grad(): logits =
            model(sample)`): the time saved cannot be measured, and the result may later be changed in
            place or fed to autograd; a block in a method of a class that defines `forward`, whatever its
            base (`class Sampler(Reconstructor)` with the base from a sibling module): module internals,
            like TM104's, where a model the caller supplies may turn grad back on inside
            """,
        autofix="""
            Unsafe. Replaces `torch.no_grad()` with `torch.inference_mode()`. Unsafe because a
            tensor made under inference mode can never be saved for backward or updated in place outside
            it; the rule already stays silent where it sees that happen, but code elsewhere may still do
            it.
            """,
    ),
    Rule(
        "TM403",
        "data-attribute",
        "warning",
        evidence=("static",),
        what="""
            Flags reads and writes of `.data` on a tensor or parameter: in-place writes
            (`w.data.normal_()`, `p.data.add_(...)`, `p.data = ...`, a store into
            a row, `w.data[j][i] = v`, and `.data` handed to a function of the source that writes its
            argument in place, `swap_rows_(w.data, a, b)`), reads
            (`h.data`, `Variable(h.data)`), `.data.resize_()`/`.set_()`/`.t_()`, and `loss.data[0]`
            (also on a reduction over every element, `torch.sum(correct).data[0]`, which is 0-dim too).
            Owners it recognises: tensors, the parameters of a known module (`m.weight` in an init
            function applied with `model.apply(...)` or checking `isinstance(m, nn.Conv2d)`, modules
            from `.modules()` or from a loop over an `nn.ModuleList`/`nn.Sequential`, `for block in
            self.blocks:`), outputs of a submodule that a class of the source assigns in `__init__`
            (`novelty.target(x)` with `novelty = Novelty().to(device)`), loop variables over `.parameters()`, `group["params"]` or a list
            named like parameters (`params`, `net_params`: `def sgd(params, lr): for p in params:`;
            also through `zip`), `next(model.parameters())`, hidden states, `Variable(...)` arguments,
            names the same function calls `.backward()` on (`loss_1, loss_2 = co_loss(...)`, then
            `loss_1.backward()` and `loss_1.data.item()`), the `.cpu()`/`.cuda()`/`.detach()` copy of a
            model's output or of a tensor known to require grad (`out.cpu().data.numpy()`; not of
            batches or labels, which carry no graph), and what a function the source registers as a
            forward hook is handed after the module (`inputs[0].data` in a forward pre-hook; not a
            backward hook's gradients, which a plain `backward()` builds no graph for).
            `p.data -= ...` is reported as the in-place write it is (`with torch.no_grad(): p -= ...`).
            Several reads in one statement make one finding that names them all, the tensor known to
            carry a graph or require grad first (`pred.data` before `grid.data`).
            """,
        why="""
            `.data` gives a tensor that autograd does not track: in-place changes through it are not
            seen by the version counter, so wrong gradients are computed silently instead of raising.
            Shape changes through it (`resize_`, `set_`, `t_`, `unsqueeze_`) only change a detached
            alias: the tensor itself keeps its old shape on current PyTorch. `loss.data[0]` indexes a
            0-dim tensor and raises since PyTorch 0.4. A write to a lazy layer's parameter before its
            first forward pass (`self.net = nn.LazyLinear(1)`, then `self.net.weight.data.normal_(0, 0.01)`)
            is silently lost when the layer creates the parameter, and `nn.init` refuses it: that finding
            says so and advises initialising after a first forward pass.
            """,
        example="""
            w = layer.weight.data
            layer.bias.data.fill_(0)
            p.data -= lr * p.grad
            print(loss.data[0])
            """,
        fix="""
            w = layer.weight.detach()
            nn.init.zeros_(layer.bias)          # or: with torch.no_grad(): layer.bias.fill_(0)
            with torch.no_grad():
                p -= lr * p.grad
            print(loss.item())
            """,
        not_flagged="""
            `dataset.data`, `batch.data`, `response.data` and any owner not known to be a tensor (live: not
            a Tensor); reads of a tensor that never required grad, where nothing is bypassed: built by a
            factory without `requires_grad` (`xs = torch.linspace(0, 1, 5)` then `xs.data.numpy()`) or by
            arithmetic and tensor methods of such tensors, assigned once (updates by a number, `x /=
            np.sqrt(var)`, aside) and never switched on with `requires_grad_()`; running sums that
            start from such a factory and only ever add detached values, numbers or statistics computed
            under `no_grad` (`total = torch.zeros(1)`, `total = total + loss.detach()`, `hits +=
            counts["hits"]`, then `dist.all_reduce(total.data)`); live, a plain `torch.Tensor` with `requires_grad` False and no
            `grad_fn` (parameters, tensors with a graph and tensors of unknown origin are still reported,
            and so are writes through `.data`, which a graph that saved the tensor would not notice);
            `.data` that reads no value: metadata (`x.data.device`, `.shape`, `.size()`),
            factories (`x.data.new(...)`), type checks (`isinstance(x.data, ...)`), the argument a method
            or factory takes only a dtype, device or shape from (`a.type_as(x.data)`, `a.to(x.data)`,
            `a.expand_as(x.data)`, `torch.zeros_like(x.data)`, `nn.init._calculate_fan_in_and_fan_out(w.data)`),
            also through a name
            the function uses only that way (`w = next(self.parameters()).data` then `w.new(...)`); a function argument `m` with `m.weight.data` unless the function is applied to a
            module or checks the module class. Writes get the write fix (`nn.init.*_` or the same
            in-place call under `torch.no_grad()`, which computes the same values and makes autograd
            raise if the old value was still needed), never `.detach()`, which would write to (or
            resize) a detached alias. Not flagged, as `.data` bypasses nothing there: a gradient
            (`p.grad.data.clamp_(...)`, `p.grad.data.add_(l.data)`: a gradient is in no graph, and
            `.data` keeps `l`'s out of it), code that runs under `no_grad`/`inference_mode` (a block
            or a decorated function, such as a hand-written optimizer step or an EMA update), a read
            detached at once (`w.data.clone().detach()`), and `.data` on the indices output of
            `max`/`min`/`topk`/`sort` (`_, idx = out.max(1)` then `idx.data`) or on lengths and token
            ids, integer tensors with no graph. Also not flagged:
            `.data =` swaps that change dtype, device or layout on purpose (`p.data = fn(p.data)`, also a function
            of an imported module of the package, `p.data = c_f.to_device(p.data, device=d)`,
            `b.data = b.to(dtype)`, `.half()`, `resize_(..., memory_format=...)`, a view into a flat
            buffer with `.view_as(p)`), which have no
            drop-in replacement; `p.data = <new tensor>` is told `copy_` only with its condition
            (same shape, dtype and device), unconditionally only when the new value is built from
            `p` by elementwise operations
            """,
        autofix="""
            Safe: `nn.init.*_(w.data)` becomes `nn.init.*_(w)` (init writes under `no_grad` into
            the same storage either way; also `xavier(w.data)` for a function of the source that only
            hands its argument to `nn.init`). Unsafe: `loss.data[0]` becomes `loss.item()` (the tensor is
            taken for 0-dim from what it holds; one with elements indexed fine and would now raise), and a
            read `x.data` becomes `x.detach()`, which shares the version counter, so an in-place write to
            the result now makes a later backward fail loudly instead of computing with changed values.
            Writes through `.data` need restructuring under `no_grad` and get no edit.
            """,
    ),
    Rule(
        "TM404",
        "variable-deprecated",
        "warning",
        evidence=("static",),
        what="Flags `torch.autograd.Variable(...)`.",
        why="""
            `Variable` has been a no-op wrapper since PyTorch 0.4; it returns a plain tensor and its
            `volatile` flag does nothing, so old code reads as if it did something it does not.
            """,
        example="x = Variable(torch.randn(3), requires_grad=True)",
        fix="x = torch.randn(3, requires_grad=True)",
        autofix="""
            Safe. `Variable(x)` becomes `x.detach()` — exactly what the wrapper still does: a
            tensor that shares `x`'s storage and carries no graph. `Variable(x, requires_grad=True)`
            becomes `x.detach().requires_grad_()`; `volatile=` has no effect any more and is dropped. When
            `x` is a fresh factory call (`torch.randn(3)`, `torch.tensor(data)`, `torch.from_numpy(a)`),
            detaching would change nothing and the wrapper simply goes; not for the legacy `torch.Tensor(t)`
            constructors, which alias a tensor argument with its graph.
            """,
    ),
    Rule(
        "TM405",
        "numpy-without-detach",
        "error",
        evidence=("static", "runtime"),
        what="""
            Flags `.numpy()` directly on a model output or loss with no `.detach()` in the chain
            (and, when the cell fails with "Can't call numpy() on Tensor that requires grad", the line that raised).
            """,
        why="""
            It raises "Can't call numpy() on Tensor that requires grad" — usually only at the end of
            a long run, when the metrics are computed.
            """,
        example="preds = model(x).cpu().numpy()",
        fix="preds = model(x).detach().cpu().numpy()",
        not_flagged="""
            chains that contain `.detach()` or run under `no_grad`/`inference_mode`; the output of a module
            whose class (of this source) registers no parameter, buffer or submodule (`Swish()(xs)`), or a
            `torch.nn` layer without parameters (`nn.Softmax(dim=-1)(xs)`): it needs grad only where its
            input does, so it is flagged only when that input is a model output; the output of a module
            of another library that this source builds but never trains, loads weights into, lists the
            parameters of or switches to train or eval (`decoder = FixedTablot(terms=33).to(device)`, a
            numerical method packaged as a module; not a class of torchvision, timm, transformers and other
            model libraries, nor one built with `from_pretrained`), and a `torch.nn` loss of it
            (`nn.MSELoss()(ft(t), decoder(fs, t))`) unless its other input is a model output; in a kernel,
            a live module none of whose parameters requires grad
            """,
        autofix="""
            Safe. Inserts `.detach()` right before `.numpy()`: on a tensor without gradients it
            changes nothing, on one with gradients the line raised.
            """,
    ),
    Rule(
        "TM406",
        "backward-under-no-grad",
        "error",
        evidence=("static",),
        what="""
            Flags `.backward()` inside a `no_grad`/`inference_mode` block (or a function decorated
            with them).
            """,
        why="""
            Nothing computed in the block has a graph, so `backward()` raises "element 0 of tensors
            does not require grad and does not have a grad_fn".
            """,
        example="""
            with torch.no_grad():
                loss = criterion(model(x), y)
                loss.backward()
            """,
        fix="""
            loss = criterion(model(x), y)
            loss.backward()
            """,
        not_flagged="""
            a tensor computed before the block, with gradients on (`loss = model.training_step(b)`, then
            `with torch.no_grad(): loss.backward()`; also a loss handed in as an argument of the function
            holding the block, or one the method stored on the object there with gradients on,
            `self.batch_loss = self.loss(out, y)` under `set_grad_enabled(True)`): its graph exists, and the
            block only keeps the update after it out of the graph
            """,
        overrides=("TM402",),
    ),
    Rule(
        "TM408",
        "eval-without-no-grad",
        "warning",
        evidence=("static",),
        what="""
            Flags a loop that runs forward passes of a module after `model.eval()` (no `model.train()`
            in between) with gradients on: no `no_grad`/`inference_mode` block around the loop or the
            forward, no decorator, no `backward()` (or `torch.autograd.grad`, optimizer step) in the
            loop, and nothing after it that back-propagates what it computed. Reported at the loop.
            The forward may go through a function of the same source called in the loop
            (`total += calc_loss(x, y).item()` with `def calc_loss(x, y): return crit(model(x), y)`,
            a method `self.logits(x)`, or `score(net, x)` with `def score(m, x): m(x)`), also one
            defined in an earlier notebook cell (from its source; in a kernel, the live function's),
            when that function is not decorated with `no_grad`/`inference_mode`, runs the forward
            outside such a block and does not back-propagate.
            """,
        why="""
            `model.eval()` only switches dropout and batch norm to inference; it does not stop
            autograd. Every forward still records a graph and keeps the activations each layer saves
            for backward until the output is dropped: evaluation uses as much memory as training,
            runs slower, and `volatile=True` (the old way to stop it) has been ignored since 0.4.
            """,
        example="""
            def evaluate(model, loader):
                model.eval()
                correct = 0
                for x, y in loader:
                    correct += (model(x).argmax(1) == y).sum().item()
                return correct
            """,
        fix="""
            @torch.no_grad()
            def evaluate(model, loader):
                model.eval()
                correct = 0
                for x, y in loader:
                    correct += (model(x).argmax(1) == y).sum().item()
                return correct
            """,
        not_flagged="""
            loops that call `backward()`, `torch.autograd.grad` or an optimizer's `step()` (saliency
            maps, adversarial examples, fine-tuning with frozen batch norm), also through a helper of
            the same file; loops that make their inputs require grad (`pos.requires_grad = True`:
            forces as gradients of an energy) and code built on interatomic-potential libraries
            (SevenNet, MACE, NequIP, CHGNet, MatGL, ...), whose forward differentiates the energy;
            loops whose outputs a later `backward()` uses; functions decorated with
            `no_grad`/`inference_mode` (also a project's own wrapper named for them, yolov5's
            `@smart_inference_mode()`) or that the file calls under them; forwards under
            `with torch.no_grad()`, `inference_mode()` or `set_grad_enabled(<not True>)` at any level;
            modules whose parameters are all frozen (`requires_grad_(False)`); a module put back
            in training mode before the loop; `generate()`-style methods (they disable gradients
            themselves); loops that call a method of an object a non-PyTorch class built around a model
            (`attack = GradientSignAttack(model, ...)` then `attack.perturb(x, y)`, an explainer's
            `attribute(...)`), whose own backward through the model is not visible in the loop
            """,
    ),
]
