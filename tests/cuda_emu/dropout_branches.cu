// Dropout that skips dropped units with a branch, for the emulator's warp-divergence counter
// (tests/test_cuda_emu_divergence.py). Demo kernels, not the product's: lab/dropout computes dropout with torch,
// and kernels/*.cu holds only kernels a launcher in lab/ runs. Each thread handles one unit; blockDim.x is a
// multiple of 32, so warp w is units [32 w, 32 w + 32). y starts at zero: a dropped unit is not computed.

// Element-wise (Song et al. 2019, Fig. 1b): each unit is kept or dropped on its own, so a warp runs the branch when
// any of its 32 units is kept, with only the kept lanes busy.
extern "C" __global__ void dropout_units(const unsigned char* keep, const float* x, float* y, float scale, int n) {
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n && keep[i]) y[i] = x[i] * scale;
}

// Row pattern: a row of `cols` units (a multiple of 32) is kept or dropped whole, so every warp is all in or all
// out: the warps of dropped rows skip the branch, the others run it with every lane busy.
extern "C" __global__ void dropout_rows(const unsigned char* keep_row, const float* x, float* y, float scale, int rows,
                                        int cols) {
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < rows * cols && keep_row[i / cols]) y[i] = x[i] * scale;
}
