"""Rendered WGSL that ships with the package: a fresh process's first image renders nothing.

Rendering the default configurations' kernels from the jinja2 templates (importing
jinja2, compiling each template, rendering) is pure Python, about 0.1 s on a fast CPU
and 0.2-0.4 s on a busy GPU host, all of it on the path of a fresh process's first
wgpu image. So the texts of the default configurations ship rendered, in
``kernels/shipped/wgsl.json.gz``, and `template.render` looks each call up there first:

- an entry is keyed by the digest of everything a render reads from its caller (the
  template's name, the header, the constants, the ``enable`` directives and the template
  variables: `arguments_digest`), so a generator that asks for other text never finds
  this one;
- the file holds the fingerprint of what turns those arguments into text (the bytes of
  every template under ``kernels/wgsl`` and of ``template.py``: `templates_fingerprint`);
  when the installed templates differ from those the texts were rendered from, none is
  used;
- a render whose digest is not shipped (another device, precision, model or option)
  renders from the templates as before.

The texts are made by ``python -m oidn_gpu.record.kernel_texts`` (the kernels a first
denoise of each default configuration renders, on a device that runs nothing); a test
makes them again and compares, so the shipped file never falls behind the generators.
`counts` tells how many renders of this process were found shipped.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

KERNELS_DIR = Path(__file__).resolve().parent
WGSL_DIR = KERNELS_DIR / "wgsl"
SHIPPED_PATH = KERNELS_DIR / "shipped" / "wgsl.json.gz"
# Files whose bytes decide what a render makes of its arguments (besides WGSL_DIR's).
RENDERER_FILES = (KERNELS_DIR / "template.py",)
FORMAT = 1  # of the shipped file

_lock = threading.Lock()
_shipped: dict[str, str] | None = None
_counts = {"shipped": 0, "rendered": 0}
_capture: dict[str, str] | None = None


def templates_fingerprint() -> str:
    """SHA-256 of the renderer and every template file (names and bytes, in name order)."""
    digest = hashlib.sha256()
    files = [*RENDERER_FILES, *sorted(WGSL_DIR.rglob("*.wgsl"))]
    for path in files:
        name = path.relative_to(KERNELS_DIR).as_posix()
        data = path.read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def arguments_digest(
    template: str,
    header: str,
    consts: Mapping[str, object],
    enables: tuple[str, ...],
    context: Mapping[str, object],
) -> str:
    """The key of one render: SHA-256 of the ``repr`` of its arguments (the template
    variables in name order; the constants in their order, which the text keeps)."""
    key = (template, header, tuple(consts.items()), tuple(enables), sorted(context.items()))
    return hashlib.sha256(repr(key).encode()).hexdigest()


def _load() -> dict[str, str]:
    """The shipped texts (empty when missing, unreadable or made from other templates)."""
    try:
        data = json.loads(gzip.decompress(SHIPPED_PATH.read_bytes()))
    except (OSError, ValueError):
        return {}
    if data.get("format") != FORMAT or data.get("templates") != templates_fingerprint():
        return {}
    return dict(data.get("texts", {}))


def lookup(digest: str) -> str | None:
    """The shipped text of a render's `arguments_digest`, else None (counted either way)."""
    global _shipped
    with _lock:
        if _shipped is None:
            _shipped = _load()
        text = None if _capture is not None else _shipped.get(digest)
        _counts["shipped" if text is not None else "rendered"] += 1
        return text


def rendered(digest: str, text: str) -> None:
    """Note a text rendered from the templates (kept while `capture` is active)."""
    with _lock:
        if _capture is not None:
            _capture[digest] = text


def counts() -> dict[str, int]:
    """How many renders of this process were ``shipped`` and how many ``rendered``."""
    with _lock:
        return dict(_counts)


@contextmanager
def capture() -> Iterator[dict[str, str]]:
    """Render every kernel from the templates (no shipped text is used) and collect the
    texts by digest into the mapping yielded (for making the shipped file)."""
    global _capture
    with _lock:
        if _capture is not None:
            raise RuntimeError("shipped_texts.capture() is already active")
        _capture = texts = {}
    try:
        yield texts
    finally:
        with _lock:
            _capture = None


def file_bytes(texts: Mapping[str, str]) -> bytes:
    """The shipped file of ``texts`` (deterministic: sorted keys, no gzip timestamp)."""
    document: dict[str, Any] = {
        "format": FORMAT,
        "templates": templates_fingerprint(),
        "texts": dict(sorted(texts.items())),
    }
    text = json.dumps(document, indent=0, sort_keys=True, ensure_ascii=True)
    return gzip.compress(text.encode(), compresslevel=9, mtime=0)


def forget() -> None:
    """Drop the loaded texts (the next lookup reads the file again); for tests."""
    global _shipped
    with _lock:
        _shipped = None
