"""The WGSL shipped rendered: current with the templates and generators, used without
jinja2, ignored when the templates changed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from oidn_gpu.kernels import shipped_texts
from oidn_gpu.record import kernel_texts

SRC = Path(__file__).resolve().parents[2] / "src"


def test_the_shipped_file_is_what_the_generators_make_today() -> None:
    """Fails after a template or generator change until
    ``python -m oidn_gpu.record.kernel_texts`` made the file again."""
    texts = kernel_texts.render_defaults()
    # both models on both devices, each with input, output and network kernels
    assert len(texts) >= 30
    assert all(t.startswith("// oidn_gpu.kernels.") for t in texts.values())
    assert shipped_texts.file_bytes(texts) == shipped_texts.SHIPPED_PATH.read_bytes(), (
        "the shipped WGSL is stale: run python -m oidn_gpu.record.kernel_texts"
    )


def test_a_fresh_process_generates_the_default_kernels_without_jinja2() -> None:
    """The network kernels of both default configurations on a large NVIDIA GPU come from
    the shipped file: jinja2 is never imported, nothing is rendered."""
    script = textwrap.dedent(
        """
        import json, sys
        from oidn_gpu.backends.wgpu import kernel_choice, nodes
        from oidn_gpu.graph import passes
        from oidn_gpu.kernels import shipped_texts
        from oidn_gpu.kernels.spec import Precision
        from oidn_gpu.model.weights import load_builtin
        from oidn_gpu.record.kernel_texts import DEVICES

        caps = DEVICES["nvidia-large"]
        count = 0
        for name in ("rt_hdr_alb_nrm", "rt_ldr_alb_nrm"):
            graph = passes.optimize(load_builtin(name).graph, decoder=True, channel_align=1)
            built = nodes.build_nodes(
                graph, caps, precision=Precision.FP16, kernel="auto", gemm=None
            )
            count += len(built)
        print(json.dumps({**shipped_texts.counts(), "nodes": count,
                          "jinja2": "jinja2" in sys.modules}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["nodes"] >= 30
    assert result == {
        "shipped": result["nodes"],
        "rendered": 0,
        "nodes": result["nodes"],
        "jinja2": False,
    }


def _render_pool() -> str:
    from oidn_gpu.kernels import pool
    from oidn_gpu.kernels.spec import PoolSpec, Precision

    return pool.generate(PoolSpec(32, Precision.FP16)).source


def test_a_text_is_found_by_its_arguments_and_not_used_after_a_template_change(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with shipped_texts.capture() as captured:
        rendered = _render_pool()
    assert list(captured.values()) == [rendered]
    path = tmp_path / "wgsl.json.gz"
    path.write_bytes(shipped_texts.file_bytes({next(iter(captured)): "// shipped\n"}))
    monkeypatch.setattr(shipped_texts, "SHIPPED_PATH", path)
    shipped_texts.forget()
    try:
        assert _render_pool() == "// shipped\n"  # found by the digest of its arguments
        # templates other than those the file was made from: the file is not used
        monkeypatch.setattr(shipped_texts, "templates_fingerprint", lambda: "other")
        shipped_texts.forget()
        before = shipped_texts.counts()["rendered"]
        assert _render_pool() == rendered
        assert shipped_texts.counts()["rendered"] == before + 1
    finally:
        monkeypatch.undo()
        shipped_texts.forget()


def test_capture_is_not_reentrant() -> None:
    with (
        shipped_texts.capture(),
        pytest.raises(RuntimeError, match="already active"),
        shipped_texts.capture(),
    ):
        pass
