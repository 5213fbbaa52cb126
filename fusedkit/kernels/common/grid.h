// Grid sizes shared by the elementwise epilogue launchers of every problem. Pure CUDA (no torch
// headers), so each .cu that includes it through its launchers.h still compiles alone with nvcc.
#pragma once

#include <cstdint>

namespace fusedkit {

constexpr int64_t kMaxGridY = 65535;  // gridDim.y (and .z) limit; gridDim.x allows 2^31 - 1

// Grid size of the scalar epilogue kernels: about 16 blocks of 256 threads per SM on a 132-SM
// H200, so every SM is busy and each thread loops over several rows, which amortises block
// start-up. Measured on an H200 (p12, 1024 x 8192, y in HBM): one block row per row of y
// (32768 blocks of 256 threads) ran the scalar epilogue at 1.5 TB/s, this grid at 2.2 TB/s.
constexpr int64_t kEpilogueTargetBlocks = 2048;

// Rows of the epilogue grid: kEpilogueTargetBlocks / col_blocks, clamped to [1, min(M, 65535)].
inline unsigned epilogue_grid_rows(int64_t M, int64_t col_blocks) {
    int64_t rows = kEpilogueTargetBlocks / (col_blocks > 0 ? col_blocks : 1);
    rows = rows < 1 ? 1 : rows;
    rows = rows < M ? rows : M;
    return static_cast<unsigned>(rows < kMaxGridY ? rows : kMaxGridY);
}

// Exact grid of the float4 epilogue kernels (p12 step 04, p45 step 03): x has one thread per
// float4 column (cols4 float4s per row, `threads` per block), y one block per tile of
// rows_per_tile rows, capped at kMaxGridY (the kernels stride over any further tiles).
struct GridXY {
    unsigned x, y;
};

inline GridXY vec4_tile_grid(int64_t M, int64_t cols4, int threads, int rows_per_tile) {
    const int64_t col_blocks = (cols4 + threads - 1) / threads;
    int64_t row_groups = (M + rows_per_tile - 1) / rows_per_tile;
    row_groups = row_groups < kMaxGridY ? row_groups : kMaxGridY;
    return {static_cast<unsigned>(col_blocks), static_cast<unsigned>(row_groups)};
}

}  // namespace fusedkit
