"""Tensors as cprr sees them: dtype names, byte sizes, and tensors over cprr's own memory."""

import ctypes
import math

import torch

# torch dtype -> cprr dtype name (runtime/dtype.h). Others are hashed as their bytes (u8).
_DTYPES = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.uint8: "u8",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.bool: "u8",
}


def dtype_name(t: torch.Tensor) -> str:
    return _DTYPES.get(t.dtype, "u8")


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def shape_of(t: torch.Tensor) -> list:
    """The shape a capture records: the tensor's, or its bytes for a dtype cprr does not name."""
    if t.dtype in _DTYPES:
        return list(t.shape) if t.dim() > 0 else [1]
    return [nbytes(t)]


class _CudaMemory:
    """`bytes` of device memory at `address`, as __cuda_array_interface__ describes it."""

    def __init__(self, address: int, size: int):
        self.__cuda_array_interface__ = {
            "shape": (size,),
            "typestr": "|u1",
            "data": (address, False),
            "version": 2,
        }


def tensor_over(address: int, size: int, shape, dtype: torch.dtype, device: torch.device):
    """A tensor of `shape` and `dtype` over `size` bytes at `address` (cprr's arena memory)."""
    if size == 0:
        return torch.empty(tuple(shape), dtype=dtype, device=device)
    if device.type == "cuda":
        raw = torch.as_tensor(_CudaMemory(address, size), device=device)
    else:
        raw = torch.frombuffer((ctypes.c_uint8 * size).from_address(address), dtype=torch.uint8)
    return raw.view(dtype).reshape(tuple(shape))


def byte_size(shape, dtype: torch.dtype) -> int:
    item = torch.empty((), dtype=dtype).element_size()
    return int(math.prod(shape)) * item
