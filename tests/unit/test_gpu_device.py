"""The GPU device interface without a GPU: buffer rounding, deferred release, the recorder."""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.backends.gpu_device import (
    STORAGE_USAGE,
    BufferUsage,
    DeferredRelease,
    GpuDevice,
    PassTimestamps,
    buffer_byte_size,
    padded_bytes,
)
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError, OutOfMemoryError
from oidn_gpu.record.config import RecordConfig
from oidn_gpu.record.device import RecordingDevice, recording_capabilities


@pytest.fixture
def recorder() -> RecordingDevice:
    return RecordingDevice(recording_capabilities(RecordConfig(16, 16)))


@pytest.mark.parametrize(("asked", "size"), [(0, 4), (1, 4), (4, 4), (5, 8), (4097, 4100)])
def test_buffers_are_whole_words_of_at_least_one_word(asked: int, size: int) -> None:
    assert buffer_byte_size("b", asked, 1 << 20, "the device") == size
    assert len(padded_bytes(b"\1" * asked)) == size
    assert padded_bytes(b"\1" * asked)[:asked] == b"\1" * asked


def test_a_buffer_over_the_limit_names_the_buffer_and_the_limit() -> None:
    with pytest.raises(OutOfMemoryError, match=r"'big' needs 20 bytes but the device allows at"):
        buffer_byte_size("big", 17, 16, "the device")


def test_padded_bytes_of_an_array_are_its_contiguous_bytes() -> None:
    array = np.arange(6, dtype=np.float16).reshape(2, 3)[:, ::2]  # not contiguous
    assert padded_bytes(array) == np.ascontiguousarray(array).tobytes()


def test_the_recording_device_implements_the_interface(recorder: RecordingDevice) -> None:
    assert isinstance(recorder, GpuDevice)
    assert not isinstance(object(), GpuDevice)
    buffer = recorder.create_buffer("x", 5)
    assert buffer.size == 8 and buffer.usage == STORAGE_USAGE
    data = recorder.create_buffer_with_data("d", b"\1\2\3", BufferUsage.UNIFORM)
    assert data.data == b"\1\2\3\0"


def test_recorded_dispatches_need_their_pipelines_bind_group(recorder: RecordingDevice) -> None:
    shader = recorder.create_shader_module("s", "// wgsl", trusted=False)
    first = recorder.create_compute_pipeline("a", shader, "main")
    second = recorder.create_compute_pipeline("b", shader, "main")
    group = recorder.create_bind_group("g", first, [recorder.create_buffer("x", 16)])
    encoder = recorder.create_command_encoder("e")
    encoder.dispatch(first, group, (2, 1, 1))
    with pytest.raises(InvalidOperationError, match="made for pipeline 'a', not 'b'"):
        encoder.dispatch(second, group, (1, 1, 1))
    with pytest.raises(InvalidOperationError, match="no timestamp queries"):
        encoder.dispatch(first, group, (1, 1, 1), timestamps=PassTimestamps(None, 0, 1))
    with pytest.raises(InvalidArgumentError, match="not made by this recording device"):
        encoder.dispatch(first, object(), (1, 1, 1))
    recorder.submit([encoder.finish()])
    assert recorder.operation_count == 1


def test_deferred_release_on_a_recorder_releases_at_the_next_collect(
    recorder: RecordingDevice,
) -> None:
    released: list[int] = []
    deferred: DeferredRelease[int] = DeferredRelease(recorder, released.append)
    deferred.retire(1)
    deferred.retire(2)
    assert len(deferred) == 2 and released == []  # nothing before collect
    deferred.collect()  # nothing recorded is ever in flight
    assert released == [1, 2] and len(deferred) == 0
    deferred.retire(3)
    deferred.release_all()
    assert released == [1, 2, 3]
