"""TM6xx — saving and loading."""

from .model import Rule

RULES = [
    Rule(
        "TM601",
        "save-whole-model",
        "warning",
        evidence=("static",),
        what="""
            Flags `torch.save(model, f)` where `model` is an `nn.Module`, and a checkpoint dict or list
            that holds one (`{"model": model, "optimizer": optimizer}`, `[model, criterion, opt]`). A module is known from what
            built it (an `nn.Module` class of the file or of torch, `torchvision.models.*`,
            `timm.create_model`, `torch.hub.load`, the live namespace), from its use as one (the
            name has `.parameters()`, `.train()`, `.eval()`, `.apply()` called on it: a class from a
            sibling module, `model = model.RNNModel(...)`), from loading a model's weights (an
            object built from a class, `copy = WaveGlow(**cfg).cuda()`, then
            `copy.load_state_dict(model.state_dict())`; not a class named like an optimizer,
            scheduler, scaler or meter, nor one built over `.parameters()`), or it is a function parameter named like
            a model (`model`, `net`, `netG`, `encoder`) that no call in the file passes weights for;
            also through a name every binding of which is such a module, an alias or a copy of one
            (`to_save = copy.deepcopy(model).cpu()`, `frozen = model.eval()`). Where the same source
            loads the module back whole (`model = torch.load(f)` into the saved name, or any name
            from the same file expression), the hint names that line and changes it too:
            `model.load_state_dict(torch.load(f))` (the model trained in the same scope is still
            there; elsewhere it is built from its class first), since saving the weights alone would
            break that reload.
            """,
        why="""
            Pickling a module stores the path of its class: the file no longer loads after the class
            is renamed, moved or edited, on another PyTorch version, or without the defining code.
            """,
        example="""
            torch.save(model, "model.pt")
            """,
        fix="""
            torch.save(model.state_dict(), "model.pt")
            model.load_state_dict(torch.load("model.pt", map_location=device))
            """,
        not_flagged="""
            `state_dict()`, dicts of state dicts and numbers (checkpoints), tensors, objects of other
            classes (a vocabulary), parameters of generic helpers (`save(obj, path)`, `model_state`),
            and a parameter the file passes a state dict for (`save_model(model.state_dict(), p)`);
            a whole module saved beside its own weights (another `torch.save` of the same function
            writes `model.state_dict()`, alone or in a checkpoint dict) when nothing in the source
            loads the module back whole: a convenience copy next to the portable checkpoint
            """,
        autofix="""
            Unsafe. `torch.save(model, f)` becomes `torch.save(model.state_dict(), f)` (and a
            module stored in a checkpoint dict written in the call, `{"model": model}`, becomes
            `model.state_dict()`). Unsafe because the code that loads the file must change with it: build
            the model, then `load_state_dict`. No edit where the same file or notebook loads whole models
            back (`torch.load` without any `load_state_dict`), nor for a checkpoint dict entry the same
            code loads and reads back by its key (`torch.load(p)["model"]`): the edit alone would break it.
            """,
    ),
    Rule(
        "TM602",
        "unsafe-load",
        "warning",
        evidence=("static",),
        what="Flags `torch.load(..., weights_only=False)`.",
        why="""
            It runs the full unpickler: a checkpoint from an untrusted source can execute arbitrary
            code on load.
            """,
        example="""
            ckpt = torch.load("ckpt.pt", weights_only=False)
            """,
        fix="""
            ckpt = torch.load("ckpt.pt", map_location=device)   # weights_only=True is the default
            # save state dicts, not modules, so that weights_only loading works; for a file that
            # also holds Python objects you trust, allow exactly those:
            with torch.serialization.safe_globals([datetime.datetime]):
                data = torch.load("data.pt")
            """,
        not_flagged="""
            a file the same function (or the script's top level) writes with `torch.save(obj, same_path)`:
            a cache of this code's own, not someone else's pickle; a file an earlier line of the source
            saves a whole module to (`torch.save(model, name + ".pth")` in `train`, then
            `torch.load(name + ".pth", weights_only=False)` in `predict`): only the full unpickler loads
            it, and TM601's finding on that save changes this load with it; a Lightning checkpoint (the
            function reads its `"hyper_parameters"`, or names `"pytorch-lightning_version"`): its
            hyper-parameters are pickled Python objects that the weights-only unpickler refuses,
            and Lightning loads its own checkpoints in full; a load through the author's own
            unpickler (`pickle_module=`, such as one whose `find_class` admits only torch names),
            which decides itself what gets in
            """,
        autofix="""
            Unsafe. Drops `weights_only=False`: a file that pickles more than tensors and plain
            containers no longer loads, which is the protection.
            """,
    ),
]
