// Helpers shared by kernels/codec.cu and kernels/collective.cu: types, the team of threads that
// owns one quantization block, the code search, and the scaling x -> a. Included by both (NVRTC
// finds it through the include path lab/backend.py gives; no CUDA headers are needed).
#pragma once

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;

#define MAX_K 4
#define NBPAD (256 + MAX_K)  // lut search reads bounds[c] for c <= 255 + MAX_K - 1
#define MAX_THREADS 1024
#define INF __int_as_float(0x7f800000)
#define FLT_MAX_ 3.402823466e+38f

__device__ __forceinline__ u32 umax(u32 a, u32 b) { return a > b ? a : b; }

// The absmax is kept as the bit pattern of |x|: for non-negative floats integer order is float
// order, and a NaN (above +inf) propagates as torch's amax does, so the launcher's caller sees it.
__device__ __forceinline__ u32 abs_bits(float f) { return __float_as_uint(f) & 0x7fffffffu; }

// ------------------------------------------------------------------ teams

// A power of two up to 32 threads inside a warp for small blocks, or the whole CTA for large ones.
struct Team {
    int size, lane;
    i64 id, count;

    __device__ __forceinline__ explicit Team(int team_size) : size(team_size) {
        const int per_cta = blockDim.x / size;
        lane = threadIdx.x % size;
        id = (i64)blockIdx.x * per_cta + threadIdx.x / size;
        count = (i64)gridDim.x * per_cta;
    }

    // Max over the team, returned to every member. `red`: 32 words of shared memory.
    __device__ __forceinline__ u32 max(u32 v, u32* red) const {
        if (size <= 32) {
            const u32 mask = size == 32 ? 0xffffffffu : ((1u << size) - 1) << (threadIdx.x & 31 & ~(size - 1));
            for (int o = size / 2; o > 0; o /= 2) v = umax(v, __shfl_xor_sync(mask, v, o));
            return v;
        }
        for (int o = 16; o > 0; o /= 2) v = umax(v, __shfl_xor_sync(0xffffffffu, v, o));
        if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = v;
        __syncthreads();
        v = red[0];
        for (int w = 1; w < (int)blockDim.x / 32; ++w) v = umax(v, red[w]);
        __syncthreads();
        return v;
    }
};

// ------------------------------------------------------------------ code search

// #{j < 255 : sb[j] <= a} for sb sorted ascending.
__device__ __forceinline__ u32 search_binary(const float* sb, float a) {
    u32 c = 0;
#pragma unroll
    for (u32 s = 128; s > 0; s /= 2)
        if (sb[c + s - 1] <= a) c += s;
    return c;
}

template <bool LUT>
struct Search {
    const float* sb;  // shared: the bounds, then +inf up to NBPAD
    const u8* lut;    // lut[top 16 bits of a] = #{bounds <= least float with those bits}
    int K;            // the most bounds any lut bucket holds, 1..MAX_K
    u32 nb;           // number of bounds (the finite entries of sb)

    __device__ __forceinline__ u32 operator()(float a) const {
        u32 c;
        if constexpr (LUT) {
            c = __ldg(lut + (__float_as_uint(a) >> 16));
#pragma unroll
            for (int j = 0; j < MAX_K; ++j)
                if (j < K) c += a >= sb[c];
        } else {
            c = search_binary(sb, a);
        }
        // a is NaN or +-inf only when x/scale overflowed or x was not finite (the launchers'
        // callers take the reference then); match torch.bucketize: +inf and NaN go after every
        // bound (not after the +inf padding), -inf before.
        if (!(fabsf(a) <= FLT_MAX_)) c = a == -INF ? 0u : nb;
        return c;
    }
};

// ------------------------------------------------------------------ scaling

// x -> a: x * (1/scale), 0 for scale 0, and x / scale where 1/scale overflows (x * inf would
// turn 0 into NaN and every other value into +-inf). The choice is uniform over a block.
struct Scale {
    float inv, scale;
    bool divide;
    __device__ __forceinline__ explicit Scale(float s) : scale(s) {
        inv = s > 0.f ? __frcp_rn(s) : 0.f;
        divide = inv == INF;
    }
    __device__ __forceinline__ float operator()(float x) const { return divide ? __fdiv_rn(x, scale) : __fmul_rn(x, inv); }
};
