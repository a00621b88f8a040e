"""Where code that cannot run without a GPU puts its tensors: on the default GPU only (bare
`.cuda()`, `"cuda"`), or on GPUs it picks (`.cuda(args.gpu)`, `torch.cuda.set_device(rank)`,
`torch.device("cuda", local_rank)`), and whether it runs one process per GPU.

TM203 asks this of a `torch.load` without `map_location`: a checkpoint that default-GPU code
wrote holds tensors of the default GPU, which exists wherever that code can run at all, while
code that picks GPUs writes files that name an index another run may lack, and one process per
GPU means every process restores its copy onto the one GPU the file names."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .cuda_only import declares_cuda_only
from .nodes import device_type_of_literal, per_node, terminal_name

_NOT_CUDA = frozenset({"cpu", "mps", "xpu", "meta"})
# a variable or attribute that holds one device (`device`, `self.device`, `main_device`), not a
# list of GPU ids (`device_ids`)
_ONE_DEVICE = re.compile(r"(^|_)device$", re.IGNORECASE)
# a command-line option that lets the user choose the CPU (`--device`, `--cpu`, `--no-cuda`)
_DEVICE_OPTION = re.compile(r"^--?[\w-]*(device|cpu|cuda)[\w-]*$", re.IGNORECASE)
_RANK_OR_GPU = re.compile(r"rank|gpu", re.IGNORECASE)
_PER_PROCESS_CALLS = frozenset({"init_process_group", "spawn", "DistributedDataParallel"})


@dataclass(frozen=True)
class Placement:
    picks_gpus: bool  # chooses GPU indices rather than leaving everything on the default GPU
    per_process: bool  # one process per GPU (distributed training)
    sets_device: bool  # `torch.cuda.set_device(...)`: in each process `"cuda"` is its own GPU


def cuda_placement(module: ast.AST, *, declared: bool = False) -> Placement | None:
    """The placement of code with no path to the CPU that moves tensors to CUDA; None when it
    may run on the CPU (a device flag, a `"cpu"` literal, a device read from the command line or
    handed in by a caller) or moves nothing to CUDA. `declared`: something else (the project's
    libraries) already says the code needs a GPU."""
    return _placement(module) if declared or declares_cuda_only(module) else _placement_if_cuda_only(module)


@per_node
def _placement_if_cuda_only(module: ast.AST) -> Placement | None:
    if any(_may_use_the_cpu(n) for n in ast.walk(module)):
        return None
    return _placement(module)


@per_node
def _placement(module: ast.AST) -> Placement | None:
    moves = picks = per_process = sets_device = False
    for n in ast.walk(module):
        if isinstance(n, ast.Call):
            name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            receiver = n.func.value if isinstance(n.func, ast.Attribute) else None
            if name == "cuda" and receiver is not None and _name(receiver) != "torch":
                moves = True
                picks |= bool(n.args) or any(k.arg == "device" for k in n.keywords)
            elif name == "set_device":
                sets_device = picks = True
            elif name == "to" and n.args and _names_a_rank_or_gpu(n.args[0]):
                picks = True
            elif name == "device" and n.args and _cuda_name(n.args[0]) is not None:
                moves = True
                picks |= len(n.args) > 1 or _picks_an_index(n.args[0])
            if name in _PER_PROCESS_CALLS:
                per_process = True
            if any(k.arg == "device_ids" for k in n.keywords):
                picks = True
        elif _cuda_name(n) is not None and not isinstance(n, ast.Call):
            moves = True
            picks |= _picks_an_index(n)
        elif isinstance(n, (ast.Name, ast.Attribute)) and "local_rank" in _name(n).lower():
            per_process = True
    if not moves:
        return None
    return Placement(picks, per_process and picks, sets_device)


def _may_use_the_cpu(n: ast.AST) -> bool:
    if isinstance(n, ast.Attribute) and n.attr == "is_available":
        return True  # `use_cuda = args.cuda and torch.cuda.is_available()`: a path without one
    if isinstance(n, ast.Constant) and isinstance(n.value, str):
        return n.value.strip().lower().split(":")[0] in _NOT_CUDA or bool(_DEVICE_OPTION.match(n.value))
    if isinstance(n, (ast.If, ast.IfExp, ast.While)):
        return _asks_for_cuda(n.test)
    if isinstance(n, ast.Call) and _is_torch_device(n.func):
        return not n.args or _cuda_name(n.args[0]) is None  # `torch.device(args.device)`
    if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
        targets = n.targets if isinstance(n, ast.Assign) else [n.target]
        if any(_ONE_DEVICE.search(_name(t)) for t in targets):
            return not _a_cuda_device(n.value)  # `device = opt.device`, `device = pick()`
    if isinstance(n, ast.arguments):
        params = [*n.posonlyargs, *n.args, *n.kwonlyargs]
        return any(_ONE_DEVICE.search(p.arg) for p in params)  # a caller hands the device in
    return False


def _asks_for_cuda(test: ast.AST) -> bool:
    """`if args.cuda:`, `x.cuda() if use_cuda else x`, `torch.cuda.is_available()`,
    `args.ngpu > 0`, `if opt.use_gpu:`: whether to use a GPU at all, not which one (`args.gpu is
    None`, `rank % ngpus_per_node == 0`, `torch.cuda.device_count() > 1`)."""
    for sub in ast.walk(test):
        if isinstance(sub, (ast.Name, ast.Attribute)) and not _is_torch_cuda(sub):
            if "cuda" in _name(sub).lower():
                return True
        if isinstance(sub, ast.Compare) and any(
            _cuda_name(c) is not None for c in (sub.left, *sub.comparators)
        ):
            return True  # `device.type == "cuda"`
        if isinstance(sub, ast.Compare) and len(sub.comparators) == 1 and _compares_for_the_cpu(sub):
            return True
    gpu_flags = [test.operand] if isinstance(test, ast.UnaryOp) else [test]
    if isinstance(test, ast.BoolOp):
        gpu_flags = [v.operand if isinstance(v, ast.UnaryOp) else v for v in test.values]
    return any(isinstance(v, (ast.Name, ast.Attribute)) and "gpu" in _name(v).lower() for v in gpu_flags)


_GPU_COUNT = re.compile(r"^(n_?|num_?)gpus?$|gpus$|device_count", re.IGNORECASE)
_GPU_INDEX = re.compile(r"gpu(_?id)?$", re.IGNORECASE)


def _compares_for_the_cpu(test: ast.Compare) -> bool:
    """`args.ngpu > 0`, `n_gpu == 0`, `torch.cuda.device_count() >= 1` (how many GPUs, none
    meaning the CPU), or `args.gpu >= 0`, `gpu_id == -1` (-1 meaning the CPU); not
    `device_count() > 1` (how many to use) nor `args.gpu != 0` (which process prints)."""
    left, op, right = test.left, test.ops[0], test.comparators[0]
    name = _name(left.func) if isinstance(left, ast.Call) else _name(left)
    if not isinstance(right, (ast.Constant, ast.UnaryOp)):
        return False
    try:
        value = ast.literal_eval(right)
    except ValueError:
        return False
    if _GPU_COUNT.search(name):
        return value == 0 or (value == 1 and isinstance(op, (ast.GtE, ast.Lt)))
    if _GPU_INDEX.search(name):
        return value == -1 or (value == 0 and isinstance(op, (ast.GtE, ast.Lt)))
    return False


def _cuda_name(node: ast.AST) -> str | None:
    """The text of a string that names a CUDA device: `"cuda"`, `"cuda:1"`, `f"cuda:{rank}"`,
    `"cuda:{}".format(gpu)`; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if device_type_of_literal(node) == "cuda" else None
    if isinstance(node, ast.JoinedStr) and node.values:
        head = node.values[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str) and head.value.startswith("cuda:"):
            return head.value + "{}"
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
    ):
        return _cuda_name(node.func.value)
    return None


def _picks_an_index(node: ast.AST) -> bool:
    text = _cuda_name(node) or ""
    return ":" in text and text.split(":", 1)[1].strip() not in ("", "0")


def _a_cuda_device(value: ast.AST) -> bool:
    """What a device variable may be set to in code with no CPU path: a CUDA string or
    `torch.device`, a GPU index, `torch.cuda.current_device()`, or another such variable."""
    if _cuda_name(value) is not None or isinstance(value, ast.Name):
        return True
    if isinstance(value, ast.Constant):
        return isinstance(value.value, int) and not isinstance(value.value, bool)
    if isinstance(value, ast.Call):
        if _is_torch_device(value.func):
            return bool(value.args) and _cuda_name(value.args[0]) is not None
        return isinstance(value.func, ast.Attribute) and value.func.attr == "current_device"
    return False


def _names_a_rank_or_gpu(node: ast.AST) -> bool:
    return isinstance(node, (ast.Name, ast.Attribute)) and bool(_RANK_OR_GPU.search(_name(node)))


def _is_torch_device(func: ast.AST) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "device" and _name(func.value) == "torch") or (
        isinstance(func, ast.Name) and func.id == "device"
    )


def _is_torch_cuda(node: ast.AST) -> bool:
    """`torch.cuda` itself, the module a call like `torch.cuda.device_count()` goes through."""
    return isinstance(node, ast.Attribute) and node.attr == "cuda" and _name(node.value) == "torch"


def _name(node: ast.AST) -> str:
    return terminal_name(node) or ""
