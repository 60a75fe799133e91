"""The tool's logging: ``--log-level`` and ``--log-file`` on every command, log file lines
with a timestamp, a level and the logger, messages shown once on stderr, and the library
adding no handler of its own."""

from __future__ import annotations

import argparse
import logging
import re

from cli_support import write_exr

from oidn_gpu.cli import build_parser

LINE = re.compile(
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4} (DEBUG|INFO|WARNING|ERROR) (oidn_gpu[\w.]*): "
)


def _commands(
    parser: argparse.ArgumentParser, path: str = ""
) -> dict[str, argparse.ArgumentParser]:
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                found[f"{path} {name}".strip()] = command
                found.update(_commands(command, f"{path} {name}"))
    return found


def _denoise_fast(cli, tmp_path, scene, *flags):
    """``oidn-gpu denoise`` of a small frame at quality fast with ``flags``; its result and
    the log file it was given."""
    color = write_exr(tmp_path / "c.exr", scene(16)["color_4spp"])
    log = tmp_path / "run.log"
    out = tmp_path / "out.exr"
    return cli("denoise", color, "-o", out, "--quality", "fast", *flags, "--log-file", log), log


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings}


def test_every_command_takes_the_log_flags():
    parser = build_parser()
    commands = _commands(parser)
    assert {"denoise", "info", "inspect", "program info", "weights fetch"} <= set(commands)
    assert {"--log-level", "--log-file"} <= _flags(parser)
    for name, command in commands.items():
        if name != "bench":  # its flags are the benchmark's: see the next test
            assert {"--log-level", "--log-file"} <= _flags(command), name


def test_bench_takes_the_log_flags_before_its_own(cli, tmp_path):
    log = tmp_path / "bench.log"
    bench = (
        "bench",
        "--backend",
        "reference",
        "--size",
        "16x16",
        "--runs",
        "1",
        "--warmup",
        "0",
        "--log-file",
        log,
        "--log-level",
        "debug",
    )
    result = cli(*bench, "--weights", "rt_hdr_alb_nrm_small")
    assert result.rc == 0, result.err
    result = cli(*bench, "--weights", "rt_ldr_small")  # not the benchmark's inputs
    assert result.rc == 2
    (line,) = log.read_text().splitlines()
    assert LINE.match(line) and " ERROR oidn_gpu.cli: the benchmark uses " in line


def test_log_file_lines_carry_a_timestamp_a_level_and_the_logger(cli, tmp_path, scene):
    result, log = _denoise_fast(cli, tmp_path, scene, "--no-progress")
    assert result.rc == 0, result.err
    lines = log.read_text().splitlines()
    assert lines and all(LINE.match(line) for line in lines), lines
    text = "\n".join(lines)
    assert re.search(r" INFO oidn_gpu\.sequence: frame 1/1 .*c\.exr", text)  # the run's line
    assert re.search(r" INFO oidn_gpu\.cli: 1 frame", text)  # the summary
    # each message once on stderr (the run's own line is not repeated by the handler)
    assert result.err.count("frame 1/1") == 1
    assert "1 frame" in result.err


def test_an_error_reaches_stderr_once_and_the_log_file_at_error_level(cli, tmp_path):
    log = tmp_path / "run.log"
    result = cli("inspect", tmp_path / "nope.tza", "--log-file", log)
    assert result.rc == 2
    assert result.err.splitlines() == [
        f"error: weights file '{tmp_path / 'nope.tza'}' does not exist"
    ]
    (line,) = log.read_text().splitlines()
    assert LINE.match(line) and " ERROR oidn_gpu.cli: weights file " in line


def test_quiet_keeps_stderr_to_errors_while_the_log_file_keeps_the_summary(cli, tmp_path, scene):
    result, log = _denoise_fast(cli, tmp_path, scene, "-q")
    assert result.rc == 0 and result.err == ""
    assert " INFO oidn_gpu.cli: 1 frame" in log.read_text()


def test_log_level_warning_leaves_info_out_of_both(cli, tmp_path, scene):
    result, log = _denoise_fast(cli, tmp_path, scene, "--no-progress", "--log-level", "warning")
    assert result.rc == 0
    assert "1 frame" not in result.err and " INFO " not in log.read_text()


def test_the_library_adds_no_handler_but_a_null_handler_and_the_tool_removes_its_own(cli):
    assert cli("info", "--no-probe", "-v").rc == 0
    handlers = logging.getLogger("oidn_gpu").handlers
    assert handlers and all(isinstance(h, logging.NullHandler) for h in handlers)
    assert logging.getLogger("oidn_gpu").level == logging.NOTSET  # its level put back


def test_while_a_bar_is_drawn_log_lines_go_through_tqdm_with_the_same_level(capsys):
    from tqdm import tqdm

    from oidn_gpu.cli.logs import close_logging, configure_logging, progress_safe

    configure_logging("warning")
    logger = logging.getLogger("oidn_gpu.sequence")
    try:
        with progress_safe():
            handlers = logging.getLogger("oidn_gpu").handlers
            assert any(type(h).__name__ == "_TqdmLoggingHandler" for h in handlers)
            with tqdm(total=2, file=__import__("sys").stderr, disable=False) as bar:
                logger.info("below the level")
                logger.warning("above the bar")
                bar.update(1)
    finally:
        close_logging()
    err = capsys.readouterr().err
    assert "warning: above the bar\n" in err and "below the level" not in err


def test_backend_info_shows_on_stderr_only_when_asked_but_always_in_the_log_file(capsys, tmp_path):
    from oidn_gpu.cli.logs import close_logging, configure_logging

    backend = logging.getLogger("oidn_gpu.backends.cuda.bridge")
    tool = logging.getLogger("oidn_gpu.cli")
    log = tmp_path / "run.log"
    for level, shown in ((None, False), ("info", True)):
        configure_logging(level, str(log))
        try:
            backend.info("kernels loaded (%s)", level)
            tool.info("summary (%s)", level)
        finally:
            close_logging()
        err = capsys.readouterr().err
        assert f"summary ({level})" in err
        assert (f"kernels loaded ({level})" in err) is shown
    text = log.read_text()
    assert "kernels loaded (None)" in text and "kernels loaded (info)" in text
