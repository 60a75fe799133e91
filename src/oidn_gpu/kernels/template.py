"""The strict WGSL template renderer: jinja2 with ``StrictUndefined``, includes, const header.

Templates live in ``kernels/wgsl/*.wgsl``. The dialect is kept tiny: templates
print names, numbers and WGSL expressions that Python computed, use ``{% if %}`` for
feature branches, ``{% for %}`` over lists Python prepared (sources, unrolled rows, the
steps of a pipeline) and ``{% include %}`` for shared snippets and per-feature parts
(``wgsl/igemm/``; a generator may name the part to include). No macros: what varies
between call sites is data. A missing variable is an error.

`render` prepends, in this order: the header comment (first line, naming the
generator and its spec), ``enable`` directives, and a block of named ``const``
declarations printed from a Python dict. Output is deterministic. The text of a render
whose arguments were rendered ahead and shipped (`shipped_texts`: the default
configurations' kernels) is taken from there, without jinja2.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from oidn_gpu.errors import InvalidArgumentError, require
from oidn_gpu.kernels import shipped_texts

WGSL_DIR = Path(__file__).resolve().parent / "wgsl"
_LOG = logging.getLogger("oidn_gpu.kernels")


@dataclass(frozen=True)
class I32:
    """Marks an int constant to be declared as ``i32`` (plain ints are ``u32``)."""

    value: int


def wgsl_f32(value: float) -> str:
    """The shortest WGSL literal that rounds to the float32 nearest ``value`` (``1.5f``)."""
    v = np.float32(value)
    if not math.isfinite(float(v)):
        raise InvalidArgumentError(f"cannot print non-finite constant {value!r} in WGSL")
    text = np.format_float_scientific(v, unique=True, trim="-")
    mantissa, exponent = text.split("e")
    exp = int(exponent)
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}e{exp}f" if exp else f"{mantissa}f"


def const_decl(name: str, value: object) -> str:
    """One ``const`` declaration: bool, u32 (int), i32 (`I32`) or f32 (float)."""
    if isinstance(value, bool):
        return f"const {name}: bool = {'true' if value else 'false'};"
    if isinstance(value, I32):
        return f"const {name}: i32 = {int(value.value)}i;"
    if isinstance(value, (int, np.integer)):
        if value < 0 or value > 0xFFFFFFFF:
            raise InvalidArgumentError(f"const {name} = {value} does not fit u32")
        return f"const {name}: u32 = {int(value)}u;"
    if isinstance(value, (float, np.floating)):
        return f"const {name}: f32 = {wgsl_f32(float(value))};"
    raise InvalidArgumentError(f"unsupported const type for {name}: {type(value).__name__}")


@functools.lru_cache(maxsize=1)
def _environment():
    jinja2 = require("jinja2", "wgpu")
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(WGSL_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render(
    template: str,
    *,
    header: str,
    consts: Mapping[str, object],
    enables: tuple[str, ...] = (),
    **context: object,
) -> str:
    """Render ``wgsl/<template>`` under a header comment, enables and const block.

    Args:
        template: file name in ``kernels/wgsl``.
        header: text of the first-line comment (generator and spec); one line.
        consts: named constants, printed in insertion order as WGSL ``const``s.
        enables: WGSL ``enable`` extensions (``f16``, ``subgroups``).
        context: template variables (strings, numbers, lists, dicts Python prepared).
    """
    if "\n" in header:
        raise InvalidArgumentError("shader header must be a single line")
    digest = shipped_texts.arguments_digest(template, header, consts, enables, context)
    shipped = shipped_texts.lookup(digest)
    if shipped is not None:
        return shipped
    started = time.perf_counter()
    lines = [f"// {header}"]
    lines += [f"enable {e};" for e in enables]
    if consts:
        lines.append("")
        lines += [const_decl(k, v) for k, v in consts.items()]
    body = _environment().get_template(template).render(**context)
    text = "\n".join(lines) + "\n\n" + body.strip("\n") + "\n"
    # normalise runs of blank lines so the output stays tidy and stable
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    shipped_texts.rendered(digest, text)
    elapsed_ms = (time.perf_counter() - started) * 1e3
    # a phase record (`oidn-gpu bench --cold` counts the kernels rendered, not shipped)
    _LOG.debug(
        "rendered %s in %.1f ms",
        template,
        elapsed_ms,
        extra={"phase": "render", "elapsed_ms": elapsed_ms},
    )
    return text
