"""WGSL kernel generators: pure ``generate(spec) -> Kernel`` functions, text only (no wgpu).

Interface with the backends
===========================

Activation storage layout
-------------------------
Every tensor ``[C, H, W]`` is stored HWC with channels padded to vec4 blocks:
``blocks = ceil(C / 4)``; element ``value[(y * W + x) * blocks + b]`` is the vec4
of channels ``4b .. 4b+3`` (padding lanes are zero). fp16 networks store
``vec4<f16>`` (8 bytes per block), fp32 networks ``vec4<f32>`` (16 bytes). The
final conv writes fp32 (``ConvSpec.out_precision = FP32``). Buffer size of a
tensor: ``H * W * blocks * 4 * itemsize`` bytes.

Weights and bias (`kernels.weights`)
------------------------------------
``pack_conv(spec, weight[O, I, 3, 3], bias[O], kernel.weight_layout)`` returns
flat NumPy arrays: weights in ``kernel.weight_layout`` (output-major or k-major
blocked vec4, float32 or float16 per ``spec.precision``), bias float32 of
``OB * 4``. Input blocks follow the concatenated, per-source padded blocks of
the conv's sources (decoder: upsampled source first, as in the graph).

Specs (`kernels.spec`)
----------------------
``ConvSpec(sources=(ConvSource(channels, upsample), ...), out_channels,
precision, relu, pool, out_precision)``; ``ConvSpec.simple(cin, cout, ...)``.
``PoolSpec(channels, precision)``. IO specs live in `kernels.io_passes`.

Kernels and bindings (group 0, in this order)
---------------------------------------------
Conv families (`conv_direct`, `conv_igemm`, `conv_spatial`, `conv_subgroup`,
`final_rgb`; `conv_pool` and `decoder` are entry points over the same specs):

    input0 .. input{N-1}  read        sources, blocked (N = len(spec.sources))
    weights               read        packed weights (kernel.weight_layout)
    bias                  read        vec4<f32>
    output                read_write  blocked output tensor
    params                uniform     {height: u32, width: u32} = OUTPUT spatial size

``pool.generate(PoolSpec)``: ``input``, ``output``, ``params`` {height, width} of
the OUTPUT (input is 2H x 2W).

`io_passes`: ``generate_input_pack`` (``source`` f32 dense HWC, ``output``,
``params`` {height, width}); ``generate_output_unpack`` (``input``, ``output``
f32 dense, ``params`` {height, width}); ``generate_input_pass`` (``main_image``,
[``albedo_image``], [``normal_image``] as ``array<f32>``, ``output``, ``params``:
see `io_passes.input_pass_params`, ``frame``: `spec.FRAME_PARAMS` {input_scale,
output_scale}); ``generate_output_pass`` (``input``, ``output`` ``array<f32>``,
``params``: `io_passes.OUTPUT_PASS_PARAMS`, ``frame``). The per-frame uniform
holds the scales, so recorded programs can take a new input scale per frame.

Params are packed with ``kernel.pack_params(**fields)`` (16-byte padded,
little-endian; missing or unknown fields raise). Dispatch
``kernel.grid(out_channels, out_height, out_width)`` workgroups (the io
passes take the pixel rectangle they iterate over, see `io_passes`).

Shape rules the planner guarantees (trusted kernels rely on them): conv H, W
even whenever a source is upsampled or a pool is fused (the U-Net's 16-pixel
alignment), buffers at least the sizes above. ``Kernel.trusted`` is True only
when those rules put every index in range.

Kernel choice: `select.select_conv(spec, limits, kernel="auto", gemm=...)`.
"""
