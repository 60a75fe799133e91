"""Record Intel OIDN 2.5.1's autoexposure scales on this CPU (or an emulated one).

OIDN does not report its autoexposure value, but its output with ``inputScale``
unset equals its output with ``inputScale`` set to exactly that value. For each
image this runs OIDN once with autoexposure and then with explicit scales: the scale
our order for ``--expect`` gives, its float32 neighbours and the scales of the other
orders (and of near misses: SSE4 with FMA, SSE4 as 4 lanes). When exactly the
expected scale reproduces the automatic output bit for bit, it is recorded;
otherwise every float32 within a few steps of all those candidates is tried, and
exactly one must reproduce the output.

OIDN's CPU device picks its ISA from the CPU it runs on. To record another ISA
than the host's, run this under QEMU's user-mode emulator with an older CPU model
(``OIDN_VERBOSE=2`` makes OIDN print the ISA it chose)::

    OIDN_VERBOSE=2 qemu-x86_64 -cpu Nehalem .venv/bin/python \\
        scripts/record_oidn_autoexposure.py tests/data/autoexposure/oidn_sse4.json \\
        tests/data/autoexposure/images.npz tests/data/autoexposure/sse4_images.npz \\
        --isa "SSE4.1 (QEMU -cpu Nehalem)" --expect sse4
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oidn_gpu.image import autoexposure as ae
from tests.oracle import oidn_denoise

NEIGHBOUR_STEPS = 4  # float32 steps searched on each side of every candidate


def float32_neighbours(value: float, steps: int) -> list[float]:
    """``value`` and the ``steps`` float32 values on each side of it."""
    out = [np.float32(value)]
    for direction in (np.float32(np.inf), np.float32(-np.inf)):
        current = np.float32(value)
        for _ in range(steps):
            current = np.nextafter(current, direction)
            out.append(current)
    return sorted({float(v) for v in out})


# Our orders, and near misses that OIDN does not run, to tell the SSE4 target's width
# and FMA choice apart.
ORDERS = {
    **ae.ISAS,
    "sse4 with fma": ae.CpuIsa("sse4-fma", 8, 4, fma=True),
    "sse4 as 4 lanes": ae.CpuIsa("sse4-i32x4", 4, 4, fma=False),
}


def score(image: np.ndarray, scale: float) -> dict:
    """Our scale for every order, and the orders that give OIDN's ``scale``."""
    ours = {name: ae.autoexposure(image, isa=isa) for name, isa in ORDERS.items()}
    return {"ours": ours, "matching_isas": [name for name, s in ours.items() if s == scale]}


def record(image: np.ndarray, expect: str) -> dict:
    """OIDN's scale for one image, and which of our orders give it."""
    ours = score(image, float("nan"))["ours"]
    auto = oidn_denoise(image, hdr=True, quality="fast")

    def reproduces(scale: float) -> bool:
        return np.array_equal(
            auto, oidn_denoise(image, hdr=True, quality="fast", input_scale=scale)
        )

    expected = ours[expect]
    others = set(float32_neighbours(expected, 1)) | set(ours.values())
    others.discard(expected)
    if reproduces(expected) and not any(reproduces(s) for s in sorted(others)):
        scale = expected
    else:
        candidates = {c for s in ours.values() for c in float32_neighbours(s, NEIGHBOUR_STEPS)}
        matches = [c for c in sorted(candidates) if reproduces(c)]
        if len(matches) != 1:
            raise SystemExit(f"{len(matches)} scales reproduce OIDN's output: {matches}")
        scale = matches[0]
    return {
        "shape": list(image.shape),
        "oidn_scale": scale,
        "oidn_scale_hex": scale.hex(),
        **score(image, scale),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="JSON file to write")
    parser.add_argument("images", type=Path, nargs="+", help=".npz files of HxWx3 images")
    parser.add_argument("--isa", help="the ISA OIDN reported, for the record")
    parser.add_argument(
        "--expect", choices=sorted(ae.ISAS), help="our order expected to match (tried first)"
    )
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="keep OIDN's recorded scales in OUTPUT, recompute only our orders' scales",
    )
    args = parser.parse_args()
    if not args.rescore and (args.isa is None or args.expect is None):
        parser.error("recording needs --isa and --expect")
    images = {}
    for path in args.images:
        with np.load(path) as npz:
            images.update({name: (f"{path.name}:{name}", npz[name]) for name in npz.files})
    if args.rescore:
        result = json.loads(args.output.read_text())
        for name, entry in result["scales"].items():
            entry.update(score(images[name][1], entry["oidn_scale"]))
        args.output.write_text(json.dumps(result, indent=1) + "\n")
        return
    result = {"oidn": "2.5.1 (pyoidn 2.5.1.0, CPU device)", "isa": args.isa, "scales": {}}
    for name, (source, image) in images.items():
        result["scales"][name] = entry = {"image": source, **record(image, args.expect)}
        print(name, entry["oidn_scale"], entry["matching_isas"], flush=True)
        args.output.write_text(json.dumps(result, indent=1) + "\n")  # progress so far


if __name__ == "__main__":
    main()
