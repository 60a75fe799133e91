"""The cuda temporal session's Triton kernels against the NumPy passes (the oracle).

Without a GPU they run through Triton's interpreter on CPU tensors (tests/cuda/conftest.py),
on a GPU on CUDA tensors; tiny sequences (30x30 and 40x40, 3 frames) with the reference image
standing in for the denoiser, as tests/temporal/test_passes.py runs the other backends.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from oidn_gpu.backends.cuda import temporal_kernels as tk
from oidn_gpu.temporal import passes as tp
from tests.temporal import synthetic

GUIDES = {
    "depth": dict(depth=True, normal=False, albedo=False),
    "aux": dict(depth=False, normal=True, albedo=True),
}


class TritonPasses:
    """`TemporalPasses` of the kernels (host arrays in and out), for the comparison."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def _t(self, array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(array, np.float32)).to(self.device)

    def reproject(self, motion, guide, prev_guide, signal, prev_state, params):
        height, width = motion.shape[:2]
        repro = torch.empty((height, width, 16), dtype=torch.float32, device=self.device)
        self.kept = torch.zeros(1, dtype=torch.int32, device=self.device)
        signal_t = self._t(signal)
        lum = torch.empty((2, height, width), dtype=torch.float32, device=self.device)
        tk.gather(
            self._t(motion),
            self._t(guide),
            self._t(prev_guide),
            signal_t,
            self._t(prev_state),
            repro,
            lum,
            self.kept,
            params,
            has_history=True,
        )
        acc = [torch.empty((height, width, 3), device=self.device) for _ in range(3)]
        tk.reject(signal_t, repro, lum, *acc, params)
        for index, image in enumerate(acc):  # the denoiser's inputs are the signal channels
            assert torch.equal(image, repro[..., 3 * index : 3 * index + 3])
        return repro.cpu().numpy()

    def stabilize(self, denoised, reprojection, params):
        height, width = reprojection.shape[:2]
        out = torch.empty((height, width, 3), dtype=torch.float32, device=self.device)
        self.state = torch.empty((height, width, 16), dtype=torch.float32, device=self.device)
        tk.stabilize(self._t(denoised), self._t(reprojection), out, self.state, params)
        return out.cpu().numpy()


def _run(passes, frames, params):
    """Every frame through ``passes``: reprojections and outputs; the kernels' next state
    and history count checked against NumPy's on the way."""

    def check(rep, state):
        np.testing.assert_allclose(passes.state.cpu().numpy(), state, rtol=0, atol=0)
        assert int(passes.kept) == int(np.sum(rep[..., tp.REPROJECTION_VALID] > 0.5))

    is_triton = isinstance(passes, TritonPasses)
    return synthetic.run_passes(passes, frames, params, check if is_triton else None)


@pytest.mark.parametrize(
    "kind, guides, options, size",
    [
        ("pan", "depth", {}, 40),  # more than one program (BLOCK), the last one partial
        ("object", "depth", {"clamp": "minmax", "clamp_radius": 1}, 30),
        ("object", "aux", {"change_sigmas": 0.0, "firefly_ratio": 0.0}, 30),
        ("pan", "aux", {"clamp": "none", "output_blend": 1.0}, 30),
        ("object", "depth", {"disocclusion_margin": 2, "change_sigmas": 0.0}, 30),
        ("object", "depth", {"disocclusion_margin": 0}, 30),
        ("contact", "depth", {}, 30),  # silhouettes within the depth tolerance
    ],
)
def test_kernels_agree_with_numpy(device, kind, guides, options, size):
    params = tp.TemporalParams(**options).with_guides(**GUIDES[guides])
    frames = synthetic.sequence(kind, frames=3, size=size)
    assert size < 40 or size * size > tk.BLOCK
    frames[1].motion[3, 3] = np.nan
    frames[2].motion[5:9, 20:] = 1e20  # far off screen
    expected = _run(tp.NumpyTemporalPasses(), frames, params)
    got = _run(TritonPasses(device), frames, params)
    for (rep_e, out_e), (rep_g, out_g) in zip(expected, got, strict=True):
        np.testing.assert_allclose(rep_g, rep_e, rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(out_g, out_e, rtol=2e-5, atol=2e-6)
        assert np.isfinite(rep_g).all() and np.isfinite(out_g).all()


@pytest.mark.parametrize(
    "albedo, normal, depth", [(True, True, True), (False, False, True), (True, False, False)]
)
def test_pack_is_the_numpy_packing(device, albedo, normal, depth):
    rng = np.random.default_rng(3)
    images = {
        name: rng.normal(0, 2, (8, 12, 3)).astype(np.float32)
        for name in ("color", "albedo", "normal")
    }
    images["depth"] = rng.random((8, 12)).astype(np.float32)
    images["color"][0, 0] = [np.nan, np.inf, -np.inf]
    images["albedo"][1, 1, 2] = np.nan
    images["depth"][2, 3] = np.inf
    images["depth"][2, 4] = np.nan
    given = {"color": True, "albedo": albedo, "normal": normal, "depth": depth}
    arrays = {k: (v if given[k] else None) for k, v in images.items()}
    tensors = {k: None if v is None else torch.from_numpy(v).to(device) for k, v in arrays.items()}
    signal = torch.empty((8, 12, 9), device=device)
    guide = torch.empty((8, 12, 8), device=device)
    tk.pack(tensors["color"], tensors["albedo"], tensors["normal"], tensors["depth"], signal, guide)
    expected_signal = tp.pack_signal(arrays["color"], arrays["albedo"], arrays["normal"])
    expected_guide = tp.pack_guide(arrays["depth"], arrays["albedo"], arrays["normal"])
    np.testing.assert_array_equal(signal.cpu().numpy(), expected_signal)
    np.testing.assert_array_equal(guide.cpu().numpy(), expected_guide)


def test_stabilize_passes_nonfinite_denoised_pixels(device):
    params = tp.TemporalParams()
    rep = np.zeros((8, 8, 16), np.float32)
    rep[..., tp.REPROJECTION_OUTPUT_COUNT] = 2.0
    rep[..., tp.STATE_OUTPUT : tp.STATE_OUTPUT + 3] = 0.5
    denoised = np.ones((8, 8, 3), np.float32)
    denoised[2, 2] = [np.nan, np.inf, -np.inf]
    passes = TritonPasses(device)
    out = passes.stabilize(denoised, rep, params)
    np.testing.assert_allclose(out, tp.stabilize(denoised, rep, params), rtol=1e-6, atol=1e-7)
    state = passes.state.cpu().numpy()
    np.testing.assert_array_equal(state, tp.next_state(rep, out))
    assert np.isfinite(state).all()
