"""The NumPy reference backend: a fast, memory-bounded fp32 executor of a whole U-Net.

Same arithmetic as `graph.reference` (fp32 storage, fp32 BLAS accumulation),
organised for speed and bounded memory at full-HD sizes:

- **Layout.** Every activation ``[C, H, W]`` is stored channel-major with a
  one-pixel zero border, flattened per channel: ``[C, (H + 2) * (W + 2)]``,
  in the buffer slot `graph.plan` assigns it (slots are reused once values
  die). With the border in place, tap ``(kh, kw)`` of a 3x3 convolution over
  a run of consecutive pixels is one contiguous slice shifted by
  ``(kh - 1) * (W + 2) + (kw - 1)``, so im2col is 9 long memcpy-like copies
  per band, and the gemm writes straight into the destination value.
- **Bands.** Each conv works on a run of consecutive padded positions (a
  band) sized so that its im2col matrix ``[1 + 9 * I, n]`` stays around
  ``band_bytes``: plain convs on any run, conv+pool and decoder convs on
  whole rows, and at least `MIN_BANDS` bands per conv where it is large
  enough. Row 0 of that matrix is all ones and column 0 of the weight
  matrix is the bias, so the bias add is part of the gemm. Garbage computed
  at the border columns crossed between rows is zeroed after the node.
- **Threads.** The bands of a conv are handed out to ``threads`` workers (the
  calling thread and a pool), each with its own scratch; every gemm runs on a
  single BLAS thread. Workers block while they wait, so a busy machine slows a
  run down without the collapse of spinning BLAS threads, and the band plan
  does not depend on the thread count, so neither does the result.
- **Fusions.** `ConvPool` pools each band before storing it (ReLU after the
  max, which commutes with it), so the full-resolution pre-pool tensor never
  exists; `DecoderConv` assembles the upsampled and skip sources of one band
  (plus a one-row halo) in a small band buffer, so neither the upsampled nor
  the concatenated tensor exists. Unfused nodes work too.

Every gemm call has exactly ``GEMM_COLUMNS`` columns (a band's last partial
call is padded with scratch columns and its result cropped): calls of varying
width make OpenBLAS pick small-matrix and tail kernels by shape, which changes
the last bits. With the fixed shape, results on OpenBLAS's AVX-512 kernels are
bit-identical whatever the band sizes, fusion, tiling or image width. They are
not on every BLAS: OpenBLAS's AVX2 (Haswell) sgemm kernels sum a column in an
order that depends on where the column sits in the call, so other bands or
tiles change the last bits (measured: at most 1.7e-6 of the output scale).
Repeated runs of one shape, with any thread count, make the same calls on the
same data and are bit-identical everywhere. The tests check band sizes 1, 3 and all rows against
float32 rounding bounds.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np

from oidn_gpu.backends.base import (
    ExecutorBase,
    ExecutorInfo,
    ExecutorResources,
    check_network_input,
)
from oidn_gpu.backends.lru import LruCache
from oidn_gpu.backends.reference.blas_threads import BLAS_THREADS
from oidn_gpu.backends.reference.overflow import checked_output, quiet_overflow
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError
from oidn_gpu.graph import ir
from oidn_gpu.graph.passes import optimize
from oidn_gpu.graph.plan import Plan, Shape, Step, plan, size_alignment
from oidn_gpu.graph.reference import ConvParams, weight_matrix

FP32_BYTES = 4
GEMM_COLUMNS = 768
"""Columns (pixels) of every gemm call. A fixed call shape makes OpenBLAS pick the same
kernels whatever the band sizes and image width. Each call's im2col matrix is built just
before it, and at 768 columns it stays in a core's L2 for most layers. Measured on a
2-core AVX-512 host (rt_hdr_alb_nrm network, 2 threads): 256x256 with 2048/1024/768/512/256
columns 184/155/131/141/143 ms; 1080p with 2048/1024/768/512 columns 4.4/4.6/3.9-4.0/
4.0-4.5 s."""
DEFAULT_BAND_BYTES = 24 << 20
"""Target im2col band size: measured fastest around 16-32 MiB on a 2-core AVX-512 host
(small enough to stay in cache between the copies and the gemm)."""

MIN_BANDS = 8
"""Bands a conv is cut into at least (where it is large enough), so that every thread has
work and a thread the OS holds back delays the layer by a small part. The band plan never
depends on the thread count, so neither do the numbers."""

MIN_BAND_CALLS = 4
"""Gemm calls a band of rows spans at least when `MIN_BANDS` lowers its size."""

MAX_DEFAULT_THREADS = 8
"""Cap of the default thread count: a 256x256 image has about 8 bands in most layers,
and its deepest layers only one or two."""

_TAPS = tuple((kh, kw) for kh in range(3) for kw in range(3))


class NetworkModel(Protocol):
    """What the executor needs of a model (`model.unet.ValidatedModel` satisfies it)."""

    @property
    def graph(self) -> ir.Graph: ...

    @property
    def convs(self) -> Mapping[str, ConvParams]: ...


def check_threads(threads: Any) -> int | None:
    """``threads`` (OIDN's ``numThreads``) checked: None or an int >= 1; the one check of
    the reference backend's ``threads`` option.

    Raises:
        InvalidArgumentError: anything else.
    """
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        raise InvalidArgumentError(f"threads must be an int >= 1 or None, got {threads!r}")
    return threads


def padded_value_bytes(name: str, shape: Shape) -> int:
    """Storage of one value here: fp32 ``[C, H + 2, W + 2]`` (one-pixel zero border)."""
    del name
    return shape.channels * (shape.height + 2) * (shape.width + 2) * FP32_BYTES


@dataclass
class _Scratch:
    """One worker's flat scratch buffers (each band runs on one worker's set)."""

    patches: np.ndarray  # im2col matrices
    spill: np.ndarray  # the last partial gemm call of a band
    band: np.ndarray  # decoder band inputs
    pooled: np.ndarray  # pre-pool band outputs

    @property
    def arrays(self) -> list[np.ndarray]:
        return [self.patches, self.spill, self.band, self.pooled]


_Job = Callable[[_Scratch], None]
"""One band of a conv, run by a worker with its own scratch."""


@dataclass
class _Prepared:
    """Shape-dependent state: the plan, one array per slot, scratch per worker, band sizes."""

    plan: Plan
    slots: list[np.ndarray]
    sizes: tuple[int, int, int, int]  # elements of each scratch buffer (see `_Scratch`)
    bands: dict[str, int]  # node -> band size: columns (Conv) or rows (ConvPool, DecoderConv)
    scratch: list[_Scratch]

    def scratch_for(self, workers: int) -> list[_Scratch]:
        """The scratch sets of ``workers`` workers, allocating the missing ones."""
        while len(self.scratch) < workers:
            patches, spill, band, pooled = self.sizes
            self.scratch.append(
                _Scratch(
                    # zeros: the stale columns past a band's end must hold finite values
                    patches=np.zeros(patches, np.float32),
                    spill=np.empty(spill, np.float32),
                    band=np.empty(band, np.float32),
                    pooled=np.empty(pooled, np.float32),
                )
            )
        return self.scratch[:workers]

    @property
    def arrays(self) -> list[np.ndarray]:
        return [*self.slots, *(a for s in self.scratch for a in s.arrays)]

    @property
    def byte_size(self) -> int:
        arrays = self.arrays
        return sum(a.nbytes for a in arrays)

    def value(self, name: str) -> np.ndarray:
        """The ``[C, (H + 2) * (W + 2)]`` view of a value in its slot."""
        shape = self.plan.shapes[name]
        size = shape.channels * (shape.height + 2) * (shape.width + 2)
        return self.slots[self.plan.slot_of[name]][:size].reshape(shape.channels, -1)


def _grid(flat: np.ndarray, shape: Shape) -> np.ndarray:
    return flat.reshape(flat.shape[0], shape.height + 2, shape.width + 2)


def _zero_border(grid: np.ndarray) -> None:
    grid[:, 0, :] = 0
    grid[:, -1, :] = 0
    grid[:, :, 0] = 0
    grid[:, :, -1] = 0


def _im2col(src: np.ndarray, row_stride: int, start: int, n: int, out: np.ndarray) -> np.ndarray:
    """Patch matrix ``[1 + 9 * C, round_up(n, GEMM_COLUMNS)]`` of ``n`` positions from ``start``.

    ``src`` is ``[C, L]`` with rows of ``row_stride`` pixels. Row 0 of the
    result is ones (the bias column of the weight matrix multiplies it);
    columns past ``n`` are stale scratch whose gemm results are discarded.
    """
    channels = src.shape[0]
    columns = _round_up(n, GEMM_COLUMNS)
    patches = out[: (1 + 9 * channels) * columns].reshape(1 + 9 * channels, columns)
    patches[0, :n] = 1.0
    for tap, (kh, kw) in enumerate(_TAPS):
        offset = start + (kh - 1) * row_stride + (kw - 1)
        patches[1 + tap * channels : 1 + (tap + 1) * channels, :n] = src[:, offset : offset + n]
    return patches


def _gemm(
    weights: np.ndarray,
    src: np.ndarray,
    row_stride: int,
    start: int,
    out: np.ndarray,
    scratch: _Scratch,
) -> None:
    """``out [O, n]`` = the conv of ``n`` positions of ``src`` from ``start`` (bias included).

    Runs as gemm calls of exactly GEMM_COLUMNS columns, each on the im2col matrix of
    its own columns built just before it (still in cache when the gemm reads it).
    Every call has the same shape, so OpenBLAS picks the same kernels whatever the
    band sizes or image width (see the module docstring for what still varies). The
    last partial call lands in the scratch's ``spill`` and is copied.
    """
    n = out.shape[1]
    for first in range(0, n, GEMM_COLUMNS):
        count = min(GEMM_COLUMNS, n - first)
        patches = _im2col(src, row_stride, start + first, count, scratch.patches)
        if count == GEMM_COLUMNS:
            np.matmul(weights, patches, out=out[:, first : first + count])
        else:
            tail = scratch.spill[: weights.shape[0] * GEMM_COLUMNS].reshape(weights.shape[0], -1)
            np.matmul(weights, patches, out=tail)
            out[:, first:] = tail[:, :count]


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def default_threads() -> int:
    """Threads used when none are given: the usable cores, 1 to `MAX_DEFAULT_THREADS`.

    Every core, as OIDN's CPU device does: the threads take whole bands and block
    (never spin) while they wait, so other processes on the cores slow a run down
    without collapsing it. Measured on a 2-core host with load average 5 (256x256
    rt_hdr_alb_nrm network): 1 thread 0.75-0.90 s, 2 threads 0.38-0.73 s. (OpenBLAS's
    own threads spin at its barriers: 2 of them took 4.0-6.8 s there, against 1.0 s
    for one, which is why every gemm here runs single-threaded.)
    """
    return max(1, min(MAX_DEFAULT_THREADS, usable_cores()))


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _bands(height: int, rows: int) -> Iterable[tuple[int, int]]:
    for y0 in range(0, height, rows):
        yield y0, min(y0 + rows, height)


def _band_rows(rows_max: int, height: int, row_stride: int, step: int) -> int:
    """Rows per band (a multiple of ``step``, at most ``rows_max``) wasting the fewest gemm columns.

    A band of ``r`` rows computes ``(r - 1) * row_stride + W`` columns rounded up to
    GEMM_COLUMNS; ``rows_max`` is first lowered so that the image has at least
    `MIN_BANDS` bands (work for every thread) while a band still spans at least
    `MIN_BAND_CALLS` gemm calls (shorter bands would waste too many padding
    columns), then among the sizes from half of it the one with the smallest padding
    fraction (in whole percent) is taken, the largest of those.
    """
    rows_min_calls = -(-MIN_BAND_CALLS * GEMM_COLUMNS // row_stride)
    rows_max = min(rows_max, max(-(-height // MIN_BANDS), rows_min_calls))
    rows_max = max(step, min(rows_max, height) // step * step)
    width = row_stride - 2

    def waste(rows: int) -> int:
        n = (rows - 1) * row_stride + width
        return round(100 * (_round_up(n, GEMM_COLUMNS) - n) / n)

    candidates = range(max(step, rows_max // 2 // step * step), rows_max + 1, step)
    return min(candidates, key=lambda r: (waste(r), -r))


class ReferenceExecutor(ExecutorBase):
    """fp32 NumPy executor of a model's network (implements `NetworkExecutor`).

    Args:
        model: object with ``.graph`` (an `ir.Graph`, usually unfused) and
            ``.convs`` (layer name -> weights with ``weight (O, I, 3, 3)`` and
            ``bias (O,)``), e.g. `model.unet.ValidatedModel`.
        fuse: run the fused graph (`graph.passes.optimize` with
            ``channel_align=1``); False runs every node unfused.
        band_bytes: target size of one im2col band in bytes.
        band_rows: fixed rows per band instead (rounded up to even for
            conv+pool); for tests of band independence.
        shape_cache_size: how many input sizes keep their buffers.
        threads: threads that run the bands of each conv (OIDN's ``numThreads``); the
            calling thread is one of them, the others are this executor's pool. BLAS is
            set to one thread during `run`, whichever thread calls it
            (`blas_threads.thread_setter`), and restored after. None: `default_threads`
            (the usable cores, 1 to 8), but never more than the BLAS's current setting,
            so ``OPENBLAS_NUM_THREADS`` and an enclosing ``threadpoolctl.threadpool_limits``
            still cap it. The result does not depend on it: the bands and every gemm
            call are the same.

    Every size's buffers are reused by the next run of that size, so `run`,
    `prewarm` and `close` hold a per-executor lock: threads sharing one executor
    take turns.

    Raises:
        InvalidArgumentError: missing or mis-shaped weights, bad options.
    """

    def __init__(
        self,
        model: NetworkModel,
        *,
        fuse: bool = True,
        band_bytes: int = DEFAULT_BAND_BYTES,
        band_rows: int | None = None,
        shape_cache_size: int = 1,
        threads: int | None = None,
    ) -> None:
        if band_bytes < 1 or (band_rows is not None and band_rows < 1) or shape_cache_size < 1:
            raise InvalidArgumentError(
                f"band_bytes {band_bytes}, band_rows {band_rows} and shape_cache_size "
                f"{shape_cache_size} must all be at least 1"
            )
        self._threads = check_threads(threads)
        graph = model.graph
        self._graph = (
            optimize(graph, channel_align=1)
            if fuse
            else optimize(graph, conv_pool=False, decoder=False)
        )
        self._weights = {conv.name: self._pack(conv, model.convs) for conv in self._graph.convs()}
        self._alignment = size_alignment(self._graph)
        self._band_bytes = band_bytes
        self._band_rows = band_rows
        self._prepared: LruCache[tuple[int, int], _Prepared] = LruCache(shape_cache_size)
        self._lock = threading.Lock()
        self._closed = False
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0
        self._pool_pid = os.getpid()

    @staticmethod
    def _pack(conv: ir.Conv, convs: Mapping[str, ConvParams]) -> np.ndarray:
        """``[O, 1 + 9 * I]`` fp32: column 0 the bias, then `weight_matrix` order."""
        try:
            params = convs[conv.name]
        except KeyError:
            raise InvalidArgumentError(f"no weights for conv layer '{conv.name}'") from None
        expected = (conv.out_channels, conv.in_channels, 3, 3)
        if tuple(params.weight.shape) != expected or tuple(params.bias.shape) != expected[:1]:
            raise InvalidArgumentError(
                f"conv '{conv.name}' weights have shapes {tuple(params.weight.shape)} and "
                f"{tuple(params.bias.shape)}; expected {expected} and {expected[:1]}"
            )
        packed = np.empty((conv.out_channels, 1 + 9 * conv.in_channels), np.float32)
        packed[:, 0] = params.bias
        packed[:, 1:] = weight_matrix(params.weight, np.float32)
        return packed

    @property
    def graph(self) -> ir.Graph:
        """The graph this executor runs (fused unless ``fuse=False``)."""
        return self._graph

    # -- shape-dependent preparation -------------------------------------------------

    def _band_for(self, step: Step) -> int:
        """Band size of a conv step: columns for `Conv`, rows for `ConvPool`/`DecoderConv`."""
        node = step.node
        if not isinstance(node, (ir.Conv, ir.ConvPool, ir.DecoderConv)):
            return 0
        full = step.input_shapes[0] if isinstance(node, ir.ConvPool) else step.output_shape
        wp = full.width + 2
        k = 1 + 9 * sum(s.channels for s in step.input_shapes)
        if isinstance(node, ir.Conv):
            if self._band_rows:
                columns = self._band_rows * wp
            else:  # at least MIN_BANDS bands where the layer has that many gemm calls
                calls = -(-full.height * wp // GEMM_COLUMNS)
                columns = min(self._band_bytes // (k * 4), -(-calls // MIN_BANDS) * GEMM_COLUMNS)
            return max(1, columns // GEMM_COLUMNS) * GEMM_COLUMNS
        step_rows = 2 if isinstance(node, ir.ConvPool) else 1
        if self._band_rows:
            return min(_round_up(self._band_rows, step_rows), full.height)
        rows_max = self._band_bytes // (k * wp * FP32_BYTES)
        return _band_rows(rows_max, full.height, wp, step_rows)

    def _prepare(self, height: int, width: int) -> _Prepared:
        key = (height, width)
        known = self._prepared.get(key)
        if known is not None:
            return known
        execution = plan(self._graph, height, width, value_bytes=padded_value_bytes)
        bands: dict[str, int] = {}
        patches = spill = band = pooled = 0
        for step in execution.steps:
            node, out = step.node, step.output_shape
            size = bands[node.name] = self._band_for(step)
            if not size:
                continue
            full = step.input_shapes[0] if isinstance(node, ir.ConvPool) else out
            wp = full.width + 2
            k = 1 + 9 * sum(s.channels for s in step.input_shapes)
            patches = max(patches, k * GEMM_COLUMNS)
            spill = max(spill, out.channels * GEMM_COLUMNS)
            if isinstance(node, ir.DecoderConv):
                band = max(band, (k - 1) // 9 * (size + 2) * wp)
            if isinstance(node, ir.ConvPool):
                pooled = max(pooled, out.channels * size * wp)
        self._prepared.make_room()  # the evicted buffers are freed before these are made
        prepared = _Prepared(
            plan=execution,
            slots=[np.empty(size // FP32_BYTES, np.float32) for size in execution.slot_bytes],
            sizes=(patches, spill, band, pooled),
            bands=bands,
            scratch=[],
        )
        self._prepared.put(key, prepared)
        return prepared

    def prewarm(self, shapes: Iterable[tuple[int, int]]) -> None:
        """Plan and allocate for each ``(H, W)``; only the last ``shape_cache_size`` stay."""
        with self._lock:
            self._check_open()
            workers = self.workers()
            for height, width in shapes:
                self._prepare(int(height), int(width)).scratch_for(workers)

    # -- execution -------------------------------------------------------------------

    def run(self, x: np.ndarray) -> np.ndarray:
        """Run the network.

        Args:
            x: ``[C_in, H, W]`` float32, H and W multiples of 16 (of the graph's
                size alignment).

        Returns:
            ``[3, H, W]`` float32 (the graph output's channels).

        Raises:
            InvalidArgumentError: bad input.
            InvalidOperationError: the executor is closed.
        """
        with self._lock:
            self._check_open()
            x = check_network_input(x, self._graph.input_channels, self._alignment)
            workers = self.workers()
            # Every gemm runs single-threaded: the parallelism is the bands (`_each`).
            with BLAS_THREADS.limit(1), quiet_overflow():
                return checked_output(self._run(x, workers))

    def workers(self) -> int:
        """Threads the next `run` uses (see ``threads``)."""
        if self._threads is not None:
            return self._threads
        return min([default_threads(), *BLAS_THREADS.caller_setting()])

    def _run(self, x: np.ndarray, workers: int) -> np.ndarray:
        prep = self._prepare(x.shape[1], x.shape[2])
        scratch = prep.scratch_for(workers)
        graph = self._graph
        shapes = prep.plan.shapes
        source = _grid(prep.value(graph.input), shapes[graph.input])
        source[:, 1:-1, 1:-1] = x
        _zero_border(source)
        for step in prep.plan.steps:
            self._run_step(prep, step.node, scratch)
        result = _grid(prep.value(graph.output), shapes[graph.output])
        return np.ascontiguousarray(result[:, 1:-1, 1:-1])

    def _each(self, jobs: Sequence[Callable[[_Scratch], None]], scratch: list[_Scratch]) -> None:
        """Run every job (a band) once, on up to ``len(scratch)`` threads, each with its scratch.

        The calling thread is one of the workers; the others come from this executor's
        pool. Bands are handed out in order as workers free up, so a worker that the OS
        holds back takes fewer of them. Which worker runs a band does not change its
        numbers: every gemm is single-threaded and its shape fixed.
        """
        workers = min(len(scratch), len(jobs))
        if workers <= 1:
            for job in jobs:
                job(scratch[0])
            return
        lock = threading.Lock()
        taken = iter(range(len(jobs)))
        failed = threading.Event()

        def work(own: _Scratch) -> None:
            while not failed.is_set():
                with lock:
                    index = next(taken, None)
                if index is None:
                    return
                try:
                    with quiet_overflow():  # this thread's NumPy error state
                        jobs[index](own)
                except BaseException:
                    failed.set()
                    raise

        if self._pool_pid != os.getpid():  # a forked child has none of the parent's threads
            self._pool, self._pool_pid = None, os.getpid()
        if self._pool is None or self._pool_size < workers - 1:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            self._pool = ThreadPoolExecutor(workers - 1, thread_name_prefix="oidn-gpu-reference")
            self._pool_size = workers - 1
        futures = [self._pool.submit(work, own) for own in scratch[1:workers]]
        try:
            work(scratch[0])
        finally:
            wait(futures)
        for future in futures:
            future.result()  # re-raise a worker's exception

    def _run_step(self, prep: _Prepared, node: ir.Node, scratch: list[_Scratch]) -> None:
        shapes = prep.plan.shapes
        dst = prep.value(node.name)
        if isinstance(node, ir.Conv):
            self._each(self._conv(prep, node, dst), scratch)
        elif isinstance(node, ir.ConvPool):
            self._each(self._conv_pool(prep, node, dst), scratch)
        elif isinstance(node, ir.DecoderConv):
            self._each(self._decoder(prep, node, dst), scratch)
        elif isinstance(node, ir.Pool):
            src = _grid(prep.value(node.input), shapes[node.input])[:, 1:-1, 1:-1]
            out = _grid(dst, shapes[node.name])[:, 1:-1, 1:-1]
            np.maximum(src[:, 0::2, 0::2], src[:, 0::2, 1::2], out=out)
            np.maximum(out, src[:, 1::2, 0::2], out=out)
            np.maximum(out, src[:, 1::2, 1::2], out=out)
        elif isinstance(node, ir.Upsample):
            src = _grid(prep.value(node.input), shapes[node.input])[:, 1:-1, 1:-1]
            out = _grid(dst, shapes[node.name])
            for i in (1, 2):
                for j in (1, 2):
                    out[:, i:-1:2, j:-1:2] = src
        elif isinstance(node, ir.Concat):
            first = 0
            for value in node.inputs:
                part = prep.value(value)
                dst[first : first + part.shape[0]] = part
                first += part.shape[0]
        else:
            raise InvalidArgumentError(f"unknown node type {type(node).__name__}")
        _zero_border(_grid(dst, shapes[node.name]))

    def _conv(self, prep: _Prepared, node: ir.Conv, dst: np.ndarray) -> list[_Job]:
        """``[I, H, W] -> [O, H, W]`` over runs of consecutive positions, written in place.

        Positions run from the first to the last interior pixel in padded
        row-major order; the border columns crossed on the way get garbage,
        which `_run_step` zeroes afterwards. One job per run.
        """
        shape = prep.plan.shapes[node.name]
        src = prep.value(node.input)
        weights, wp = self._weights[node.name], shape.width + 2
        relu = node.activation is ir.Activation.RELU
        first, end = wp + 1, shape.height * wp + shape.width + 1

        def job(start: int, own: _Scratch) -> None:
            n = min(prep.bands[node.name], end - start)
            out = dst[:, start : start + n]
            _gemm(weights, src, wp, start, out, own)
            if relu:
                np.maximum(out, 0, out=out)

        return [partial(job, start) for start in range(first, end, prep.bands[node.name])]

    def _conv_pool(self, prep: _Prepared, node: ir.ConvPool, dst: np.ndarray) -> list[_Job]:
        """``[I, H, W] -> [O, H/2, W/2]``: each band of rows is pooled, then ReLU'd, into dst."""
        conv = node.conv
        full = prep.plan.shapes[conv.input]
        src = prep.value(conv.input)
        weights, wp, width = self._weights[conv.name], full.width + 2, full.width
        relu = conv.activation is ir.Activation.RELU
        out_grid = _grid(dst, prep.plan.shapes[node.name])
        left, right = slice(1, width + 1, 2), slice(2, width + 2, 2)

        def job(y0: int, y1: int, own: _Scratch) -> None:
            rows = y1 - y0
            start, n = (y0 + 1) * wp + 1, (rows - 1) * wp + width
            band = own.pooled[: conv.out_channels * rows * wp].reshape(conv.out_channels, -1)
            _gemm(weights, src, wp, start, band[:, 1 : 1 + n], own)
            grid = band.reshape(conv.out_channels, rows, wp)
            pooled = out_grid[:, 1 + y0 // 2 : 1 + y1 // 2, 1:-1]
            np.maximum(grid[:, 0::2, left], grid[:, 0::2, right], out=pooled)
            np.maximum(pooled, grid[:, 1::2, left], out=pooled)
            np.maximum(pooled, grid[:, 1::2, right], out=pooled)
            if relu:
                np.maximum(pooled, 0, out=pooled)

        return [partial(job, y0, y1) for y0, y1 in _bands(full.height, prep.bands[node.name])]

    def _decoder(self, prep: _Prepared, node: ir.DecoderConv, dst: np.ndarray) -> list[_Job]:
        """Upsample + concat + conv: each band's input (with halo rows) is built, then convolved."""
        shape = prep.plan.shapes[node.name]
        weights, wp, width = self._weights[node.conv.name], shape.width + 2, shape.width
        channels = node.conv.in_channels
        relu = node.conv.activation is ir.Activation.RELU

        def job(y0: int, y1: int, own: _Scratch) -> None:
            rows = y1 - y0
            band = own.band[: channels * (rows + 2) * wp].reshape(channels, -1)
            self._assemble(prep, node, band.reshape(channels, rows + 2, wp), y0, y1)
            n = (rows - 1) * wp + width
            start = (y0 + 1) * wp + 1
            out = dst[:, start : start + n]
            _gemm(weights, band, wp, wp + 1, out, own)
            if relu:
                np.maximum(out, 0, out=out)

        return [partial(job, y0, y1) for y0, y1 in _bands(shape.height, prep.bands[node.name])]

    @staticmethod
    def _assemble(
        prep: _Prepared, node: ir.DecoderConv, band: np.ndarray, y0: int, y1: int
    ) -> None:
        """Fill ``band [I, rows + 2, W + 2]`` with padded rows ``y0 .. y1 + 1`` of the concat."""
        width = band.shape[2] - 2
        first = 0
        for source in node.sources:
            value = prep.value(source.value)
            part = band[first : first + source.channels]
            if source.upsample:
                grid = _grid(value, prep.plan.shapes[source.value])
                # padded full-res row/column r reads padded half-res (r + 1) // 2
                # (borders map to borders).
                half_rows = grid[:, (np.arange(y0, y1 + 2) + 1) // 2, 1:-1]
                part[:, :, 1 : width + 1 : 2] = half_rows
                part[:, :, 2 : width + 2 : 2] = half_rows
                part[:, :, 0] = 0
                part[:, :, -1] = 0
            else:
                wp = width + 2
                part.reshape(source.channels, -1)[:] = value[:, y0 * wp : (y1 + 2) * wp]
            first += source.channels

    # -- introspection and lifetime --------------------------------------------------

    def info(self) -> ExecutorInfo:
        """Backend ``'reference'``, fp32, and the computation chosen per layer."""
        kernels = {}
        for node in self._graph.nodes:
            if isinstance(node, ir.Conv):
                kernels[node.name] = "im2col-sgemm"
            elif isinstance(node, ir.ConvPool):
                kernels[node.conv.name] = "im2col-sgemm+maxpool"
            elif isinstance(node, ir.DecoderConv):
                kernels[node.conv.name] = "upsample+concat+im2col-sgemm"
            else:
                kernels[node.name] = type(node).__name__.lower()
        threads = self.workers()
        device = f"cpu ({threads} thread{'s' * (threads != 1)}, numpy {np.__version__})"
        return ExecutorInfo("reference", device, "fp32", MappingProxyType(kernels))

    def resources(self) -> ExecutorResources:
        """Prepared sizes and the bytes held (activation slots, scratch, packed weights)."""
        with self._lock:
            held = [p.byte_size for p in self._prepared.values()]
            count = sum(len(p.arrays) for p in self._prepared.values()) + len(self._weights)
            weights = sum(w.nbytes for w in self._weights.values())
            return ExecutorResources(tuple(self._prepared), count, sum(held) + weights)

    def close(self) -> None:
        """Release every buffer; later calls to `run` raise `InvalidOperationError`.

        Waits for a `run` in another thread to finish first.
        """
        with self._lock:
            self._prepared.clear()
            self._weights = {}
            self._closed = True
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidOperationError("the reference executor is closed")
