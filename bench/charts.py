"""PNG charts of the headline benchmarks, drawn from the JSON documents ``oidn-gpu bench
--json PATH`` writes (schema ``oidn-gpu.bench``, docs/json.md).

    python bench/charts.py                                   # docs/benchmark-data -> docs/img
    python bench/charts.py --data RUN_FOLDER --out docs/img  # a new device run's JSON

Every ``*.json`` of ``--data`` with the ``oidn-gpu.bench`` schema is read; which chart a
document feeds follows from its backend and kind:

- ``cuda-sizes.png``: cuda ``configurations`` documents: the whole denoise with the data
  on the GPU (``e2e_gpu_median_ms``) and from NumPy arrays (``host_wall_median_ms``) per
  image size and weights, and the plain cuDNN port (``baseline``) where it was run;
- ``cuda-cold.png``: cuda ``cold`` documents with sequences: N frames in a fresh process,
  oidn-gpu beside Intel OIDN's CUDA device (``sequences.summary``);
- ``oidn-cpu.png``: oidn ``sizes`` documents: ``Denoiser(backend="oidn")`` beside a direct
  Intel OIDN call per size.

The committed inputs (docs/benchmark-data) are the tables of docs/benchmarks.md written
as the benches' JSON, each naming its section (``transcribed_from``); the charts are in
docs/benchmarks.md. Needs matplotlib (``pip install 'oidn-gpu[bench]'``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCHEMA = "oidn-gpu.bench"
OURS, THEIRS, THIRD = "#1f77b4", "#7f7f7f", "#ff7f0e"


def load_documents(folder: Path) -> list[dict[str, Any]]:
    """The ``oidn-gpu.bench`` documents in ``folder`` (by file name)."""
    docs = []
    for path in sorted(folder.glob("*.json")):
        doc = json.loads(path.read_text("utf-8"))
        if isinstance(doc, dict) and doc.get("schema") == SCHEMA:
            doc["_file"] = path.name
            docs.append(doc)
    return docs


def _label(entry: dict[str, Any]) -> str:
    size = {720: "720p", 1080: "1080p", 2160: "4K"}.get(entry["height"])
    size = size or f"{entry['width']}x{entry['height']}"
    return size + (" fast" if str(entry["weights"]).endswith("_small") else "")


def _bars(ax: Any, labels: list[str], series: list[tuple[str, list[float | None], str]]) -> None:
    """Grouped bars with their values written above them (None: no bar)."""
    width = 0.8 / len(series)
    for i, (name, values, color) in enumerate(series):
        xs = [x + (i - (len(series) - 1) / 2) * width for x in range(len(labels))]
        shown = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
        bars = ax.bar([x for x, _ in shown], [v for _, v in shown], width, label=name, color=color)
        texts = [f"{v:.0f}" if v >= 100 else f"{v:.3g}" for _, v in shown]
        ax.bar_label(bars, labels=texts, fontsize=8, padding=2)
    ax.set_xticks(range(len(labels)), labels)
    ax.legend(frameon=False, fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)


def cuda_sizes(docs: list[dict[str, Any]], ax: Any) -> str:
    runs = [d for d in docs if d["backend"] == "cuda" and d["kind"] == "configurations"]
    if not runs:
        raise ValueError("no cuda configurations document")
    runs.sort(key=lambda d: (str(d["cuda"]["weights"]).endswith("_small"), d["cuda"]["height"]))
    labels = [_label(d["cuda"]) for d in runs]
    baseline = [d.get("baseline", {}).get("e2e_gpu_median_ms") for d in runs]
    series = [
        ("oidn-gpu cuda, data on the GPU", [d["cuda"]["e2e_gpu_median_ms"] for d in runs], OURS),
        (
            "oidn-gpu cuda, NumPy in and out",
            [d["cuda"]["host_wall_median_ms"] for d in runs],
            THIRD,
        ),
    ]
    if any(v is not None for v in baseline):
        series.append(("plain cuDNN port, data on the GPU", baseline, THEIRS))
    _bars(ax, labels, series)
    ax.set_ylabel("ms per denoise (median)")
    device = runs[0]["cuda"]["device"]
    return f"Whole denoise, rt_hdr_alb_nrm (fast: _small), fp16, {device}"


def cuda_cold(docs: list[dict[str, Any]], ax: Any) -> str:
    colds = [d for d in docs if d["backend"] == "cuda" and d["kind"] == "cold"]
    if not colds or "sequences" not in colds[-1]:
        raise ValueError("no cuda cold document with sequences")
    doc = colds[-1]
    summary = doc["sequences"]["summary"]
    frames = sorted(summary["ours"], key=int)
    labels = [f"{n} frames" for n in frames]
    series = [
        ("oidn-gpu cuda", [summary["ours"][n]["total_s"] for n in frames], OURS),
        ("Intel OIDN 2.5.1 CUDA", [summary["intel_oidn"][n]["total_s"] for n in frames], THEIRS),
    ]
    _bars(ax, labels, series)
    ax.set_ylabel("seconds in a fresh process (median)")
    height, width = doc["sequences"]["size"]
    device = doc.get("device", "")
    return f"A fresh process's first frames, {width}x{height}, NumPy in and out, {device}"


def oidn_cpu(docs: list[dict[str, Any]], ax: Any) -> str:
    rows = [r for d in docs if d["backend"] == "oidn" and d["kind"] == "sizes" for r in d["rows"]]
    if not rows:
        raise ValueError("no oidn sizes document")
    labels = [f"{r['width']}x{r['height']}" for r in rows]
    series = [
        ('Denoiser(backend="oidn")', [r["denoiser_median_ms"] for r in rows], OURS),
        ("direct pyoidn call", [r["pyoidn_median_ms"] for r in rows], THEIRS),
    ]
    _bars(ax, labels, series)
    ax.set_ylabel("ms per denoise (median)")
    device = rows[0]["device"].upper()
    return f"The oidn backend against Intel OIDN itself ({device} device)"


CHARTS: dict[str, Callable[[list[dict[str, Any]], Any], str]] = {
    "cuda-sizes.png": cuda_sizes,
    "cuda-cold.png": cuda_cold,
    "oidn-cpu.png": oidn_cpu,
}


def draw(docs: list[dict[str, Any]], out: Path) -> list[Path]:
    """Every chart whose documents are there, as PNG in ``out``; returns the files."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    written = []
    out.mkdir(parents=True, exist_ok=True)
    for name, chart in CHARTS.items():
        fig, ax = plt.subplots(figsize=(7, 3.6), dpi=100)
        try:
            title = chart(docs, ax)
        except (ValueError, IndexError, KeyError):
            plt.close(fig)
            continue  # no document for this chart
        ax.set_title(title, fontsize=10)
        fig.text(0.01, 0.01, "oidn-gpu bench --json; docs/benchmarks.md", fontsize=7, color="0.4")
        fig.tight_layout()
        path = out / name
        fig.savefig(path, metadata={"Software": None})  # no matplotlib version: stable bytes
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO / "docs" / "benchmark-data")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    args = parser.parse_args(argv)
    docs = load_documents(args.data)
    if not docs:
        print(f"error: no {SCHEMA} JSON documents in {args.data}", file=sys.stderr)
        return 1
    for path in draw(docs, args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
