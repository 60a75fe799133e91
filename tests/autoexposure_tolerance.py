"""How close a GPU autoexposure scale must be to the host's (`image.autoexposure`).

The GPU sums each bin in another order than OIDN's CPU lanes and evaluates
``log2``/``exp2`` with the GPU's own functions, so its scale is not bit-exact;
the tree over the bins is the host's, so it stays within 1e-6 relative while the
geometric mean luminance lies within 2^-8 .. 2^8 of the key. Beyond, the host's
own float32 rounding is coarser: its mean ``m`` of the log2 values has a ULP of
up to 2^-19 (|m| < 16), one ULP of ``m`` moves the scale by ``ln 2 * ulp(m)``
relative (6.6e-7 at |m| = 8..16), and a bin's average differing in its last bit
can flip the rounding of the host's partial sums, and WGSL lets a device's ``log2`` be
3 ULP off outside [0.5, 2] (WGSL spec, "Floating Point Accuracy"): on a constant image
every bin carries the same error, which the mean keeps. The bar is then three ULPs of
``m`` (NVIDIA's H200 Vulkan driver gave 2.65e-6 for a constant 3e-7 image, m = 19.2:
2.0 ULPs).
"""

from __future__ import annotations

import numpy as np

from oidn_gpu.image import autoexposure as ae

RTOL = 1e-6
MEAN_ULPS = 3


def autoexposure_tolerance(host: float) -> float:
    """The relative tolerance of a GPU scale against the host's scale ``host`` (> 0)."""
    mean = np.float32(np.log2(float(ae.KEY) / host))
    return max(RTOL, float(np.log(2) * MEAN_ULPS * np.spacing(np.abs(mean))))
