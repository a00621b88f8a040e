"""TM1xx — model definitions (inside `nn.Module` subclasses)."""

from .model import Rule

RULES = [
    Rule(
        "TM101",
        "tensor-created-in-forward",
        "warning",
        evidence=("static",),
        what="""
            Flags tensor factories (`torch.zeros`, `torch.ones`, `torch.arange`, `torch.tensor`, ...)
            called without `device=` inside `forward` or a method that `forward` calls.
            """,
        why="""
            The tensor is built on the CPU on every call. Once the model moves to a GPU, `forward`
            mixes devices and fails, or silently copies every step.
            """,
        example="""
            def forward(self, x):
                mask = torch.ones(x.shape[0], 10)
            """,
        fix="""
            def forward(self, x):
                mask = x.new_ones(x.shape[0], 10)  # or torch.ones(..., device=x.device)
            # constant tensors: self.register_buffer("mask", torch.ones(10)) in __init__
            """,
        not_flagged="""
            the methods of a trainer that subclasses `nn.Module` to move what it holds, whose `forward` is
            the training loop (it back-propagates and steps an optimizer itself), or that has no `forward` and
            back-propagates: its validation switching modes, host-side schedules and `no_grad` blocks are the loop's;
            factories with a `device=` argument; `*_like` and `x.new_*`; `torch.normal(mu, std)` with
            tensor arguments (built on their device); `torch.tensor(t)`/`torch.as_tensor(t)` of a tensor (a
            forward input, an annotated `torch.Tensor`), which stays on `t`'s device (a needless copy, not a CPU
            tensor); the conversion of what the caller passed, `torch.tensor(inputs[0])` in a forward that
            takes arrays or tensors (a parameter the function never rebinds, not a number, and a result
            it never moves: `torch.tensor(lengths).to(x.device)` is still flagged, as is a list the
            function fills in itself); a factory in a function that turns NumPy arrays into tensors with
            `torch.from_numpy` and moves nothing (no `.to`, `.cuda`, `device=`): it computes on the CPU
            by construction, and a device on the factory alone would not change that; code outside `forward`/methods it calls; a factory in the branch
            that only runs without CUDA, in code that writes the CUDA and the CPU path out twice (the `else` of
            `if torch.cuda.is_available():`, of `if x.is_cuda:` or of `... if x.is_cuda else torch.ones(n)`, the body
            of `if not torch.cuda.is_available():`, the `else` of a branch that calls `.cpu()`): there everything is
            on the CPU (not the `else:` of a GPU count,
            `if torch.cuda.device_count() > 1:`, which may run on one GPU). The factory in the CUDA branch is still
            flagged. Host bookkeeping: a tensor that, with what torch functions of it alone compute
            (`torch.unique_consecutive`, `cumsum`, constant indexing), is only read back as Python
            values (`.tolist()`, `.item()`, `int()`, slice bounds, `if` tests against constants or numbers, such as a
            coin flip `if torch.rand(1) < self.p:` with `p=0.5` in `__init__`), never
            meeting another tensor (`torch.tensor([c.shape[-1] for c in crops])` whose group ends slice
            the list `crops`): on the CPU that is free, on the device each read would wait. A 0-dim
            tensor built from a Python number handed straight to an operation or a function
            (`f(x, torch.tensor(y_th))` with `y_th=10.0`, or from arithmetic on numbers,
            `x * torch.tensor(self.dim**0.5, dtype=x.dtype)`): PyTorch takes it as a scalar next to a
            tensor on any device (one appended to a list or joined by `torch.stack`/`torch.cat`
            still is flagged: joining needs one device). Zero-element tensors (`torch.empty(0, dtype=torch.long)`)
            bound in one branch of an `if` whose other branch binds the same names from a computation: typed
            stand-ins for values that branch does not use (TorchScript wants one type); an empty tensor grown with
            the inputs (`out = torch.empty(0, 8)`, then `torch.cat([out, y])`) is still flagged. The hint names only spellings PyTorch has: `x.new_*` for zeros/ones/empty/full/tensor, `torch.*_like`
            for zeros/ones/empty/full/rand/randn/randint, `device=` for the rest (`arange`, `eye`,
            `linspace`, ...)
            """,
        overrides=("TM102",),
        autofix="""
            Unsafe. Adds `device=x.device` to the factory call, where `x` is a tensor whose shape
            the call already reads (`torch.zeros(x.size(0), 4)`) or the forward's input when it is named
            like one. Unsafe because the tensor moves, which is the point, and code that relied on a CPU
            tensor there changes. Not `x.new_zeros(...)`, which would also take `x`'s dtype. Never a name
            only the call's own comprehension binds (`c` in `[c.shape[-1] for c in crops]`, out of scope
            at `device=`), nor an input the call takes as its data (`crops` in that comprehension,
            `torch.tensor(x)`), which may be a list. No fix for
            `torch.normal` or when no input tensor is in sight.
            """,
    ),
    Rule(
        "TM102",
        "device-move-inside-module",
        "warning",
        evidence=("static",),
        what="""
            Flags `.cuda()`, `.cpu()` and `.to(<device literal or global device>)` on `self`, a
            parameter, a submodule or an input inside an `nn.Module` method. In a trainer that is a
            module, whose `forward` runs a whole training step (it draws its own batches, calls
            `backward()` and steps an optimizer), the finding says the data's device is hardcoded and
            the fix follows a tensor of the module's own (a registered buffer, `.to(self.steps.device)`,
            else `next(self.parameters()).device`), as there is no input to follow.
            """,
        why="""
            The model decides its own device, so `model.to(device)` by the caller no longer controls
            where it runs: it breaks on machines without that device and fights multi-GPU wrappers.
            """,
        example="""
            def forward(self, x):
                x = x.cuda()
            """,
        fix="""
            model = Net().to(device)   # the caller moves model and inputs once
            # inside the module, follow the input: t.to(x.device)
            """,
        not_flagged="""
            `.to(x.device)`, `.to(x.dtype)`, `.to(self.weight.device)`, `.to(other)` where the argument derives from a tensor;
            the batches of a data loop a method other than the forward pass runs itself (layer-wise inference,
            `for n_id, adj in subgraph_loader: x = x_all[n_id].to(device)`), streamed from host memory as a
            training loop streams them;
            a module class defined inside a function that hands an instance to `torch.onnx.export`,
            `torch.jit.trace`/`script` or `torch.export.export` (a wrapper built to export a model once:
            `self.model = obj.model.to("cpu")` puts it where the example input is);
            casts to a dtype, also one imported from torch (`from torch import int32`, `.to(int32)`);
            moves inside the module's own `cpu()`, `cuda()`, `to()` or `_apply()` (a module that keeps parts
            unregistered, a dict of transforms, and moves them when the caller calls these methods);
            moves to a device the caller chose: `x.to(self.device)` / `.cuda(self.gpu_id)` where the attribute is set from a
            constructor argument or read off the module's own tensors (pipeline shards, a `device` property), `.to(device)` with
            `device` a parameter or a local (also read in a lambda of the method: `map(lambda t: t.to(device), embeds)`); modules in code that uses `torch.distributed.rpc` (`RRef`, `to_here`, `rpc_sync`), which must
            hand CPU tensors back over RPC and place each remote shard on its worker's device; model parallel classes that
            place their submodules on two or more devices (`self.a = ....to("cuda:0")`, `self.b = ....to("cuda:1")`), where
            moving activations between the parts is the point; `.cuda()` and CUDA literals in code that runs on CUDA only
            (the file, notebook or project says so, as for TM201); moves under a CUDA flag the caller sets
            (`if self.use_cuda: h = h.cuda()`; also under another name, `if self.dp:` where the class
            sets `self.dp = conf["use_gpu"]`, though not in that test's `else`, the CPU branch, where
            a `.cuda()` is flagged); `.cpu()` under a test of the input's own device (`if x.device.type in
            ["mps", "xpu"]: x = x.cpu()`, also through a name bound to that test: a backend workaround);
            `.to("cpu", non_blocking=True)`, an asynchronous fetch of a value for the host; `.cpu()`
            under a switch that asks for host memory (`if self.cpu_cache: feat = feat.cpu()`, also
            around a loop; the `.cuda()` that brings the feature back is still flagged, as
            `.to(x.device)` does the same on every device); a copy written into a plain tensor attribute built
            without a device (`self.codes[i : i + n] = codes.cpu()` with `self.codes = torch.zeros(n)`, which
            `model.to(device)` leaves in host memory): writing into host memory takes it;
            `.cpu()` / `.to("cpu")` that fetches values for Python (chained with
            `.tolist()`/`.numpy()`/`.item()`, also through a torch function of the copy,
            `torch.zeros_like(x.cpu()).numpy()`, or bound to a name the method reads that way: host-side indices from
            `.nonzero().cpu()`, or a copy that indexes a Python list, `model.transitions[best[i]]`); `.cpu()` whose copy is handed to host-side code: an argument of a NumPy function
            (`np.asarray(x.cpu())`), the lengths of `pack_padded_sequence` (`lengths=lens.cpu()`, also through a
            name bound to the copy: PyTorch requires them on the CPU) or an argument of a call that writes a file (`save_image(img.cpu(), path)`), a detached
            copy appended to a list (`TRACE.append(norm.detach().cpu())`: a record of values in host memory),
            an argument that a function of this source reads with
            `.item()`/`.tolist()`/`.numpy()`/`int(...)`, or a detached copy (`x.cpu().data`, `x.detach().cpu()`:
            values, no graph) passed to a plain function defined elsewhere (`build_targets(pred.cpu().data, ...)`),
            or bound to a name that the method hands, directly or through a loop over it, only to functions of a
            non-torch library (`costs = pwl.detach().cpu()` then `[linear_sum_assignment(c) for c in costs]`:
            SciPy runs on the host);
            `.cpu()` in an inference entry point (`generate`, `decode_*`, `predict`, ...) that hands its results
            back (`return ids.cpu()`) or to a host-side object that is not a module or a tensor
            (`self.vocab.string(tokens.int().cpu())`);
            a copy passed to a torch function, a method, a submodule or a function of this source that computes
            with it as a tensor is still flagged; moves under a test of the input's own device
            (`if x.is_cuda: t = t.cuda()`, `t.cuda() if x.is_cuda else t`, `if x.device.type == "cuda":`,
            `if self.weight.is_cuda:`), which follow where the caller put the data and run on the CPU (not
            `torch.cuda.is_available()`, nor `self.device.type` of a device the module chose); moves of a module that
            holds no tensors, which move nothing: a loss built without a class weight (`nn.CrossEntropyLoss().cuda()`,
            as for TM201), an `nn.Module` class of this source that registers no parameter, buffer or submodule
            (a plain tensor attribute does not count: `.cuda()` leaves it where it is), or a name or `self.<attr>`
            bound only to one of those; a factory moved in the same call (`torch.zeros(n).to(device)`) is TM101's
            finding. The hint fits the class: a module with no parameters of its own (nothing registered, where
            `next(self.parameters())` raises StopIteration) builds and moves tensors on the forward's input device
            (`device=scores.device`); an input or a batch drawn from one goes where the module's own tensors are
            (`.to(next(self.parameters()).device)`), or in a module without parameters follows the forward's
            first input (`.to(scores.device)`) or, being that input, stays where the caller put it; `self.cuda()`
            and submodule moves are left to the caller's `model.to(device)`
            """,
        overrides=("TM201", "TM202"),
    ),
    Rule(
        "TM103",
        "mode-switch-inside-module",
        "warning",
        evidence=("static",),
        what="""
            Flags `self.train()`, `self.eval()` and `.train()`/`.eval()` on a submodule inside an
            `nn.Module` method.
            """,
        why="""
            Training and evaluation mode are the caller's decision; a module that flips its own mode
            silently overrides `model.eval()` before validation (or `model.train()` after it).
            """,
        example="""
            def forward(self, x):
                self.eval()
            """,
        fix="""
            model.eval()        # by the caller, before validation
            model.train()       # and back before training
            """,
        not_flagged="""
            the methods of a trainer that subclasses `nn.Module` to move what it holds, whose `forward` is
            the training loop (it back-propagates and steps an optimizer itself), or that has no `forward` and
            back-propagates: its validation switching modes, host-side schedules and `no_grad` blocks are the loop's;
            `self.training` reads; `def train(self, mode=True)` overrides calling `super().train(mode)`;
            calls in `__init__` or `__setstate__` (no caller has set a mode yet while the module is built
            or unpickled; `self.train()` there is a no-op); `self.eval()` after the same method loaded the
            module's own weights (`self.load_state_dict(pretrained)`: a loader of pretrained weights hands
            back a model ready for inference, as `from_pretrained` does); `self.eval()` in an inference entry point (`generate`, `predict`,
            `sample`, `synthesize`, `parse`, ...), which needs eval mode for what it returns, and the
            `self.train()` after it that puts training mode back on the way out; calls in a method that
            back-propagates or steps an optimizer itself (a whole training step); a mode saved and put
            back (`was = self.ema.training`, `self.ema.eval()`, ..., `self.ema.train(was)`: both calls);
            `self.<part>.eval()` after the
            same method assigned `self.<part>` (a `setUp` or `load` that builds or loads that part: like
            `__init__`, no caller has set its mode yet); `self.<part>.eval()` inside a `no_grad`/`inference_mode`
            block that runs the same part (`with torch.inference_mode(): self.codec.eval(); ids = self.codec(wave)`):
            a frozen tool (a tokenizer, a teacher) whose mode is the module's business, since a caller's
            `model.train()` would turn its dropout or codebook updates back on; likewise `self.<part>.eval()` of a part the
            class freezes (`for p in self.codec.parameters(): p.requires_grad = False`); in a method other than the
            forward pass, an `eval()` of the module (or a part) followed by a `train()` of it or of one of its
            parts (`self.eval()` for a sampling rollout, then `self.core.train()` for the policy loss): a phase
            switch in the middle of one algorithm step, which no caller could make (both calls). The reverse
            order, `train()` then `eval()`, leaves the module in eval mode and is flagged. In a method outside
            the forward path, an `eval()` after which the method records no graph (decorated `@torch.no_grad()`
            or `@torch.inference_mode()`, or going on into such a block): an inference entry point by what it
            does, whatever its name (`tokenize`, a sampling or search loop). In the forward pass (or a helper
            of it), `self.<part>.eval()`: the part runs in eval mode on every call whatever the caller set (a
            frozen teacher, a BatchNorm used as a fixed affine map), so removing the call would change what the
            module computes. `self.eval()`/`self.train()` of the whole module in the forward pass (it stays in
            that mode after the call) and `self.<part>.train()` there are still flagged
            """,
    ),
    Rule(
        "TM104",
        "no-grad-inside-module",
        "warning",
        evidence=("static",),
        what="""
            Flags `with torch.no_grad()`, `@torch.no_grad()`, `torch.set_grad_enabled(False)` and
            `torch.inference_mode` inside an `nn.Module` method.
            """,
        why="""
            The module silently cuts the graph: a caller who wants to backpropagate through it (fine
            tuning, adversarial inputs, a bigger model) gets no gradient and no error.
            """,
        example="""
            def forward(self, x):
                with torch.no_grad():
                    return self.fc(x)
            """,
        fix="""
            with torch.inference_mode():   # the caller decides
                y = model(x)
            """,
        not_flagged="""
            the methods of a trainer that subclasses `nn.Module` to move what it holds, whose `forward` is
            the training loop (it back-propagates and steps an optimizer itself), or that has no `forward` and
            back-propagates: its validation switching modes, host-side schedules and `no_grad` blocks are the loop's;
            a class with a backward pass of its own (another method runs `torch.autograd.backward` or
            `torch.autograd.grad` under `torch.enable_grad()`, as a reversible block's `backward_pass`
            does): its forward runs without a graph on purpose, to save the activations that backward
            recomputes;
            a `with` block in the forward path that runs no layer of the module and does not return (no
            `self.<submodule>(...)`, `self(...)` or `self.forward(...)` in it): a teacher's targets computed from the
            inputs, a weight renormalised in place (`self.weight.copy_(...)`), a memory bank updated in place leave the
            output's graph to every trained parameter; a block whose layers the same forward also runs with gradients
            on, outside any such block (training in phases: on one path only a refiner trains, on another the parts
            the block runs train themselves): which parts train on which path is the module's design, and a caller
            cannot wrap half of a forward (a layer that runs without gradients on every path is still flagged);
            the same constructs outside module classes, and in methods that `forward` does not call: `generate`, `predict`,
            `sample` are inference entry points, and weight initialisation or EMA updates write parameters in place and must
            not be recorded; nobody back-propagates through them; a `forward` that back-propagates or
            steps an optimizer itself (MAML's meta-training step): its `no_grad` blocks measure metrics
            on the side, the author's decision, with no caller's choice to override; a method whose every
            `return` hands back Python values (`.tolist()`, `.item()`, `.numpy()`): no graph leaves it, so
            there is no gradient for a caller to want; a decorated method of the forward path that cuts nothing
            trained: it runs only submodules the class freezes (`for p in self.target.parameters(): p.requires_grad
            = False`, BYOL's momentum encoder), or only its parts' generation entry points (`self.semantic.generate(...)`),
            or, for a helper, runs no layer and returns nothing or only indices (an EMA update, `return topk_indices`);
            a block whose layers are parts it switches to eval itself (`self.codec.eval()`, then `self.codec(wave)`),
            or parts the class freezes (`for p in self.backbone.parameters(): p.requires_grad = False`, also through a
            layer inside them, `self.codec.encoder(wave)`): frozen tools, not layers the module trains; a decorated
            method named as an inference entry point (`@torch.inference_mode() def decode(...)`), also when `forward`
            calls it: a public inference API decorated for its own callers
            """,
        overrides=("TM402",),
    ),
    Rule(
        "TM105",
        "unregistered-submodules",
        "error",
        evidence=("static", "live"),
        what="""
            Flags a plain `list`/`tuple`/`dict` of modules or `nn.Parameter`s stored on `self` in a
            module's `__init__` (also when filled with `.append`). Live: any module instance in the
            kernel whose attribute holds such a container, e.g. one returned by a helper function.
            """,
        why="""
            PyTorch does not see inside plain containers: those layers are missing from
            `.parameters()` (the optimizer never trains them), `.to(device)`, `state_dict()` and
            `.train()/.eval()`.
            """,
        example="self.layers = [nn.Linear(64, 64) for _ in range(4)]",
        fix="""
            self.layers = nn.ModuleList(nn.Linear(64, 64) for _ in range(4))
            # dicts: nn.ModuleDict; parameters: nn.ParameterList / nn.ParameterDict
            """,
        not_flagged="""
            `nn.ModuleList([...])`, `nn.Sequential(*layers)`, lists of ints/strings/shapes; lists that only keep an order
            over layers registered another way: `self.<attr>` aliases, or layers the same method registers with
            `setattr(self, name, layer)`, `self.add_module(name, layer)` or `self.<attr> = layer`; a list the class
            itself hands to a container (`nn.Sequential(*self.layers)`, `nn.ModuleList(self.parts)`) or registers
            item by item in a loop over it (`self.add_module(f"head{i}", head)`); wrappers appended in a loop over a
            module the class already holds (`for m in self.members: self.views.append(View(m, scale))`), when the
            wrapper class builds no layer or parameter of its own: their only weights are the members', already
            registered (a wrapper that adds a layer is still flagged)
            """,
        autofix="""
            Safe. Wraps a list, tuple or comprehension of modules in `nn.ModuleList(...)`, a dict
            display with plain string keys in `nn.ModuleDict(...)`, and turns `self.x = []` filled by
            `.append`/`.insert`/`.extend` of modules into `self.x = nn.ModuleList()`, spelled with the
            source's own `nn` import. Offered only where the forward pass computes the same thing: the
            assignment comes after `super().__init__()` (an nn container before it raises), every item is
            a module, and nothing uses the attribute in a way the container does not support — in the
            class (iteration, indexing, `len`, `append`/`extend`/`insert`/`pop`, `items`/`keys`/`values`
            only; no `isinstance`, arithmetic or second assignment) or elsewhere in the file or notebook
            (`model.layers.sort()`, `model.layers + extra`, a reassignment). The layers then appear in
            `.parameters()` and `state_dict()`, which is the fix; a checkpoint saved before has fewer keys.
            Unsafe: a list of Parameters into `nn.ParameterList` (no list for `torch.stack`), and a dict
            comprehension into `nn.ModuleDict` (keys known only at run time). Keys that would clash with the
            container's own attributes get no fix.
            """,
    ),
    Rule(
        "TM106",
        "tensor-attribute-not-buffer",
        "warning",
        evidence=("static", "live"),
        what="""
            Flags a plain tensor (not an `nn.Parameter`) assigned to `self.<attr>` in a module's
            `__init__`. Live: a module instance holding a plain tensor attribute. A conversion chained
            on a Parameter (`nn.Parameter(t).double()`, `.cuda()`, `.to(device)`) returns a new plain
            tensor whenever it has work to do: the trained weight is then not registered; that finding
            says so and hints to convert before wrapping (or to let `model.to(device)` move it), never
            `register_buffer`.
            """,
        why="""
            Plain tensor attributes do not follow `model.to(device)` / `.half()` and are missing from
            `state_dict()`: the model breaks on the GPU and the tensor is lost on save/load.
            """,
        example="self.scale = torch.ones(16)",
        fix="""
            self.register_buffer("scale", torch.ones(16))   # persistent=False to keep it out of state_dict
            """,
        not_flagged="""
            `nn.Parameter(...)`, `register_buffer(...)`; a tensor that a later statement of `__init__` makes a
            Parameter (`self.lr = lr * torch.ones_like(p)` then `self.lr = nn.Parameter(self.lr)`), or
            that `__init__` wraps into a Parameter under another name while no other method reads it
            (`self.taus = torch.stack(...)` then `self.ps = nn.Parameter(self.taus)`); a conversion with nothing to do on a Parameter
            of a fresh float32 CPU tensor (`nn.Parameter(torch.randn(n)).type(torch.FloatTensor)`,
            `.float()`, `.to(torch.float32)`, in-place initialisers): PyTorch returns the Parameter
            itself; classes that move their own tensor state (the class or a base in the
            same source defines `to`, `_apply` or `cuda`), also lazily: a method re-binds the attribute
            to a tensor it is given (`self.alpha = self.alpha.type_as(x)`, `self.w = self.w.to(x.device)`,
            `self.mask = self.mask.to(dtype=x.dtype, device=x.device) if self.mask is not None else None`;
            not `.to(torch.float16)`, which follows no input), or refills it from the module's own state
            (`self.backup_mean.data = deepcopy(self.running_mean.data)`, `self.saved = self.weight.detach().clone()`:
            scratch that ends up where that state is, kept out of `state_dict()` on purpose), or a
            placeholder that `forward` rebinds on every call, in its own statements and not from itself
            (`self.weight = self.coeffs[:n].reshape(out, in)`); a 0-dim constant
            built from a number, neither placed nor trained (`self.scale = torch.tensor(0.0625)`): a 0-dim CPU
            tensor mixes with tensors on any device, as the number would, and `__init__` builds it anew (live:
            a 0-dim CPU tensor that does not require grad; also not a stray device for TM205); host data: an attribute the class reads
            only for Python values (`self.edges[i].item()`, `self.cuts.tolist()`, `float(...)`, or a loop
            such as `for lo, hi in zip(self.lows, self.highs)` whose elements are read only that way),
            as ECE bin edges are: as a buffer it would follow the model to the GPU and each read would
            wait for the device; an attribute into which the class writes only host copies
            (`self.codes[i : i + n] = codes.cpu()`: a log kept in host memory on purpose, which as a buffer would
            follow the model to the GPU and into every checkpoint); a zero-element placeholder (`torch.empty(2, 0)`,
            `torch.zeros(0)`) that another method of the class rebinds from something else (a runtime cache made on the
            input's device): it holds no data to move; a second assignment of an attribute already reported (the CPU `else`
            of `if torch.cuda.is_available(): self.mean = ....cuda()`): one finding per attribute, at its
            first assignment. A tensor put on a device the caller passes to the constructor
            (`.to(device)`, `device=device` with a parameter of `__init__`), and attributes computed
            from such tensors (`self.alphas = 1 - self.betas`), is reported as info: it starts where
            the caller's model is and breaks only on a later `model.to(...)`/`.half()` or in
            `state_dict()`. Live: instances of classes that move their own tensors (the class or a
            base other than `nn.Module` overrides `_apply`, as metric libraries do), host data as
            above in a class the same cell defines, and any module whose class is defined outside
            the user's code
            """,
        # `self.mask = torch.ones(n).to(device)`: as a buffer it follows `model.to(device)`, so
        # the move inside the module (TM102) goes with the fix
        overrides=("TM102",),
    ),
    Rule(
        "TM107",
        "detach-in-forward",
        "info",
        evidence=("static",),
        what="Flags `.detach()` and `.data` on intermediates inside `forward` that leave the layers before them no other path for gradients.",
        why="""
            Gradients stop flowing at that point: every layer before it stops learning, with no error.
            """,
        example="""
            def forward(self, x):
                h = self.encoder(x).detach()
                return self.head(h)
            """,
        fix="""
            def forward(self, x):
                h = self.encoder(x)        # keep the graph, unless a stop-gradient is intended
                return self.head(h)
            """,
        not_flagged="""
            code outside `forward` and the methods it calls; `torch.no_grad` blocks (TM104 covers those); a draw
            `dist.sample().detach()` (also through a name bound to it): `sample()` makes no graph, `rsample()` is
            the one that keeps it; the ground
            truth a loss is handed (`target.data` in `forward(self, output, target)`; also `labels`, `gt_*`), which never
            requires a gradient; `.data` used for
            metadata or as a factory, which stops nothing (`x.data.new(...)`, `x.data.new_zeros(...)`, `x.data.size()`,
            `isinstance(x.data, torch.cuda.FloatTensor)`, `type(x.data)`); a stop-gradient under an explicit freeze switch
            (`if config.fix_emb:`, `if self.freeze:`, `if not self.train_emb:`), and any option of the code: a flag or a
            mode compared with a string (`if self.mode == "learn_only_prototypes":`, `if not create_graph:`,
            `if self.straight_through and self.reinmax:`, also `if not should_detach: continue` before it; not
            `self.training`); in a class named as a loss or criterion, a stop-gradient while another input of
            the function keeps its gradient (a teacher's output or a memory bank detached beside the student's
            logits; a loss that detaches its only prediction is still flagged); the output of a submodule the class freezes
            (`self.cnn.requires_grad_(False)`); a value computed inside a `no_grad`/`inference_mode` block of the same
            method (`with torch.no_grad(): out = self.prior(x)`, then `recon = out["recon"]` and `recon.detach()`): it has
            no graph to cut; a module whose every owner in the source calls it only inside `no_grad` blocks
            (`self.latent = LatentModel()`, then `with torch.no_grad(): z = self.latent(x)`): its forward never records
            a graph (one call with gradients on, anywhere, keeps it flagged); statistics handed only as the `running_mean`/`running_var` of `F.batch_norm` or
            `F.instance_norm` (`var, mean = var.detach(), mean.detach()` then `F.batch_norm(x, mean, var)`), which are
            updated in place and must not require grad; a stop-gradient that blocks one path of several, so gradients
            still reach the layers before it: the straight-through estimator (`z + (q - z).detach()`,
            `hard - soft.detach() + soft`), and a value that the same function also uses with its graph
            (VQ-VAE's `mse_loss(q, z.detach())` beside `mse_loss(z, q.detach())`, a projection returned both
            through a predictor and detached as a target), and a max or logsumexp of the other operand
            subtracted for numerical stability (`logits - logits.max(1, keepdim=True)[0].detach()`, or
            `m, _ = torch.max(logits, 1, keepdim=True)` then `logits - m.detach()`); values with no
            gradient to cut: integer or bool tensors, as the code shows them (`.long()`, `dtype=torch.long`,
            `torch.LongTensor(...)`, `argmax`, `x.max(1)[1]`, `topk(...)[1]`, a comparison; or a name that
            is also used as an index, as the input of the class's `nn.Embedding`, as a `gather`/`scatter_`
            index, or beside such a tensor in a conditional: `trg[t] if teach else top1`; or whose name says it
            holds lengths or indices: `text_lengths`, `token_ids`, `keep_idx`), and values that
            leave for Python (`lengths.data.tolist()`, `x.detach().cpu().numpy()`, `.item()`, `int(...)`,
            the `lengths` of `pack_padded_sequence`); `return out.data` in the branch taken when an
            optional targets argument is not given (`if targets is None:`, or the `else` of
            `if targets is not None:`) while the other branch takes the targets and returns: the
            inference path of a forward that computes its own loss. `.data` reads there are still
            legacy reads (TM403). Writes through `.data` (`x.data[i] = v`, `x.data.clamp_()`) stop no
            gradient: the tensor keeps its graph, and TM403 reports them as the writes they are. A
            detached submodule output gets the freeze advice: `self.cnn.requires_grad_(False)` where it
            is built, so it records no activations
            """,
        overrides=("TM403",),
    ),
]
