"""`TemporalDenoiser` on the cuda backend: its `CudaTemporalSession` (history on the
device, Triton kernels) against the host session (NumPy passes) of the same denoiser.

Without a GPU the cuda backend and its kernels run on the CPU (tests/cuda/conftest.py):
the torch engine (``engine="cudnn"``) with a tiny random U-Net (tests/data), the temporal
kernels through Triton's interpreter; 24x24 frames.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import oidn_gpu
from oidn_gpu import TemporalDenoiser
from oidn_gpu.backends.base import TemporalFrame
from oidn_gpu.backends.cuda.temporal_session import CudaTemporalSession
from oidn_gpu.backends.host_temporal import HostTemporalSession
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError
from oidn_gpu.temporal import passes as tp
from tests.cuda.conftest import HAS_CUDA, rel_l2
from tests.temporal import synthetic

TINY_AOV = Path(__file__).resolve().parents[1] / "data" / "tiny_base_ic9.tza"
SIZE = 24


@pytest.fixture(scope="module")
def denoiser():
    with oidn_gpu.Denoiser(backend="cuda", engine="cudnn", weights=TINY_AOV, hdr=True) as den:
        yield den


def _agree(actual, expected):
    """Interpreted on the CPU the kernels are NumPy's arithmetic; on a GPU (contracted
    multiply-adds, the fp16 cuDNN network amplifying them over the frames: up to 2.2e-3
    measured on an H200, docs/benchmarks.md) the cuDNN
    engine's tolerance (tests/cuda/test_bridge.py)."""
    if HAS_CUDA:
        assert rel_l2(actual, expected) < 1e-2
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


def _host(denoiser):
    """A temporal denoiser of ``denoiser`` on the host session with the NumPy passes."""
    td = TemporalDenoiser(denoiser)
    td.session.close()
    td.session = HostTemporalSession(denoiser.frames, tp.NumpyTemporalPasses())
    return td


def _both(denoiser, items):
    """Outputs, restarts and history fractions of the device and the host session."""
    runs = []
    for td in (TemporalDenoiser(denoiser), _host(denoiser)):
        with td:
            outputs, fractions = [], []
            for item in items:
                outputs.append(td.denoise(**item))
                fractions.append(td.history_fraction)
            runs.append(
                (outputs, [(r.frame, r.reason) for r in td.restarts], fractions, td.session.name)
            )
    return runs


def test_the_cuda_backend_has_a_device_session(denoiser):
    with TemporalDenoiser(denoiser) as td:
        assert isinstance(td.session, CudaTemporalSession)
        assert td.session.device.type == ("cuda" if HAS_CUDA else "cpu")


@pytest.mark.parametrize("kind", ["pan", "object"])
def test_session_agrees_with_the_host_passes(denoiser, kind):
    frames = synthetic.sequence(kind, frames=3, size=SIZE)
    (device, restarts_d, fractions_d, name), (host, restarts_h, fractions_h, _) = _both(
        denoiser, [synthetic.item(f, i + 1) for i, f in enumerate(frames)]
    )
    assert name == "cuda"
    assert restarts_d == restarts_h
    assert fractions_d == fractions_h and fractions_d[-1] > 0.5
    for a, b in zip(device, host, strict=True):
        assert a.shape == (SIZE, SIZE, 3) and a.dtype == np.float32
        _agree(a, b)


def test_restarts_and_cuts_as_on_the_host(denoiser):
    frames = synthetic.sequence("static", frames=4, size=SIZE)
    small = synthetic.sequence("static", frames=1, size=16)[0]
    items = [
        synthetic.item(frames[0], 1),
        synthetic.item(frames[1], 2),
        synthetic.item(frames[2], 4),
        synthetic.item(small, 5),
        synthetic.item(frames[3], 6, depth=frames[3].depth * 2),
        synthetic.item(frames[0], 7, depth=frames[0].depth * 8),
    ]  # 7: another shot again
    (device, restarts_d, _, _), (host, restarts_h, _, _) = _both(denoiser, items)
    assert [frame for frame, _ in restarts_d] == [1, 4, 5, 6, 7]
    assert "camera cut" in restarts_d[-1][1]
    assert restarts_d == restarts_h
    for a, b in zip(device, host, strict=True):
        _agree(a, b)


@pytest.mark.parametrize("bad", [np.nan, np.inf, 1e20, -5000.0])
def test_bad_motion_rejects_history_and_never_gives_nan(denoiser, bad):
    frames = synthetic.sequence("object", frames=3, size=SIZE)
    frames[1].motion[:, : SIZE // 2] = bad
    frames[2].motion[8:12] = bad
    frames[2].color[0, 0] = np.nan
    (device, _, _, _), (host, _, _, _) = _both(denoiser, [synthetic.item(f) for f in frames])
    for a, b in zip(device, host, strict=True):
        assert np.isfinite(a).all()
        _agree(a, b)


def test_alpha_and_one_channel_images_go_through(denoiser):
    f = synthetic.sequence("static", frames=1, size=16)[0]
    rgba = np.concatenate([f.color, np.full((16, 16, 1), 0.25, np.float32)], axis=2)
    with TemporalDenoiser(denoiser) as td:
        out = td.denoise(rgba, f.albedo[..., :1], f.normal, motion=f.motion, depth=f.depth)
    with _host(denoiser) as td:
        expected = td.denoise(rgba, f.albedo[..., :1], f.normal, motion=f.motion, depth=f.depth)
    assert out.shape == (16, 16, 4) and (out[..., 3] == 0.25).all()
    _agree(out, expected)


def test_frame_on_device_takes_and_gives_device_tensors(denoiser):
    frames = synthetic.sequence("pan", frames=2, size=16)
    with TemporalDenoiser(denoiser) as td:
        expected = [td.denoise(**synthetic.item(f)) for f in frames]
        params = td.params.with_guides(depth=True, normal=False, albedo=False)
    session = CudaTemporalSession(denoiser.frames, td.session.device)
    dev = session.device
    for index, f in enumerate(frames):
        images = [
            torch.from_numpy(np.ascontiguousarray(a)).to(dev)
            for a in (f.color, f.albedo, f.normal, f.motion, f.depth)
        ]
        images[0] = images[0].double()  # converted on the device
        out, _fraction, cut = session.frame_on_device(*images, params, restart=index == 0)
        assert isinstance(out, torch.Tensor) and out.device == dev and not cut
        _agree(out.cpu().numpy(), expected[index])
    with pytest.raises(InvalidArgumentError, match="temporal motion image is on ndarray"):
        session.frame_on_device(images[0], None, None, f.motion, images[4], params, restart=False)
    session.close()
    session.close()
    with pytest.raises(InvalidOperationError, match="closed"):
        session.frame_on_device(*images, params, restart=False)


def test_denoise_many_stages_the_next_frame_ahead(denoiser):
    frames = synthetic.sequence("pan", frames=3, size=16)
    items = [synthetic.item(f, i + 1) for i, f in enumerate(frames)]
    with TemporalDenoiser(denoiser) as td:
        expected = [td.denoise(**item) for item in items]
    with TemporalDenoiser(denoiser) as td:
        got = list(td.denoise_many(iter(items)))
        session = td.session
        assert session._pending == [None, None]  # every prefetched frame was used
        assert all(slot.get("color") is not None for slot in session._slots)  # both sets
    for a, b in zip(got, expected, strict=True):
        _agree(a, b)


def test_denoise_many_reports_a_bad_frame_in_its_turn(denoiser):
    frames = synthetic.sequence("static", frames=2, size=16)
    items = [
        synthetic.item(frames[0], 1),
        synthetic.item(frames[1], 2),
        {**synthetic.item(frames[1], 3), "motion": None},
    ]
    with TemporalDenoiser(denoiser) as td:
        outputs = td.denoise_many(items)
        assert next(outputs).shape == (16, 16, 3)
        assert next(outputs).shape == (16, 16, 3)
        with pytest.raises(InvalidArgumentError, match="needs a motion image"):
            next(outputs)


def test_a_prefetched_frame_not_given_is_dropped(denoiser):
    frames = synthetic.sequence("pan", frames=4, size=16)
    with TemporalDenoiser(denoiser) as td:
        expected = td.denoise(**synthetic.item(frames[3]))
    with TemporalDenoiser(denoiser) as td:
        session = td.session
        for f in frames[:3]:  # three prefetches: the oldest is dropped
            session.prefetch(TemporalFrame(f.color, f.albedo, f.normal, f.motion, f.depth))
        assert all(pending is not None for pending in session._pending)
        got = td.denoise(**synthetic.item(frames[3]))  # none of them: staged now
    _agree(got, expected)
