"""Ray and OpenImageIO for a machine without a package index, packed small.

A GPU machine that cannot reach PyPI still runs the render farm (``oidn-gpu denoise
... --ray``) when Ray, OpenImageIO and Ray's own dependencies travel with the checkout.
Ray's wheel is about 80 MB, most of it a Java jar, the dashboard's web client, the
libraries built on Ray (RLlib, Tune, Train, Serve, Data, ...), the cloud providers of the
autoscaler and debug symbols; a farm of local actors needs none of them. ``build``
downloads the wheels for the target Python (pip, cp3XY manylinux x86-64), unpacks them
into one folder, removes those parts, strips the symbols of the native code and packs the
folder as one ``.tar.xz``. ``unpack`` extracts it on the target machine and removes the
dependencies that the machine's Python already has at a version Ray accepts, so that the
payload never shadows a package that other code there relies on.

    python3 scripts/device_payload.py build                 # .payload/ray-site-cp312.tar.xz
    python3 scripts/device_payload.py build --python 3.11 --out /tmp/p   # for this machine
    python3 scripts/device_payload.py unpack .payload /tmp/ray-site      # on the target

Then put the folder first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import lzma
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

RAY = "ray==2.60.0"
OPENIMAGEIO = "OpenImageIO==3.2.2.0"
# manylinux tags of the wheels (Ray: manylinux2014; OpenImageIO: manylinux_2_28)
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
# on the target already (torch's environment) and pulled in only by OpenImageIO
NOT_CARRIED = {"numpy"}

# Parts of the unpacked wheels that local actors never import (paths relative to the site
# folder). Ray imports its libraries lazily; the autoscaler's cloud providers are loaded
# by name only for a cluster launched on that cloud.
REMOVED = (
    "ray/jars",  # the Java worker
    "ray/dashboard/client",  # the dashboard's web page (include_dashboard=False)
    "ray/rllib",
    "ray/tune",
    "ray/train",
    "ray/serve",
    "ray/data",
    "ray/llm",
    "ray/workflow",
    "ray/util/dask",
    "ray/util/spark",
    "ray/util/horovod",
    "ray/util/lightgbm",
    "ray/util/xgboost",
    "ray/util/sgd",
    "ray/util/joblib",
    "ray/autoscaler/aws",
    "ray/autoscaler/gcp",
    "ray/autoscaler/azure",
    "ray/autoscaler/aliyun",
    "ray/autoscaler/vsphere",
    "ray/autoscaler/spark",
    "ray/autoscaler/_private/aws",
    "ray/autoscaler/_private/gcp",
    "ray/autoscaler/_private/_azure",
    "ray/autoscaler/_private/aliyun",
    "ray/autoscaler/_private/vsphere",
    "ray/autoscaler/_private/spark",
    "ray/autoscaler/_private/kuberay",
    "ray/setup-dev.py",
    "ray-2.60.0.dist-info/RECORD",  # lists the files removed here
    "OpenImageIO/bin",  # oiiotool, maketx, ...: the Python module needs none
    "OpenImageIO/share/fonts",  # for text drawn into images
    "OpenImageIO/__init__.pyi",
)
REMOVED_SUFFIXES = (".js.map", ".pyi")
ELF_MAGIC = b"\x7fELF"
# x86 branch conversion, then LZMA2 with a window that spans Ray's binaries (about
# 85 MB stripped); unpacking needs about 128 MiB of memory, packing about 1.3 GiB
XZ_FILTERS = (
    {"id": lzma.FILTER_X86},
    {"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "dict_size": 128 << 20},
)


def download(python: str, folder: Path) -> list[Path]:
    """Ray with its dependencies (no extras) and OpenImageIO, as wheels for ``python``."""
    common = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--only-binary=:all:",
        "--python-version",
        python,
        "--implementation",
        "cp",
        *[arg for platform in PLATFORMS for arg in ("--platform", platform)],
        "-d",
        str(folder),
    ]
    subprocess.run([*common, RAY], check=True)
    subprocess.run([*common, "--no-deps", OPENIMAGEIO], check=True)
    wheels = sorted(folder.glob("*.whl"))
    return [w for w in wheels if _wheel_name(w) not in NOT_CARRIED]


def _wheel_name(wheel: Path) -> str:
    return wheel.name.split("-", 1)[0].lower().replace("_", "-")


def trim(site: Path) -> int:
    """Remove what local actors do not need and strip native code; returns bytes saved."""
    before = _size(site)
    for relative in REMOVED:
        path = site / relative
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    for path in list(site.rglob("*")):
        if path.is_dir() and path.name in ("__pycache__", "tests"):
            shutil.rmtree(path)
    for path in site.rglob("*"):
        if path.is_file() and path.name.endswith(REMOVED_SUFFIXES):
            path.unlink()
    for path in [site / "ray/_raylet.so", *(site / "ray/core").rglob("*")]:
        # Ray's own binaries (built by Bazel, not patched by auditwheel: stripping a patched
        # library can break it) carry a full symbol table; the dynamic symbols stay
        if path.is_file() and _is_elf(path):
            subprocess.run(["strip", "--strip-unneeded", str(path)], check=True)
    return before - _size(site)


def _members(site: Path) -> list[Path]:
    """Every folder and file, Ray's three large binaries first and next to each other:
    they link the same libraries (gRPC, protobuf, Abseil), which the compressor's window
    then finds once."""
    big = [site / "ray/_raylet.so", *sorted((site / "ray/core/src").rglob("*"))]
    big = [p for p in big if p.is_file() and _is_elf(p)]
    rest = [p for p in sorted(site.rglob("*")) if p not in big]
    return [*[p for p in rest if p.is_dir()], *big, *[p for p in rest if not p.is_dir()]]


def _is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == ELF_MAGIC


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def build(python: str, out: Path) -> Path:
    tag = "cp" + python.replace(".", "")
    out.mkdir(parents=True, exist_ok=True)
    archive = out / f"ray-site-{tag}.tar.xz"
    with tempfile.TemporaryDirectory(prefix="device-payload-") as tmp:
        wheels = download(python, Path(tmp) / "wheels")
        site = Path(tmp) / "site"
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(site)
        for path in site.rglob("*"):  # zipfile drops the mode bits: raylet, gcs_server
            if path.is_file() and _is_elf(path):
                path.chmod(0o755)
        saved = trim(site)
        names = ", ".join(w.name for w in wheels)
        print(f"wheels: {names}")
        print(f"trimmed {saved / 2**20:.0f} MiB; {_size(site) / 2**20:.0f} MiB left")
        partial = archive.with_name(archive.name + ".partial")
        with (
            lzma.open(partial, "wb", format=lzma.FORMAT_XZ, filters=XZ_FILTERS) as xz,
            tarfile.open(fileobj=xz, mode="w|") as tar,
        ):
            for path in _members(site):
                tar.add(path, arcname=str(path.relative_to(site)), recursive=False)
        partial.replace(archive)
    print(f"{archive}: {archive.stat().st_size / 2**20:.1f} MiB")
    return archive


def _distributions(site: Path) -> dict[str, tuple[Path, importlib.metadata.Distribution]]:
    """The packages unpacked in ``site``: normalized name -> (.dist-info folder, metadata)."""
    found = {}
    for info in site.glob("*.dist-info"):
        dist = importlib.metadata.PathDistribution(info)
        found[dist.metadata["Name"].lower().replace("_", "-")] = (info, dist)
    return found


def unpack(payload: Path, dest: Path) -> None:
    """Extract every ``*.tar.xz`` of ``payload`` into ``dest``, then remove each carried
    dependency that this Python already has at a version that every carried package
    accepts (Ray itself and OpenImageIO always stay)."""
    archives = sorted(payload.glob("*.tar.xz"))
    if not archives:
        raise SystemExit(f"no .tar.xz in {payload}; build it with: {Path(__file__).name} build")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for archive in archives:
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter="tar" if hasattr(tarfile, "tar_filter") else None)
    try:
        from packaging.requirements import Requirement
    except ImportError:
        print("packaging is missing here: every carried dependency stays")
        return
    carried = _distributions(dest)
    wanted: dict[str, list] = {}
    for _, dist in carried.values():
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                wanted.setdefault(req.name.lower().replace("_", "-"), []).append(req.specifier)
    kept, dropped = [], []
    for name, (info, dist) in sorted(carried.items()):
        if name in ("ray", "openimageio"):
            continue
        try:
            have = importlib.metadata.version(name)  # dest is not on sys.path here
        except importlib.metadata.PackageNotFoundError:
            kept.append(f"{name} {dist.version}")
            continue
        if all(spec.contains(have, prereleases=True) for spec in wanted.get(name, [])):
            for file in dist.files or []:
                path = dest / file
                if path.is_file() and dest in path.resolve().parents:
                    path.unlink()
            shutil.rmtree(info, ignore_errors=True)
            dropped.append(f"{name} {have}")
        else:
            kept.append(f"{name} {dist.version} (here {have})")
    for folder in sorted(dest.iterdir()):  # packages left empty
        if folder.is_dir() and not any(p.is_file() for p in folder.rglob("*")):
            shutil.rmtree(folder)
    print(f"carried: {', '.join(kept) or 'none'}")
    print(f"this Python's own: {', '.join(dropped) or 'none'}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="download, trim and pack")
    b.add_argument("--python", default="3.12", help="target Python version (default 3.12)")
    b.add_argument("--out", type=Path, default=Path(".payload"), help="folder of the archive")
    u = sub.add_parser("unpack", help="extract on the target machine")
    u.add_argument("payload", type=Path, help="folder holding the .tar.xz")
    u.add_argument("dest", type=Path, help="folder to put first on PYTHONPATH")
    args = parser.parse_args(argv)
    if args.command == "build":
        build(args.python, args.out)
    else:
        unpack(args.payload, args.dest)


if __name__ == "__main__":
    main()
