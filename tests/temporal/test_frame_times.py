"""``--temporal --backend wgpu`` runs each next frame's GPU work ahead, inside the call of
the frame before: its time is counted to its own frame, so the per-frame times add up to
the run's and the last frame is not reported as nearly free (lavapipe, 64 px frames)."""

from __future__ import annotations

import pytest

from oidn_gpu.backends.wgpu.temporal_session import WgpuTemporalSession
from tests.temporal.cli_runs import copy_frames, run_temporal

pytestmark = pytest.mark.gpu


def test_frames_run_ahead_are_timed_to_their_own_frame(tmp_path, capsys, monkeypatch):
    inputs = copy_frames(tmp_path / "in", "moving", range(1, 5))
    ahead: list[float] = []  # each call's seconds spent on the next frame
    frame = WgpuTemporalSession.frame

    def recorded(self, *args, **kwargs):
        result = frame(self, *args, **kwargs)
        ahead.append(self.last_ahead_s)
        return result

    monkeypatch.setattr(WgpuTemporalSession, "frame", recorded)
    wgpu = ("--backend", "wgpu", "--precision", "fp32")
    rc, err, summary = run_temporal(capsys, inputs, tmp_path / "out", backend=wgpu)
    assert rc == 0 and summary is not None, err
    results = summary["results"]
    assert len(ahead) == len(results) == 4
    # frames 2-4 ran ahead in the call before theirs, the last one queued nothing
    assert all(s > 0 for s in ahead[:-1]) and ahead[-1] == 0.0
    total = sum(r["elapsed_s"] for r in results)
    assert abs(total - summary["elapsed_s"]) <= 0.02 * summary["elapsed_s"] + 0.01
    for before, result in zip(ahead[:-1], results[1:], strict=True):
        # its work done in the call before is its own time (and its denoise stage's)
        assert result["elapsed_s"] >= before - 1e-3
        assert result["stages_s"]["denoise"] >= before - 1e-3
    first = results[0]
    stages = first["stages_s"]
    assert first["elapsed_s"] >= sum(stages.values()) - 1e-3


def test_info_of_a_wgpu_temporal_denoiser_says_its_history_is_on_the_device():
    from oidn_gpu import TemporalDenoiser
    from tests.temporal import synthetic

    frames = synthetic.sequence("pan", frames=3, size=24)
    with TemporalDenoiser(backend="wgpu", hdr=True, precision="fp32", quality="fast") as td:
        items = [synthetic.item(f, n) for n, f in enumerate(frames, start=1)]
        outputs = list(td.denoise_many(items))
        info = td.info()
    assert len(outputs) == 3
    assert (info.backend, info.session, info.frames, info.history_frames) == (
        "wgpu",
        "device",
        3,
        3,
    )
    assert info.denoiser.backend == "wgpu" and info.guides == "depth"
    assert [r.reason for r in info.restarts] == ["the first frame"]
