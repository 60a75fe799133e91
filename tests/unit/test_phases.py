"""`backends.phases`: a first use's phases run with the cyclic garbage collector paused
(and restored as it was), and are logged with their times."""

from __future__ import annotations

import gc
import logging
import threading

import pytest

from oidn_gpu.backends.phases import paused_gc, timed_phase


@pytest.fixture(autouse=True)
def _collector_restored():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_the_collector_is_off_in_the_block_and_on_again_after() -> None:
    gc.enable()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():  # nested
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_the_program_turned_off_stays_off() -> None:
    gc.disable()
    with paused_gc():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_the_collector_is_back_on_after_an_error() -> None:
    gc.enable()
    with pytest.raises(ValueError), paused_gc():
        raise ValueError("in the block")
    assert gc.isenabled()


def test_blocks_of_two_threads_end_with_the_collector_on_after_the_last() -> None:
    gc.enable()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def second() -> None:
        first_in.wait()
        with paused_gc():
            second_in.set()
            first_out.wait()  # the first block has ended: this one still pauses it
            seen["after the first ended"] = gc.isenabled()

    thread = threading.Thread(target=second)
    thread.start()
    with paused_gc():
        first_in.set()
        second_in.wait()
    first_out.set()
    thread.join()
    assert seen == {"after the first ended": False}
    assert gc.isenabled()


def test_a_timed_phase_is_logged_with_its_time_when_it_returns(caplog) -> None:
    log = logging.getLogger("oidn_gpu.test_phases")
    with caplog.at_level(logging.DEBUG, logger=log.name):
        with timed_phase(log, "build the network"):
            paused = not gc.isenabled()
        with pytest.raises(RuntimeError), timed_phase(log, "a failed phase"):
            raise RuntimeError("no log record for a phase that failed")
    records = [r for r in caplog.records if hasattr(r, "phase")]
    assert [r.phase for r in records] == ["build the network"]
    assert records[0].elapsed_ms >= 0.0
    assert paused
