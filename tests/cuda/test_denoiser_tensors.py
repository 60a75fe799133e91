"""`Denoiser.denoise` on tensors of the cuda backend's device: the same bits as the NumPy path.

Without a GPU the cuda backend runs on the CPU (tests/cuda/conftest.py), so CPU
torch tensors are "on its device" and take the device path: the conversions, the
staging into the denoiser's buffers and the answer in the caller's type are the
GPU's code. Most tests use the torch engine (``engine="cudnn"``: torch convolutions,
fast on the CPU) and tiny random U-Nets (tests/data); one runs the Triton kernels
through the interpreter. The NumPy path of the same denoiser is the reference:
equal means bit for bit.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch

import oidn_gpu
from oidn_gpu import filter_device
from oidn_gpu.backends.cuda.runner import DeviceScalar
from oidn_gpu.errors import (
    CancelledError,
    InvalidArgumentError,
    InvalidOperationError,
    NonFiniteInputWarning,
)
from oidn_gpu.image import tensors
from tests.cuda.conftest import HAS_CUDA, DlpackArray

# These run the device path on CPU tensors (the backend's device under Triton's
# interpreter); on an NVIDIA GPU, tests/cuda/test_device_tensors.py runs it on CUDA tensors.
pytestmark = pytest.mark.skipif(
    HAS_CUDA, reason="CPU tensors are host arrays to a GPU denoiser; see test_device_tensors.py"
)

DATA = Path(__file__).resolve().parents[1] / "data"
TINY_AOV = DATA / "tiny_base_ic9.tza"  # color, albedo, normal
TINY_COLOR = DATA / "tiny_base_ic3.tza"  # one image

FLOAT_DTYPES = (torch.float16, torch.float32, torch.float64, torch.bfloat16)
INTEGER_DTYPES = (torch.uint8, torch.uint16)


def _denoiser(weights=TINY_AOV, **options):
    return oidn_gpu.Denoiser(backend="cuda", engine="cudnn", weights=weights, **options)


def _runner(denoiser):
    (engine,) = denoiser._engines.values()
    return engine.runner


def _stayed_on_device(denoiser):
    """The denoiser's calls so far made no host buffer (the NumPy path stages through
    pinned host buffers; the device path copies on the device only)."""
    for engine in denoiser._engines.values():
        assert engine.runner.denoiser._host == {}


def _images(rng, height, width, dtype, channels=3):
    """color, albedo, normal as float64 NumPy values valid for ``dtype`` (LDR for integers)."""
    top = 1.0 if dtype in INTEGER_DTYPES else 4.0
    color = rng.random((height, width, channels)) * top
    albedo = rng.random((height, width, 3))
    normal = rng.random((height, width, 3)) * 2 - 1
    return color, albedo, normal


def _as(values, dtype, *, signed=False):
    """``values`` (float64) as a tensor of ``dtype``: integers encode [0, 1] or [-1, 1]."""
    if dtype in INTEGER_DTYPES:
        top = 255 if dtype == torch.uint8 else 65535
        scaled = (values + 1) / 2 if signed else values
        return torch.from_numpy(np.rint(scaled * top).astype(np.int32)).to(dtype)
    return torch.from_numpy(values).to(dtype)


def _host(tensor):
    """What the NumPy path is given for ``tensor``: its NumPy array (bfloat16: float32)."""
    return tensor.float().numpy() if tensor.dtype == torch.bfloat16 else tensor.numpy()


def _same(actual, expected):
    assert isinstance(actual, torch.Tensor)
    if actual.dtype == torch.bfloat16:  # the NumPy path answers float32 rounded to bfloat16
        expected = torch.from_numpy(expected).to(torch.bfloat16)
        assert torch.equal(actual, expected)
        return
    np.testing.assert_array_equal(actual.numpy(), expected, strict=True)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + INTEGER_DTYPES, ids=str)
def test_every_dtype_gives_the_numpy_paths_bits(dtype, rng):
    hdr = dtype not in INTEGER_DTYPES
    color, albedo, normal = _images(rng, 24, 32, dtype)
    inputs = [_as(color, dtype), _as(albedo, dtype), _as(normal, dtype, signed=True)]
    with _denoiser(hdr=hdr) as den:
        actual = den.denoise(*inputs)
        device_info = den.info()
        _stayed_on_device(den)
        expected = den.denoise(*[_host(t) for t in inputs])
        assert den.info().input_scale == device_info.input_scale
    assert actual.dtype == dtype and actual.shape == inputs[0].shape
    _same(actual, expected)


def test_strided_views_and_an_hxw_image(rng):
    """Channels-first storage seen channels-last, a transposed view and every other pixel,
    and an HxW (one-channel) image answered HxW."""
    color, albedo, normal = _images(rng, 20, 36, torch.float32)
    chw = torch.from_numpy(np.ascontiguousarray(color.transpose(2, 0, 1))).float()
    channels_last = chw.permute(1, 2, 0)  # pixel stride 1, channel stride H*W
    transposed = torch.from_numpy(np.ascontiguousarray(albedo.transpose(1, 0, 2))).half()
    transposed = transposed.transpose(0, 1)
    every_other = torch.from_numpy(np.repeat(normal, 2, axis=1)).float()[:, ::2]
    assert not channels_last.is_contiguous() and not every_other.is_contiguous()
    with _denoiser(hdr=True) as den:
        actual = den.denoise(channels_last, transposed, every_other)
        _stayed_on_device(den)
        expected = den.denoise(*[t.numpy() for t in (channels_last, transposed, every_other)])
    _same(actual, expected)
    gray = torch.from_numpy(color[:, :, 0]).float().t()  # HxW, transposed
    with _denoiser(TINY_COLOR) as den:
        actual = den.denoise(gray)
        _stayed_on_device(den)
        expected = den.denoise(gray.numpy())
    assert actual.shape == gray.shape
    _same(actual, expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.uint8], ids=str)
def test_alpha_is_passed_through(dtype, rng):
    color, albedo, normal = _images(rng, 16, 24, dtype, channels=4)
    inputs = [_as(color, dtype), _as(albedo, dtype), _as(normal, dtype, signed=True)]
    with _denoiser() as den:
        actual = den.denoise(*inputs)
        _stayed_on_device(den)
        expected = den.denoise(*[t.numpy() for t in inputs])
    assert actual.shape == (16, 24, 4)
    assert torch.equal(actual[..., 3], inputs[0][..., 3])
    _same(actual, expected)


def test_output_in_place_and_of_another_dtype(rng):
    color, albedo, normal = _images(rng, 16, 24, torch.float32, channels=4)
    rgba = torch.from_numpy(color).half()
    aux = [torch.from_numpy(albedo).float(), torch.from_numpy(normal).float()]
    host_rgba = rgba.numpy().copy()
    with _denoiser(hdr=True) as den:
        assert den.denoise(rgba, *aux, output=rgba) is rgba  # the output aliases the color
        _stayed_on_device(den)
        den.denoise(host_rgba, *[t.numpy() for t in aux], output=host_rgba)
        np.testing.assert_array_equal(rgba.numpy(), host_rgba, strict=True)
    ldr = torch.from_numpy(np.clip(color, 0, 1)).float()
    out = torch.zeros((16, 24, 4), dtype=torch.uint8)
    host_out = np.zeros((16, 24, 4), np.uint8)
    with _denoiser() as den:
        assert den.denoise(ldr, *aux, output=out) is out
        _stayed_on_device(den)
        den.denoise(ldr.numpy(), *[t.numpy() for t in aux], output=host_out)
    np.testing.assert_array_equal(out.numpy(), host_out, strict=True)


def test_fresh_tensors_reuse_the_captured_frame(rng):
    color, albedo, normal = _images(rng, 16, 32, torch.float32)
    with _denoiser(hdr=True) as den:
        first = den.denoise(*[torch.from_numpy(a).float() for a in (color, albedo, normal)])
        frames = dict(_runner(den).denoiser._frames)
        assert len(frames) == 1
        fresh = [torch.from_numpy(a.copy()).float() for a in (color, albedo, normal)]
        again = den.denoise(*fresh)
        assert _runner(den).denoiser._frames == frames  # nothing captured anew
        _stayed_on_device(den)
        host = den.denoise(
            color.astype(np.float32), albedo.astype(np.float32), normal.astype(np.float32)
        )
        assert _runner(den).denoiser._frames == frames  # the NumPy path stages there too
    assert torch.equal(first, again)
    np.testing.assert_array_equal(first.numpy(), host)


def test_autoexposure_is_read_when_info_asks(rng):
    color, albedo, normal = _images(rng, 16, 16, torch.float32)
    inputs = [torch.from_numpy(a).float() for a in (color, albedo, normal)]
    with _denoiser(hdr=True) as den:
        den.denoise(*[t.numpy() for t in inputs])
        expected = den.info().input_scale
        den.denoise(*inputs)
        assert den.frames.pending_scale is not None  # still on the device
        assert den.info().input_scale == expected and den.frames.pending_scale is None


def test_a_zero_autoexposure_warns_when_read():
    """The warning of a black image comes when the scale is read (`Denoiser.info`)."""
    color = torch.ones((8, 8, 3))
    color[0, 0, 1] = float("inf")
    lazy = filter_device._LazyScale(DeviceScalar(torch.zeros(1), None), color)
    with pytest.warns(NonFiniteInputWarning, match="1 pixel of the color is not finite"):
        assert float(lazy) == 0.0


def test_tiles_prefilter_and_progress(rng):
    # tall enough for tiles of the smallest edge the U-Net's 96 px overlap allows
    color, albedo, normal = _images(rng, 240, 32, torch.float32)
    inputs = [torch.from_numpy(a).float() for a in (color, albedo, normal)]
    seen = []
    with _denoiser(hdr=True, tile_size=224) as den:
        actual = den.denoise(*inputs, progress=seen.append)
        _stayed_on_device(den)
        expected = den.denoise(*[t.numpy() for t in inputs])
        assert den.info().tiles > 1
    _same(actual, expected)
    assert seen == [0.0, 1.0]
    inputs = [inputs[0][:16, :16], inputs[1][:16, :16].half(), inputs[2][:16, :16]]
    # bf16: the network would round a float16 aux image differently from a float32 one
    with _denoiser(hdr=True, prefilter="accurate", precision="bf16") as den:
        actual = den.denoise(*inputs)
        for sub in den._prefilters.values():
            _stayed_on_device(sub)
        _stayed_on_device(den)
        expected = den.denoise(*[t.numpy() for t in inputs])
    _same(actual, expected)


def test_cancel_leaves_the_output_untouched(rng):
    color, albedo, normal = _images(rng, 16, 16, torch.float32)
    inputs = [torch.from_numpy(a).float() for a in (color, albedo, normal)]
    out = torch.full((16, 16, 3), 7.0)
    with _denoiser(hdr=True) as den, pytest.raises(CancelledError):
        den.denoise(*inputs, output=out, progress=lambda fraction: fraction < 1.0)
    assert (out == 7.0).all()


def test_a_tensor_without_data_is_an_error_naming_the_image(rng):
    color, albedo, normal = _images(rng, 16, 16, torch.float32)
    inputs = [torch.from_numpy(a).float() for a in (color, albedo, normal)]
    elsewhere = torch.empty((16, 16, 3), device="meta")
    with _denoiser(hdr=True) as den:
        with pytest.raises(
            InvalidArgumentError, match="albedo image is a torch tensor on device 'meta'"
        ):
            den.denoise(inputs[0], elsewhere, inputs[2])
        with pytest.raises(
            InvalidArgumentError, match="output image is a torch tensor on device 'meta'"
        ):
            den.denoise(*inputs, output=elsewhere)


def test_errors_are_the_numpy_paths(rng):
    color, albedo, normal = _images(rng, 16, 16, torch.float32)
    inputs = [torch.from_numpy(a).float() for a in (color, albedo, normal)]
    with _denoiser(hdr=True) as den:
        for bad in ([inputs[0], inputs[1][:8], inputs[2]], [inputs[0].int(), *inputs[1:]]):
            with pytest.raises(InvalidOperationError) as on_device:
                den.denoise(*bad)
            with pytest.raises(InvalidOperationError) as on_host:
                den.denoise(*[t.numpy() for t in bad])
            assert str(on_device.value).replace("torch.", "") == str(on_host.value)
        with pytest.raises(InvalidOperationError, match="channel count mismatch"):
            den.denoise(*inputs, output=torch.zeros((16, 16, 4)))
        with pytest.raises(InvalidOperationError, match="holds LDR values"):
            den.denoise(inputs[0].to(torch.uint8), *inputs[1:])
    with _denoiser(TINY_COLOR, filter_type="RTLightmap") as den:
        with pytest.warns(UserWarning, match="takes only a color image") as caught:
            den.denoise(*inputs)
        _stayed_on_device(den)
    assert [w.filename for w in caught] == [__file__]


def test_the_triton_kernels_take_tensors_too(rng):
    color, albedo, normal = _images(rng, 16, 16, torch.float32)
    inputs = [torch.from_numpy(a).float() for a in (color, albedo, normal)]
    with oidn_gpu.Denoiser(backend="cuda", hdr=True, weights=TINY_AOV) as den:
        actual = den.denoise(*inputs)
        _stayed_on_device(den)
        expected = den.denoise(*[t.numpy() for t in inputs])
        assert "triton" in den.info().device
    _same(actual, expected)


class _CudaInterface:
    """Stands for a CUDA array of another library (only its attribute is looked at)."""

    __cuda_array_interface__: ClassVar[dict] = {
        "shape": (2, 2),
        "typestr": "<f4",
        "data": (0, False),
    }


class _Namespace:
    @staticmethod
    def from_dlpack(tensor):
        return ("rewrapped", tensor)


def test_which_arrays_are_device_arrays():
    assert tensors.device_kind(torch.zeros(2)) == "torch"
    assert tensors.device_kind(np.zeros(2)) is None  # NumPy has __dlpack__ on the CPU
    host = DlpackArray(torch.zeros(2, 2), _Namespace())
    assert tensors.device_kind(host) is None
    assert tensors.device_kind(_CudaInterface()) == "cuda"
    assert (
        tensors.as_device_call(np.zeros((4, 4, 3), np.float32), None, None, None, hdr=False) is None
    )


def test_a_dlpack_callers_type_comes_back_through_its_namespace():
    source = torch.arange(12, dtype=torch.float32).reshape(2, 2, 3)
    host = DlpackArray(source, _Namespace())
    wrapped = tensors.as_tensor(host)
    assert wrapped.data_ptr() == source.data_ptr()  # no copy
    restore = tensors._restore(wrapped, host, "color", signed=False)
    kind, tensor = restore(source * 2)
    assert kind == "rewrapped" and torch.equal(tensor, source * 2)
    assert tensors._answer(source) is None  # torch answers torch


def test_calls_under_inference_mode_and_outside_it(rng):
    """A pipeline running under torch.inference_mode, then outside it (or the other way
    round): the denoiser's own buffers are never inference tensors."""
    color, albedo, normal = _images(rng, 16, 16, torch.float32)
    inputs = [torch.from_numpy(a).float() for a in (color, albedo, normal)]
    with _denoiser(hdr=True) as den:
        with torch.inference_mode():
            first = den.denoise(*inputs)
            host = den.denoise(*[t.numpy() for t in inputs])
        again = den.denoise(*inputs)
        host_again = den.denoise(*[t.numpy() for t in inputs])
        with torch.inference_mode():
            out = torch.empty_like(inputs[0])
            assert den.denoise(*inputs, output=out) is out
    assert torch.equal(first, again) and torch.equal(out, again)
    np.testing.assert_array_equal(host, host_again)
