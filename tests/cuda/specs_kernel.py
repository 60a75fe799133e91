"""A one-line Triton kernel whose specialization tests/cuda/test_kernel_specs.py compiles."""

import triton
import triton.language as tl


@triton.jit
def double_kernel(x_ptr, n, BLOCK: tl.constexpr):  # noqa: N803 - Triton's capitals
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2.0, mask=mask)
