"""What a run did: each frame's `FrameResult` and the run's `SequenceSummary` (a line of
totals, the layers used, and the same as JSON for machines)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oidn_gpu.sequence.options import FrameJob


@dataclass
class FrameResult:
    """What happened to one frame.

    Attributes:
        layers: the inputs used: ``color``, ``albedo``, ``normal`` (a layer name, a
            file, or None), ``aovs`` (the passes denoised with ``--aovs``) and ``mode``.
        stages: seconds of the frame's stages, ``read``, ``denoise`` and ``write``
            (`sequence.frame.STAGES`; empty for a frame not done).
    """

    job: FrameJob
    status: str  # 'done', 'skipped' or 'failed'
    elapsed_s: float = 0.0
    error: str | None = None
    used: str = ""  # which inputs were used, in words
    layers: dict[str, Any] = field(default_factory=dict)
    nonfinite_pixels: int = 0  # denoised pixels with a NaN or infinite channel
    warnings: tuple[str, ...] = ()  # NaN/Inf pixel counts, a black autoexposure
    stages: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready description of this frame."""
        return {
            "input": str(self.job.color),
            "output": str(self.job.output),
            "status": self.status,
            "elapsed_s": round(self.elapsed_s, 4),
            "error": self.error,
            "layers": self.layers or None,
            "nonfinite_pixels": self.nonfinite_pixels,
            "warnings": list(self.warnings),
            "stages_s": {k: round(v, 4) for k, v in self.stages.items()} or None,
        }


@dataclass
class SequenceSummary:
    """Totals of a run."""

    results: list[FrameResult] = field(default_factory=list)
    elapsed_s: float = 0.0
    interrupted: bool = False

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def failed(self) -> list[FrameResult]:
        return [r for r in self.results if r.status == "failed"]

    @property
    def nonfinite_frames(self) -> int:
        """Frames written with non-finite (NaN or infinite) output pixels."""
        return sum(1 for r in self.results if r.nonfinite_pixels)

    def line(self, total: int) -> str:
        """``3 frames: 2 denoised, 0 skipped, 1 failed in 4.2 s (1.9 s per frame)``."""
        done = self.count("done")
        per_frame = f" ({self.elapsed_s / done:.2f} s per frame)" if done else ""
        text = (
            f"{total} frame{'s' if total != 1 else ''}: {done} denoised, "
            f"{self.count('skipped')} skipped, {self.count('failed')} failed "
            f"in {self.elapsed_s:.1f} s{per_frame}"
        )
        if self.nonfinite_frames:
            text += f"; {self.nonfinite_frames} with non-finite output pixels"
        not_started = total - len(self.results)
        if self.interrupted:
            text += f"; interrupted, {not_started} not started"
        elif not_started:
            text += f"; {not_started} not started"
        return text

    def layers_line(self) -> str | None:
        """``layers used: color 'ViewLayer.Noisy Image', albedo ... (3 frames)``, one
        line per distinct choice, or None when no frame was denoised."""
        counts: dict[str, int] = {}
        for result in self.results:
            if result.status == "done":
                counts[result.used] = counts.get(result.used, 0) + 1
        if not counts:
            return None
        lines = [
            f"layers used: {used} ({n} frame{'s' if n != 1 else ''})" for used, n in counts.items()
        ]
        return "\n".join(lines)

    def as_json(self, total: int) -> dict[str, Any]:
        """The run as a JSON-ready dict: counts, time and every frame's inputs and output."""
        return {
            "frames": total,
            "denoised": self.count("done"),
            "skipped": self.count("skipped"),
            "failed": self.count("failed"),
            "nonfinite": self.nonfinite_frames,
            "not_started": total - len(self.results),
            "interrupted": self.interrupted,
            "elapsed_s": round(self.elapsed_s, 4),
            "results": [r.as_json() for r in self.results],
        }

