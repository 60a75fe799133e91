"""`bench/temporal_backends.py`: the sequences exported as arrays, denoised from them and
scored give what the files give (the path the GPU machines without an EXR reader take)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.bench_scripts import load

SEQUENCES = Path(__file__).resolve().parents[1] / "data" / "sequences"


def test_exported_arrays_denoise_as_the_files_do(tmp_path, capsys):
    backends = load("temporal_backends")
    stability = load("temporal_stability")
    temporal_mode = load("temporal_mode")
    data, outputs = tmp_path / "sequences.npz", tmp_path / "reference.npz"
    backends.main(["export", str(SEQUENCES / "moving"), "--to", str(data)])
    backends.main(["run", "--data", str(data), "--backend", "reference", "--to", str(outputs)])
    got = np.load(outputs)
    frames = stability.load_sequence(SEQUENCES / "moving")
    oracle = {
        "per-frame": stability.per_frame("reference")(frames),
        "temporal": temporal_mode.temporal("reference", {})(frames),
    }
    for method, expected in oracle.items():
        assert len(expected) == 12
        for i, image in enumerate(expected):
            np.testing.assert_array_equal(got[f"moving/{method}/{i:03d}"], image)
    capsys.readouterr()
    backends.main(["score", str(SEQUENCES / "moving"), "--outputs", str(outputs)])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| moving")]
    assert len(rows) == 2 and all(row.endswith("| 0.00e+00 |") for row in rows)
