"""The ``oidn-gpu`` command-line tool: parse, call the library, print. No GPU code here.

Subcommands:
    denoise   denoise image files, multi-layer EXRs and frame sequences
    inspect   describe a .tza weights file
    info      version, optional modules, backends and adapters, what 'auto' picks
    weights   ``weights fetch`` downloads the three large official weights files
    example   print the path of the bundled example render (or copy it)
    bench     benchmark the wgpu backend (default) or ``--backend reference`` (cli/bench.py)
    record    record one whole GPU denoise (or the network) as a replayable program
    replay    run a recorded program on this machine's GPU
    program   ``program info``: what a recorded program contains (these three: cli/record.py)
    completion  the tab-completion script of bash, zsh or fish (cli/completion.py)

The ``--backend`` choices and the per-backend execution flags (``--precision``,
``--kernel``, ``--gemm``) come from the backend registry (`backends.base`): each
backend's ``Options`` says which of its options are flags, their choices and help.

Modules: `main` (the parser of every subcommand, the dispatch, errors and exit codes),
`usage` (`UsageError`, exit codes, argument types), `backend_flags` (``--backend`` and the
backend option flags), `denoise` and `inputs` (``denoise``: flags, the one
`DenoiserConfig`, files), `frames` (``--frames``), `color_flags` (``--input-colorspace``,
``--display``, ``--view``), `layers` (``--list-layers``), `inspect`, `info`, `weights`,
`example`, `completion` (shell scripts), `settings` (the config file of the ``OIDN_GPU_*``
settings), and `bench` and `record` (their own flags).

Exit codes: 0 all done, 1 failure (some frames failed or, with ``--frames``, are missing; a
download failed, ...),
2 bad usage (unknown flag, bad value, missing input, an output that cannot be
written or that is an input), 130 interrupted (Ctrl-C or SIGTERM; no partial
outputs or temporary files are left). Errors print ``error: <message>`` on stderr; a traceback
only with ``--verbose``.
"""

from oidn_gpu.cli.backend_flags import BackendFlag, backend_flags, backend_options
from oidn_gpu.cli.denoise import cmd_denoise, denoiser_config, farm_options, sequence_options
from oidn_gpu.cli.example import example_path
from oidn_gpu.cli.inputs import IMAGE_SUFFIXES, expand_inputs, map_path, plan_jobs
from oidn_gpu.cli.inspect import describe_inputs
from oidn_gpu.cli.main import COMMANDS, build_parser, main
from oidn_gpu.cli.usage import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
)

__all__ = [
    "COMMANDS",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "IMAGE_SUFFIXES",
    "BackendFlag",
    "UsageError",
    "backend_flags",
    "backend_options",
    "build_parser",
    "cmd_denoise",
    "denoiser_config",
    "describe_inputs",
    "example_path",
    "expand_inputs",
    "farm_options",
    "main",
    "map_path",
    "plan_jobs",
    "sequence_options",
]
