"""Layer names renderers give the beauty, albedo and normal AOVs, and which passes
are denoised without the albedo.

Names are compared case-insensitively with a layer's full name and with its last
component (``'ViewLayer.Denoising Albedo'`` matches ``'Denoising Albedo'``); in each
of `COLOR_LAYER_NAMES`, `ALBEDO_LAYER_NAMES` and `NORMAL_LAYER_NAMES` the first
name that a file has wins. docs/aovs.md shows `RENDERER_AOVS` as a table.

Sources (each renderer's manual and the files it writes):

* Blender Cycles, multi-layer EXR: ``<ViewLayer>.Combined``, ``<ViewLayer>.Noisy Image``
  (the beauty before denoising when Denoising Data is on; Combined is then already
  denoised), ``<ViewLayer>.Denoising Albedo``, ``<ViewLayer>.Denoising Normal`` (X, Y, Z);
  the ``DiffCol`` and ``Normal`` passes as fallbacks.
* Arnold EXR driver: beauty ``RGBA`` (root R, G, B, A, or layer ``RGBA``); AOVs
  ``albedo``, ``diffuse_albedo``, ``N``; ``denoise_albedo`` / ``denoise_normal`` in some hosts.
* V-Ray render elements: beauty in the root R, G, B, A; ``VRayDiffuseFilter`` (albedo),
  ``VRayNormals`` and ``VRayBumpNormals``.
* Redshift AOVs: beauty in the root R, G, B, A; ``DiffuseFilter`` (Diffuse Filter AOV),
  ``N`` (Normals) and ``BumpNormals``.
* RenderMan: beauty ``Ci`` (alpha ``a``); the denoiser's AOVs ``albedo`` and ``normal``.
* Karma (Houdini): beauty ``C``; AOVs ``albedo`` and ``N``.
* Octane: ``Beauty``; the Denoise Albedo and Denoise Normal render AOVs
  (``Denoise Albedo``, ``Denoise Normal``), or the info passes ``Albedo`` and ``Normal``
  (``Shading normal``).
* Motion vectors: Cycles ``<ViewLayer>.Vector``, Arnold and Karma ``motionvector``, V-Ray
  ``VRayVelocity``, Redshift ``MotionVectors``, RenderMan ``motionBack`` / ``motionFore``;
  their units and signs are in `oidn_gpu.image.motion`.
* Mitsuba 3 ``aov`` integrator: beauty in the root R, G, B, A; AOVs named by the user,
  conventionally ``albedo:albedo`` and ``nn:sh_normal`` (``albedo.R``, ``nn.X``).
* Unreal Engine Movie Render Queue, multi-layer EXR: the final image in the root R, G, B, A
  (``FinalImage``); its buffer-visualisation passes ``BaseColor`` and ``WorldNormal``.
* LuxCore film outputs: ``RGB_IMAGEPIPELINE`` / ``RGBA_IMAGEPIPELINE``, ``ALBEDO``, and
  ``AVG_SHADING_NORMAL`` (the one LuxCore's own OIDN pipeline plugin takes) or
  ``SHADING_NORMAL``.
* Nuke's compositing conventions: the beauty in ``rgba`` (root R, G, B, A), the albedo as
  ``diffuse_albedo`` or ``albedo``, world-space normals as ``Nworld`` or ``N_world``.

Passes denoised with ``--aovs`` use the beauty's albedo and normal, except passes the
albedo does not modulate (`COLOR_ONLY_AOV_NAMES`), which get the colour-only weights,
as Cycles denoises its Shadow Catcher pass without the albedo (Cycles ``passes.cpp``:
``PASS_SHADOW_CATCHER`` has ``use_denoising_albedo = false``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RendererAovs:
    """The layer names one renderer writes for the beauty and the denoising AOVs."""

    renderer: str
    beauty: tuple[str, ...]
    albedo: tuple[str, ...]
    normal: tuple[str, ...]
    # Motion-vector passes; how each one's values are read: oidn_gpu.image.motion.
    motion: tuple[str, ...] = ()


ROOT = ""  # the layer of channels without a prefix: R, G, B, A

RENDERER_AOVS: tuple[RendererAovs, ...] = (
    RendererAovs(
        "Blender Cycles",
        ("Noisy Image", "Combined"),
        ("Denoising Albedo", "DiffCol"),
        ("Denoising Normal", "Normal"),
        motion=("Vector",),
    ),
    RendererAovs(
        "Arnold",
        (ROOT, "RGBA"),
        ("albedo", "diffuse_albedo", "denoise_albedo"),
        ("N", "denoise_normal"),
        motion=("motionvector",),
    ),
    RendererAovs(
        "V-Ray",
        (ROOT, "RGB", "RGB color"),
        ("VRayDiffuseFilter",),
        ("VRayNormals", "VRayBumpNormals"),
        motion=("VRayVelocity",),
    ),
    RendererAovs(
        "Redshift",
        (ROOT, "Beauty"),
        ("DiffuseFilter",),
        ("N", "BumpNormals"),
        motion=("MotionVectors",),
    ),
    RendererAovs(
        "RenderMan", ("Ci",), ("albedo",), ("normal",), motion=("motionBack", "motionFore")
    ),
    RendererAovs("Karma", ("C",), ("albedo",), ("N",), motion=("motionvector",)),
    RendererAovs(
        "Octane",
        ("Beauty",),
        ("Denoise Albedo", "DenoiseAlbedo", "Albedo"),
        ("Denoise Normal", "DenoiseNormal", "Normal", "Shading normal"),
    ),
    RendererAovs("Mitsuba", (ROOT,), ("albedo",), ("nn", "sh_normal")),
    RendererAovs(
        "Unreal Movie Render Queue", (ROOT, "FinalImage"), ("BaseColor",), ("WorldNormal",)
    ),
    RendererAovs(
        "LuxCore",
        (ROOT, "RGB_IMAGEPIPELINE", "RGBA_IMAGEPIPELINE"),
        ("ALBEDO",),
        ("AVG_SHADING_NORMAL", "SHADING_NORMAL"),
    ),
    RendererAovs("Nuke", (ROOT, "rgba"), ("diffuse_albedo", "albedo"), ("Nworld", "N_world")),
)

# Generic names tried after the renderers' own ones.
_GENERIC_BEAUTY = ("color", "colour", "image", "rgb_color")
_GENERIC_ALBEDO = ("denoising_albedo", "diffuse_color", "base_color")
_GENERIC_NORMAL = ("normals", "shading_normal", "denoising_normal")


def _ordered(names: list[str]) -> tuple[str, ...]:
    """Unique names, first occurrence kept, compared case-insensitively."""
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        if name.casefold() not in seen:
            seen.add(name.casefold())
            out.append(name)
    return tuple(out)


# Blender's names come first: "Noisy Image" must win over the already denoised "Combined",
# and "Denoising Albedo" over the "DiffCol" pass. Renderer-specific AOV names come before
# the short shared ones ("albedo", "N", "normal").
COLOR_LAYER_NAMES: tuple[str, ...] = _ordered(
    [name for r in RENDERER_AOVS for name in r.beauty] + list(_GENERIC_BEAUTY)
)
ALBEDO_LAYER_NAMES: tuple[str, ...] = _ordered(
    [
        "Denoising Albedo",
        "VRayDiffuseFilter",
        "DiffuseFilter",
        "Denoise Albedo",
        "DenoiseAlbedo",
        "BaseColor",
        "albedo",
        "denoise_albedo",
        "diffuse_albedo",
        "DiffCol",
        *list(_GENERIC_ALBEDO),
    ]
)
NORMAL_LAYER_NAMES: tuple[str, ...] = _ordered(
    [
        "Denoising Normal",
        "VRayBumpNormals",
        "VRayNormals",
        "BumpNormals",
        "Denoise Normal",
        "DenoiseNormal",
        "WorldNormal",
        "AVG_SHADING_NORMAL",
        "Nworld",
        "N_world",
        "normal",
        "nn",
        "sh_normal",
        "Shading normal",
        "denoise_normal",
        "N",
        *list(_GENERIC_NORMAL),
    ]
)

# Motion passes, in the order they are looked for (the first one a file has wins). RenderMan's
# motionBack comes with its motionFore; oidn_gpu.image.motion reads the pair together.
MOTION_LAYER_NAMES: tuple[str, ...] = _ordered(
    [name for r in RENDERER_AOVS for name in r.motion if name != "motionFore"]
)

# One-channel depth passes, in the order they are looked for (temporal mode; optional):
# Blender's Depth (channel Z), Arnold's and Karma's Z, Mitsuba's depth.
DEPTH_LAYER_NAMES: tuple[str, ...] = ("Depth", "Z", "depth")

# Passes the albedo does not modulate: denoised with the colour-only weights by --aovs.
COLOR_ONLY_AOV_NAMES: tuple[str, ...] = (
    "Shadow Catcher",
    "shadow",
    "shadows",
    "VRayShadows",
    "VRayRawShadow",
)


def is_color_only_aov(layer_name: str) -> bool:
    """Whether ``--aovs`` denoises this layer without the albedo and normal."""
    last = layer_name.rsplit(".", 1)[-1].casefold()
    return any(last == n.casefold() for n in COLOR_ONLY_AOV_NAMES)


def is_motion_pass(layer_name: str) -> bool:
    """Whether a layer is a motion-vector pass by its name (`MOTION_LAYER_NAMES` and
    RenderMan's ``motionFore``): pixel offsets, not light, which ``--aovs`` refuses."""
    last = layer_name.rsplit(".", 1)[-1].casefold()
    names = (*MOTION_LAYER_NAMES, "motionFore")
    return any(last == n.casefold() for n in names)
