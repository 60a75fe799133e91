"""Denoise a frame sequence on a Ray cluster (``oidn-gpu denoise ... --ray [ADDRESS]``).

One long-lived worker per GPU (or per CPU slot for a backend that computes on the CPU)
runs as a Ray actor: it keeps its Denoisers, and with them the model, the plans and the
compiled GPU kernels, warm from frame to frame. The driver streams frames (file paths,
never pixels) to the workers, at most two per worker, so a worker always has its next
frame queued but a slow worker never hoards frames. Each worker reads its frame from
the (shared) storage, denoises it with the same code as the single-process loop
(`sequence.denoise_frame`) and writes the output atomically (temporary file, then rename).

Failures:

- a frame whose denoise raises is tried again on another worker, up to ``retries`` more
  times, then reported as failed; the other frames go on;
- a worker that dies (its process crashed, its node was lost, or it was killed) loses no
  frame: the frames it held go back to the queue. Ray restarts the worker (up to
  ``retries + 1`` times) and it gets frames again once it answers; a frame that was on
  ``retries + 1`` workers that died is reported as failed, so a frame that crashes every
  worker cannot take the whole farm down;
- with ``skip_existing`` a frame is skipped when its output (every part) and preview
  exist and decode at the frame's sizes (`sequence.output_is_complete`, the test of the
  single-process loop too); a truncated or foreign half-written file is denoised again.

The driver aggregates progress: a bar on a terminal, one line per frame otherwise, and
the summary of `sequence.SequenceSummary`. Ray is optional (``pip install
'oidn-gpu[ray]'``) and imported only when a farm runs.

Modules: `driver` (`denoise_sequence`, the worker plan), `scheduler` (the driver loop and
its progress report), `worker` (the actor, its thread limits), `logs` (the workers' log
records forwarded to the driver).
"""

from oidn_gpu.farm.driver import (
    DEFAULT_RETRIES,
    RAY_USAGE_STATS_ENV,
    FarmOptions,
    WorkerPlan,
    denoise_sequence,
    plan_workers,
)
from oidn_gpu.farm.scheduler import FRAMES_IN_FLIGHT_PER_WORKER, FarmFrameResult, FarmSummary
from oidn_gpu.farm.worker import (
    RAY_EXTRA,
    FrameOutcome,
    FrameWorker,
    import_ray,
    output_is_complete,
)

__all__ = [
    "DEFAULT_RETRIES",
    "FRAMES_IN_FLIGHT_PER_WORKER",
    "RAY_EXTRA",
    "RAY_USAGE_STATS_ENV",
    "FarmFrameResult",
    "FarmOptions",
    "FarmSummary",
    "FrameOutcome",
    "FrameWorker",
    "WorkerPlan",
    "denoise_sequence",
    "import_ray",
    "output_is_complete",
    "plan_workers",
]
