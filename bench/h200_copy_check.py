"""Does `Denoiser.denoise` give the same bits for a copy of its torch tensors, call after
call, per engine? (The cuda benchmark's API rows check it.) Prints, for each call, the
largest difference from the first captured frame's result."""

from __future__ import annotations

import numpy as np
import torch

import oidn_gpu
from tests.cuda.test_bench_api import TINY_AOV

for engine in ("cudnn", "triton"):
    rng = np.random.default_rng(3)
    host = [(rng.random((16, 16, 3)) * 4).astype(np.float32),
            rng.random((16, 16, 3)).astype(np.float32),
            (rng.random((16, 16, 3)) * 2 - 1).astype(np.float32)]
    same = [torch.from_numpy(a).cuda() for a in host]
    with oidn_gpu.Denoiser(hdr=True, backend="cuda", engine=engine, precision="fp16",
                           weights=str(TINY_AOV)) as den:
        outs = [den.denoise(*same) for _ in range(4)]
        copies = [den.denoise(*[t.clone() for t in same]) for _ in range(4)]
        print(engine, den.info().device)
        for name, out in [*(("same", o) for o in outs), *(("copy", o) for o in copies)]:
            print(f"  {name}: max |diff| to call 1 {float((out - outs[0]).abs().max()):.3g}, "
                  f"to call 3 {float((out - outs[2]).abs().max()):.3g}")
