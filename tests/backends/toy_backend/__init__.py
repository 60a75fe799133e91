"""A toy fourth backend, registered only in the tests (`tests/backends/conftest.py`).

It is a whole backend in one folder: options, probe, an executor, the host tile
runner and a benchmark. Its executor runs the reference executor on the transposed
image with transposed 3x3 kernels (a U-Net of 3x3 convolutions, 2x2 pools and 2x
upsamples commutes with transposition), so its images are OIDN's within float
rounding, computed another way. `backend.CONTRACT_ENTRY` is how the contract
suite holds it.
"""
