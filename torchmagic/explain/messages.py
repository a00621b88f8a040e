"""Classify PyTorch's shape, dtype and device error messages into structured records.

Only the exact builtin exception types PyTorch raises are read, and only when their single
argument is a plain `str`: `str()` of any other exception (a user-defined type, or a builtin
one holding an arbitrary object) could run user code. The formats are those of torch 2.x
(tests trigger each one for real and pin the text); unknown messages give None, since TM001
must not flag errors that are not about tensors.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_READABLE = (RuntimeError, IndexError, ValueError, TypeError, NotImplementedError, AssertionError)
_args = BaseException.__dict__["args"].__get__

# Error kinds (TensorError.kind).
MATMUL = "matmul"
CAT = "cat"
STACK = "stack"
BROADCAST = "broadcast"
CONV_CHANNELS = "conv_channels"
CONV_RANK = "conv_rank"
INPUT_TOO_SMALL = "input_too_small"
VIEW_STRIDE = "view_stride"
VIEW_NUMEL = "view_numel"
DEVICE = "device"
DTYPE = "dtype"
TARGET_DTYPE = "target_dtype"
INDEX_DTYPE = "index_dtype"
INDEX_RANGE = "index_range"
INDEX_BOUNDS = "index_bounds"
TARGET_RANGE = "target_range"
TARGET_SHAPE = "target_shape"
BATCH_SIZE = "batch_size"
NORM_FEATURES = "norm_features"
NORM_SHAPE = "norm_shape"
BATCH_ONE = "batch_one"
RNN_INPUT = "rnn_input"
EMBED_DIM = "embed_dim"
DIM_RANGE = "dim_range"
NOT_TENSOR = "not_tensor"
META_VALUES = "meta_values"  # an op needed values a meta tensor does not have (dry runs)


@dataclass(frozen=True)
class TensorError:
    """What a PyTorch error message says, parsed: kind plus the facts it names, in order."""

    kind: str
    text: str  # the message's first line, as PyTorch wrote it
    exc_type: str = "RuntimeError"
    shapes: tuple[tuple[int, ...], ...] = ()
    sizes: tuple[int, ...] = ()  # numbers the message names (expected before got)
    dtypes: tuple[str, ...] = ()  # torch names: float32, int64, ...
    devices: tuple[str, ...] = ()  # cpu, cuda:0, meta, ...
    dim: int | None = None
    argument: str | None = None  # the argument, entry or op the message blames
    detail: str = ""  # sub-kind: "expand", "rank", "bmm", "probabilities", ...


# ---- names in messages -------------------------------------------------------------------------

# c10 ScalarType names ("Float"), C++ type names ("float", "long int", "c10::Half"), and the
# element part of legacy type strings ("torch.cuda.FloatTensor" -> "Float").
_DTYPES = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "bfloat16": "bfloat16",
    "long": "int64",
    "long int": "int64",
    "int64_t": "int64",
    "int": "int32",
    "short": "int16",
    "short int": "int16",
    "char": "int8",
    "signed char": "int8",
    "byte": "uint8",
    "unsigned char": "uint8",
    "bool": "bool",
    "complexfloat": "complex64",
    "complexdouble": "complex128",
    "complexhalf": "complex32",
    "c10::complex<float>": "complex64",
    "c10::complex<double>": "complex128",
}
_TORCH_DTYPES = {
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
    "complex64",
    "complex128",
}
_LEGACY = re.compile(r"^torch\.(?:(\w+)\.)?(\w+)Tensor$")


def dtype_name(text: str) -> str:
    """`Float`, `float`, `c10::Half`, `torch.float64`, `torch.cuda.LongTensor` -> `float32`..."""
    t = text.strip().strip("'\"")
    legacy = _LEGACY.match(t)
    if legacy:
        t = legacy.group(2)
    t = t.removeprefix("torch.").removeprefix("c10::") if not t.startswith("c10::complex") else t
    if t in _TORCH_DTYPES:
        return t
    return _DTYPES.get(t.lower(), t)


def legacy_device(text: str) -> str | None:
    """`torch.cuda.FloatTensor` -> `cuda`, `torch.FloatTensor` -> `cpu`; None if not that form."""
    m = _LEGACY.match(text.strip())
    if not m:
        return None
    return m.group(1) or "cpu"


def shape_of(text: str) -> tuple[int, ...]:
    """`32x128`, `[2, 4]`, `(2 x 2)`, `torch.Size([4, 1])`, `3` -> a tuple of ints."""
    return tuple(int(n) for n in re.findall(r"-?\d+", text.replace("torch.Size", "")))


# ---- the formats -------------------------------------------------------------------------------

_Parser = Callable[["re.Match[str]", str], TensorError]
_FORMATS: list[tuple[re.Pattern[str], _Parser]] = []


def _format(pattern: str) -> Callable[[_Parser], _Parser]:
    def register(fn: _Parser) -> _Parser:
        _FORMATS.append((re.compile(pattern), fn))
        return fn

    return register


@_format(r"mat1 and mat2 shapes cannot be multiplied \((\d+x\d+) and (\d+x\d+)\)")
def _mm(m: re.Match[str], text: str) -> TensorError:
    return TensorError(MATMUL, text, shapes=(shape_of(m[1]), shape_of(m[2])))


@_format(
    r"Expected size for first two dimensions of batch2 tensor to be: (\[[\d, ]+\]) but got: (\[[\d, ]+\])"
)
def _bmm(m: re.Match[str], text: str) -> TensorError:
    return TensorError(MATMUL, text, shapes=(shape_of(m[1]), shape_of(m[2])), detail="bmm")


@_format(r"size mismatch, got input \(([\dx]+)\), mat \((\d+x\d+)\), vec \((\d+)\)")
def _mv(m: re.Match[str], text: str) -> TensorError:
    return TensorError(MATMUL, text, shapes=(shape_of(m[2]), shape_of(m[3])), detail="mv")


@_format(
    r"inconsistent tensor size, expected tensor (\[[\d, ]*\]) and src (\[[\d, ]*\]) to have the same number of elements"
)
def _dot(m: re.Match[str], text: str) -> TensorError:
    return TensorError(MATMUL, text, shapes=(shape_of(m[1]), shape_of(m[2])), detail="dot")


@_format(
    r"Sizes of tensors must match except in dimension (-?\d+)\. Expected size (\d+) but got size (\d+) "
    r"for tensor number (\d+) in the list"
)
def _cat(m: re.Match[str], text: str) -> TensorError:
    return TensorError(CAT, text, sizes=(int(m[2]), int(m[3])), dim=int(m[1]), argument=m[4])


@_format(r"Tensors must have same number of dimensions: got (\d+) and (\d+)")
def _cat_rank(m: re.Match[str], text: str) -> TensorError:
    return TensorError(CAT, text, sizes=(int(m[1]), int(m[2])), detail="rank")


@_format(
    r"stack expects each tensor to be equal size, but got (\[[\d, ]*\]) at entry (\d+) and (\[[\d, ]*\]) at entry (\d+)"
)
def _stack(m: re.Match[str], text: str) -> TensorError:
    return TensorError(STACK, text, shapes=(shape_of(m[1]), shape_of(m[3])), sizes=(int(m[2]), int(m[4])))


@_format(
    r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton dimension (\d+)"
)
def _broadcast(m: re.Match[str], text: str) -> TensorError:
    return TensorError(BROADCAST, text, sizes=(int(m[1]), int(m[2])), dim=int(m[3]))


@_format(
    r"The expanded size of the tensor \((-?\d+)\) must match the existing size \((\d+)\) at non-singleton "
    r"dimension (\d+)\.\s+Target sizes: (\[[-\d, ]*\])\.\s+Tensor sizes: (\[[\d, ]*\])"
)
def _expand(m: re.Match[str], text: str) -> TensorError:
    return TensorError(
        BROADCAST,
        text,
        shapes=(shape_of(m[4]), shape_of(m[5])),
        sizes=(int(m[1]), int(m[2])),
        dim=int(m[3]),
        detail="expand",
    )


@_format(
    r"Given (groups|transposed)=(\d+), weight of size (\[[\d, ]+\]), expected input(\[[\d, ]+\]) "
    r"to have (\d+) channels, but got (\d+) channels instead"
)
def _conv(m: re.Match[str], text: str) -> TensorError:
    return TensorError(
        CONV_CHANNELS,
        text,
        shapes=(shape_of(m[3]), shape_of(m[4])),
        sizes=(int(m[5]), int(m[6])),
        detail="transposed" if m[1] == "transposed" else "",
    )


@_format(
    r"Expected (\d+)D \(unbatched\) or (\d+)D \(batched\) input to (\w+), but got input of size: (\[[\d, ]*\])"
)
def _conv_rank(m: re.Match[str], text: str) -> TensorError:
    return TensorError(CONV_RANK, text, shapes=(shape_of(m[4]),), sizes=(int(m[1]), int(m[2])), argument=m[3])


@_format(r"Calculated padded input size per channel: \(([\d x]+)\)\. Kernel size: \(([\d x]+)\)")
def _kernel_too_big(m: re.Match[str], text: str) -> TensorError:
    return TensorError(INPUT_TOO_SMALL, text, shapes=(shape_of(m[1]), shape_of(m[2])), detail="kernel")


@_format(r"Given input size: \(([\dx]+)\)\. Calculated output size: \(([\dx]+)\)\. Output size is too small")
def _pool_too_small(m: re.Match[str], text: str) -> TensorError:
    return TensorError(INPUT_TOO_SMALL, text, shapes=(shape_of(m[1]), shape_of(m[2])), detail="output")


@_format(r"view size is not compatible with input tensor's size and stride")
def _view(m: re.Match[str], text: str) -> TensorError:
    return TensorError(VIEW_STRIDE, text)


@_format(r"shape '(\[[-\d, ]*\])' is invalid for input of size (\d+)")
def _view_numel(m: re.Match[str], text: str) -> TensorError:
    return TensorError(VIEW_NUMEL, text, shapes=(shape_of(m[1]),), sizes=(int(m[2]),))


_DEV = r"([a-z]+(?::\d+)?)"


@_format(
    rf"Expected all tensors to be on the same device, but got (\w+) is on {_DEV}, different from other "
    rf"tensors on {_DEV}(?: \(when checking argument in method (\w+)\))?"
)
def _device_arg(m: re.Match[str], text: str) -> TensorError:
    return TensorError(DEVICE, text, devices=(m[2], m[3]), argument=m[1], detail=m[4] or "")


@_format(
    rf"Expected all tensors to be on the same device, but found at least two devices, {_DEV} and {_DEV}!"
    r"(?: \(when checking arg?u?ment for argument (\w+) in method (\w+)\))?"
)
def _device_two(m: re.Match[str], text: str) -> TensorError:
    return TensorError(DEVICE, text, devices=(m[1], m[2]), argument=m[3], detail=m[4] or "")


@_format(rf"Tensor on device {_DEV} is not on the expected device {_DEV}!")
def _device_expected(m: re.Match[str], text: str) -> TensorError:
    return TensorError(DEVICE, text, devices=(m[1], m[2]))


@_format(r"can't convert {_DEV} device type tensor to numpy".replace("{_DEV}", _DEV))
def _device_numpy(m: re.Match[str], text: str) -> TensorError:
    return TensorError(DEVICE, text, devices=(m[1], "cpu"), detail="numpy")


@_format(r"Input type \(([\w.:<> ]+)\) and (weight|bias) type \(([\w.:<> ]+)\) should be the same")
def _input_type(m: re.Match[str], text: str) -> TensorError:
    a, b = m[1], m[3]
    da, db = legacy_device(a), legacy_device(b)
    dtypes = (dtype_name(a), dtype_name(b))
    if da is not None and db is not None and da != db:
        return TensorError(DEVICE, text, devices=(da, db), dtypes=dtypes, argument=m[2])
    return TensorError(DTYPE, text, dtypes=dtypes, argument=m[2])


@_format(r"(\w+) and (\w+) must have the same dtype, but got (\w+) and (\w+)")
def _same_dtype(m: re.Match[str], text: str) -> TensorError:
    return TensorError(DTYPE, text, dtypes=(dtype_name(m[3]), dtype_name(m[4])), argument=f"{m[1]}, {m[2]}")


@_format(r"expected (\w+) and (\w+) to have the same dtype, but got: ([\w:<> ]+?) != ([\w:<> ]+)$")
def _same_dtype_cpp(m: re.Match[str], text: str) -> TensorError:
    return TensorError(DTYPE, text, dtypes=(dtype_name(m[3]), dtype_name(m[4])), argument=f"{m[1]}, {m[2]}")


@_format(r"expected scalar type (\w+) but found (\w+)")
def _scalar_type(m: re.Match[str], text: str) -> TensorError:
    return TensorError(DTYPE, text, dtypes=(dtype_name(m[1]), dtype_name(m[2])))


@_format(r"(\w+) input tensors must have the same dtype, but got (\w+), (\w+),? and (\w+)")
def _addmv_dtype(m: re.Match[str], text: str) -> TensorError:
    return TensorError(DTYPE, text, dtypes=tuple(dtype_name(x) for x in (m[2], m[3], m[4])), argument=m[1])


@_format(r"RNN input dtype \(([\w.]+)\) does not match weight dtype \(([\w.]+)\)")
def _rnn_dtype(m: re.Match[str], text: str) -> TensorError:
    return TensorError(DTYPE, text, dtypes=(dtype_name(m[1]), dtype_name(m[2])), argument="rnn")


@_format(
    r"Index put requires the source and destination dtypes match, got (\w+) for the destination and (\w+)"
)
def _index_put_dtype(m: re.Match[str], text: str) -> TensorError:
    return TensorError(DTYPE, text, dtypes=(dtype_name(m[1]), dtype_name(m[2])), argument="index_put")


@_format(r"result type (\w+) can't be cast to the desired output type (\w+)")
def _cast(m: re.Match[str], text: str) -> TensorError:
    return TensorError(DTYPE, text, dtypes=(dtype_name(m[1]), dtype_name(m[2])), detail="cast")


@_format(r"^\"?(\w+)\"? not implemented for '(\w+)'")
def _not_implemented_for(m: re.Match[str], text: str) -> TensorError:
    return TensorError(DTYPE, text, dtypes=(dtype_name(m[2]),), argument=m[1], detail="unsupported")


@_format(r"expected target dtype to be Long or Byte, but got (\w+)")
def _target_dtype(m: re.Match[str], text: str) -> TensorError:
    return TensorError(TARGET_DTYPE, text, dtypes=("int64", dtype_name(m[1])))


@_format(r"Expected floating point type for target with class probabilities, got (\w+)")
def _target_probs(m: re.Match[str], text: str) -> TensorError:
    return TensorError(TARGET_DTYPE, text, dtypes=("float32", dtype_name(m[1])), detail="probabilities")


@_format(
    r"Expected tensor for argument #\d+ '(\w+)' to have one of the following scalar types: ([\w, ]+); "
    r"but got ([\w.]+) instead(?: \(while checking arguments for (\w+)\))?"
)
def _index_dtype(m: re.Match[str], text: str) -> TensorError:
    wanted = tuple(dtype_name(x) for x in m[2].split(", "))
    return TensorError(INDEX_DTYPE, text, dtypes=(*wanted, dtype_name(m[3])), argument=m[4] or m[1])


@_format(r"tensors used as indices must be long, int, byte or bool tensors")
def _index_dtype_getitem(m: re.Match[str], text: str) -> TensorError:
    return TensorError(INDEX_DTYPE, text, argument="indexing")


@_format(r"(\w+)\(\): Expected dtype int32 or int64 for index")
def _index_dtype_select(m: re.Match[str], text: str) -> TensorError:
    return TensorError(INDEX_DTYPE, text, dtypes=("int32", "int64"), argument=m[1])


@_format(r"^index out of range in self$")
def _index_range(m: re.Match[str], text: str) -> TensorError:
    return TensorError(INDEX_RANGE, text)


@_format(r"Index (\d+) of input takes value (-?\d+) which is not in the valid range \[0, (\d+)\)")
def _index_range_bag(m: re.Match[str], text: str) -> TensorError:
    return TensorError(INDEX_RANGE, text, sizes=(int(m[2]), int(m[3])), argument="embedding_bag")


@_format(r"index (-?\d+) is out of bounds for dimension (\d+) with size (\d+)")
def _index_bounds(m: re.Match[str], text: str) -> TensorError:
    return TensorError(INDEX_BOUNDS, text, sizes=(int(m[1]), int(m[3])), dim=int(m[2]))


@_format(r"^Target (-?\d+) is out of bounds")
def _target_range(m: re.Match[str], text: str) -> TensorError:
    return TensorError(TARGET_RANGE, text, sizes=(int(m[1]),))


@_format(r"0D or 1D target tensor expected, multi-target not supported")
def _multi_target(m: re.Match[str], text: str) -> TensorError:
    return TensorError(TARGET_SHAPE, text, detail="multi-target")


@_format(r"Expected target size (\[[\d, ]*\]), got (\[[\d, ]*\])")
def _target_size(m: re.Match[str], text: str) -> TensorError:
    return TensorError(TARGET_SHAPE, text, shapes=(shape_of(m[1]), shape_of(m[2])))


@_format(
    r"Target size \((torch\.Size\(\[[\d, ]*\]\))\) must be the same as input size \((torch\.Size\(\[[\d, ]*\]\))\)"
)
def _target_size_bce(m: re.Match[str], text: str) -> TensorError:
    return TensorError(TARGET_SHAPE, text, shapes=(shape_of(m[2]), shape_of(m[1])))


@_format(
    r"Using a target size \((torch\.Size\(\[[\d, ]*\]\))\) that is different to the input size "
    r"\((torch\.Size\(\[[\d, ]*\]\))\)"
)
def _target_size_bce_prob(m: re.Match[str], text: str) -> TensorError:
    return TensorError(TARGET_SHAPE, text, shapes=(shape_of(m[2]), shape_of(m[1])))


@_format(r"Expected input batch_size \((\d+)\) to match target batch_size \((\d+)\)")
def _batch(m: re.Match[str], text: str) -> TensorError:
    return TensorError(BATCH_SIZE, text, sizes=(int(m[1]), int(m[2])))


@_format(r"running_(?:mean|var) should contain (\d+) elements not (\d+)")
def _bn(m: re.Match[str], text: str) -> TensorError:
    return TensorError(NORM_FEATURES, text, sizes=(int(m[2]), int(m[1])))


@_format(
    r"Given normalized_shape=(\[[\d, ]*\]), expected input with shape \[\*?,? ?([\d, ]*)\], "
    r"but got input of size ?(?:torch\.Size\()?(\[[\d, ]*\])"
)
def _ln(m: re.Match[str], text: str) -> TensorError:
    return TensorError(NORM_SHAPE, text, shapes=(shape_of(m[1]), shape_of(m[3])))


@_format(
    r"Expected weight to be a vector of size equal to the number of channels in input, but got weight of "
    r"shape (\[[\d, ]*\]) and input of shape (\[[\d, ]*\])"
)
def _gn(m: re.Match[str], text: str) -> TensorError:
    return TensorError(NORM_SHAPE, text, shapes=(shape_of(m[1]), shape_of(m[2])), detail="channels")


@_format(r"Expected more than 1 value per channel when training, got input size (torch\.Size\(\[[\d, ]*\]\))")
def _batch_one(m: re.Match[str], text: str) -> TensorError:
    return TensorError(BATCH_ONE, text, shapes=(shape_of(m[1]),))


@_format(r"input\.size\(-1\) must be equal to input_size\. Expected (\d+), got (\d+)")
def _rnn_size(m: re.Match[str], text: str) -> TensorError:
    return TensorError(RNN_INPUT, text, sizes=(int(m[1]), int(m[2])))


@_format(r"(\w+): Expected input to be (\d)D or (\d)D, got (\d+)D instead")
def _rnn_rank(m: re.Match[str], text: str) -> TensorError:
    return TensorError(RNN_INPUT, text, sizes=(int(m[2]), int(m[3]), int(m[4])), argument=m[1], detail="rank")


@_format(r"was expecting embedding dimension of (\d+), but got (\d+)")
def _mha(m: re.Match[str], text: str) -> TensorError:
    return TensorError(EMBED_DIM, text, sizes=(int(m[1]), int(m[2])))


@_format(r"Dimension out of range \(expected to be in range of \[(-?\d+), (-?\d+)\], but got (-?\d+)\)")
def _dim_range(m: re.Match[str], text: str) -> TensorError:
    return TensorError(DIM_RANGE, text, sizes=(int(m[1]), int(m[2]), int(m[3])), dim=int(m[3]))


@_format(r"input\.dim\(\) = (\d+) is not equal to len\(dims\) = (\d+)")
def _permute_rank(m: re.Match[str], text: str) -> TensorError:
    return TensorError(DIM_RANGE, text, sizes=(int(m[1]), int(m[2])), detail="permute")


@_format(r"^(\w+)\(\): argument '(\w+)' \(position \d+\) must be Tensor, not ([\w.]+)")
def _not_tensor(m: re.Match[str], text: str) -> TensorError:
    return TensorError(NOT_TENSOR, text, argument=m[2], detail=m[3])


@_format(r"(?:Tensor\.item\(\) cannot be called on meta tensors|Cannot copy out of meta tensor; no data)")
def _meta_values(m: re.Match[str], text: str) -> TensorError:
    return TensorError(META_VALUES, text)


@_format(r"register_meta function for (torch\.\w+)\(\) raises unimplemented")
def _meta_nonzero(m: re.Match[str], text: str) -> TensorError:
    return TensorError(META_VALUES, text, argument=m[1], detail="data-dependent-size")


@_format(r"(\w+::\w+(?:\.\w+)?): attempted to run this operator with Meta tensors")
def _meta_missing(m: re.Match[str], text: str) -> TensorError:
    return TensorError(META_VALUES, text, argument=m[1], detail="no-meta-kernel")


# ---- the meta device's wording (its kernels check in Python, with their own messages) ----------


@_format(r"a and b must have same reduction dim, but got (\[[\d, ]+\]) X (\[[\d, ]+\])")
def _mm_meta(m: re.Match[str], text: str) -> TensorError:
    return TensorError(MATMUL, text, shapes=(shape_of(m[1]), shape_of(m[2])))


@_format(r"size mismatch, got input \((\d+x\d+)\), vec \((\d+)\)")
def _mv_meta(m: re.Match[str], text: str) -> TensorError:
    return TensorError(MATMUL, text, shapes=(shape_of(m[1]), shape_of(m[2])), detail="mv")


@_format(
    r"Sizes of tensors must match except in dimension (-?\d+)\. Expected (\d+) in dimension (\d+) but got (\d+) "
    r"for tensor number (\d+) in the list"
)
def _cat_meta(m: re.Match[str], text: str) -> TensorError:
    return TensorError(CAT, text, sizes=(int(m[2]), int(m[4])), dim=int(m[1]), argument=m[5])


@_format(r"stack expects each tensor to be equal size, but got (torch\.Size\(\[[\d, ]*\]\)) at entry (\d+)")
def _stack_meta(m: re.Match[str], text: str) -> TensorError:
    return TensorError(STACK, text, shapes=(shape_of(m[1]),), sizes=(int(m[2]),))


@_format(
    r"Attempting to broadcast a dimension of length (\d+) at (-?\d+)! Mismatching argument at index \d+ had "
    r"(torch\.Size\(\[[\d, ]*\]\)); but expected shape should be broadcastable to (\[[\d, ]*\])"
)
def _broadcast_meta(m: re.Match[str], text: str) -> TensorError:
    target, got = shape_of(m[4]), shape_of(m[3])
    dim = int(m[2]) + (len(target) if int(m[2]) < 0 else 0)
    expected = target[dim] if 0 <= dim < len(target) else 0
    return TensorError(BROADCAST, text, shapes=(target, got), sizes=(expected, int(m[1])), dim=dim)


@_format(r"^Invalid channel dimensions$")
def _conv_meta(m: re.Match[str], text: str) -> TensorError:
    return TensorError(CONV_CHANNELS, text)


@_format(r"(\w+)\(\): Expected dtype int32/int64 for index, but got ([\w.]+)")
def _index_dtype_meta(m: re.Match[str], text: str) -> TensorError:
    return TensorError(INDEX_DTYPE, text, dtypes=("int32", "int64", dtype_name(m[2])), argument=m[1])


# ---- entry point -------------------------------------------------------------------------------


def message_text(exc: BaseException) -> str | None:
    """The message of an exact builtin exception type whose one argument is a `str`, else None."""
    if type(exc) not in _READABLE:
        return None
    args = _args(exc)
    if type(args) is not tuple or len(args) != 1 or type(args[0]) is not str:
        return None
    return args[0]


def classify(exc: BaseException) -> TensorError | None:
    """The structured form of a PyTorch shape/dtype/device error, or None for anything else."""
    text = message_text(exc)
    if text is None:
        return None
    return classify_text(text, type(exc).__name__)


def classify_text(text: str, exc_type: str = "RuntimeError") -> TensorError | None:
    first = text.strip().split("\n", 1)[0].strip()
    if len(first) > 2000:
        first = first[:2000]
    for pattern, parse in _FORMATS:
        m = pattern.search(first)
        if m is not None:
            err = parse(m, first)
            return err if err.exc_type == exc_type else _with_type(err, exc_type)
    return None


def _with_type(err: TensorError, exc_type: str) -> TensorError:
    from dataclasses import replace

    return replace(err, exc_type=exc_type)
