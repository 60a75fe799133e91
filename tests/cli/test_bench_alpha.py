"""``oidn-gpu bench --alpha denoise``: a frame with its alpha denoised against its RGB denoise,
on the reference backend at a tiny size."""

from __future__ import annotations

import re


def test_bench_alpha_prints_both_times_and_their_ratio(cli) -> None:
    flags = "--alpha denoise --backend reference --size 24x16 --runs 2 --warmup 1 --threads 1"
    result = cli("bench", *flags.split())
    assert result.rc == 0, result.err
    assert "reference on cpu" in result.out and "24x16, quality high" in result.out
    assert '| images | RGB | RGBA, alpha="denoise" | ratio |' in result.out
    row = re.search(r"\| NumPy arrays \| ([\d.]+) ms \| ([\d.]+) ms \| ([\d.]+)x \|", result.out)
    assert row is not None, result.out
    rgb, rgba, ratio = (float(v) for v in row.groups())
    assert rgb > 0 and rgba > 0 and abs(ratio - rgba / rgb) < 0.01 + 0.01 * ratio
    assert "torch tensors" not in result.out  # the reference backend denoises host arrays


def test_bench_alpha_refuses_an_option_of_another_backend(cli) -> None:
    result = cli("bench", "--alpha", "denoise", "--backend", "reference", "--engine", "triton")
    assert result.rc == 2
    assert "engine" in result.err
