"""``oidn-gpu prepare``: each configuration asked for runs a frame and waits for its kernels."""

from __future__ import annotations

import re


def test_prepare_runs_every_configuration_asked_for(cli):
    result = cli(
        "prepare",
        "--backend",
        "reference",
        "--size",
        "40x24",
        "--inputs",
        "hdr",
        "srgb",
        "--aux",
        "none",
        "albedo+normal",
    )
    assert result.rc == 0, result.err
    lines = [line for line in result.out.splitlines() if line.startswith("prepared ")]
    names = [re.match(r"prepared (.*?):", line).group(1) for line in lines]
    assert names == [
        "hdr, none, quality high",
        "hdr, albedo+normal, quality high",
        "srgb, none, quality high",
        "srgb, albedo+normal, quality high",
    ]
    assert all("CPU" in line or "cpu" in line for line in lines), lines


def test_prepare_export_needs_a_backend_that_ships_kernels(cli, tmp_path):
    result = cli(
        "prepare",
        "--backend",
        "reference",
        "--size",
        "16x16",
        "--aux",
        "none",
        "--export",
        tmp_path,
    )
    assert result.rc == 2
    assert "--export: the reference backend ships no compiled kernels" in result.err


def test_prepare_refuses_an_unknown_choice_or_size(cli):
    result = cli("prepare", "--inputs", "linear")
    assert result.rc == 2 and "invalid choice: 'linear'" in result.err
    result = cli("prepare", "--size", "1920")
    assert result.rc == 2 and "expected a size like 1920x1080, got '1920'" in result.err
