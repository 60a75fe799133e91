"""What a recorded program holds where oidn-webgpu (the seeds) defines it, word by word."""

from __future__ import annotations

import pytest

from oidn_gpu.record import make_config, read_program
from oidn_gpu.record.api import record_denoise
from oidn_gpu.record.format import BufferUsage

# The recorder runs the wgpu executor on a recording device, so it needs wgpu (no GPU).
pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("hdr", [False, True])
def test_frame_and_tile_parameter_buffer_usages(tiny_tza, hdr):
    """oidn-webgpu's ``uniformBuffer`` (native/denoise.ts) makes the frame and every tile's
    parameters UNIFORM|COPY_DST (0x48). The frame buffer is that here; the tile parameter
    blocks are UNIFORM (0x40): they are mapped at creation and nothing writes them later
    (docs/program-format.md, oidn-gpu's extensions)."""
    program = read_program(
        record_denoise(tiny_tza["tiny_base_ic3"], make_config(16, 16, denoise=True, hdr=hdr))
    )
    frame = program.buffers[program.meta.frame_buffer]
    assert frame.usage == BufferUsage.UNIFORM | BufferUsage.COPY_DST == 0x48
    params = [b for b in program.buffers if "/params" in b.label]  # per layer and pass
    assert len(params) == 18 and all(b.usage == BufferUsage.UNIFORM == 0x40 for b in params)
