"""The GPU runners' shared frame loop (`backends.frame_runner`): checks, order, cancel.

The wgpu and cuda runners run on it (tests/gpu, tests/cuda); here its pieces are
checked on their own: the host-image checks both runners give, and the order in
which `run_frame` queues a frame's passes and reports progress.
"""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.backends.frame_runner import (
    FrameRunner,
    host_frame,
    progress_after_tile,
    run_frame,
)
from oidn_gpu.errors import CancelledError, InvalidArgumentError


class _Passes:
    """Passes that write down what they were asked to queue."""

    def __init__(self) -> None:
        self.queued: list[tuple[str, object]] = []

    def autoexposure_pass(self, frame: object) -> None:
        self.queued.append(("autoexposure", frame))

    def tile_pass(self, frame: object, index: int) -> None:
        self.queued.append((f"tile {index}", frame))


def test_the_autoexposure_is_queued_before_the_first_tile() -> None:
    passes = _Passes()
    run_frame(passes, "frame", 3, autoexposure=True)
    assert passes.queued == [
        ("autoexposure", "frame"),
        ("tile 0", "frame"),
        ("tile 1", "frame"),
        ("tile 2", "frame"),
    ]
    passes = _Passes()
    run_frame(passes, "frame", 2, autoexposure=False)
    assert [name for name, _ in passes.queued] == ["tile 0", "tile 1"]


def test_progress_hears_each_tile_and_false_cancels_before_the_next() -> None:
    heard: list[float] = []

    def progress(fraction: float) -> bool:
        heard.append(fraction)
        return len(heard) < 2

    passes = _Passes()
    with pytest.raises(CancelledError, match="progress callback"):
        run_frame(passes, None, 4, autoexposure=False, after_tile=progress_after_tile(progress))
    assert heard == [0.25, 0.5] and len(passes.queued) == 2
    assert progress_after_tile(None) is None


def test_host_frame_takes_views_and_the_destination_channels() -> None:
    color = np.zeros((4, 5, 4), np.float32)
    normal = np.zeros((4, 5), np.float16)
    output = np.ones((4, 5, 4), np.float16)
    frame = host_frame((color[:, :, :3], None, normal), output=output)
    assert frame.roles == ("main", "normal") and frame.shape == (4, 5, 3)
    assert np.shares_memory(frame.arrays[0], color) and frame.arrays[1].shape == (4, 5, 1)
    assert frame.target is not None and np.shares_memory(frame.target, output)
    assert frame.target.shape == (4, 5, 3)  # the 4th channel is left as it is


def test_host_frame_with_alpha_keeps_the_main_image_s_four_channels() -> None:
    rgba = np.zeros((4, 5, 6), np.float16)[:, :, 1:5]
    output = np.ones((4, 5, 4), np.float32)
    frame = host_frame((rgba, np.zeros((4, 5, 3), np.float32)), output=output, with_alpha=True)
    assert frame.arrays[0].shape == (4, 5, 4) and np.shares_memory(frame.arrays[0], rgba)
    assert frame.out_channels == 3 and frame.shape == (4, 5, 4)
    assert frame.target is not None and frame.target.shape == (4, 5, 4)
    ints = host_frame((np.zeros((2, 2, 4), np.int32),), with_alpha=True)
    assert ints.arrays[0].dtype == np.float32 and ints.arrays[0].shape == (2, 2, 4)


def test_host_frame_reads_other_dtypes_as_float32_or_rejects_them() -> None:
    ints = np.zeros((2, 2, 3), np.int32)
    assert host_frame((ints,)).arrays[0].dtype == np.float32
    with pytest.raises(InvalidArgumentError, match="dtype int32; expected float16 or float32"):
        host_frame((ints,), convert=False)


@pytest.mark.parametrize(
    ("images", "options", "message"),
    [
        ((None, np.zeros((2, 2, 3))), {}, "the main image is missing"),
        ((np.zeros((2, 2, 3)),) * 4, {}, "4 images were given"),
        ((np.zeros((2, 2, 3)), np.zeros((3, 2, 3))), {}, "image size 3x2 differs"),
        ((np.zeros((2, 2, 5)),), {}, "expected HxW or HxWxC with C 1..3"),
        ((np.zeros((2, 2, 3)),), {"out_channels": 4}, "out_channels is 4; expected 1, 2 or 3"),
        ((np.zeros((2, 2, 3)),), {"output": np.zeros((2, 2, 2), np.float32)}, r"\(2, 2, 3\)"),
        ((np.zeros((2, 2, 3)),), {"output": np.zeros((2, 2, 3), np.float64)}, "float64"),
        (
            (np.zeros((2, 2, 3)),),
            {"output": np.zeros((2, 2, 3), np.float32)[::-1].copy()[:0]},
            r"\(0, 2, 3\)",
        ),
        ((np.zeros((2, 2, 3)),), {"with_alpha": True}, r"\(2, 2, 3\); expected HxWx4"),
        (
            (np.zeros((2, 2, 4)),),
            {"with_alpha": True, "output": np.zeros((2, 2, 3), np.float32)},
            r"expected \(2, 2, 4\)",
        ),
    ],
)
def test_host_frame_says_what_is_wrong(images, options, message) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        host_frame(images, **options)


def test_a_read_only_destination_is_rejected() -> None:
    output = np.zeros((2, 2, 3), np.float32)
    output.flags.writeable = False
    with pytest.raises(InvalidArgumentError, match="read-only"):
        host_frame((np.zeros((2, 2, 3), np.float32),), output=output)


class _Runner(FrameRunner[str, str, str]):
    """A runner whose primitives write down the order in which a frame uses them."""

    def __init__(self) -> None:
        super().__init__(frame_cache_size=2)
        self.log: list[object] = []

    def _upload_frame(self, frame, slot):
        self.log.append("upload")
        return [f"device {role}" for role in frame.roles]

    def _output_image(self, frame, slot):
        return "device output"

    def _frame_entry(self, request):
        return "key", lambda: "device frame"

    def _launch(self, frame, autoexposure, progress):
        self.log.append("network")

    def _mark(self):
        self.log.append("mark")
        return "the mark"

    def _queue_beside(self, work, mark):
        self.log.append(("beside from", mark))
        work()

    def _read_back(self, frame, output, slot, upload_ms, submit_ms):
        self.log.append("read back")
        return "pending"

    def _result(self, pending):
        return pending


def test_work_beside_the_network_is_queued_from_a_mark_before_it_and_read_back_with_it() -> None:
    runner = _Runner()
    frame = host_frame((np.zeros((2, 2, 4), np.float32), np.zeros((2, 2, 3))), with_alpha=True)

    def beside(images: list[str], output: str) -> None:
        runner.log.append(("alpha", tuple(images), output))

    runner._submit_host(frame, None, None, autoexposure=False, progress=None, beside=beside)
    assert runner.log == [
        "upload",
        "mark",
        "network",
        ("beside from", "the mark"),
        ("alpha", ("device main", "device albedo"), "device output"),
        "read back",
    ]
    runner.log.clear()  # without work beside: no mark
    runner._submit_host(
        host_frame((np.zeros((2, 2, 3)),)), None, None, autoexposure=False, progress=None
    )
    assert runner.log == ["upload", "network", "read back"]
