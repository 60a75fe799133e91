"""oidn_gpu.farm without a Ray instance: worker plans, GPU adapters, complete outputs,
the worker class run directly, the summary line and the command line's checks."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from farm_support import CONFIG, jobs_for, write_frames

from oidn_gpu import farm, sequence
from oidn_gpu.backends import base
from oidn_gpu.backends.cuda.placement import cuda_device_for_gpu
from oidn_gpu.backends.wgpu.placement import select_gpu_adapter
from oidn_gpu.cli import main
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image import io
from oidn_gpu.image.preview import write_side_by_side


@pytest.mark.parametrize(
    ("resources", "backend", "workers", "cpus", "expected"),
    [
        ({"CPU": 16.0, "GPU": 4.0}, "wgpu", None, 1, farm.WorkerPlan(4, 1, 1)),
        ({"CPU": 16.0, "GPU": 4.0}, "auto", None, 1, farm.WorkerPlan(4, 1, 1)),
        ({"CPU": 16.0, "GPU": 4.0}, "reference", None, 4, farm.WorkerPlan(4, 4, 0)),
        ({"CPU": 16.0, "GPU": 4.0}, "wgpu", 2, 1, farm.WorkerPlan(2, 1, 1)),
        ({"CPU": 2.0}, "reference", None, 1, farm.WorkerPlan(2, 1, 0)),
        ({"CPU": 2.0}, "reference", None, 2, farm.WorkerPlan(1, 2, 0)),
        ({"CPU": 2.0}, "wgpu", None, 1, farm.WorkerPlan(2, 1, 0)),  # lavapipe: CPU slots
        ({"CPU": 3.0}, "reference", None, 4, farm.WorkerPlan(1, 4, 0)),
    ],
)
def test_workers_are_one_per_gpu_or_per_cpu_slot(resources, backend, workers, cpus, expected):
    assert farm.plan_workers(resources, backend, workers, cpus) == expected


@pytest.mark.parametrize(
    ("resources", "workers", "gpus", "expected"),
    [
        ({"CPU": 16.0, "GPU": 1.0}, None, 0.5, farm.WorkerPlan(2, 1, 0.5)),  # 2 on one GPU
        ({"CPU": 16.0, "GPU": 1.0}, 1, 0.5, farm.WorkerPlan(1, 1, 0.5)),
        ({"CPU": 16.0, "GPU": 2.0}, None, 0.25, farm.WorkerPlan(8, 1, 0.25)),
        ({"CPU": 16.0, "GPU": 3.0}, None, 1 / 3, farm.WorkerPlan(9, 1, 1 / 3)),
        ({"CPU": 16.0, "GPU": 4.0}, None, 2.0, farm.WorkerPlan(2, 1, 2.0)),
        ({"CPU": 16.0, "GPU": 1.0}, None, 2.0, farm.WorkerPlan(1, 1, 2.0)),  # Ray: pending
    ],
)
def test_gpu_workers_take_their_share_of_the_gpus(resources, workers, gpus, expected):
    assert farm.plan_workers(resources, "cuda", workers, 1, gpus) == expected
    assert farm.plan_workers(resources, "reference", workers, 1, gpus).num_gpus == 0


def test_a_backend_gets_gpu_slots_when_it_says_it_uses_a_gpu(monkeypatch: pytest.MonkeyPatch):
    # Two more backends under new names: one that computes on the CPU, one on a GPU.
    for name, target in (("cpu-twin", "reference"), ("gpu-twin", "cuda")):
        monkeypatch.setitem(base.REGISTRY, name, base.REGISTRY[target])
        monkeypatch.setitem(base._loaded, name, base.get_backend(target))
    resources = {"CPU": 8.0, "GPU": 2.0}
    assert farm.plan_workers(resources, "cpu-twin", None, 2) == farm.WorkerPlan(4, 2, 0)
    assert farm.plan_workers(resources, "gpu-twin", None, 2) == farm.WorkerPlan(2, 1, 1)


@pytest.mark.parametrize("gpus", [0.0, -0.5, 1.5, float("nan")])
def test_a_gpu_share_is_a_fraction_or_whole_gpus(gpus):
    with pytest.raises(InvalidArgumentError, match=rf"gpus_per_worker must be .* got {gpus}"):
        farm.plan_workers({"CPU": 2.0, "GPU": 1.0}, "wgpu", None, 1, gpus)


def test_cuda_workers_use_the_gpu_ray_made_visible():
    assert cuda_device_for_gpu(0, {"CUDA_VISIBLE_DEVICES": "0"}) == "cuda:0"
    assert cuda_device_for_gpu(5, {"CUDA_VISIBLE_DEVICES": "3,5"}) == "cuda:1"
    assert cuda_device_for_gpu(2, {}) == "cuda:2"  # unset: every GPU is visible
    hidden = r"Ray assigned GPU 1 .* '0,2' on .*; expected a list that holds 1"
    with pytest.raises(InvalidArgumentError, match=hidden):
        cuda_device_for_gpu(1, {"CUDA_VISIBLE_DEVICES": "0,2"})


@pytest.mark.parametrize(
    ("resources", "workers", "cpus", "message"),
    [
        ({"CPU": 2.0}, 0, 1, "workers must be at least 1, got 0"),
        ({"CPU": 2.0}, None, 0, "cpus_per_worker must be at least 1, got 0"),
        ({"memory": 1e9}, None, 1, "the Ray cluster has no CPU to run workers on"),
    ],
)
def test_bad_worker_plans_say_what_is_wrong(resources, workers, cpus, message):
    with pytest.raises(InvalidArgumentError, match=message):
        farm.plan_workers(resources, "reference", workers, cpus)


def _adapter(name: str, kind: str) -> SimpleNamespace:
    return SimpleNamespace(info={"device": name, "adapter_type": kind})


def test_each_ray_gpu_id_gets_its_own_discrete_adapter():
    adapters = [
        _adapter("llvmpipe", "CPU"),
        _adapter("Intel UHD", "IntegratedGPU"),
        _adapter("H200 a", "DiscreteGPU"),
        _adapter("H200 b", "DiscreteGPU"),
    ]
    picked = [select_gpu_adapter(adapters, i).info["device"] for i in (0, 1)]
    assert picked == ["H200 a", "H200 b"]
    assert select_gpu_adapter(adapters[:2], 0).info["device"] == "Intel UHD"
    with pytest.raises(InvalidArgumentError, match=r"Ray assigned GPU 2 .* lists 2 GPU adapter"):
        select_gpu_adapter(adapters, 2)


def test_only_a_decodable_output_of_the_input_size_is_complete(tmp_path: Path):
    [src] = write_frames(tmp_path / "in", 1)
    job = sequence.FrameJob(src, tmp_path / "out.exr", side_by_side=tmp_path / "side.png")
    assert not farm.output_is_complete(job)  # missing
    pixels = io.read_image(src).pixels
    io.write_image_atomic(job.output, pixels)
    assert not farm.output_is_complete(job)  # the preview asked for is missing
    io.write_image_atomic(job.side_by_side, np.zeros((4, 4, 3), np.float32))
    assert not farm.output_is_complete(job)  # a preview of another size: not ours
    write_side_by_side(job.side_by_side, pixels, pixels, encoding="linear")
    assert farm.output_is_complete(job)
    assert farm.output_is_complete(sequence.FrameJob(src, job.output))
    io.write_image_atomic(job.output, pixels[:-1])
    assert not farm.output_is_complete(job)  # another size: not ours
    io.write_image_atomic(job.output, pixels)
    job.output.write_bytes(job.output.read_bytes()[:-64])
    assert not farm.output_is_complete(job)  # half-written by another tool


def test_the_worker_class_denoises_and_reports_failures(tmp_path: Path):
    inputs = write_frames(tmp_path / "in", 2)
    jobs = jobs_for(inputs, tmp_path / "out")
    worker = farm.FrameWorker(CONFIG, sequence.SequenceOptions(), blas_threads=1)
    assert "1 CPU" in worker.ready()
    outcome = worker.denoise(jobs[0])
    assert outcome.status == "done" and outcome.used.endswith("; hdr")
    assert io.read_image(jobs[0].output).pixels.shape == io.read_image(inputs[0]).pixels.shape
    assert worker.denoise(jobs[0], skip_existing=True).status == "skipped"
    missing = sequence.FrameJob(tmp_path / "nope.exr", tmp_path / "out" / "nope.exr")
    failed = worker.denoise(missing)
    assert failed.status == "failed" and "nope.exr" in failed.error
    assert "Traceback" in failed.details
    worker.close()


def test_the_summary_line_names_workers_and_troubles():
    summary = farm.FarmSummary(workers=["worker 1 (a)", "worker 2 (b)"], retried=1, lost=2)
    line = summary.line(0)
    assert line.startswith("0 frames: 0 denoised, 0 skipped, 0 failed in 0.0 s on 2 workers")
    assert line.endswith("; 1 failed attempt retried, 2 frames requeued from dead workers")


def test_farm_flags_need_ray(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    [src] = write_frames(tmp_path, 1)
    assert main(["denoise", str(src), "-o", str(tmp_path / "o.exr"), "--retries", "3"]) == 2
    assert capsys.readouterr().err.strip() == "error: --retries needs --ray"
    out = str(tmp_path / "o.exr")
    assert main(["denoise", str(src), "-o", out, "--gpus-per-worker", "0.5"]) == 2
    assert capsys.readouterr().err.strip() == "error: --gpus-per-worker needs --ray"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1.5", "1.5 must be a fraction in (0, 1] or a whole number of GPUs"),
        ("0", "0 must be a fraction"),
        ("half", "'half' is not a number"),
    ],
)
def test_a_bad_gpu_share_says_what_is_expected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, message: str
):
    argv = ["denoise", str(tmp_path / "in.exr"), "-o", str(tmp_path / "o.exr"), "--ray"]
    assert main([*argv, "--gpus-per-worker", value]) == 2
    assert f"error: argument --gpus-per-worker: {message}" in capsys.readouterr().err


def test_ray_missing_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    [src] = write_frames(tmp_path, 1)
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    out = tmp_path / "o.exr"
    assert main(["denoise", str(src), "-o", str(out), "--ray"]) == 1
    err = capsys.readouterr().err
    assert "install it with: pip install 'oidn-gpu[ray]'" in err
    assert not out.exists()


def test_a_worker_limits_openimageio_and_host_copy_threads_to_its_cpus_until_closed(
    tmp_path: Path,
):
    import OpenImageIO

    from oidn_gpu.image import host_copy

    names = farm.worker.OIIO_THREAD_ATTRIBUTES
    before = {name: OpenImageIO.get_int_attribute(name) for name in names}
    worker = farm.FrameWorker(CONFIG, sequence.SequenceOptions(), blas_threads=3)
    try:
        assert OpenImageIO.get_int_attribute("threads") == 3
        assert OpenImageIO.get_int_attribute("exr_threads") == 3
        assert host_copy.copy_threads() <= 3
    finally:
        worker.close()
    assert {name: OpenImageIO.get_int_attribute(name) for name in before} == before
    assert host_copy.limit_copy_threads(None) is None  # the cap was lifted on close


def test_the_worker_hands_back_what_it_logged_during_a_frame(tmp_path: Path):
    import logging

    inputs = write_frames(tmp_path / "in", 1)
    jobs = jobs_for(inputs, tmp_path / "out")

    class Chatty(farm.FrameWorker):
        def denoise(self, job, skip_existing=False):
            logging.getLogger("oidn_gpu.sequence").debug("not at the driver's level")
            logging.getLogger("oidn_gpu.sequence").warning("slow frame %s", job.color.name)
            return super().denoise(job, skip_existing)

    logging.getLogger("oidn_gpu.farm").info("before any frame: not the frame's")
    worker = Chatty(CONFIG, sequence.SequenceOptions(), blas_threads=1, log_level=logging.INFO)
    try:
        outcome = worker.denoise_logged(jobs[0])
    finally:
        worker.close()
    assert outcome.status == "done"
    messages = [(r.name, r.levelno, r.message) for r in outcome.records]
    assert ("oidn_gpu.sequence", logging.WARNING, f"slow frame {inputs[0].name}") in messages
    assert all(level >= logging.INFO for _, level, _ in messages)
