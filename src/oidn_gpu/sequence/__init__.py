"""Denoise a list of image files (one frame or a whole sequence) with one Denoiser.

For each frame: read the beauty (and alpha) and the albedo/normal AOVs, from
separate files or from layers of the same multi-layer EXR; denoise; write the
output atomically (and optionally a noisy | denoised preview). A frame that fails
is reported and the others still run. Progress goes to stderr through tqdm
(per frame, advancing per tile within a frame); where no bar is shown (stderr is
not a terminal, as on a render farm) each frame gets one log line instead: the
frame, the layers used, the time and the output. A summary ends the run
(`SequenceSummary.line`, or `SequenceSummary.as_json` for machines).

An OpenEXR input written to an OpenEXR output keeps everything the input holds
(`oidn_gpu.image.exr`): every part, layer and channel, data and display window,
tiling, compression, pixel types and attributes. The denoised beauty replaces the
noisy one under the same channel names, or goes into a new layer beside it
(`OutputOptions.layer_name`); `OutputOptions.aovs` denoises further passes into the
same file. Other outputs hold the beauty (and its alpha) alone.

The Denoiser is created on the first frame and reused; frames whose files need
another mode (HDR vs sRGB, from the file's pixel type) get their own one.

Modules: `options` (what a run is given), `load` (a frame's images from its files),
`frame` (one frame denoised and written), `loop` (`run_sequence`), `summary` (what a
run did), `patterns` (frame numbers in file names).
"""

from oidn_gpu.sequence.frame import DenoiserPool, FrameOutcome, denoise_frame, read_summed_passes
from oidn_gpu.sequence.load import (
    NOTE_ALPHA_DROPPED,
    NOTE_NO_AUX,
    NOTE_NORMAL_WITHOUT_ALBEDO,
    FrameNote,
    LoadedFrame,
    load_frame,
    resolve_mode,
)
from oidn_gpu.sequence.loop import (
    describe_error,
    incomplete_reason,
    output_is_complete,
    run_sequence,
)
from oidn_gpu.sequence.options import (
    MODES,
    AuxSource,
    FrameJob,
    InputOptions,
    OutputOptions,
    SequenceOptions,
)
from oidn_gpu.sequence.patterns import (
    expand_frame_patterns,
    frame_pattern_files,
    has_frame_pattern,
)
from oidn_gpu.sequence.summary import FrameResult, SequenceSummary

__all__ = [
    "MODES",
    "NOTE_ALPHA_DROPPED",
    "NOTE_NORMAL_WITHOUT_ALBEDO",
    "NOTE_NO_AUX",
    "AuxSource",
    "DenoiserPool",
    "FrameJob",
    "FrameNote",
    "FrameOutcome",
    "FrameResult",
    "InputOptions",
    "LoadedFrame",
    "OutputOptions",
    "SequenceOptions",
    "SequenceSummary",
    "denoise_frame",
    "describe_error",
    "expand_frame_patterns",
    "frame_pattern_files",
    "has_frame_pattern",
    "incomplete_reason",
    "load_frame",
    "output_is_complete",
    "read_summed_passes",
    "resolve_mode",
    "run_sequence",
]
