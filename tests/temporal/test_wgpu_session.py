"""`WgpuTemporalSession` (the temporal mode with its history on the wgpu device) against the
host path: the NumPy passes (and the WGSL passes on host arrays) around a per-frame wgpu
denoise (lavapipe)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from oidn_gpu import Denoiser
from oidn_gpu.backends.base import TemporalFrame, TemporalSession, get_backend
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError
from oidn_gpu.temporal import passes as tp
from tests.bench_scripts import load
from tests.temporal import synthetic

pytestmark = pytest.mark.gpu

SEQUENCES = Path(__file__).resolve().parents[1] / "data" / "sequences"
TINY_WEIGHTS = Path(__file__).resolve().parents[1] / "data" / "tiny_base_ic9.tza"
CROP = 32  # px: the sequences' top-left corner, where each has an edge and motion
FRAMES = 4
# The WGSL passes against NumPy's: float32 in the same order, FMA contraction aside
# (tests/temporal/test_wgpu_passes.py), carried through the same fp32 network.
RTOL, ATOL = 1e-4, 1e-5


@dataclass(frozen=True)
class Step:
    frame: TemporalFrame
    restart: bool = False


@pytest.fixture(scope="module")
def denoiser():
    with Denoiser(backend="wgpu", hdr=True, precision="fp32", quality="fast") as den:
        yield den


@pytest.fixture(scope="module")
def wgsl_passes(denoiser):
    passes = get_backend("wgpu").temporal_passes(denoiser.backend_options)
    yield passes
    passes.close()


def _params(frame: TemporalFrame, **values) -> tp.TemporalParams:
    """The guides `TemporalDenoiser` chooses: depth alone where there is depth."""
    with_depth = frame.depth is not None
    return tp.TemporalParams(**values).with_guides(
        depth=with_depth,
        normal=frame.normal is not None and not with_depth,
        albedo=frame.albedo is not None and not with_depth,
    )


def host_path(den, passes, steps, params):
    """``[(output, history_fraction, cut)]``: what `TemporalDenoiser` computes per frame
    with ``passes`` on host arrays."""
    results, state = [], None
    for step in steps:
        f = step.frame
        size = f.color.shape[:2]
        signal = tp.pack_signal(f.color, f.albedo, f.normal)
        guide = tp.pack_guide(f.depth, f.albedo, f.normal)
        fresh = state is None or step.restart
        prev_state, prev_guide = (tp.empty_state(*size), guide) if fresh else state
        rep = passes.reproject(f.motion, guide, prev_guide, signal, prev_state, params)
        fraction, cut = tp.history_fraction(rep), False
        if not fresh and 1.0 - fraction > params.cut_threshold:
            rep = passes.reproject(f.motion, guide, guide, signal, tp.empty_state(*size), params)
            fraction, cut = 0.0, True
        denoised = den.denoise(
            *(
                None if image is None else np.ascontiguousarray(rep[..., c : c + 3])
                for c, image in ((0, f.color), (3, f.albedo), (6, f.normal))
            )
        )
        out = passes.stabilize(np.asarray(denoised, np.float32), rep, params)
        state = (tp.next_state(rep, out), guide)
        results.append((out, fraction, cut))
    return results


def session_path(session, steps, params):
    results = []
    for index, step in enumerate(steps):
        result = session.frame(step.frame, params, restart=index == 0 or step.restart)
        results.append((result.output, result.history_fraction, result.cut))
    return results


def _session(den):
    session = get_backend("wgpu").temporal_session(den.frames)
    assert isinstance(session, TemporalSession)
    return session


def _sequence_steps(name: str) -> list[Step]:
    stability = load("temporal_stability")
    frames = stability.load_sequence(SEQUENCES / name)[:FRAMES]
    steps = []
    for f in frames:
        motion = np.where(f.motion.invalid[..., None], np.float32(np.nan), f.motion.backward)
        crop = (slice(0, CROP), slice(0, CROP))
        steps.append(
            Step(
                TemporalFrame(
                    *(
                        np.ascontiguousarray(a[crop], np.float32)
                        for a in (f.color, f.albedo, f.normal, motion, f.depth)
                    )
                )
            )
        )
    return steps


def _synthetic_steps(kind: str, frames: int = FRAMES, size: int = 24) -> list[Step]:
    return [
        Step(TemporalFrame(f.color, f.albedo, f.normal, f.motion, f.depth))
        for f in synthetic.sequence(kind, frames=frames, size=size)
    ]


def _assert_same(got, expected, exact: bool) -> None:
    assert len(got) == len(expected)
    for (out_g, fraction_g, cut_g), (out_e, fraction_e, cut_e) in zip(got, expected, strict=True):
        assert (fraction_g, cut_g) == (fraction_e, cut_e)
        if exact:
            np.testing.assert_array_equal(out_g, out_e)
        else:
            np.testing.assert_allclose(out_g, out_e, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", ["static", "orbit", "moving"])
def test_the_session_is_the_host_path_on_the_sequences(denoiser, wgsl_passes, name):
    """The same kernels on the same device: the WGSL host path's image, bit for bit; the
    NumPy passes' within float32 contraction."""
    steps = _sequence_steps(name)
    params = _params(steps[0].frame)
    with _session(denoiser) as session:
        got = session_path(session, steps, params)
    assert got[-1][1] > 0.5  # the history was used
    _assert_same(got, host_path(denoiser, wgsl_passes, steps, params), exact=True)
    _assert_same(got, host_path(denoiser, tp.NumpyTemporalPasses(), steps, params), exact=False)


def test_a_cut_and_a_restart_start_the_history_again(denoiser, wgsl_passes):
    """A frame of another scene (all depths changed) is a camera cut, decided on the device;
    a restart asked for drops the history too."""
    steps = _synthetic_steps("object", frames=6)
    for index in range(2, 6):  # another scene from frame 2 on
        f = steps[index].frame
        steps[index] = Step(replace(f, depth=f.depth * np.float32(3)))
    steps[4] = replace(steps[4], restart=True)
    params = _params(steps[0].frame, cut_threshold=0.5)
    with _session(denoiser) as session:
        got = session_path(session, steps, params)
    assert [cut for _, _, cut in got] == [False, False, True, False, False, False]
    assert got[2][1] == got[4][1] == 0.0 and got[3][1] > 0.5
    _assert_same(got, host_path(denoiser, wgsl_passes, steps, params), exact=True)


def test_bad_motion_and_nonfinite_images_give_no_nan(denoiser, wgsl_passes):
    steps = _synthetic_steps("pan")
    bad = {1: (np.nan, 1e6), 2: (np.inf, -np.inf), 3: (-3e4, np.nan)}
    for index, (mx, my) in bad.items():
        f = steps[index].frame
        motion, color, depth, albedo = (a.copy() for a in (f.motion, f.color, f.depth, f.albedo))
        motion[2:9, 3:12, 0], motion[5:14, 1:6, 1] = mx, my
        color[4, 4], color[5, 5], color[6, 6] = np.nan, np.inf, -np.inf
        depth[7, 7], depth[8, 8], albedo[9, 9] = np.nan, np.inf, np.nan
        steps[index] = Step(TemporalFrame(color, albedo, f.normal, motion, depth))
    params = _params(steps[0].frame)
    with _session(denoiser) as session:
        got = session_path(session, steps, params)
    assert all(np.isfinite(out).all() for out, _, _ in got)
    _assert_same(got, host_path(denoiser, wgsl_passes, steps, params), exact=True)


def test_other_parameters_are_the_host_path(denoiser, wgsl_passes):
    """No light-change test (the accumulation writes the reprojection), no firefly limit,
    no disocclusion margin, a short history and the min-max clamp."""
    steps = _synthetic_steps("object", frames=5)
    params = _params(
        steps[0].frame,
        history=3,
        change_sigmas=0,
        firefly_ratio=0,
        disocclusion_margin=0,
        clamp="minmax",
        clamp_radius=1,
    )
    with _session(denoiser) as session:
        got = session_path(session, steps, params)
    _assert_same(got, host_path(denoiser, wgsl_passes, steps, params), exact=True)
    _assert_same(got, host_path(denoiser, tp.NumpyTemporalPasses(), steps, params), exact=False)


def test_a_silhouette_within_the_depth_tolerance_is_the_host_path(denoiser, wgsl_passes):
    """The gather, submitted before the other images are uploaded, has the normals that
    decide the output history where the depth moved (the "contact" sphere's rim)."""
    steps = _synthetic_steps("contact")
    params = _params(steps[0].frame)
    assert params.use_depth and not params.use_normal
    with _session(denoiser) as session:
        got = session_path(session, steps, params)
    _assert_same(got, host_path(denoiser, wgsl_passes, steps, params), exact=True)
    _assert_same(got, host_path(denoiser, tp.NumpyTemporalPasses(), steps, params), exact=False)


def test_without_depth_the_albedo_and_normal_decide(denoiser, wgsl_passes):
    steps = [Step(replace(s.frame, depth=None)) for s in _synthetic_steps("object")]
    f = steps[2].frame
    albedo, normal = f.albedo.copy(), f.normal.copy()
    albedo[3, 3], normal[4, 4] = np.nan, np.nan
    steps[2] = Step(replace(f, albedo=albedo, normal=normal))
    params = _params(steps[0].frame)
    assert params.use_albedo and params.use_normal and not params.use_depth
    with _session(denoiser) as session:
        got = session_path(session, steps, params)
    _assert_same(got, host_path(denoiser, wgsl_passes, steps, params), exact=True)
    _assert_same(got, host_path(denoiser, tp.NumpyTemporalPasses(), steps, params), exact=False)


def test_a_tiled_frame_is_tiled_as_a_host_denoise_is(wgsl_passes):
    """A strip wider than the least tile (its overlap is 96 px each side), over two tiles,
    with a small network."""
    steps = [
        Step(
            TemporalFrame(
                *(
                    np.ascontiguousarray(a[20:36])
                    for a in (
                        s.frame.color,
                        s.frame.albedo,
                        s.frame.normal,
                        s.frame.motion,
                        s.frame.depth,
                    )
                )
            )
        )
        for s in _synthetic_steps("object", frames=3, size=224)
    ]
    with Denoiser(
        backend="wgpu", hdr=True, precision="fp32", weights=TINY_WEIGHTS, tile_size=208
    ) as den:
        params = _params(steps[0].frame)
        with _session(den) as session:
            got = session_path(session, steps, params)
        assert den.info().tiles > 1
        _assert_same(got, host_path(den, wgsl_passes, steps, params), exact=True)


def test_a_size_change_restarts_and_close_releases_everything(denoiser):
    small, large = _synthetic_steps("static", 2, 16), _synthetic_steps("static", 2, 24)
    params = _params(small[0].frame)
    session = _session(denoiser)
    first = session.frame(small[0].frame, params, restart=True)
    assert session.frame(small[1].frame, params, restart=False).history_fraction > 0.9
    # a new size without restart=True: the history of another size is not used
    resized = session.frame(large[0].frame, params, restart=False)
    assert resized.history_fraction == 0.0 and not resized.cut
    assert first.output.shape == (16, 16, 3) and resized.output.shape == (24, 24, 3)
    assert session.resources()[0] > 0
    session.close()
    session.close()
    assert session.resources() == (0, 0)
    with pytest.raises(InvalidOperationError, match="closed"):
        session.frame(small[0].frame, params, restart=True)


def test_a_session_outliving_its_denoiser_refuses_frames_and_closes():
    f = _synthetic_steps("static", 1, 16)[0].frame
    den = Denoiser(backend="wgpu", hdr=True, precision="fp32", quality="fast")
    session = _session(den)
    session.frame(f, _params(f), restart=True)
    den.close()
    with pytest.raises(InvalidOperationError, match="denoiser is closed"):
        session.frame(f, _params(f), restart=False)
    session.close()
    assert session.resources() == (0, 0)


def test_mismatched_images_are_refused(denoiser):
    f = _synthetic_steps("static", 1, 16)[0].frame
    with (
        _session(denoiser) as session,
        pytest.raises(InvalidArgumentError, match="motion image is 8x16"),
    ):
        session.frame(replace(f, motion=f.motion[:, :8]), _params(f), restart=True)


def test_the_session_serves_rt_without_accurate_prefiltering():
    backend = get_backend("wgpu")
    for options, served in (
        ({}, True),
        ({"prefilter": "fast"}, True),
        ({"prefilter": "accurate"}, False),
        ({"filter_type": "RTLightmap"}, False),
    ):
        with Denoiser(backend="wgpu", **options) as den:
            session = backend.temporal_session(den.frames)
            assert (session is not None) is served
            if session is not None:
                session.close()


def test_the_session_stabilize_passes_nonfinite_denoised_pixels_and_writes_the_state(wgsl_passes):
    """Pass 2 of the session on a denoised frame with NaN and infinities: those pixels
    pass through (bits), the windows count them as 0, the next state is `next_state`'s."""
    from oidn_gpu.backends.gpu_device import STORAGE_USAGE, BufferUsage
    from oidn_gpu.kernels import temporal as kt

    rng = np.random.default_rng(3)
    height, width = 8, 12
    rep = rng.random((height, width, tp.REPROJECTION_CHANNELS), dtype=np.float32)
    rep[..., tp.REPROJECTION_OUTPUT_COUNT] = rng.choice([1.0, 2.0, 3.3], (height, width))
    den = rng.random((height, width, 3), dtype=np.float32)
    den[1, 2, 0], den[3, 4, 1], den[5, 6, 2], den[7, 11] = np.nan, np.inf, -np.inf, np.nan
    params = tp.TemporalParams(clamp="variance")
    device = wgsl_passes._device
    kernel = kt.generate_stabilize(kt.TemporalSpec(params), session=True)
    module = device.create_shader_module(kernel.key, kernel.source, trusted=False)
    pipeline = device.create_compute_pipeline(kernel.key, module, kernel.entry_point)
    arrays = {
        "denoised": den,
        "reprojection": rep,
        "out": np.zeros_like(den),
        "state": np.zeros((height, width, tp.STATE_CHANNELS), np.float32),
    }
    buffers = {
        name: device.create_buffer(name, a.nbytes, STORAGE_USAGE) for name, a in arrays.items()
    }
    for name in ("denoised", "reprojection"):
        device.write_buffer(buffers[name], 0, arrays[name])
    uniform = device.create_buffer_with_data(
        "params",
        kt.SESSION_PARAMS.pack(width=width, height=height, keep_min=0, restart=0),
        BufferUsage.UNIFORM,
    )
    group = device.create_bind_group("stabilize", pipeline, [*buffers.values(), uniform])
    encoder = device.create_command_encoder("stabilize")
    encoder.dispatch(pipeline, group, kernel.grid(0, height, width))
    device.submit([encoder.finish()])
    out, state = (
        np.frombuffer(device.read_buffer(buffers[n]), np.float32).reshape(arrays[n].shape)
        for n in ("out", "state")
    )
    expected = tp.stabilize(den, rep, params)
    np.testing.assert_allclose(out, expected, rtol=2e-5, atol=2e-6)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(den))
    np.testing.assert_array_equal(out[~np.isfinite(den)], den[~np.isfinite(den)])
    np.testing.assert_allclose(state, tp.next_state(rep, expected), rtol=2e-5, atol=2e-6)
    assert np.isfinite(state).all()


def test_the_benchmark_row_of_the_session_checks_it_against_the_host_path():
    overhead, row_of = load("temporal_overhead"), load("temporal_session_overhead")
    frames = overhead.sequence(16, 32, 3)
    row = row_of.measure_session(
        "wgpu", frames, 1, {"precision": "fp32", "quality": "fast"}, 2, overhead._median_ms
    )
    assert row["bit_equal_frames"] == 2 and row["max_abs_diff"] == 0.0
    assert row["session_ms"] > 0 and {"host_upload", "host_wait"} <= set(row["split_ms"])
    assert "2 bit-equal" in row_of.describe("wgpu", row, 32, 16)


def test_denoiser_temporal_true_runs_the_device_session_with_the_host_paths_image(
    denoiser, wgsl_passes
):
    """Through the public API: `Denoiser(temporal=True, backend="wgpu")` keeps its history
    on the device, and gives the image of the host path with the WGSL passes, bit for bit."""
    from oidn_gpu.backends.host_temporal import HostTemporalSession

    steps = _sequence_steps("moving")
    options = dict(backend="wgpu", hdr=True, precision="fp32", quality="fast")

    def run(host: bool) -> list[np.ndarray]:
        with Denoiser(temporal=True, **options) as td:
            if host:
                td.session.close()
                td.session = HostTemporalSession(td.denoiser.frames, wgsl_passes)
            else:
                assert td.session.name == "wgpu-device"
            return [
                td.denoise(
                    s.frame.color,
                    s.frame.albedo,
                    s.frame.normal,
                    motion=s.frame.motion,
                    depth=s.frame.depth,
                    frame=i,
                )
                for i, s in enumerate(steps)
            ]

    for got, expected in zip(run(host=False), run(host=True), strict=True):
        np.testing.assert_array_equal(got, expected)
