  // Parity form: GEMM rows are the low-resolution pixels (i, j) of one output parity
  // (py, px) = (cls / 2, cls % 2), output pixel (2i + py, 2j + px); the four parities of a
  // row tile are neighbouring workgroups in a linear (x, z) grid.
  let row_count = (conv_h / 2u) * (conv_w / 2u);
  let linear_group = wid.x + wid.z * nwg.x;
  let cls = linear_group % 4u;
  let tile_m = (linear_group / 4u) * TILE_M;
  let col_tile = wid.y;
  // this parity's packed weights
  let w_class = cls * (TOTAL_K * OUT_BLOCKS * 4u);
