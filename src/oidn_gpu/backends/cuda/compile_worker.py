"""The child process that compiles a frame's Triton kernels into Triton's disk cache.

    python -m oidn_gpu.backends.cuda.compile_worker JOB.pickle

See `compile_job` for why; `CudaDenoiser` starts it (`compile_job.start`).
"""

from __future__ import annotations

import os
import pickle
import sys
from types import SimpleNamespace

import torch

from oidn_gpu.backends.cuda import kernel_specs
from oidn_gpu.backends.cuda.compile_job import CompileJob
from oidn_gpu.backends.cuda.executor import CudaExecutor
from oidn_gpu.backends.cuda.runner import CudaDenoiser


def executor_of(job: CompileJob) -> CudaExecutor:
    """The job's executor: the caller's network, precision, fusion and row-kernel choice."""
    model = SimpleNamespace(graph=job.graph, convs=job.convs, spec=job.spec)
    return CudaExecutor(
        model,
        device=job.device_index,
        precision=job.precision,
        engine="triton",
        tune=False,
        bridge=False,
        fused=job.fused,
        rows=job.rows,
    )


def run_job(job: CompileJob) -> None:
    """Compile the job's kernels by running its frame once on scratch images."""
    executor = executor_of(job)
    with CudaDenoiser(executor, use_graphs=False) as denoiser:
        images = []
        for shape, dtype, channels in job.images:
            tensor = torch.zeros(shape, dtype=getattr(torch, dtype), device=executor.device)
            images.append(tensor[..., :channels] if len(shape) == 3 else tensor)
        denoiser.denoise_tensors(
            *images,
            mode=job.mode,
            plan=job.plan,
            out_channels=job.out_channels,
            autoexposure=job.autoexposure,
        )
        if executor.device.type == "cuda":
            torch.cuda.synchronize(executor.device)


def main(argv: list[str]) -> int:
    (path,) = argv
    if hasattr(os, "nice"):
        os.nice(10)  # below the caller's frames, which the compile must not slow
    with open(path, "rb") as f:
        job = pickle.load(f)  # written by `start` of this package, in a private temp file
    os.unlink(path)
    if job.spec_key is None:
        run_job(job)
        return 0
    with kernel_specs.recording() as records:  # the next process compiles them in parallel
        run_job(job)
    kernel_specs.save(job.spec_key, records)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
