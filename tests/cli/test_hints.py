"""What a first run says: progress in whole frames, an interrupted run's count and how to
resume, hints that name the fix (a misspelt option, a channels-first tensor, a backend that
cannot run here), and notes on inputs that are accepted but probably not meant."""

from __future__ import annotations

import io as text_io
import re
import subprocess
import sys

import numpy as np
import pytest
from cli_support import pythonpath_env

import oidn_gpu
from oidn_gpu.sequence.loop import ProgressBar


def test_the_progress_bar_counts_whole_frames() -> None:
    stream = text_io.StringIO()
    bar = ProgressBar(8, True, stream)
    bar.frame_callback(1, "f2.exr")(0.7)  # frame 2 of 8, 70% of its tiles done
    bar.close()
    text = stream.getvalue()
    assert "1/8 frames" in text, text
    assert "1.70" not in text and "1.00/8" not in text, text


def test_a_miscased_option_is_matched_to_its_name() -> None:
    color = np.random.default_rng(0).random((8, 8, 3), dtype=np.float32)
    for call in (lambda: oidn_gpu.denoise(color, HDR=True), lambda: oidn_gpu.Denoiser(HDR=1)):
        with pytest.raises(oidn_gpu.InvalidArgumentError, match=r"did you mean 'hdr'\?"):
            call()


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_a_channels_first_image_gets_a_hint_to_put_channels_last(kind: str) -> None:
    image = np.random.default_rng(0).random((3, 16, 24), dtype=np.float32)
    if kind == "torch":
        torch = pytest.importorskip("torch")
        image = torch.from_numpy(image)
    with pytest.raises(oidn_gpu.InvalidOperationError) as err:
        oidn_gpu.denoise(image, backend="reference")
    assert "it looks channels-first, 3 x 16 x 24" in str(err.value)
    assert "image.permute(1, 2, 0)" in str(err.value)
    assert "image.transpose(1, 2, 0)" in str(err.value)
    hwc = image.permute(1, 2, 0) if kind == "torch" else image.transpose(1, 2, 0)
    assert tuple(oidn_gpu.denoise(hwc, backend="reference", quality="fast").shape) == (16, 24, 3)


def test_a_backend_that_cannot_run_here_lists_those_that_can_in_the_api() -> None:
    """As the command line says it: ``backend="cuda"`` on a machine without an NVIDIA GPU
    (hidden from a child process) names why and the backends that run here."""
    code = (
        "import numpy as np, oidn_gpu\n"
        "try:\n"
        "    oidn_gpu.denoise(np.ones((8, 8, 3), np.float32), backend='cuda')\n"
        "except oidn_gpu.UnsupportedDeviceError as err:\n"
        "    print(err)\n"
    )
    env = pythonpath_env()
    env["CUDA_VISIBLE_DEVICES"] = ""
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(
        r"the cuda backend cannot run on this machine: .+; the backends that run here: "
        r".*'reference'.* \('oidn-gpu info' lists what each sees\)\n",
        done.stdout,
    ), done.stdout
    assert "TRITON_INTERPRET" not in done.stdout


def test_inspect_takes_a_built_in_weights_name(cli) -> None:
    result = cli("inspect", "rt_hdr_alb_nrm")
    assert result.rc == 0, result.err
    assert "official:        yes, rt_hdr_alb_nrm.tza (OIDN 2.5.1)" in result.out
    assert "input:           9 channels" in result.out
    wrong = cli("inspect", "rt_hdr_alb_nrn")
    assert wrong.rc == 2
    assert "'rt_hdr_alb_nrn' is neither a file nor built-in weights" in wrong.err
    assert "'rt_hdr_alb_nrm'" in wrong.err  # the names it could be


def test_info_in_python_is_what_the_command_prints(cli) -> None:
    report = oidn_gpu.info(probe_devices=False)
    assert report.version == oidn_gpu.__version__
    assert "reference" in {backend.name for backend in report.backends}
    assert next(b for b in report.backends if b.name == "reference").available
    printed = cli("info", "--no-probe")
    assert printed.rc == 0
    # the report, then the command line's settings (the config file's and variables')
    assert printed.out.startswith(str(report).strip() + "\n")
    assert "settings" in printed.out[len(str(report)) :].lower()


def test_denoise_help_points_at_nothing_an_installed_package_lacks(cli) -> None:
    result = cli("denoise", "--help")
    assert result.rc == 0
    assert "docs/" not in result.out  # the docs folder is not installed with the package
    assert "Unreal's Movie Render Queue, LuxCore and Nuke's conventions" in " ".join(
        result.out.split()
    )
