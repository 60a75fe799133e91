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

    def temporal(self) -> dict[str, Any] | None:
        """A temporal run's history in brief (None for per-frame denoising): ``mode``,
        ``restarts`` (each frame whose history restarted, other than the first, and why),
        ``warmed_up`` (complete frames of a resumed run denoised again for the history)
        and ``no_depth`` (frames without a depth pass)."""
        reports = [
            (r, r.layers["temporal"]) for r in self.results if (r.layers or {}).get("temporal")
        ]
        if not reports:
            return None
        restarts = [
            {"input": str(r.job.color), "reason": t.get("restart")}
            for r, t in reports
            if t.get("history") in ("restarted", "warm-up restarted")
        ]
        return {
            "mode": "temporal",
            "restarts": restarts,
            "warmed_up": sum(1 for _, t in reports if str(t.get("history")).startswith("warm")),
            "no_depth": sum(1 for r, t in reports if r.status == "done" and not t.get("depth")),
        }

    def temporal_line(self) -> str | None:
        """``temporal: history restarted at 1 frame (f.0005.exr: ...); 2 frames warmed up``,
        or None for per-frame denoising."""
        brief = self.temporal()
        if brief is None:
            return None
        restarts = brief["restarts"]
        text = "temporal: history " + (
            f"restarted at {len(restarts)} frame{'s' * (len(restarts) != 1)} ("
            + "; ".join(f"{r['input']}: {r['reason']}" for r in restarts)
            + ")"
            if restarts
            else "kept from the first frame to the last"
        )
        if brief["warmed_up"]:
            text += f"; {brief['warmed_up']} complete frame(s) denoised again for the history"
        if brief["no_depth"]:
            text += f"; {brief['no_depth']} frame(s) without a depth pass (depth is optional)"
        return text

    def as_json(self, total: int) -> dict[str, Any]:
        """The run as a JSON-ready dict: counts, time and every frame's inputs and output
        (and ``temporal``, `temporal`, for a temporal run)."""
        brief = self.temporal()
        return {
            **({} if brief is None else {"temporal": brief}),
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
