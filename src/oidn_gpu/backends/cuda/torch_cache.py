"""A folder for PyTorch's own CUDA kernel cache before the backend's first CUDA work.

PyTorch compiles a few elementwise CUDA kernels at run time (its "jiterator": ``exp2``,
``nan_to_num`` and the like, which the autoexposure uses) and keeps them in
``$PYTORCH_KERNEL_CACHE_PATH``, else ``$XDG_CACHE_HOME/torch/kernels``, else
``~/.cache/torch/kernels`` (ATen's ``jit_utils.cpp``). Where that folder cannot be
created (a new container user's home without ``.cache``, a read-only home), PyTorch prints
"Specified kernel cache directory could not be created! This disables kernel caching."
on the first such kernel, into the user's output. `ensure_torch_kernel_cache` creates the
folder PyTorch will use, or, where it cannot be created, points
``PYTORCH_KERNEL_CACHE_PATH`` at ``torch-kernels`` in oidn-gpu's per-user cache folder
(`oidn_gpu.user_cache`), else at a new private temporary folder of this process. A value
the user set is never changed.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import MutableMapping
from pathlib import Path

from oidn_gpu import user_cache

TORCH_CACHE_ENV_VAR = "PYTORCH_KERNEL_CACHE_PATH"


def torch_kernel_cache(environ: MutableMapping[str, str]) -> Path | None:
    """The folder PyTorch uses for its kernel cache under ``environ`` (None: no folder,
    neither the variable nor a home is set)."""
    named = environ.get(TORCH_CACHE_ENV_VAR)
    if named:
        return Path(named)
    xdg = environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "torch" / "kernels"
    home = environ.get("HOME")
    return Path(home) / ".cache" / "torch" / "kernels" if home else None


def _usable(folder: Path) -> bool:
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
    return folder.is_dir() and os.access(folder, os.R_OK | os.W_OK | os.X_OK)


def ensure_torch_kernel_cache(environ: MutableMapping[str, str] | None = None) -> Path | None:
    """Make PyTorch's kernel cache folder exist before its first use; returns the folder
    it will use (None where none could be made: PyTorch then says so itself)."""
    environ = os.environ if environ is None else environ
    if environ.get(TORCH_CACHE_ENV_VAR):
        return torch_kernel_cache(environ)  # the user's choice, kept as it is
    default = torch_kernel_cache(environ)
    if default is not None and _usable(default):
        return default
    with contextlib.suppress(OSError):
        ours = user_cache.cache_root() / "torch-kernels"
        if _usable(ours):
            environ[TORCH_CACHE_ENV_VAR] = str(ours)
            return ours
    with contextlib.suppress(OSError):
        private = Path(tempfile.mkdtemp(prefix="oidn-gpu-torch-kernels-"))
        environ[TORCH_CACHE_ENV_VAR] = str(private)
        return private
    return None
