"""Tensor metadata readers that run no user Python and read no values.

Each is the C-level method or descriptor of `torch._C.TensorBase`, called on the tensor
directly: a subclass's `__torch_function__`, properties or `__getattr__` never run, so
scanning a namespace or tracing a forward pass cannot trigger user code, a GPU sync, or a
FakeTensor/functional-tensor dispatch.
"""

from __future__ import annotations

import torch

_T = torch._C.TensorBase

size = _T.size
stride = _T.stride
numel = _T.numel
element_size = _T.element_size
is_contiguous = _T.is_contiguous
data_ptr = _T.data_ptr
storage_offset = _T.storage_offset
dtype = _T.__dict__["dtype"].__get__
device = _T.__dict__["device"].__get__
requires_grad = _T.__dict__["requires_grad"].__get__
grad_fn = _T.__dict__["grad_fn"].__get__
base = _T.__dict__["_base"].__get__
layout = _T.__dict__["layout"].__get__
is_nested = _T.__dict__["is_nested"].__get__
is_quantized = _T.__dict__["is_quantized"].__get__
version = _T.__dict__["_version"].__get__

_dynamo_compiling = torch.compiler.is_compiling
_tracing_state = torch._C._get_tracing_state


def is_compiling() -> bool:
    """Dynamo compiles, or `torch.jit.trace` records: a metadata read of a tensor there would
    enter the graph being built (the tracer records each `size()` it sees, so a read on one of
    its runs and not the next makes the trace check fail), so hooks stay out."""
    return _tracing_state() is not None or _dynamo_compiling()
