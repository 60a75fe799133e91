"""The config file (TOML): its values stand for the ``OIDN_GPU_*`` variables; a flag beats a
variable, a variable beats the file, the file beats the default; ``oidn-gpu info`` says
which one each value comes from."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from cli_support import write_exr

from oidn_gpu.cli import settings
from oidn_gpu.model.weights import bundled_weights_dir


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No setting's variable set (the CLI tests' backend comes from the file below)."""
    for setting in settings.SETTINGS:
        monkeypatch.delenv(setting.variable, raising=False)
    monkeypatch.delenv(settings.CONFIG_VARIABLE, raising=False)
    return monkeypatch


@pytest.fixture
def broken_weights(tmp_path: Path) -> Path:
    """A weights folder whose files are not the official weights (a denoise with it fails,
    naming it)."""
    folder = tmp_path / "broken-weights"
    folder.mkdir()
    for official in bundled_weights_dir().glob("*.tza"):
        (folder / official.name).write_bytes(b"not weights")
    return folder


def _config(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "oidn-gpu.toml"
    path.write_text(text)
    monkeypatch.setenv(settings.CONFIG_VARIABLE, str(path))
    return path


def _frame(tmp_path: Path) -> Path:
    rng = np.random.default_rng(1)
    return write_exr(tmp_path / "c.exr", rng.uniform(0, 1, (16, 16, 3)).astype(np.float32))


def test_the_files_value_is_used_and_a_flag_overrides_it(
    cli, clean_env, broken_weights: Path, tmp_path: Path
) -> None:
    _config(tmp_path, f'backend = "reference"\nweights = "{broken_weights}"\n', clean_env)
    src = _frame(tmp_path)
    result = cli("denoise", src, "-o", tmp_path / "a.exr")
    assert result.rc == 1
    assert str(broken_weights) in result.err  # the file's weights folder was searched
    empty = tmp_path / "empty"
    empty.mkdir()
    result = cli("denoise", src, "-o", tmp_path / "b.exr", "--weights-dir", empty)
    assert result.rc == 0, result.err  # the flag beats the file
    assert settings.BY_KEY["weights"].variable not in os.environ  # restored after the command


def test_a_variable_beats_the_file_and_info_says_where_each_value_comes_from(
    cli, clean_env, broken_weights: Path, tmp_path: Path
) -> None:
    path = _config(
        tmp_path,
        f'backend = "reference"\nweights = "{broken_weights}"\ncuda_rows = false\n'
        "copy_threads = 3\n",
        clean_env,
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    clean_env.setenv("OIDN_GPU_WEIGHTS", str(empty))
    clean_env.setenv("OIDN_GPU_COPY_THREADS", "2")
    assert cli("denoise", _frame(tmp_path), "-o", tmp_path / "o.exr").rc == 0
    out = cli("info", "--no-probe").out
    assert f"config file: {path}" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert "reference" in lines["backend"] and "(config file;" in lines["backend"]
    assert str(empty) in lines["weights"] and "(OIDN_GPU_WEIGHTS;" in lines["weights"]
    assert " off " in lines["cuda_rows"] and "(config file)" in lines["cuda_rows"]
    assert " 2 " in lines["copy_threads"] and "(OIDN_GPU_COPY_THREADS)" in lines["copy_threads"]
    assert "(default)" in lines["cuda_tuning"]
    assert f"user weights: {empty}" in out


def test_the_platform_config_folder_is_read(
    cli, clean_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import platformdirs

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    folder = Path(platformdirs.user_config_dir("oidn-gpu", appauthor=False))
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text('cuda_tuning = "on"\n')
    out = cli("info", "--no-probe").out
    assert f"config file: {folder / 'config.toml'}" in out
    assert "(config file)" in next(line for line in out.splitlines() if "cuda_tuning" in line)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("backend = 'cuda\n", ["is not valid TOML"]),
        ("colour = 1\n", ["unknown setting 'colour'", "backend, weights"]),
        ("copy_threads = '4'\n", ['copy_threads = "4" is not a whole number']),
        ("copy_threads = true\n", ["copy_threads = true is not a whole number"]),
        ("backend = 'cpu'\n", ['backend = "cpu" is not a backend', "reference"]),
    ],
)
def test_bad_files_are_usage_errors_naming_the_file(
    cli, clean_env, tmp_path: Path, text: str, words: list[str]
) -> None:
    path = _config(tmp_path, text, clean_env)
    result = cli("info", "--no-probe")
    assert result.rc == 2
    assert f"'{path}'" in result.err
    for word in words:
        assert word in result.err


def test_a_named_file_that_is_missing_is_an_error(cli, clean_env, tmp_path: Path) -> None:
    clean_env.setenv(settings.CONFIG_VARIABLE, str(tmp_path / "nope.toml"))
    result = cli("info", "--no-probe")
    assert result.rc == 2
    assert "OIDN_GPU_CONFIG names" in result.err and "nope.toml" in result.err


def test_every_oidn_gpu_variable_of_the_package_is_a_setting() -> None:
    """A new ``OIDN_GPU_*`` variable needs its config-file key (and docs)."""
    import re

    source = Path(settings.__file__).parents[1]
    found = set()
    for path in source.rglob("*.py"):
        found |= set(re.findall(r"\"(OIDN_GPU_[A-Z0-9_]+)\"", path.read_text()))
    known = {s.variable for s in settings.SETTINGS} | {settings.CONFIG_VARIABLE}
    assert found - known == set()


def test_docs_list_every_setting() -> None:
    text = (Path(__file__).parents[2] / "docs" / "config.md").read_text()
    for setting in settings.SETTINGS:
        assert f"| `{setting.key}` | `{setting.variable}` |" in text
