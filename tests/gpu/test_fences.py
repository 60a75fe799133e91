"""`WgpuDevice.wait_idle` returns only once every fence made before it reports the work done.

A fence's callback runs on wgpu's poll thread, which may be a moment behind the queue; a
release that waits for the queue (a denoiser's `release_bindings`, then `resources`) must
find the fences signalled when `wait_idle` returns.
"""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.backends.gpu_device import STORAGE_USAGE

pytestmark = pytest.mark.gpu


def test_every_fence_is_done_when_wait_idle_returns(gpu):
    source = gpu.create_buffer_with_data("src", np.arange(1 << 16, dtype=np.float32), STORAGE_USAGE)
    fences = []
    for i in range(200):
        gpu.write_buffer(source, 0, np.full(16, i, np.float32))
        fences.append(gpu.fence())
        if i % 10 == 9:
            gpu.wait_idle()
            assert all(f.is_done() for f in fences), f"round {i}"
