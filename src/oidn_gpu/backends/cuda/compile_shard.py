"""A child process that compiles a share of a frame's Triton kernels into Triton's disk cache.

    python -m oidn_gpu.backends.cuda.compile_shard JOB.json

``JOB.json`` holds ``{"capability": 90, "specs": [TEXT, ...]}``: Triton's
specialization texts (`kernel_specs`). Each is compiled for that compute
capability as Triton's own launch would compile it, so the launch then finds
it in the cache. Imports Triton and this package's kernels, never torch, and
needs no GPU (Triton's compiler and ``ptxas`` run on the CPU).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from oidn_gpu.backends.cuda.kernel_specs import parse_spec


def compile_spec(text: str, capability: int) -> Any:
    """Compile one specialization text for ``capability``; returns Triton's kernel."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource, make_backend

    fn, signature, constexprs, attrs, raw_options = parse_spec(text)
    target = GPUTarget("cuda", int(capability), 32)
    options = make_backend(target).parse_options(raw_options)
    source = ASTSource(fn, signature, constexprs, attrs)
    return triton.compile(source, target=target, options=options.__dict__)


def main(argv: list[str]) -> int:
    (path,) = argv
    if hasattr(os, "nice"):
        os.nice(10)  # below the caller's frames
    with open(path, encoding="utf-8") as f:
        job = json.load(f)  # written by `kernel_specs.compile_parallel`, in a private temp file
    failed = 0
    for text in job["specs"]:
        try:
            compile_spec(text, job["capability"])
        except Exception as err:  # the others still compile; the caller's frame compiles it
            failed += 1
            print(f"{type(err).__name__}: {err}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
