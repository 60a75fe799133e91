"""A bounded fuzz harness: seeded byte mutations, each case run in a child process.

`mutations` derives cases from valid files with a seeded `numpy.random.Generator`
(flipped bytes, truncation, overwritten header fields, spliced ranges), so a run is the
same on every machine. `run_cases` feeds them one at a time to a check function in a
spawned child process (the check is named ``module:function`` and takes the case's bytes
and a scratch folder) and sorts each outcome:

- accepted: the check returned (a string it returns is counted as a label);
- refused: it raised one of the project's exceptions (`oidn_gpu.errors.OIDNGPUError`);
- foreign: any other exception escaped (a defect: its traceback is kept);
- crash: the child died (a segfault or an abort in a native library);
- hang: no answer within the per-case timeout (the child is killed and replaced).

The child also reports its peak resident memory, so a case that allocates far more than
the file warrants shows up without exhausting the machine first.
"""

from __future__ import annotations

import importlib
import multiprocessing
import resource
import traceback
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

# Generous against a loaded 2-core CI machine: a case takes milliseconds.
CASE_TIMEOUT_S = 20.0
RETRY_FACTOR = 6  # a case that times out is tried again with this many times the time
STARTUP_TIMEOUT_S = 180.0  # the child imports NumPy, OpenImageIO and oidn_gpu first
# Values that break length and size fields: zero, one, sign bits, all ones, near-limits.
_INTERESTING_U32 = (0, 1, 2, 0x7F, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 65537)


@dataclass
class FuzzReport:
    """What happened to every case of one run."""

    cases: int = 0
    accepted: int = 0
    labels: Counter[str] = field(default_factory=Counter)  # what accepted checks returned
    refused: Counter[str] = field(default_factory=Counter)  # exception type -> count
    foreign: list[str] = field(default_factory=list)  # "case N: Type: message\ntraceback"
    crashes: list[int] = field(default_factory=list)
    hangs: list[int] = field(default_factory=list)
    peak_rss_mb: float = 0.0

    def problems(self) -> str:
        """Every defect found, for an assertion message ('' when none)."""
        lines = [f"crashed: case {i}" for i in self.crashes]
        lines += [f"hung: case {i}" for i in self.hangs]
        lines += self.foreign[:5]
        if len(self.foreign) > 5:
            lines.append(f"... and {len(self.foreign) - 5} more foreign exceptions")
        return "\n".join(lines)


def mutations(
    bases: Sequence[bytes], count: int, seed: int, *, header_byte_size: int = 512
) -> Iterator[bytes]:
    """``count`` mutated copies of ``bases`` (taken in turn), seeded by ``seed``.

    ``header_byte_size`` bytes at the start of each file (and the last as many, where a
    table of contents sits in some formats) get most of the structural mutations.
    """
    rng = np.random.default_rng(seed)
    for index in range(count):
        data = bytearray(bases[index % len(bases)])
        for _ in range(int(rng.integers(1, 3))):
            data = _mutate_once(data, rng, header_byte_size)
        yield bytes(data)


def _mutate_once(data: bytearray, rng: np.random.Generator, header: int) -> bytearray:
    if not data:
        return bytearray(rng.integers(0, 256, 16, dtype=np.uint8).tobytes())
    kind = int(rng.integers(0, 6))
    size = len(data)
    near_end = bool(rng.integers(0, 2))
    region = min(header, size)
    start = size - region if near_end else 0
    if kind == 0:  # flip a few bytes anywhere
        for _ in range(int(rng.integers(1, 9))):
            data[int(rng.integers(0, size))] ^= 1 << int(rng.integers(0, 8))
    elif kind == 1:  # truncate
        del data[int(rng.integers(0, size)) :]
    elif kind == 2:  # random bytes over part of the header (or the table at the end)
        at = start + int(rng.integers(0, region))
        data[at : at + 4] = rng.integers(0, 256, 4, dtype=np.uint8).tobytes()
    elif kind == 3:  # an interesting 32-bit value over a header field
        at = start + int(rng.integers(0, max(1, region - 4)))
        value = int(_INTERESTING_U32[int(rng.integers(0, len(_INTERESTING_U32)))])
        data[at : at + 4] = value.to_bytes(4, "little")
    elif kind == 4:  # duplicate a range (a repeated chunk or attribute)
        at = int(rng.integers(0, size))
        length = int(rng.integers(1, 64))
        data[at:at] = data[at : at + length]
    else:  # remove a range
        at = int(rng.integers(0, size))
        del data[at : at + int(rng.integers(1, 64))]
    return data


class _Child:
    """One spawned process running the check on the cases it is sent."""

    def __init__(self, check: str, folder: Path) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child_conn = context.Pipe()
        self.process = context.Process(
            target=_serve, args=(child_conn, check, str(folder)), daemon=True
        )
        self.process.start()
        child_conn.close()
        if not self.conn.poll(STARTUP_TIMEOUT_S):
            self.kill()
            raise RuntimeError(f"the fuzz child for {check} did not start")
        try:
            kind, detail = self.conn.recv()
        except EOFError:
            kind, detail = "error", f"it exited with code {self.process.exitcode}"
        if kind != "ready":
            self.kill()
            raise RuntimeError(f"the fuzz child for {check} failed to start: {detail}")

    def kill(self) -> None:
        self.process.kill()
        self.process.join()
        self.conn.close()

    def finish(self) -> float:
        """Stop the child; its peak resident memory in MB."""
        self.conn.send(None)
        peak = float(self.conn.recv()[1]) if self.conn.poll(STARTUP_TIMEOUT_S) else 0.0
        self.process.join(STARTUP_TIMEOUT_S)
        self.conn.close()
        return peak


def run_cases(
    check: str, cases: Sequence[bytes], folder: Path, *, timeout_s: float = CASE_TIMEOUT_S
) -> FuzzReport:
    """Run ``check`` (``'module:function'``, called as ``function(data, folder)``) on every
    case in a child process; see the module docstring for the outcomes. ``folder`` is the
    check's scratch folder."""
    report = FuzzReport(cases=len(cases))
    child: _Child | None = None
    try:
        for index, data in enumerate(cases):
            if child is None:
                child = _Child(check, folder)
            child.conn.send(data)
            if not child.conn.poll(timeout_s):
                # Slow is not hung on a loaded machine: once more in a new child, with
                # RETRY_FACTOR times the time, before it counts as a hang.
                child.kill()
                child = _Child(check, folder)
                child.conn.send(data)
                if not child.conn.poll(timeout_s * RETRY_FACTOR):
                    report.hangs.append(index)
                    child.kill()
                    child = None
                    continue
            try:
                kind, detail = child.conn.recv()
            except EOFError:
                report.crashes.append(index)
                child.kill()
                child = None
                continue
            if kind == "accepted":
                report.accepted += 1
                if detail:
                    report.labels[detail] += 1
            elif kind == "refused":
                report.refused[detail] += 1
            else:
                report.foreign.append(f"case {index}: {detail}")
        if child is not None:
            report.peak_rss_mb = child.finish()
            child = None
    finally:
        if child is not None:
            child.kill()
    return report


def _serve(conn: Connection, check: str, folder_name: str) -> None:
    """The child: import the check, answer 'ready', then one outcome per case."""
    try:
        from oidn_gpu.errors import OIDNGPUError

        module, _, name = check.partition(":")
        function = getattr(importlib.import_module(module), name)
    except Exception as err:
        conn.send(("error", f"{type(err).__name__}: {err}"))
        return
    warnings.simplefilter("ignore")  # warnings are outcomes the checks look at themselves
    folder = Path(folder_name)
    conn.send(("ready", ""))
    while (data := conn.recv()) is not None:
        try:
            label = function(data, folder)
            outcome = ("accepted", label if isinstance(label, str) else "")
        except OIDNGPUError as err:
            outcome = ("refused", type(err).__name__)
        except Exception as err:
            outcome = ("foreign", f"{type(err).__name__}: {err}\n{traceback.format_exc()}")
        conn.send(outcome)
    conn.send(("peak_rss_mb", _peak_rss_kb() / 1024))


def _peak_rss_kb() -> float:
    """This process's own peak resident memory: Linux's VmHWM. Not ``ru_maxrss``, which
    Linux carries across exec: a child spawned by a large pytest process would report the
    parent's size."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return float(line.split()[1])
    except OSError:
        pass
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
