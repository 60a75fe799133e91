"""What a first run says: progress in whole frames, an interrupted run's count and how to
resume, hints that name the fix (a misspelt option, a channels-first tensor, a backend that
cannot run here), and notes on inputs that are accepted but probably not meant."""

from __future__ import annotations

import io as text_io

from oidn_gpu.sequence.loop import ProgressBar


def test_the_progress_bar_counts_whole_frames() -> None:
    stream = text_io.StringIO()
    bar = ProgressBar(8, True, stream)
    bar.frame_callback(1, "f2.exr")(0.7)  # frame 2 of 8, 70% of its tiles done
    bar.close()
    text = stream.getvalue()
    assert "1/8 frames" in text, text
    assert "1.70" not in text and "1.00/8" not in text, text
