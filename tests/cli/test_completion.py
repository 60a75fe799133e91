"""``oidn-gpu completion bash|zsh|fish``: each shell's script is generated from the parser,
and the bash one completes subcommands and flags when bash runs it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from oidn_gpu.cli.completion import SHELLS


@pytest.mark.parametrize("shell", SHELLS)
def test_each_shells_script_is_generated(cli, shell: str) -> None:
    result = cli("completion", shell)
    assert result.rc == 0, result.err
    assert "oidn-gpu" in result.out
    for word in ("denoise", "--input-colorspace", "--frames", "--side-by-side", "completion"):
        assert word in result.out, (shell, word)


def test_an_unknown_shell_is_a_usage_error(cli) -> None:
    result = cli("completion", "csh")
    assert result.rc == 2
    assert "invalid choice: 'csh' (choose from 'bash', 'zsh', 'fish')" in result.err


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_subcommands_and_flags(cli, tmp_path: Path) -> None:
    script = tmp_path / "oidn-gpu.bash"
    script.write_text(cli("completion", "bash").out)
    probe = f"""
source {script}
COMP_WORDS=(oidn-gpu den); COMP_CWORD=1; _shtab_oidn_gpu; echo "1:${{COMPREPLY[*]}}"
COMP_WORDS=(oidn-gpu denoise --input-col); COMP_CWORD=2; _shtab_oidn_gpu
echo "2:${{COMPREPLY[*]}}"
COMP_WORDS=(oidn-gpu completion ""); COMP_CWORD=2; _shtab_oidn_gpu; echo "3:${{COMPREPLY[*]}}"
"""
    out = subprocess.run(
        ["bash", "--norc", "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert "1:denoise" in out.splitlines()
    assert "2:--input-colorspace" in out.splitlines()
    assert "3:bash zsh fish" in out.splitlines()


@pytest.mark.parametrize("shell", [s for s in SHELLS if shutil.which(s)])
def test_the_scripts_parse_in_their_shell(cli, tmp_path: Path, shell: str) -> None:
    script = tmp_path / f"oidn-gpu.{shell}"
    script.write_text(cli("completion", shell).out)
    subprocess.run([shell, "-n", str(script)], check=True)
