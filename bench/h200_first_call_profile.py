"""cProfile of the first cuda denoise in a fresh process (what the first call spends on).

    python bench/h200_first_call_profile.py ENGINE
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

import numpy as np
import torch

torch.zeros(1, device="cuda")
torch.cuda.synchronize()
import oidn_gpu  # noqa: E402

engine = sys.argv[1]  # auto: the cuDNN bridge while Triton compiles
rng = np.random.default_rng(1)
h, w = 1080, 1920
imgs = [rng.random((h, w, 3), dtype=np.float32) for _ in range(3)]
den = oidn_gpu.Denoiser(hdr=True, backend="cuda", engine=engine)
prof = cProfile.Profile()
t = time.perf_counter()
prof.enable()
den.denoise(*imgs)
prof.disable()
print(engine, "first denoise", round(time.perf_counter() - t, 3), "s")
stats = pstats.Stats(prof)
stats.sort_stats("cumulative").print_stats(45)
stats.sort_stats("tottime").print_stats(25)
