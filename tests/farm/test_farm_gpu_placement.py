"""GPU workers on a Ray instance that declares GPUs: each worker's share of a GPU, the GPU
id Ray gives it, the CUDA_VISIBLE_DEVICES Ray sets and the CUDA device the worker takes.

Ray schedules by declared resources, so ``ray.init(num_gpus=2)`` on a machine without
GPUs places actors exactly as on a node with two, and sets their CUDA_VISIBLE_DEVICES.
The cuda backend's workers choose their device when they start and open it on the first
frame, so they start (and report where they run) without a CUDA driver. It runs in its
own process: the other farm tests share one Ray instance without GPUs.

The same process then asks for the wgpu backend on a node without any Vulkan driver (the
workers inherit ``VK_DRIVER_FILES`` naming none): the farm says so once, on that node,
before any worker starts (`farm.driver`'s up-front check).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from oidn_gpu.image import io

SCRIPT = """
import json, sys
from oidn_gpu import farm
from oidn_gpu.farm import driver
from oidn_gpu.errors import UnsupportedDeviceError
from oidn_gpu.sequence import FrameJob, SequenceOptions
from oidn_gpu import DenoiserConfig
from pathlib import Path

ray = farm.import_ray()
ray.init(address="local", num_cpus=4, num_gpus=2, include_dashboard=False, log_to_driver=False)
plan = farm.plan_workers(ray.cluster_resources(), "cuda", None, 1, 0.5)
handles = driver._start_workers(
    ray, plan, farm.FrameWorker, (DenoiserConfig(backend="cuda"), SequenceOptions()), retries=0
)
workers = ray.get([h.ready.remote() for h in handles])
for handle in handles:
    ray.kill(handle)
# No Vulkan driver on this node (VK_DRIVER_FILES names none): wgpu cannot run here
src = Path(sys.argv[1])
try:
    farm.denoise_sequence([FrameJob(src, src.with_name("out.exr"))], DenoiserConfig(backend="wgpu"))
    check = None
except UnsupportedDeviceError as err:
    check = str(err)
from oidn_gpu.cli import main
cli_rc = main(["denoise", str(src), "-o", str(src.with_name("cli.exr")), "--backend", "wgpu",
               "--ray"])
print(json.dumps({"plan": [plan.count, plan.num_gpus], "workers": workers, "check": check,
                  "cli_rc": cli_rc}))
ray.shutdown()
"""


@pytest.mark.slow
def test_half_gpu_workers_pair_up_on_each_gpu_with_its_cuda_device(tmp_path: Path) -> None:
    (tmp_path / "ray_bootstrap_config.yaml").write_text("")  # see conftest.py
    env = dict(
        os.environ,
        HOME=str(tmp_path),
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
        RAY_USAGE_STATS_ENABLED="0",
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
        VK_DRIVER_FILES=str(tmp_path / "no-driver.json"),
    )
    for name in ("RAY_ADDRESS", "VK_ICD_FILENAMES", "OIDN_GPU_BACKEND"):
        env.pop(name, None)
    src = tmp_path / "f1.exr"
    io.write_image_atomic(src, np.ones((16, 16, 3), np.float32), pixel_format="float")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(src)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["plan"] == [4, 0.5]
    placed = []
    for where in report["workers"]:
        match = re.search(r" GPU (\d+) \((cuda:\d+), CUDA_VISIBLE_DEVICES=([^)]*)\)$", where)
        assert match, where
        placed.append(match.groups())
    # two workers on each GPU; each sees only its GPU, as CUDA device 0
    assert sorted(placed) == [
        ("0", "cuda:0", "0"),
        ("0", "cuda:0", "0"),
        ("1", "cuda:0", "1"),
        ("1", "cuda:0", "1"),
    ]
    if sys.platform.startswith("linux"):  # Vulkan driver manifests name the drivers
        check = report["check"]
        assert check is not None and check.startswith(
            "the wgpu backend cannot run on this machine: no Vulkan driver is installed"
        ), check
        assert " (on " in check  # the node that said so
        assert not (tmp_path / "out.exr").exists()
        assert report["cli_rc"] == 2  # oidn-gpu denoise --ray: a usage error, once
        assert f"error: {check}; pass --backend NAME with one of those\n" in done.stderr
        assert not (tmp_path / "cli.exr").exists()
