"""TM2xx — devices and transfers."""

from .model import Rule

RULES = [
    Rule(
        "TM201",
        "cuda-call",
        "info",
        evidence=("static",),
        what="Flags `.cuda()` calls outside `nn.Module` methods (TM102 covers those).",
        why="""
            `.cuda()` hardcodes one kind of device: the notebook fails on a CPU-only or Apple-silicon
            machine, and every such call has to be edited to change devices.
            """,
        example="""
            model = Net().cuda()
            x = x.cuda()
            """,
        fix="""
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = Net().to(device)
            x = x.to(device)
            """,
        not_flagged="""
            `torch.cuda.*` module functions (`is_available`, `synchronize`, ...); the buffer a
            `torch.distributed` collective is handed (`stats = torch.tensor([n]).cuda()` then
            `dist.all_reduce(stats)`: NCCL reduces CUDA tensors only), and lines of a function that
            returns or raises first when CUDA is missing (`if not torch.cuda.is_available() or not
            dist.is_initialized(): return`); `.cuda()` that only runs when the user
            asked for CUDA (`if cuda:`, `if args.cuda:`, `if use_cuda:`, `if torch.cuda.is_available():`,
            `x.cuda() if use_cuda else x`): such code already runs on a machine without a GPU; `.cuda(rank)`,
            `.cuda(args.gpu)`: one GPU per process, chosen at run time (DDP and RPC trainers); code
            that says it runs on CUDA only (`assert torch.cuda.is_available()`, `assert n_gpus >= 2` with
            `n_gpus = torch.cuda.device_count()`, `dist.init_process_group("nccl")`, a
            `torch.cuda.set_device(rank)` statement of a function's or the script's own body, not under
            an `if` (it raises without CUDA), stops without a GPU,
            imports `setGPU` (which picks an NVIDIA GPU as it is imported), imports apex, cupy, pycuda or
            numba.cuda without a fallback, loads a `.cu` extension),
            in the file, the notebook, or (`torchmagic check`) any file of the project around it
            (the nearest folder with `.git`, `pyproject.toml`, `setup.py`, `setup.cfg` or
            `requirements.txt`; tests are not read); a loss built without
            a class weight (`nn.CrossEntropyLoss().cuda()` holds no tensors: it moves nothing); a comment
            that says the code as a whole needs a GPU (`# this script will not run without a CUDA GPU`,
            `# the notebook requires a GPU`; a comment on one feature, `# AMP needs a GPU`, is not one); the
            body of an object's own `def cuda(self):` method, which passes the caller's request on to the
            networks it holds (`self.online.cuda()`); a function that profiles or times CUDA kernels
            (`ProfilerActivity.CUDA`, `sort_by="cuda_time_total"`, `torch.cuda.Event(enable_timing=True)`):
            the GPU is what it measures
            """,
    ),
    Rule(
        "TM202",
        "hardcoded-device",
        "info",
        evidence=("static",),
        what="""
            Flags a literal `"cuda"`/`"cuda:N"` passed as `device=` or to `.to(...)`.
            """,
        why="""
            The code cannot run on a machine without that GPU, and moving it to another device means
            editing every literal.
            """,
        example="""
            x = torch.zeros(3, device="cuda")
            y = y.to("cuda:0")
            """,
        fix="""
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            x = torch.zeros(3, device=device)
            y = y.to(device)
            """,
        not_flagged="""
            that selection line itself; `torch.device(...)` assigned once to a name; a move inside `if torch.cuda.is_available():`;
            code that says it runs on CUDA only (as for TM201: a GPU asserted, NCCL, a CUDA-only library);
            a collective's buffer and lines after a return when CUDA is missing (as for TM201);
            a function that profiles or times CUDA kernels (as for TM201); a class's own `cuda()`
            (or `to_cuda()`/`gpu()`) method, whose job is to move the object to a CUDA device;
            indexed devices (`"cuda:1"`) in code that names two or more GPUs by index: model parallel code places each
            part on a chosen GPU on purpose
            """,
    ),
    Rule(
        "TM203",
        "load-without-map-location",
        "warning",
        evidence=("static",),
        what="""
            Flags `torch.load(f)` without `map_location=`. Code that cannot run without a GPU (no
            path to the CPU: no test of a CUDA flag, of `torch.cuda.is_available()` or of a GPU count
            against 0, no `"cpu"` literal, no device read from the command line or handed in by a
            caller; or it says it is CUDA-only) is judged by where it puts its tensors. Left on the
            default GPU (bare `.cuda()`, `"cuda"`), its checkpoints hold tensors of a GPU that exists
            wherever the code runs at all: not flagged. Where it picks GPUs (`.cuda(args.gpu)`,
            `torch.cuda.set_device`, `torch.device("cuda", rank)`, `device_ids=`), a file written
            from another GPU is restored onto that one, or fails where it is missing: info. With one
            process per GPU (`init_process_group`, `local_rank`, `DistributedDataParallel`) every
            process puts its copy of the checkpoint on the one GPU it was saved from: a warning. A
            plain load of a file that the code also loads with `map_location` elsewhere (`if
            args.gpu is None: torch.load(p)` / `else: torch.load(p, map_location=loc)`) is the
            author's default-GPU case: not flagged.
            """,
        why="""
            The tensors are restored onto the device they were saved from: loading a GPU checkpoint
            fails on a machine without that GPU, and on a GPU machine it first lands everything on
            `cuda:0`, spiking its memory.
            """,
        example="""
            state = torch.load("ckpt.pt")
            """,
        fix="""
            state = torch.load("ckpt.pt", map_location=device)
            """,
        not_flagged="""
            calls with `map_location`; a `Dataset` loading its own processed files (no name in the
            path says checkpoint, model, weights or state): its preprocessing writes them from the CPU;
            a path with a literal folder named for data (`Path(root).joinpath("split", name,
            which).with_suffix(".pt")`) and nothing in it named like a checkpoint;
            bytes a child process on this machine just wrote (`torch.load(io.BytesIO(proc.stdout))`
            with `proc = subprocess.run(...)`): they never reach a machine without the devices they were saved from
            (bytes from the network still are flagged); files that hold no device tensors: a NumPy array
            (`torch.from_numpy(torch.load(f))`), a file this same code writes from the CPU (it has no accelerator path at
            all, or it moves the model to the CPU before `torch.save`, or it saves host copies, `torch.save({k: v.cpu() for k, v
            in model.state_dict().items()}, path)`); a file reloaded later in the same run (it goes back
            onto the device it came from): in the same scope that saved it (also under a formatted name with the same fixed
            text: `torch.save(sd, "{}.pkl".format(epoch))` in the loop, then `torch.load("{}.pkl".format(best_epoch))`), at
            the top level of a later notebook cell than the one that saved it (or of a cell run after it in the same
            kernel), inside a module-level function called only at the top level after a top-level save of the file
            (`def test(): model.load_state_dict(torch.load(best))` called once the training loop has saved `best`),
            after a call to a function of the source that
            saves it (`fit(net)` then `net.load_state_dict(torch.load("last.pt"))`, also from a loop at the top level), after
            an early-stopping helper was handed the module (`stopper.step(acc, model)` with `stopper = EarlyStopping(...)`,
            then `torch.load("es_checkpoint.pt")`, a file named like its best-weights checkpoint), or after a call that was handed both
            the module and the checkpoint's location (`early_stopping(val_loss, model, path)` then
            `model.load_state_dict(torch.load(path + "/checkpoint.pth"))`); a file found beside the code itself and
            named like no checkpoint (`torch.load(Path(__file__).parent / "hadamard_tensors.pt")`): a package ships it
            for every user's machine, CPU ones included (a checkpoint there, `"pretrained_weights.pth"`, is still
            flagged); a data file, named like a dataset, corpus, vocabulary, split, metadata or
            features and not like a checkpoint (`torch.load(opt.data)`, `torch.load("vocab.pt")`, also through a name built
            by formatting: `fn = "corpus.{}.data".format(digest)`, or the literal file name a joined path ends with:
            `torch.load(osp.join(root, "split_dict.pt"))`, or a literal path through a data folder with no
            checkpoint word in it: `torch.load("/scratch/ocean/data/land_mask.pt")`), which preprocessing or a dataset download
            writes from the CPU (`osp.join(run_dir, "model_best.pt")` is still flagged); code that cannot run without a GPU and leaves everything on the default GPU. Checkpoints
            written from a GPU by code that can also run on the CPU, and files from elsewhere, are flagged
            """,
        autofix="""
            Unsafe. Adds `map_location=device` when the code has a `device` name there (a module-level
            one counts for a load inside a function), otherwise `map_location="cpu"` when the code uses no
            accelerator at all (from there `.to(device)` still works). Code that uses the GPU without a
            `device` name gets no edit: the CPU would leave the loaded model away from its CUDA inputs;
            code that picks its GPU with `torch.cuda.set_device` and has no `device` name gets
            `map_location="cuda"`, the GPU of the process.
            Unsafe because the tensors land on a different device than before, which is the point.
            """,
    ),
    Rule(
        "TM204",
        "cuda-in-dataset",
        "warning",
        evidence=("static",),
        what="""
            Flags `.cuda()` and `.to(<cuda device>)` inside a `Dataset.__getitem__`/`__iter__` or a
            `collate_fn`.
            """,
        why="""
            With `num_workers > 0` these run in worker processes: CUDA there fails to initialise or
            creates one CUDA context per worker, and with `num_workers=0` the copies are synchronous.
            """,
        example="""
            def __getitem__(self, i):
                return self.x[i].cuda()
            """,
        fix="""
            def __getitem__(self, i):
                return self.x[i]                 # CPU tensor
            loader = DataLoader(ds, pin_memory=True, num_workers=4)
            for x in loader:
                x = x.to(device, non_blocking=True)
            """,
        not_flagged="""
            moves in the training loop; a `*collate*` function that the code around it calls directly
            (`ids = collate_ids(batch, device=device)`) and never hands on by name (as `collate_fn=`): a
            helper that pads a batch in the main process, where moving it to the caller's device is its job
            """,
        overrides=("TM201", "TM202"),
    ),
    Rule(
        "TM205",
        "mixed-device-model",
        "error",
        evidence=("live",),
        what="""
            Flags a live module instance whose parameters and buffers live on more than one device
            (often a tensor attribute left behind by TM106 after `model.to(device)`). A model split
            across devices on purpose, where every submodule sits on one device, is reported as info.
            """,
        why="""
            The forward pass fails with "Expected all tensors to be on the same device", or silently
            copies between devices on every call.
            """,
        example="""
            model = Net()          # holds self.scale = torch.ones(4), a plain tensor
            model.to("cuda")       # parameters move, the plain tensor stays on the CPU
            """,
        fix="""
            self.register_buffer("scale", torch.ones(4))   # in __init__: buffers follow .to()
            model.to(device)
            """,
        not_flagged="""
            models deliberately split (pipeline) are still flagged, but as info when every submodule is on one device;
            a plain 0-dim CPU tensor attribute that does not require grad (`self.scale = torch.tensor(0.0625)`) is no
            stray: it mixes with tensors on any device, as a number would
            """,
    ),
]
