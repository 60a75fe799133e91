"""`Replayer` on hand-built programs (GPU: runs on lavapipe)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from oidn_gpu.errors import InvalidArgumentError, UnsupportedDeviceError
from oidn_gpu.record.format import ProgramFormatError, ShaderDesc
from oidn_gpu.record.replay import Replayer
from oidn_gpu.record.writer import write_program

from .programs import SCRATCH, N, doubling_program

pytestmark = pytest.mark.gpu


def expected(x: np.ndarray) -> np.ndarray:
    out = (x * np.float32(2)).astype(np.float32)
    out[:4] = SCRATCH
    return out


@pytest.fixture
def x(rng) -> np.ndarray:
    return rng.standard_normal(N).astype(np.float32)


def test_doubling_program_replays_bit_exactly_from_bytes(gpu, x):
    with Replayer(write_program(doubling_program()), gpu) as replayer:
        out = replayer.run([x])
    assert out.shape == (4, 4, 4)  # 4x4 RGBA float32
    np.testing.assert_array_equal(out.ravel(), expected(x))


def test_repeated_runs_reuse_resources_and_see_new_inputs(gpu, x):
    with Replayer(doubling_program(), gpu) as replayer:
        buffers = list(replayer._buffers)
        first = replayer.run([x]).ravel()
        second = replayer.run([x + 1]).ravel()
        assert replayer._buffers == buffers
    np.testing.assert_array_equal(first, expected(x))
    np.testing.assert_array_equal(second, expected(x + 1))


def test_caller_gpu_buffers_are_bound_in_place_of_the_programs(gpu, x):
    from oidn_gpu.backends.wgpu.device import STORAGE_USAGE

    with Replayer(doubling_program(), gpu) as replayer:
        for value in (x, x * 3):
            inp = gpu.create_buffer_with_data("test/ext-in", value, STORAGE_USAGE)
            out = gpu.create_buffer("test/ext-out", N * 4, STORAGE_USAGE)
            assert replayer.run([inp], out) is out
            got = np.frombuffer(gpu.read_buffer(out), np.float32)
            np.testing.assert_array_equal(got, expected(value))
        # the program's own output buffer was not touched by the external runs
        own = np.frombuffer(gpu.read_buffer(replayer.output_buffer), np.float32)
        assert not own.any()


def test_non_external_output_is_copied_into_the_callers_buffer(gpu, x):
    from oidn_gpu.backends.wgpu.device import STORAGE_USAGE

    program = dataclasses.replace(doubling_program(), output_external=False)
    with Replayer(program, gpu) as replayer:
        out = gpu.create_buffer("test/ext-out", N * 4, STORAGE_USAGE)
        replayer.run([x], out)
        np.testing.assert_array_equal(np.frombuffer(gpu.read_buffer(out), np.float32), expected(x))


def test_wrong_inputs_are_clear_errors(gpu, x):
    from oidn_gpu.backends.wgpu.device import BufferUsage

    with Replayer(doubling_program(), gpu) as replayer:
        with pytest.raises(InvalidArgumentError, match="takes 1 input"):
            replayer.run([x, x])
        with pytest.raises(InvalidArgumentError, match="expects 256"):
            replayer.run([x[:10]])
        small = gpu.create_buffer("test/small", 16, BufferUsage.STORAGE)
        with pytest.raises(InvalidArgumentError, match="expected 256"):
            replayer.run([small])
        uniform = gpu.create_buffer("test/uniform", N * 4, BufferUsage.UNIFORM)
        with pytest.raises(InvalidArgumentError, match="usage"):
            replayer.run([uniform])


def test_shader_that_does_not_compile_is_a_program_error(gpu):
    program = dataclasses.replace(doubling_program(), shaders=(ShaderDesc("fn main( {"),))
    with pytest.raises(ProgramFormatError, match="shader 0 does not compile"):
        Replayer(program, gpu)


def test_missing_entry_point_is_a_program_error(gpu):
    program = doubling_program()
    program = dataclasses.replace(
        program, pipelines=(dataclasses.replace(program.pipelines[0], entry_point="nope"),)
    )
    with pytest.raises(ProgramFormatError, match="pipeline 0"):
        Replayer(program, gpu)


def test_buffer_larger_than_the_device_allows_is_unsupported(gpu):
    program = doubling_program()
    huge = dataclasses.replace(program.buffers[3], byte_size=gpu.capabilities.max_buffer_size + 4)
    program = dataclasses.replace(program, buffers=(*program.buffers[:3], huge))
    with pytest.raises(UnsupportedDeviceError, match="smaller tiles"):
        Replayer(program, gpu)


def test_trusted_replay_gives_the_same_result(gpu, x):
    with Replayer(doubling_program(), gpu, trusted=True) as replayer:
        np.testing.assert_array_equal(replayer.run([x]).ravel(), expected(x))
