"""A repeated `CudaDenoiser.denoise_tensors` call skips the checks, never a changed layout.

A render loop calls with the same tensors every frame: the second call reuses the
first's checked description (`requests.LastRequest`), so nothing is described again.
A tensor changed in place (``set_``, ``as_strided_``), another view of the same
memory, other options: described again, and the image is the one a fresh denoiser
makes of the same tensors, bit for bit. The torch engine on the CPU (fast) and a
tiny random U-Net (tests/data).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from oidn_gpu.backends.cuda import runner as runner_module
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.requests import FrameKey, LastRequest
from oidn_gpu.backends.cuda.runner import CudaDenoiser
from oidn_gpu.image import process
from oidn_gpu.model.unet import load_model

TINY_AOV = Path(__file__).resolve().parents[1] / "data" / "tiny_base_ic9.tza"
HEIGHT, WIDTH = 16, 24


@pytest.fixture(scope="module")
def executor(device):
    ex = CudaExecutor(load_model(TINY_AOV), device=device, tune=False, engine="cudnn")
    yield ex
    ex.close()


def _images(rng, device):
    """color, albedo, normal, each a 3-channel view of a 4-channel tensor, and an output."""
    arrays = [
        rng.random((HEIGHT, WIDTH, 4)) * 4,
        rng.random((HEIGHT, WIDTH, 4)),
        rng.random((HEIGHT, WIDTH, 4)) * 2 - 1,
    ]
    images = [torch.from_numpy(a).float().to(device)[:, :, :3] for a in arrays]
    return images, torch.empty((HEIGHT, WIDTH, 3), dtype=torch.float32, device=device)


def _fresh(executor, images, mode, **options):
    """The image a new denoiser makes of copies of ``images``."""
    with CudaDenoiser(executor) as den:
        return den.denoise_tensors(*[i.clone() for i in images], mode=mode, **options)


MODE = process.mode_for("RT", hdr=True, input_scale=0.75)


def test_a_repeated_call_is_not_described_again(executor, rng, device, monkeypatch):
    images, out = _images(rng, device)
    described = []

    def counting(tensor, name, **kwargs):
        described.append(name)
        return real(tensor, name, **kwargs)

    real = runner_module.describe
    monkeypatch.setattr(runner_module, "describe", counting)
    with CudaDenoiser(executor) as den:
        den.denoise_tensors(*images, mode=MODE, out=out)
        first = out.clone()
        assert described == ["main", "albedo", "normal", "output"]
        equal_mode = process.mode_for("RT", hdr=True, input_scale=0.75)  # equal, not the same
        den.denoise_tensors(*images, mode=equal_mode, out=out)
        assert len(described) == 4  # the second call reused the first's description
        assert len(den._frames) == 1
    assert torch.equal(out, first)


def _restride(tensor):
    """The same address and shape, other strides (the 4-channel pixels read as 3)."""
    return tensor.as_strided_(tensor.shape, (WIDTH * 3, 3, 1))


def _reseat(tensor):
    """The same tensor object on other memory of the same shape."""
    return tensor.set_(torch.rand_like(tensor.contiguous()) * 2)


def _other_view(tensor):
    """Another view of the same memory (a new object)."""
    return tensor[:, :, :]


@pytest.mark.parametrize(
    ("engine", "change"),
    [("cudnn", _restride), ("cudnn", _reseat), ("cudnn", _other_view), ("triton", _restride)],
    ids=["cudnn-restride", "cudnn-reseat", "cudnn-other-view", "triton-restride"],
)
def test_a_changed_tensor_is_described_again(change, engine, executor, rng, device):
    """The Triton kernels read the description's address and strides (as a CUDA graph
    does): a stale one would read the old pixels."""
    images, out = _images(rng, device)
    if engine == "triton":
        executor = CudaExecutor(executor.model, device=device, tune=False, engine="triton")
    with CudaDenoiser(executor) as den:
        den.denoise_tensors(*images, mode=MODE, out=out)
        before = (images[0].data_ptr(), images[0].stride())
        images[0] = change(images[0])
        den.denoise_tensors(*images, mode=MODE, out=out)
        color = den._last_request.find((*images, out), (MODE, None, None, False)).images[0]
        assert color.tensor.data_ptr() == images[0].data_ptr()
        assert (color.row_stride, color.pixel_stride) == images[0].stride()[:2]
        frames = len(den._frames)
    if change is _restride:
        assert images[0].data_ptr() == before[0] and images[0].stride() != before[1]
    assert frames == (1 if change is _other_view else 2)  # a new address or strides: a new frame
    assert torch.equal(out, _fresh(executor, images, MODE))


def test_other_options_are_not_the_last_calls(executor, rng, device):
    images, out = _images(rng, device)
    ldr = process.mode_for("RT", hdr=False, input_scale=1.0)
    with CudaDenoiser(executor) as den:
        den.denoise_tensors(*images, mode=MODE, out=out)
        den.denoise_tensors(*images, mode=ldr, out=out)
        assert torch.equal(out, _fresh(executor, images, ldr, out_channels=3))
        one = den.denoise_tensors(*images, mode=ldr, out=out, out_channels=1)
        assert torch.equal(one[:, :, 0], _fresh(executor, images, ldr, out_channels=1)[:, :, 0])
        auto = den.denoise_tensors(*images, mode=ldr, out=out, autoexposure=True)
        assert torch.equal(auto, _fresh(executor, images, ldr, autoexposure=True))
        assert auto is out and len(den._frames) == 4


def test_last_request_compares_every_argument():
    """`LastRequest` alone: a tensor's identity, address, shape, strides and dtype, and
    the options, each on its own."""
    last = LastRequest()
    color, out = torch.zeros(4, 6, 3), torch.zeros(4, 6, 3)
    tensors, options = (color, None, None, out), ("mode", None, 3, False)
    assert last.find(tensors, options) is None
    last.remember(tensors, options, "request")
    assert last.find(tensors, options) == "request"
    assert last.find((color, None, None, out), ("mode", None, 3, False)) == "request"
    for other in [
        ("other", None, 3, False),
        ("mode", "plan", 3, False),
        ("mode", None, 1, False),
        ("mode", None, 3, True),
    ]:
        assert last.find(tensors, other) is None
    assert last.find((color, color, None, out), options) is None
    assert last.find((color.view(4, 6, 3), None, None, out), options) is None
    color.data = torch.zeros(4, 6, 3, dtype=torch.float16)
    assert last.find(tensors, options) is None
    last.clear()
    assert last.find(tensors, options) is None


def test_frame_key_hashes_once_and_compares_its_parts():
    parts = ((1, 2), "plan", np.float32(1.5))
    key = FrameKey(parts)
    assert key == FrameKey(((1, 2), "plan", np.float32(1.5))) and hash(key) == hash(parts)
    assert key != FrameKey(((1, 3), "plan", np.float32(1.5))) and key != parts
    assert {key: 1}[FrameKey(parts)] == 1


def test_executor_info_is_reused_until_what_it_reports_changes(device):
    """`CudaExecutor.info` (asked once per `Denoiser.denoise`) answers its last result
    while the engines and the prepared tiles are the same, and a new one when they change."""
    import dataclasses

    ex = CudaExecutor(load_model(TINY_AOV), device=device, tune=False, engine="triton")
    first = ex.info()
    assert ex.info() is first and dict(first.kernels) == ex.kernel_names()
    assert not any("[" in kind for kind in first.kernels.values())  # no tiles yet
    prep = ex.prepare(16, 16, "triton")
    second = ex.info()
    assert second is not first and dict(second.kernels) == ex.kernel_names()
    assert all("[" in kind for kind in second.kernels.values())  # the tiles are named
    name, config = next(iter(prep.configs.items()))
    prep.configs[name] = dataclasses.replace(config, num_warps=config.num_warps * 2)
    third = ex.info()
    assert third.kernels[name] != second.kernels[name] and dict(third.kernels) == ex.kernel_names()
    ex.last_engine = "cudnn"
    bridged = ex.info()
    assert "while Triton compiles" in bridged.device
    assert all(kind.startswith(("cudnn", "upsample")) for kind in bridged.kernels.values())
    ex.last_engine = "triton"
    assert ex.info().kernels == third.kernels and ex.info() is ex.info()
    ex.close()


class _CpuGraph:
    """A stand-in for a captured CUDA graph on the CPU: its replay runs the frame again
    (the fast path of a repeated call needs a captured frame; the CPU has no graphs)."""

    def __init__(self, frame, replays):
        self._frame, self._replays = frame, replays

    def replay(self):
        self._replays.append(self._frame)
        self._frame.run()


def _graphed(den, replays):
    den.use_graphs = True
    den._capture = lambda frame: setattr(frame, "graph", _CpuGraph(frame, replays))
    return den


def test_a_repeated_call_replays_its_frame_at_once(executor, rng, device, monkeypatch):
    """From the third call on (eager, captured, then replayed) a call repeating the last
    one replays its frame without the frame lookups; anything queued in between (another
    mode, a NumPy denoise) makes the next call look its frame up again, and every image is
    a fresh denoiser's, the fixed input scale included after an autoexposure frame."""
    images, out = _images(rng, device)
    lookups, replays = [], []
    base = runner_module.FrameRunner._run_device
    den = _graphed(CudaDenoiser(executor), replays)

    def counting(self, request, progress):
        if self is den:  # not the fresh denoisers' lookups
            lookups.append(request)
        return base(self, request, progress)

    monkeypatch.setattr(runner_module.FrameRunner, "_run_device", counting)
    fixed = process.mode_for("RT", hdr=True, input_scale=0.5)
    with den:
        for _ in range(4):
            den.denoise_tensors(*images, mode=fixed, out=out)
        assert len(lookups) == 2 and len(replays) == 3  # eager; captured + replayed; 2 fast
        assert torch.equal(out, _fresh(executor, images, fixed))
        den.denoise_tensors(*images, mode=fixed, out=out, autoexposure=True)  # writes the scale
        assert len(lookups) == 3
        den.denoise_tensors(*images, mode=fixed, out=out)  # looked up, scale written again
        assert len(lookups) == 4
        den.denoise_tensors(*images, mode=fixed, out=out)  # fast: the scale is still this one
        assert len(lookups) == 4 and den.input_scale() == 0.5
        assert torch.equal(out, _fresh(executor, images, fixed))
        host = [i.cpu().numpy() for i in images]
        den.denoise(*host, mode=fixed)  # the NumPy path queues its own frame
        den.denoise_tensors(*images, mode=fixed, out=out)
        assert len(lookups) == 6
        images[0] = _restride(images[0])  # a changed tensor: checked and looked up again
        den.denoise_tensors(*images, mode=fixed, out=out)
        assert len(lookups) == 7
        assert torch.equal(out, _fresh(executor, images, fixed))


@pytest.mark.cuda_device
def test_a_render_loop_replays_its_graph_on_the_tensors_new_contents(rng):
    """Real CUDA graphs: a render loop refills the same tensors in place each frame; from
    the third frame on the call replays the graph at once, and every frame is the image
    a fresh denoiser makes of that frame's contents, bit for bit."""
    device = torch.device("cuda")
    ex = CudaExecutor(load_model(TINY_AOV), device=device, tune=False, engine="triton")
    images, out = _images(rng, device)
    with CudaDenoiser(ex) as den:
        for frame in range(5):
            for index, image in enumerate(images):
                image.copy_(torch.rand_like(image) * (4.0 if index == 0 else 1.0) - frame % 2)
            den.denoise_tensors(*images, mode=MODE, out=out, autoexposure=True)
            assert torch.equal(out, _fresh(ex, images, MODE, autoexposure=True)), frame
        assert den._replay is not None and den._replay[1].graph is not None
    ex.close()
