"""The oidn backend: Intel OIDN 2.5.1's own devices (CPU, CUDA, HIP, SYCL) as a backend.

Intel OIDN runs the whole filter (autoexposure, input processing, tiling by its
``maxMemoryMB``, the network, output processing) on one of its devices; this backend
hands it the caller's images as they are (`runner.OidnRunner`), so everything above the
backend seam (the command line, sequences, the farm, temporal mode, the one-call cache)
runs on it. `capi` opens the library the ``pyoidn`` package ships, `devices` its
devices, `backend.BACKEND` is the registry entry. Importing this package needs no pyoidn.
"""
