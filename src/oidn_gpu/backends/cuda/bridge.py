"""The cuDNN bridge of the cuda runner: frames on cuDNN while their Triton kernels compile.

On an executor with a bridge (``engine="auto"`` on a GPU) a frame whose kernel
configuration (image dtypes and channels, output channels, transfer, HDR,
snorm, autoexposure: never the size) has no compiled Triton kernels yet runs on
cuDNN (`CompileBridge.engine_for`). Once the call has returned (`CompileBridge.start`),
a background thread has a child process (`compile_worker`) compile them into
Triton's disk cache, then runs the same frame on scratch images on a side stream,
which loads them; later frames of that configuration run on Triton. Closing the
denoiser, or the interpreter's exit, stops a compile (the child is killed).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from oidn_gpu.backends.cuda import compile_job, driver_launch, kernel_specs, shipped_kernels
from oidn_gpu.backends.cuda.cuda_driver import CudaDriverError
from oidn_gpu.backends.cuda.images import DeviceImage, describe
from oidn_gpu.backends.cuda.triton_loader import CompileStopped, interpreting, kernels
from oidn_gpu.backends.phases import log_phase, paused_gc
from oidn_gpu.errors import InvalidOperationError
from oidn_gpu.image.tiling import TilePlan

if TYPE_CHECKING:
    from oidn_gpu.backends.cuda.runner import CudaDenoiser

_LOG = logging.getLogger(__name__)


class CompileBridge:
    """The background Triton compiles of one `CudaDenoiser`.

    Attributes:
        warming: kernel configuration -> the thread compiling it (not started until
            `start`).
    """

    def __init__(self, denoiser: CudaDenoiser) -> None:
        self._denoiser = denoiser
        self.executor = denoiser.executor
        self.device = denoiser.device
        self._cuda = self.device.type == "cuda"
        self._torch = denoiser._torch
        self.warming: dict[tuple[Any, ...], threading.Thread] = {}
        self._warm_lock = threading.Lock()
        self._stop = threading.Event()
        self._children: set[Any] = set()  # compile worker processes running
        self._compile_identity: int | None = None  # see `_ready_key`

    @staticmethod
    def _kernel_config(
        images: list[DeviceImage], channels: int, mode: Any, autoexposure: bool
    ) -> tuple[Any, ...]:
        """What the compiled Triton kernels of a frame depend on (never its size)."""
        return (
            tuple((i.tensor.dtype, i.channels) for i in images),
            channels,
            mode.transfer,
            bool(mode.hdr),
            bool(mode.snorm),
            autoexposure,
        )

    def _ready_key(self, config: tuple[Any, ...]) -> tuple[Any, ...]:
        """Compiled kernels are the process's (Triton's in-memory cache): a configuration
        compiled for one denoiser is ready for every other of the same network, device,
        precision and tiles."""
        if self._compile_identity is None:  # fixed for a bridged executor (no tuning)
            ex = self.executor
            tiles = tuple(sorted(ex.tuned().items()))  # with the shipped table, the tiles
            self._compile_identity = hash((str(self.device), ex.precision, ex.graph, tiles))
        return (self._compile_identity, config)

    def engine_for(
        self,
        images: list[DeviceImage],
        channels: int,
        mode: Any,
        autoexposure: bool,
        out_image: DeviceImage | None,
        plan: TilePlan,
    ) -> str:
        """The engine of this frame: Triton, unless the bridge serves it on cuDNN while
        its kernels compile (started here on the configuration's first frame)."""
        ex = self.executor
        if not ex.bridge or ex.engine != "triton":
            return ex.engine
        config = self._kernel_config(images, channels, mode, autoexposure)
        with self._warm_lock:
            if self._ready_key(config) in _READY:
                return "triton"
            if config not in self.warming and self._load_compiled(config):
                _READY.add(self._ready_key(config))
                return "triton"
            if config not in self.warming:
                self.warming[config] = threading.Thread(
                    target=self._warm,
                    name="oidn-gpu-triton-compile",
                    daemon=True,
                    args=(config, images, out_image, channels, mode, plan, autoexposure),
                )
        return "cudnn"

    def start(self) -> None:
        """Start the background compiles that earlier bridge frames asked for (at once
        when none was: a render loop's every call asks)."""
        if not self.warming:
            return
        with self._warm_lock:
            if self._stop.is_set():
                return
            for thread in self.warming.values():
                if thread.ident is None:
                    thread.start()
                    _COMPILING.add(self)

    def stop(self, timeout: float = 60.0) -> None:
        """Stop background compiles at their next kernel and wait for them (at close, and
        at interpreter exit: a compiler thread must not outlive the process's teardown)."""
        self._stop.set()
        with self._warm_lock:
            threads = [t for t in self.warming.values() if t.ident is not None]
            for child in self._children:
                child.kill()
        for thread in threads:
            thread.join(timeout)

    def _warm(
        self,
        config: tuple[Any, ...],
        images: list[DeviceImage],
        out_image: DeviceImage | None,
        channels: int,
        mode: Any,
        plan: TilePlan,
        autoexposure: bool,
    ) -> None:
        """Compile the Triton kernels of a configuration: the frame on scratch images of
        the same dtypes and channels, on a side stream (the caller's tensors may be
        reused or freed meanwhile)."""
        torch = self._torch
        ex = self.executor
        try:
            start = time.perf_counter()
            key = self._spec_key(config) if self._cuda and not interpreting() else None
            if key is not None:
                how = self._compile(key, images, channels, mode, plan, autoexposure)
                _LOG.info("cuda: Triton kernels: %s (%.2f s)", how, time.perf_counter() - start)
            missing = kernels().UNAVAILABLE
            if missing:
                raise InvalidOperationError(missing)
            stream = torch.cuda.Stream(self.device) if self._cuda else None
            with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                scratch = [
                    describe(
                        torch.zeros(i.tensor.shape, dtype=i.tensor.dtype, device=self.device),
                        "scratch",
                    )
                    for i in images
                ]
                scratch = [
                    dataclasses.replace(s, channels=i.channels)
                    for s, i in zip(scratch, images, strict=True)
                ]
                height, width = images[0].height, images[0].width
                out = describe(
                    torch.empty((height, width, channels), dtype=torch.float32, device=self.device),
                    "output",
                )
                scale = torch.ones(1, dtype=torch.float32, device=self.device)
                recorder = (
                    kernel_specs.recording() if key is not None else contextlib.nullcontext([])
                )
                with recorder as texts:
                    self._denoiser._body(
                        scratch,
                        out,
                        mode,
                        plan,
                        autoexposure,
                        "triton",
                        scale,
                        stop=self._stop.is_set,
                    )
            if stream is not None:
                stream.synchronize()
            if key is not None:
                kernel_specs.save(key, texts)
            _LOG.info(
                "cuda: Triton kernels ready %.2f s after the first frame",
                time.perf_counter() - start,
            )
            ready = True
        except CompileStopped:
            ready = False
        except Exception as err:  # Triton is unusable here: stay on cuDNN, and say why
            ex.fallback = f"Triton kernels failed to compile ({type(err).__name__}: {err})"
            ex.engine = "cudnn"
            ready = True
        with self._warm_lock:
            if ready:
                _READY.add(self._ready_key(config))
            self.warming.pop(config, None)

    def _load_compiled(self, config: tuple[Any, ...]) -> bool:
        """Load a configuration's kernels into this process when all of them are in
        Triton's disk cache (compiled by an earlier process of this user, `oidn-gpu
        prepare`, or shipped with the package): its frames then run on Triton from the
        first, which loading costs less than a first cuDNN frame."""
        if not self._cuda or interpreting():
            return False
        if driver_launch.enabled() and self._load_through_driver(config):
            return True
        if kernels().UNAVAILABLE:
            return False
        start = time.perf_counter()
        try:
            with paused_gc():
                key = self._spec_key(config)
                if key is None:
                    return False
                shipped_kernels.install_shipped(key.triton, key.capability)
                records = kernel_specs.load(key)
                if not kernel_specs.in_cache(records):
                    return False
                with kernel_specs.recording() as seen:
                    count = kernel_specs.load_into_process(records)
                kernel_specs.save(key, seen)
        except Exception as err:  # a kernel list this Triton cannot load: compile instead
            _LOG.info("cuda: compiled kernels not loaded (%s: %s)", type(err).__name__, err)
            return False
        _LOG.info(
            "cuda: %d Triton kernels loaded from the disk cache in %.2f s",
            count,
            time.perf_counter() - start,
        )
        log_phase(_LOG, "load the compiled kernels", start)
        return True

    def _load_through_driver(self, config: tuple[Any, ...]) -> bool:
        """Load a configuration's compiled kernels with the CUDA driver (`driver_launch`:
        from the shipped package or Triton's disk cache, without importing Triton) when
        all of them are there; False (nothing loaded) otherwise, or where the driver
        refuses one."""
        start = time.perf_counter()
        try:
            with paused_gc():
                key = self._spec_key(config)
                records = kernel_specs.load(key) if key is not None else []
                if key is None or not records:
                    return False
                files = shipped_kernels.entry_files(key.triton, key.capability)
                index = self.device.index if self.device.index is not None else 0
                count = driver_launch.LAUNCHES.serve(records, files, index)
        except (ValueError, KeyError, OSError, CudaDriverError) as err:
            _LOG.info("cuda: compiled kernels not loaded by the driver (%s)", err)
            return False
        _LOG.info(
            "cuda: %d compiled kernels loaded by the CUDA driver in %.3f s",
            count,
            time.perf_counter() - start,
        )
        log_phase(_LOG, "load the compiled kernels", start)
        return True

    def _spec_key(self, config: tuple[Any, ...]) -> kernel_specs.SpecKey | None:
        """Where the kernel configuration's specializations are kept (None: Triton's
        version is unknown)."""
        version = kernel_specs.triton_version()
        if version is None:
            return None
        ex = self.executor
        major, minor = self._torch.cuda.get_device_capability(self.device)
        capability = major * 10 + minor
        parts = (
            "cuda frame kernels",
            kernel_specs.source_fingerprint(),
            capability,
            ex.precision,
            ex.graph,
            tuple(sorted(ex.tuned().items())),
            ex.fusion,
            ex.rows,
            config,
        )
        return kernel_specs.SpecKey(version, capability, kernel_specs.config_digest(parts))

    def _compile(
        self,
        key: kernel_specs.SpecKey,
        images: list[DeviceImage],
        channels: int,
        mode: Any,
        plan: TilePlan,
        autoexposure: bool,
    ) -> str:
        """Fill Triton's disk cache with the frame's kernels, out of this process: the
        shipped entries copied in, then the known specializations compiled by several
        processes at once; a configuration never seen runs its frame in one child."""
        copied = shipped_kernels.install_shipped(key.triton, key.capability)
        texts = kernel_specs.load(key)
        known = bool(texts)
        if not known:  # a new configuration: its convolutions are most likely known
            texts = kernel_specs.load_related(key)
        how = ""
        if texts:
            try:
                report = kernel_specs.compile_parallel(texts, key.capability, stop=self._stop)
            except kernel_specs.StoppedError:
                raise CompileStopped from None
            except OSError as err:
                report = None
                how = f"not compiled ahead ({err})"
            if report is not None:
                how = (
                    f"{len(texts)} known kernels compiled ahead by {report.processes} "
                    f"processes in {report.seconds:.2f} s (ok: {report.ok})"
                )
            how += f", {copied} shipped cache entries installed" if copied else ""
        if not known:
            code = self._compile_in_child(images, channels, mode, plan, autoexposure, key)
            how += f"; the frame compiled by a child process (exit code {code})"
        return how.lstrip("; ")

    def _compile_in_child(
        self,
        images: list[DeviceImage],
        channels: int,
        mode: Any,
        plan: TilePlan,
        autoexposure: bool,
        spec_key: kernel_specs.SpecKey | None = None,
    ) -> int | None:
        """Compile the frame's kernels into Triton's disk cache in a child process (no GIL
        shared with the caller's frames); the in-process pass after it loads them. A child
        that fails leaves the compile to that pass."""
        ex = self.executor
        model = ex.model
        job = compile_job.CompileJob(
            graph=model.graph,
            convs=dict(model.convs),
            spec=getattr(model, "spec", None),
            precision=ex.precision,
            device_index=self.device.index,
            images=tuple(
                (tuple(i.tensor.shape), str(i.tensor.dtype).split(".")[-1], i.channels)
                for i in images
            ),
            out_channels=channels,
            mode=mode,
            plan=plan,
            autoexposure=autoexposure,
            fused=ex.fusion,
            rows=ex.rows,
            spec_key=spec_key,
        )
        try:
            child = compile_job.start(job)
        except OSError:
            return None
        with self._warm_lock:
            self._children.add(child)
        try:
            while child.poll() is None:
                if self._stop.wait(0.05):
                    child.kill()
                    child.wait()
                    raise CompileStopped
        finally:
            with self._warm_lock:
                self._children.discard(child)
            compile_job.discard(child)
        return child.returncode

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for background Triton compiles; True when none is left running."""
        self.start()
        with self._warm_lock:
            threads = list(self.warming.values())
        for thread in threads:
            thread.join(timeout)
        with self._warm_lock:
            return not self.warming


_COMPILING: weakref.WeakSet[CompileBridge] = weakref.WeakSet()
# Kernel configurations whose Triton kernels this process has compiled (`_ready_key`).
_READY: set[tuple[Any, ...]] = set()


@atexit.register
def _stop_all_compiles() -> None:
    # A compiler thread still in Triton's C++ code when the process tears down its
    # libraries aborts the process: stop each at its next kernel and wait for it.
    for bridge in list(_COMPILING):
        bridge.stop()
