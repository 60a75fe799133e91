"""Any array type in, the caller's type out (image/arrays.py, and through oidn_gpu.denoise)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from threadpoolctl import threadpool_info, threadpool_limits

import oidn_gpu
from oidn_gpu import Denoiser, InvalidArgumentError, InvalidOperationError
from oidn_gpu.backends.reference import ReferenceExecutor
from oidn_gpu.backends.reference import executor as reference
from oidn_gpu.image.arrays import as_call, as_image
from oidn_gpu.model import weights as builtin

SHAPES = [(5, 7), (5, 7, 1), (5, 7, 3), (5, 7, 4)]
FLOATS = [np.float16, np.float32, np.float64]
INTEGERS = [np.uint8, np.uint16]


def _pixels(shape: tuple[int, ...], dtype: type, seed: int = 0) -> np.ndarray:
    """Values exactly representable in ``dtype`` (floats: float16 values; ints: all codes)."""
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, np.iinfo(dtype).max, shape, endpoint=True).astype(dtype)
    return rng.random(shape).astype(np.float16).astype(dtype)


class DLPackOnly:
    """An array known only through the DLPack protocol (as from another framework)."""

    def __init__(self, array: np.ndarray) -> None:
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


class ArrayOnly:
    """An object with ``__array__`` only (as pandas or xarray values)."""

    def __init__(self, array: np.ndarray) -> None:
        self._array = array

    def __array__(self, dtype=None, copy=None):
        return self._array if dtype is None else self._array.astype(dtype)


def _expected_float(pixels: np.ndarray, name: str = "color") -> np.ndarray:
    if pixels.dtype.kind == "u":
        values = pixels.astype(np.float32) / np.float32(np.iinfo(pixels.dtype).max)
        return values * np.float32(2) - np.float32(1) if name == "normal" else values
    return pixels.astype(pixels.dtype if pixels.dtype != np.float64 else np.float32)


# -- pure conversion ---------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", FLOATS + INTEGERS)
def test_numpy_round_trip_keeps_shape_dtype_and_values(shape, dtype) -> None:
    original = _pixels(shape, dtype)
    pixels, restore = as_image(original, "color")
    assert pixels.dtype in (np.float16, np.float32)
    assert pixels.shape == shape
    np.testing.assert_array_equal(pixels, _expected_float(original))
    back = restore(pixels)
    assert type(back) is np.ndarray
    assert back.shape == shape and back.dtype == dtype
    np.testing.assert_array_equal(back, original)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "dtype",
    [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.uint8, torch.uint16],
)
def test_torch_round_trip_keeps_type_shape_dtype_and_values(shape, dtype) -> None:
    source = _pixels(shape, np.uint16 if dtype == torch.uint16 else np.uint8)
    if dtype.is_floating_point:
        source = source.astype(np.float32) / 255
    original = torch.from_numpy(source).to(dtype)
    pixels, restore = as_image(original, "albedo")
    assert pixels.dtype in (np.float16, np.float32) and pixels.shape == shape
    back = restore(pixels)
    assert isinstance(back, torch.Tensor)
    assert back.shape == original.shape and back.dtype == dtype and back.device == original.device
    assert torch.equal(back, original)


def test_torch_float32_cpu_input_is_a_view_not_a_copy() -> None:
    tensor = torch.rand(6, 5, 3, requires_grad=True)
    pixels, _ = as_image(tensor, "color")
    assert np.shares_memory(pixels, tensor.detach().numpy())


@pytest.mark.parametrize(
    ("mode", "shape", "dtype"),
    [
        ("L", (5, 7), np.uint8),
        ("RGB", (5, 7, 3), np.uint8),
        ("RGBA", (5, 7, 4), np.uint8),
        ("I;16", (5, 7), np.uint16),
        ("F", (5, 7), np.float32),
    ],
)
def test_pil_round_trip_keeps_mode_size_and_values(mode, shape, dtype) -> None:
    original = Image.fromarray(_pixels(shape, dtype))
    assert original.mode == mode
    pixels, restore = as_image(original, "color")
    assert pixels.shape == shape
    np.testing.assert_array_equal(pixels, _expected_float(np.asarray(original)))
    back = restore(pixels)
    assert isinstance(back, Image.Image)
    assert back.mode == mode and back.size == original.size
    np.testing.assert_array_equal(np.asarray(back), np.asarray(original))


@pytest.mark.parametrize("wrapper", [DLPackOnly, ArrayOnly])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint8])
def test_dlpack_and_array_interface_inputs(wrapper, dtype) -> None:
    original = _pixels((5, 7, 3), dtype)
    pixels, restore = as_image(wrapper(original), "color")
    np.testing.assert_array_equal(pixels, _expected_float(original))
    back = restore(pixels)  # no Array API namespace: NumPy comes back
    assert type(back) is np.ndarray and back.dtype == dtype
    np.testing.assert_array_equal(back, original)


class Namespace:
    """A minimal Array API namespace: ``asarray`` makes a `NamespacedArray`."""

    @staticmethod
    def asarray(values):
        return NamespacedArray(np.asarray(values))


class NamespacedArray(DLPackOnly):
    """A DLPack array with an Array API namespace (as JAX, CuPy or array-api-strict)."""

    def __array_namespace__(self, api_version=None):
        return Namespace


def test_array_api_inputs_come_back_through_their_namespace() -> None:
    original = _pixels((5, 7, 3), np.uint8)
    pixels, restore = as_image(NamespacedArray(original), "color")
    back = restore(pixels)
    assert isinstance(back, NamespacedArray)
    np.testing.assert_array_equal(np.from_dlpack(back), original)


class DeviceOnly(DLPackOnly):
    """A DLPack array on a device NumPy cannot read (as a CuPy array)."""

    def __dlpack__(self, **kwargs):
        raise BufferError("the array is on a CUDA device; the CPU cannot take it")

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA


def test_dlpack_arrays_numpy_cannot_read_raise_clear_errors() -> None:
    with pytest.raises(
        InvalidOperationError,
        match=r"^unsupported input image format: color is a DeviceOnly that NumPy cannot read",
    ):
        as_image(DeviceOnly(np.zeros((4, 4, 3), np.float32)), "color")


def test_numpy_float_inputs_are_views() -> None:
    for dtype in (np.float16, np.float32):
        original = _pixels((4, 4, 3), dtype)
        pixels, _ = as_image(original, "color")
        assert pixels is original


@pytest.mark.parametrize("dtype", INTEGERS)
def test_integer_normals_encode_minus_one_to_one(dtype) -> None:
    top = np.iinfo(dtype).max
    original = np.array([[[0, top, top // 2 + 1]]], dtype)
    pixels, restore = as_image(original, "normal")
    np.testing.assert_array_equal(pixels[0, 0, :2], [-1, 1])
    assert abs(pixels[0, 0, 2]) < 2 / top
    np.testing.assert_array_equal(restore(pixels), original)


def test_integer_results_are_rounded_and_clipped() -> None:
    _, restore = as_image(np.zeros((1, 5), np.uint8), "color")
    result = np.array([[-0.5, 0.5 / 255, 1.4 / 255, 1.0, 7.0]], np.float32)
    np.testing.assert_array_equal(restore(result), [[0, 0, 1, 255, 255]])
    _, restore = as_image(np.zeros((1, 2), np.uint8), "color")
    np.testing.assert_array_equal(restore(np.array([[np.nan, 0.5]], np.float32)), [[0, 128]])


@pytest.mark.parametrize(
    ("image", "message"),
    [
        (np.zeros((4, 4, 3), np.int32), r"color has dtype int32; expected float16, float32"),
        (np.zeros((4, 4, 3), bool), r"color has dtype bool"),
        (torch.zeros(4, 4, 3, dtype=torch.int64), r"color has dtype torch.int64"),
        (torch.zeros(4, 4, 3, dtype=torch.complex64), r"color .*dtype torch.complex64"),
        (Image.new("P", (4, 4)), r"color is a PIL image of mode 'P'; expected one of L, RGB"),
        ([[0.5, 0.5]], r"color is a list; expected a NumPy array, a torch tensor"),
        ("image.png", r"color is a str"),
    ],
)
def test_unsupported_inputs_raise_clear_errors(image, message) -> None:
    with pytest.raises(InvalidOperationError, match=r"^unsupported input image format: " + message):
        as_image(image, "color")


def test_integer_color_is_refused_for_hdr() -> None:
    with pytest.raises(
        InvalidOperationError, match=r"color has dtype uint8, which holds LDR values in \[0, 1\]"
    ):
        as_call(np.zeros((4, 4, 3), np.uint8), None, None, None, hdr=True)
    call = as_call(
        np.zeros((4, 4, 3), np.float32), np.zeros((4, 4, 3), np.uint8), None, None, hdr=True
    )  # integer aux images are LDR anyway
    assert call.albedo.dtype == np.float32


def test_result_follows_the_main_image_type() -> None:
    albedo = torch.zeros(4, 4, 3, dtype=torch.float64)
    normal = np.zeros((4, 4), np.float32)
    call = as_call(None, albedo, normal, None, hdr=False)
    back = call.finish(np.ones((4, 4, 3), np.float32))
    assert isinstance(back, torch.Tensor) and back.dtype == torch.float64


@pytest.mark.parametrize(
    ("output", "error", "message"),
    [
        ([[0.0]], InvalidOperationError, r"^unsupported output image format: output is a list"),
        (np.zeros((4, 4, 3), np.int16), InvalidOperationError, r"output has dtype int16"),
        (np.zeros((4, 4, 3)).view(), None, None),
    ],
)
def test_output_types(output, error, message) -> None:
    if error is None:
        output.flags.writeable = False
        error, message = InvalidArgumentError, r"output array is read-only"
    with pytest.raises(error, match=message):
        as_call(np.zeros((4, 4, 3), np.float32), None, None, output, hdr=False)


# -- end to end through oidn_gpu.denoise ------------------------------------------------


@pytest.fixture(scope="module")
def ldr() -> Denoiser:
    with Denoiser(backend="reference") as den:
        yield den


@pytest.fixture(scope="module")
def color() -> np.ndarray:
    return _pixels((24, 20, 3), np.float32, seed=1)


@pytest.fixture(scope="module")
def expected(ldr: Denoiser, color: np.ndarray) -> np.ndarray:
    return ldr.denoise(color)


def _quantized(values: np.ndarray, dtype: type) -> np.ndarray:
    top = np.iinfo(dtype).max
    return np.clip(np.rint(np.nan_to_num(values) * np.float32(top)), 0, top).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_denoise_float_dtypes_match_the_float32_path(ldr, color, dtype) -> None:
    image = color.astype(np.float16).astype(dtype)  # exact in every float dtype
    result = oidn_gpu.denoise(image, backend="reference")
    assert type(result) is np.ndarray and result.dtype == dtype and result.shape == color.shape
    reference_result = ldr.denoise(image.astype(np.float32 if dtype == np.float64 else dtype))
    np.testing.assert_array_equal(result, reference_result.astype(dtype))


@pytest.mark.parametrize("dtype", INTEGERS)
def test_denoise_integers_match_the_quantized_float32_path(ldr, dtype) -> None:
    image = _pixels((24, 20, 3), dtype, seed=2)
    result = oidn_gpu.denoise(image, backend="reference")
    assert result.dtype == dtype and result.shape == image.shape
    float_result = ldr.denoise(image.astype(np.float32) / np.float32(np.iinfo(dtype).max))
    np.testing.assert_array_equal(result, _quantized(float_result, dtype))


def test_denoise_hxw_in_hxw_out(ldr, color) -> None:
    gray = np.ascontiguousarray(color[:, :, 0])
    result = oidn_gpu.denoise(gray, backend="reference")
    assert result.shape == gray.shape and result.dtype == np.float32
    np.testing.assert_array_equal(result, ldr.denoise(gray[:, :, None])[:, :, 0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.uint8])
def test_denoise_torch_in_torch_out(ldr, color, dtype) -> None:
    if dtype == torch.uint8:
        tensor = torch.from_numpy(_quantized(color, np.uint8))
    else:
        tensor = torch.from_numpy(color).to(dtype)
    result = oidn_gpu.denoise(tensor, backend="reference")
    assert isinstance(result, torch.Tensor)
    assert result.dtype == dtype and result.shape == tensor.shape and result.device == tensor.device
    if dtype == torch.uint8:
        float_result = ldr.denoise(tensor.numpy().astype(np.float32) / np.float32(255))
        expected_tensor = torch.from_numpy(_quantized(float_result, np.uint8))
    elif dtype == torch.bfloat16:
        expected_tensor = torch.from_numpy(ldr.denoise(tensor.float().numpy())).to(dtype)
    else:
        expected_tensor = torch.from_numpy(ldr.denoise(tensor.numpy()))
    assert torch.equal(result, expected_tensor)


@pytest.mark.parametrize("mode", ["RGB", "L", "F"])
def test_denoise_pil_in_pil_out(ldr, color, mode) -> None:
    if mode == "F":
        image = Image.fromarray(np.ascontiguousarray(color[:, :, 0]))
    else:
        image = Image.fromarray(_quantized(color, np.uint8)).convert(mode)
    result = oidn_gpu.denoise(image, backend="reference")
    assert isinstance(result, Image.Image) and result.mode == mode and result.size == image.size
    pixels = np.asarray(image)
    if mode == "F":
        np.testing.assert_array_equal(np.asarray(result), ldr.denoise(pixels))
    else:
        float_result = ldr.denoise(pixels.astype(np.float32) / np.float32(255))
        np.testing.assert_array_equal(np.asarray(result), _quantized(float_result, np.uint8))


def test_denoise_integer_aux_images(color) -> None:
    albedo = _pixels((24, 20, 3), np.uint8, seed=3)
    normal = _pixels((24, 20, 3), np.uint8, seed=4)
    result = oidn_gpu.denoise(torch.from_numpy(color), albedo, normal, backend="reference")
    albedo_f = albedo.astype(np.float32) / np.float32(255)
    normal_f = normal.astype(np.float32) / np.float32(255) * np.float32(2) - np.float32(1)
    assert torch.equal(
        result, torch.from_numpy(oidn_gpu.denoise(color, albedo_f, normal_f, backend="reference"))
    )


def test_denoise_into_foreign_outputs(expected, color) -> None:
    tensor_out = torch.zeros(24, 20, 3, dtype=torch.float64)
    assert oidn_gpu.denoise(color, output=tensor_out, backend="reference") is tensor_out
    assert torch.equal(tensor_out, torch.from_numpy(expected.astype(np.float64)))
    view_out = torch.zeros(24, 20, 3)  # float32 on the CPU: written in place
    assert oidn_gpu.denoise(color, output=view_out, backend="reference") is view_out
    assert torch.equal(view_out, torch.from_numpy(expected))
    pil_out = Image.new("RGB", (20, 24))
    assert oidn_gpu.denoise(color, output=pil_out, backend="reference") is pil_out
    np.testing.assert_array_equal(np.asarray(pil_out), _quantized(expected, np.uint8))
    numpy_out = np.zeros((24, 20, 3), np.uint16)
    assert oidn_gpu.denoise(color, output=numpy_out, backend="reference") is numpy_out
    np.testing.assert_array_equal(numpy_out, _quantized(expected, np.uint16))


def test_failed_call_leaves_a_foreign_output_untouched(color) -> None:
    out = torch.full((24, 20, 3), 7.0, dtype=torch.float64)
    with pytest.raises(oidn_gpu.CancelledError):
        oidn_gpu.denoise(color, output=out, backend="reference", progress=lambda f: f < 0.5)
    assert bool((out == 7.0).all())
    with pytest.raises(InvalidOperationError, match="channel count mismatch"):
        oidn_gpu.denoise(
            color, output=torch.zeros(24, 20, 1, dtype=torch.float64), backend="reference"
        )


def test_hdr_with_integer_color_is_an_error() -> None:
    with pytest.raises(InvalidOperationError, match="HDR denoising"):
        oidn_gpu.denoise(np.zeros((16, 16, 3), np.uint8), hdr=True, backend="reference")
    with pytest.raises(InvalidOperationError, match="HDR denoising"):
        oidn_gpu.denoise(
            torch.zeros(16, 16, 3, dtype=torch.uint8), filter_type="RTLightmap", backend="reference"
        )


# -- BLAS threads of the reference backend ---------------------------------------------


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 2), (3, 3), (8, 8), (64, 8)])
def test_default_threads_are_the_usable_cores_up_to_8(monkeypatch, cores, threads) -> None:
    monkeypatch.setattr(reference.os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert reference.default_threads() == threads


def test_blas_is_single_threaded_during_run_and_restored_after(monkeypatch) -> None:
    model = builtin.load_builtin("rt_ldr_small")
    x = np.random.default_rng(0).random((3, 16, 16), np.float32)
    monkeypatch.setattr(reference, "default_threads", lambda: 2)
    seen: list[tuple[list[int], int]] = []
    original_run = ReferenceExecutor._run

    def spy(self, value, workers):
        seen.append((_blas_threads(), workers))
        return original_run(self, value, workers)

    monkeypatch.setattr(ReferenceExecutor, "_run", spy)
    with threadpool_limits(limits=3, user_api="blas"):
        ReferenceExecutor(model, threads=1).run(x)
        ReferenceExecutor(model).run(x)  # default 2, under the caller's 3
        ReferenceExecutor(model, threads=5).run(x)  # asked for: not capped
        with threadpool_limits(limits=1, user_api="blas"):
            assert ReferenceExecutor(model).workers() == 1  # the caller's cap wins
        assert _blas_threads() == [3] * len(_blas_threads())
    blas = [1] * len(seen[0][0])
    assert seen == [(blas, 1), (blas, 2), (blas, 5)]


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2"])
def test_bad_thread_counts_are_refused(threads) -> None:
    model = builtin.load_builtin("rt_ldr_small")
    with pytest.raises(InvalidArgumentError, match=r"threads must be an int >= 1 or None"):
        ReferenceExecutor(model, threads=threads)
