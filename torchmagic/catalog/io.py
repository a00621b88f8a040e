"""TM6xx — saving and loading."""

from .model import Rule

RULES = [
    Rule(
        "TM601",
        "save-whole-model",
        "warning",
        evidence=("static",),
        what="""
            Flags `torch.save(model, f)` where `model` is an `nn.Module` (resolved from what the name
            was built from, or from the live namespace).
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
        not_flagged="`state_dict()`, dicts of state dicts (checkpoints), tensors",
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
            # save state dicts, not modules, so that weights_only loading works
            """,
    ),
]
