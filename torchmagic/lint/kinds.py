"""What a name or expression holds, as plain strings, and how live objects are classified.

The vocabulary (`TENSOR`, `MODULE`, ...), the tables of torch calls and methods by what they
return, and `classify_object`/`classify_class`, which read only `type(obj)` (never an
attribute of the object, so a user's `__getattr__` or property never runs). Imports neither
torch nor IPython: torch is consulted only when the caller already imported it.
"""

from __future__ import annotations

import sys

# What a name or expression holds. Plain strings keep rules short: `ctx.kind(x) == TENSOR`.
TENSOR = "tensor"
PARAMETER = "parameter"
MODULE = "module"
OPTIMIZER = "optimizer"
SCHEDULER = "scheduler"
LOADER = "dataloader"
DATASET = "dataset"
DEVICE = "device"
DTYPE = "dtype"
NUMBER = "number"
STRING = "str"
NONE = "none"
SHAPE = "shape"
NDARRAY = "ndarray"
LIST = "list"
DICT = "dict"
STATE_DICT = "state_dict"
BATCH = "batch"

TENSORS = "tensors"  # a tuple/list of tensors: `x.split(2)`, `torch.meshgrid(...)`

TENSOR_KINDS = frozenset({TENSOR, PARAMETER})

# torch functions and tensor methods that return a sequence of tensors, not one tensor.
TENSOR_SEQUENCE_FUNCS = frozenset(
    {
        "split",
        "chunk",
        "tensor_split",
        "unbind",
        "hsplit",
        "vsplit",
        "dsplit",
        "meshgrid",
        "broadcast_tensors",
        "split_with_sizes",
        "unsafe_chunk",
        "unsafe_split",
    }
)

# Conventional notebook aliases, used when a cell relies on an import made in an earlier cell.
DEFAULT_IMPORTS = {
    "torch": "torch",
    "nn": "torch.nn",
    "F": "torch.nn.functional",
    "optim": "torch.optim",
    "np": "numpy",
    "DataLoader": "torch.utils.data.DataLoader",
    "Dataset": "torch.utils.data.Dataset",
    "IterableDataset": "torch.utils.data.IterableDataset",
    "TensorDataset": "torch.utils.data.TensorDataset",
}

# torch.<fn>(...) results that are not tensors.
TORCH_NON_TENSOR = frozenset(
    {
        "device",
        "load",
        "save",
        "no_grad",
        "enable_grad",
        "inference_mode",
        "set_grad_enabled",
        "manual_seed",
        "seed",
        "is_tensor",
        "is_floating_point",
        "is_complex",
        "numel",
        "compile",
        "get_default_dtype",
        "set_default_dtype",
        "set_default_device",
        "is_grad_enabled",
        "finfo",
        "iinfo",
        "Size",
        "Generator",
        "dtype",
        "use_deterministic_algorithms",
        "set_num_threads",
        "get_num_threads",
        "set_printoptions",
        "autocast",
        "is_inference_mode_enabled",
        "equal",
        "allclose",
        "is_nonzero",
        "is_same_size",
        "is_storage",
        "is_autocast_enabled",
        "are_deterministic_algorithms_enabled",
    }
)
# what fetches a tensor's values as Python ones: `v.item()`, `v.tolist()`, `v.numpy()`, `float(v)`
HOST_VALUE_METHODS = frozenset({"item", "tolist", "numpy"})
HOST_VALUE_CALLS = frozenset({"int", "float", "bool"})
# what a tensor tells about itself without reading its values (no graph, no sync)
TENSOR_METADATA = frozenset(
    {
        "device",
        "dtype",
        "shape",
        "is_cuda",
        "ndim",
        "size",
        "dim",
        "ndimension",
        "nelement",
        "numel",
        "get_device",
        "is_sparse",
        "element_size",
    }
)
# `torch.nn` layers that hold no parameters: their output needs grad only where their input does
PARAMETERLESS_LAYERS = frozenset(
    {
        *("Softmax", "LogSoftmax", "Softmin", "Softmax2d", "Sigmoid", "LogSigmoid", "Tanh", "Tanhshrink"),
        *("ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Hardtanh"),
        *("Hardsigmoid", "Hardswish", "Hardshrink", "Softshrink", "Softplus", "Softsign", "Threshold"),
        *("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "Identity", "Flatten"),
        *("Unflatten", "Upsample", "PixelShuffle", "PixelUnshuffle", "CosineSimilarity", "PairwiseDistance"),
        *(f"{kind}Pool{d}d" for kind in ("Max", "Avg", "AdaptiveMax", "AdaptiveAvg") for d in (1, 2, 3)),
    }
)
# `torch.<name>(sizes or values)`: a new tensor built from nothing the call could follow (no
# input tensor, so no device or graph of one); and the `*_like` ones, which take only the input's
# shape, dtype and device (never its graph)
NEW_TENSOR_FUNCS = frozenset(
    {
        "zeros",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "randint",
        "arange",
        "eye",
        "linspace",
        "tensor",
        "randperm",
    }
)
LIKE_FUNCS = frozenset(
    f"{name}_like" for name in ("zeros", "ones", "empty", "full", "rand", "randn", "randint")
)
NUMBER_FUNCS = frozenset({"len", "int", "float", "round", "abs", "sum", "min", "max", "bool"})
TENSOR_TO_NUMBER = frozenset(
    {
        "item",
        "dim",
        "ndimension",
        "numel",
        "element_size",
        "nelement",
        "get_device",
        "data_ptr",
        "stride",
        "equal",
        "allclose",
        "is_complex",
        "is_pinned",
        "is_shared",
        "is_set_to",
    }
)
TENSOR_NON_TENSOR = {
    "tolist": LIST,
    "numpy": NDARRAY,
    "backward": NONE,
    "size": SHAPE,
    "register_hook": None,
    "storage": None,
    "untyped_storage": None,
    "is_contiguous": NUMBER,
    "is_floating_point": NUMBER,
    "requires_grad_": TENSOR,
    "qscheme": None,
    "q_scale": NUMBER,
    "q_zero_point": NUMBER,
    "storage_offset": NUMBER,
}
MODULE_SELF_METHODS = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "train",
        "eval",
        "float",
        "double",
        "half",
        "bfloat16",
        "requires_grad_",
        "apply",
        "type",
        "share_memory",
        "to_empty",
    }
)
MODULE_METHOD_KINDS = {
    "state_dict": STATE_DICT,
    "parameters": None,
    "named_parameters": None,
    "children": None,
    "modules": None,
}


def is_class(obj: object) -> bool:
    """`isinstance(obj, type)` without consulting `obj.__class__` (which runs user code)."""
    return issubclass(type(obj), type)


_TYPE_QUALNAME = type.__dict__["__qualname__"]
_TYPE_MODULE = type.__dict__["__module__"]


def class_path(cls: type) -> str | None:
    """Public dotted path of a class, read through `type`'s own descriptors (a metaclass
    cannot intercept them): `torch.nn.modules.loss.CrossEntropyLoss` -> `torch.nn.CrossEntropyLoss`."""
    try:
        mod, qn = _TYPE_MODULE.__get__(cls), _TYPE_QUALNAME.__get__(cls)
    except Exception:
        return None
    if isinstance(mod, str) and isinstance(qn, str):
        return _public_torch_path(mod, qn)
    return None


def _public_torch_path(module: str, qualname: str) -> str:
    """`torch.nn.modules.linear.Linear` -> `torch.nn.Linear`, so live classes match rules."""
    if module.startswith("torch.nn.modules"):
        return f"torch.nn.{qualname}"
    if module.startswith("torch.optim.lr_scheduler"):
        return f"torch.optim.lr_scheduler.{qualname}"
    if module.startswith("torch.optim."):
        return f"torch.optim.{qualname}"
    if module.startswith("torch.utils.data"):
        return f"torch.utils.data.{qualname}"
    return f"{module}.{qualname}"


def qualified_call_kind(q: str) -> str | None:
    if not q.startswith("torch."):
        if q.startswith("numpy."):
            return NDARRAY
        return None
    parts = q.split(".")
    last = parts[-1]
    if len(parts) == 2:
        if last in TORCH_NON_TENSOR or last.startswith(("is_", "are_", "get_", "set_", "_")):
            return DEVICE if last == "device" else None
        if last in TENSOR_SEQUENCE_FUNCS:
            return TENSORS
        if last[:1].islower() or last == "Tensor" or last.endswith("Tensor"):
            return TENSOR
        return None
    if parts[1] == "nn":
        if len(parts) >= 3 and parts[2] == "functional":
            return TENSOR
        if len(parts) >= 3 and parts[2] == "init":
            # the in-place initialisers return their tensor; helpers return numbers/tuples
            return TENSOR if last.endswith("_") else None
        if last == "Parameter":
            return PARAMETER
        if len(parts) == 3 and last[:1].isupper():
            return MODULE
        return None
    if parts[1] == "optim":
        if "lr_scheduler" in parts:
            return SCHEDULER if last[:1].isupper() else None
        return OPTIMIZER if last[:1].isupper() else None
    if parts[1] == "utils" and len(parts) >= 3 and parts[2] == "data":
        if last == "DataLoader":
            return LOADER
        if last.endswith("Dataset") or last in ("Subset", "random_split"):
            return DATASET
        return None
    if parts[1] in ("fft", "linalg", "special") or (parts[1] == "autograd" and last == "Variable"):
        return TENSOR
    return None


def classify_class(cls: type) -> str | None:
    """What instances of a live class are, judged by type only (never touching instances)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if issubclass(cls, torch.nn.Parameter):
            return PARAMETER
        if issubclass(cls, torch.Tensor):
            return TENSOR
        if issubclass(cls, torch.nn.Module):
            return MODULE
        if issubclass(cls, torch.optim.Optimizer):
            return OPTIMIZER
        sched = (
            getattr(torch.optim.lr_scheduler, "LRScheduler", None) or torch.optim.lr_scheduler._LRScheduler
        )
        if issubclass(cls, (sched, torch.optim.lr_scheduler.ReduceLROnPlateau)):
            return SCHEDULER
        data = torch.utils.data
        if issubclass(cls, data.DataLoader):
            return LOADER
        if issubclass(cls, data.Dataset):
            return DATASET
        if issubclass(cls, torch.device):
            return DEVICE
        if issubclass(cls, torch.dtype):
            return DTYPE
    except TypeError:
        return None
    return None


def classify_object(obj: object) -> str | None:
    """What a live object is, from `type(obj)` alone: no attribute access on the object."""
    t = type(obj)
    if t is bool or t is int or t is float or t is complex:
        return NUMBER
    if t is str:
        return STRING
    if t is list or t is tuple:
        return LIST
    if t is dict:
        return DICT
    if obj is None:
        return NONE
    if is_class(obj):
        return None
    np = sys.modules.get("numpy")
    if np is not None and issubclass(t, np.ndarray):
        return NDARRAY
    if np is not None and issubclass(t, np.number):
        return NUMBER
    return classify_class(t)
