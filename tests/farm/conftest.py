"""Fixtures of the render-farm tests: one local Ray instance for the package, small frames.

Ray runs here as CI has it: two CPUs, no dashboard, and nothing that leaves the machine.
By default a Ray head finds its address by routing towards a public DNS server and its
usage-statistics module probes the cloud metadata address 169.254.169.254 (even with the
statistics off); here Ray uses the loopback address (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``,
read when ``ray`` is imported, makes Linux behave like a single-machine macOS install), and
a home folder holding an empty ``ray_bootstrap_config.yaml`` (the file a cluster launched
by ``ray up`` has) stops the probing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import farm_workers
import pytest
from farm_support import CONFIG, FRAME_COUNT, jobs_for, write_frames
from threadpoolctl import threadpool_limits

from oidn_gpu import sequence
from oidn_gpu.image import io

# before anything imports ray (farm_workers imports it only inside the workers)
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

FARM_TESTS = Path(__file__).resolve().parent


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Shut Ray down after the last farm test. This folder is no Python package, so the
    "package" of its fixtures is the whole test suite: without this, `ray_instance` (half a
    gigabyte of Ray processes) would stay up until every other test has run."""
    if nextitem is not None and FARM_TESTS in Path(str(nextitem.path)).resolve().parents:
        return
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.fixture(scope="package")
def ray_instance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A local Ray with two CPUs, started once for the farm tests and shut down after."""
    import ray  # after the environment above

    home = tmp_path_factory.mktemp("ray-home")
    (home / "ray_bootstrap_config.yaml").write_text("")
    saved_home = os.environ.get("HOME")
    os.environ["HOME"] = str(home)  # Ray's processes inherit it
    try:
        ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False)
        # the worker classes that tests define are sent to the workers by value
        ray.cloudpickle.register_pickle_by_value(farm_workers)
        yield ray
        ray.shutdown()  # where the last farm test has not done it (pytest_runtest_teardown)
    finally:
        if saved_home is None:
            del os.environ["HOME"]
        else:
            os.environ["HOME"] = saved_home


@pytest.fixture(scope="package")
def frames(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_frames(tmp_path_factory.mktemp("frames"), FRAME_COUNT)


@pytest.fixture(scope="package")
def single_process(frames: list[Path], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The outputs of the single-process frame loop (`sequence.run_sequence`), by name.

    It runs with one BLAS thread, as each farm worker of one CPU does: OpenBLAS rounds
    differently with another thread count (about 2e-6 relative on these frames).
    """
    out = tmp_path_factory.mktemp("single")
    with threadpool_limits(limits=1):
        summary = sequence.run_sequence(
            jobs_for(frames, out), CONFIG, sequence.SequenceOptions(quiet=True)
        )
    assert summary.count("done") == FRAME_COUNT, summary.failed
    return {p.name: io.read_image(p).pixels for p in sorted(out.iterdir())}
