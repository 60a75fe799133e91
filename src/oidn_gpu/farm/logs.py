"""Log records of the farm's workers, forwarded to the driver with the worker and frame named.

A Ray worker's stdout and stderr are not relayed to the driver (``ray.init(...,
log_to_driver=False)``: Ray's relay would interleave raw worker output, without levels,
with the driver's progress). Instead each worker keeps the records of its ``oidn_gpu``
loggers at the driver's level while it denoises a frame (`WorkerLogCapture`), hands them
back with the frame's outcome (`ForwardedRecord`: plain data, picklable), and the driver
logs them again on the same loggers (`forward`), each message followed by
``[worker N (host pid ...), frame NAME]``: the driver's handlers (the command line's
stderr and ``--log-file``) show them as they show the driver's own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

LOGGER_NAME = "oidn_gpu"
# A frame's records kept by a worker (a flood from one frame is cut there, with a note).
MAX_RECORDS_PER_FRAME = 200


@dataclass(frozen=True)
class ForwardedRecord:
    """One worker log record as plain data: the logger, level, message and when."""

    name: str
    levelno: int
    message: str
    created: float


class WorkerLogCapture(logging.Handler):
    """Keeps the ``oidn_gpu`` records a worker emits at ``level`` and above (installed for
    the worker's lifetime; `take` hands over what one frame logged)."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self._records: list[ForwardedRecord] = []
        self._dropped = 0
        logger = logging.getLogger(LOGGER_NAME)
        logger.addHandler(self)
        logger.setLevel(min(level, logger.getEffectiveLevel()))

    def emit(self, record: logging.LogRecord) -> None:
        if len(self._records) >= MAX_RECORDS_PER_FRAME:
            self._dropped += 1
            return
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: the raw message, never a lost frame
            message = str(record.msg)
        if record.exc_info:
            message += "\n" + logging.Formatter().formatException(record.exc_info)
        self._records.append(ForwardedRecord(record.name, record.levelno, message, record.created))

    def take(self) -> tuple[ForwardedRecord, ...]:
        """The records since the last `take` (and a note of any left out)."""
        records = self._records
        if self._dropped:
            note = f"{self._dropped} more record(s) of this frame left out"
            records.append(ForwardedRecord(LOGGER_NAME, logging.WARNING, note, 0.0))
        self._records, self._dropped = [], 0
        return tuple(records)

    def close(self) -> None:
        logging.getLogger(LOGGER_NAME).removeHandler(self)
        super().close()


def forward(records: tuple[ForwardedRecord, ...], worker: str, frame: str) -> None:
    """Log a worker's records on the driver's loggers, naming the worker and the frame."""
    for item in records:
        logger = logging.getLogger(item.name)
        if not logger.isEnabledFor(item.levelno):
            continue
        record = logger.makeRecord(
            item.name,
            item.levelno,
            "(worker)",
            0,
            "%s [%s, frame %s]",
            (item.message, worker, frame),
            None,
        )
        if item.created:
            record.created = item.created
            record.msecs = (item.created % 1) * 1000
        logger.handle(record)
