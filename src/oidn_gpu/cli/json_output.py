"""The command line's JSON documents: one schema name and version per command's output.

Every document the tool writes with ``--json`` is a JSON object whose first keys are
``schema`` (its name, `SCHEMAS`) and ``schema_version`` (an integer raised whenever a
field changes meaning or goes away; new fields keep the version). The formats are
described in docs/json.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from oidn_gpu.files import write_bytes_atomic

# name -> version: the documents of docs/json.md
SCHEMAS = {
    "oidn-gpu.info": 1,
    "oidn-gpu.inspect": 1,
    "oidn-gpu.program-info": 1,
    "oidn-gpu.layers": 1,
    "oidn-gpu.denoise": 1,
    "oidn-gpu.bench": 1,
    "oidn-gpu.bench-temporal": 1,
}
STDOUT = "-"


def document(schema: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` under the schema's name and version (a name not in `SCHEMAS` is a bug)."""
    return {"schema": schema, "schema_version": SCHEMAS[schema], **body}


def write_document(doc: dict[str, Any], path: str | Path | None = None) -> None:
    """Print ``doc`` on stdout (``path`` None or ``-``), else write it to ``path``
    atomically."""
    text = json.dumps(doc, indent=2, allow_nan=False) + "\n"
    if path is None or str(path) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_bytes_atomic(path, text.encode("utf-8"))
