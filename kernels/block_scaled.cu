// Block-scaled formats: OCP MX v1.0 (MXFP8 E4M3/E5M2, MXFP6 E3M2/E2M3, MXFP4 E2M1, MXINT8) and
// NVFP4 (lab/codecs/cuda_block.py launches these; the CPU path in lab/codecs/block_scaled.py,
// mx.py and nvfp4.py defines the result, bit for bit).
//
// MX encode (OCP MX v1.0 §6.3): 32-value blocks; the block's absmax gives one E8M0 scale X,
//   'floor' (the spec's): X = 2^(floor(log2 amax) - emax_elem), read from amax's exponent field;
//   'rceil': X = 2^ceil(log2(amax / max_normal)) (nothing saturates); both clamped to 2^-127..2^127;
//   elements = the element format's round-to-nearest-even of x / X, saturated to ± max normal.
// NVFP4 encode: 16-value blocks; block scale = E4M3(clamp(block_amax / 6 / s, 2^-6, 448)) with the
//   fp32 tensor scale s (computed by the launcher's caller), elements = E2M1 of x · ((1/s) / scale),
//   to nearest even or stochastically with the noise of `uniform_noise` (a counter-based hash of
//   the element's index and a per-call key; lab/codecs/block_scaled.py computes the same numbers).
// NVFP4 with stochastic rounding rounds the block scale up instead, so nothing clamps at ±6 (a
//   clamped block maximum would bias the rounding toward zero).
// Decode (both): values[code] · scale of its block (· the tensor scale), exact in double, clamped
//   to the output dtype's range, rounded to it once (a NaN scale byte: the whole block NaN).
//
// A team of 8 (MX) or 4 (NVFP4) threads owns one block at a time, each thread GROUP = 4 values, so
// the packed codes of a thread are whole bytes: 4 bytes (8-bit), 3 bytes (FP6: v0 | v1 << 6 |
// v2 << 12 | v3 << 18, low byte first), 2 bytes (FP4: the first value in the low nibble). Values past
// n read as 0 (code 0), and bytes past ceil(n * bits / 8) are not written. Loads are scalar and
// stores bytewise, so any alignment of the input, codes and output is fine.

#include "common.cuh"

#define GROUP 4        // values per thread (lab/codecs/cuda_block.py knows it)
#define MX_BLOCK 32
#define NV_BLOCK 16

// ------------------------------------------------------------------ element types of the input/output

struct F32 {
    typedef float raw;
    static __device__ __forceinline__ float load(const float* p) { return *p; }
    static __device__ __forceinline__ void store(float* p, float f) { *p = f; }
};

struct F16 {
    typedef u16 raw;
    static __device__ __forceinline__ float load(const u16* p) {
        const u16 h = *p;
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
        return f;
    }
    static __device__ __forceinline__ void store(u16* p, float f) {
        u16 h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
        *p = h;
    }
};

struct BF16 {
    typedef u16 raw;
    static __device__ __forceinline__ float load(const u16* p) { return __uint_as_float((u32)*p << 16); }
    static __device__ __forceinline__ void store(u16* p, float f) {
        u16 h;
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
        *p = h;
    }
};

// ------------------------------------------------------------------ exact helpers

// 2^k as a float, k in -126..127.
__device__ __forceinline__ float exp2i(int k) { return __uint_as_float((u32)(k + 127) << 23); }

// floor(log2 m) of a finite m > 0, normal or subnormal (torch.frexp(m)[1] - 1).
__device__ __forceinline__ int floor_log2(float m) {
    const int field = (int)(__float_as_uint(m) >> 23);
    if (field) return field - 127;
    return (int)(__float_as_uint(__fmul_rn(m, exp2i(64))) >> 23) - 127 - 64;  // exact: a subnormal times 2^64
}

// An element type of OCP MX v1.0 §5.3 (lab/codecs/block_scaled.py ElementFormat).
struct Elem {
    int bits, mbits, bias, emax, is_int;
    float max_normal;
};

// Code of an already-scaled a: round to nearest even (or floor(q + noise) with noise in [0, 1)),
// saturating to ± max_normal. Minifloats: e = max(floor(log2 |a|), 1 - bias), q = |a| · 2^(mbits - e)
// (exact), code = ((e + bias - 1) << mbits) + round(q), the sign in the top bit: subnormals, zero
// and the carry into the next binade at once. MXINT8: round(a · 64), clamped to -127..127.
__device__ __forceinline__ u32 round_element(float a, const Elem& E, bool stochastic, float noise) {
    if (E.is_int) {
        const float q = __fmul_rn(a, 64.f);
        float r = stochastic ? floorf(__fadd_rn(q, noise)) : rintf(q);
        r = fminf(fmaxf(r, -127.f), 127.f);
        return (u32)(int)r & 0xffu;
    }
    const float mag = fminf(fabsf(a), E.max_normal);
    const int e = max(mag > 0.f ? floor_log2(mag) : -E.bias, 1 - E.bias);
    const float q = __fmul_rn(mag, exp2i(E.mbits - e));
    const float r = stochastic ? floorf(__fadd_rn(q, noise)) : rintf(q);
    const u32 code = ((u32)(e + E.bias - 1) << E.mbits) + (u32)r;
    return (code | (__float_as_uint(a) >> 31) << (E.bits - 1)) & 0xffu;
}

// Biased E8M0 scale of a block with absmax bits m (finite): 'floor' or 'rceil' (OCP MX v1.0 §6.3;
// block_scaled.e8m0_exponent).
__device__ __forceinline__ int e8m0_scale(u32 m, const Elem& E, int rceil) {
    int unbiased;
    if (!rceil) {
        unbiased = (int)((m >> 23) & 0xffu) - 127 - E.emax;
    } else {
        const float descale = __fdiv_rn(__uint_as_float(m), E.max_normal);
        if (descale > 0.f) {
            const u32 bits = __float_as_uint(descale), frac = bits & 0x7fffffu;
            const bool pow2 = bits >> 23 ? frac == 0 : (frac & (frac - 1)) == 0;  // normal or subnormal
            unbiased = floor_log2(descale) + (pow2 ? 0 : 1);  // ceil(log2 descale), exact
        } else {
            unbiased = -127;
        }
    }
    return min(max(unbiased, -127), 127) + 127;
}

// 2^(b - 127) of a biased E8M0 byte b < 255 (b = 0: the subnormal 2^-127).
__device__ __forceinline__ float e8m0_value(int b) { return __uint_as_float(b ? (u32)b << 23 : 1u << 22); }

// ------------------------------------------------------------------ stochastic rounding noise

// Chris Wellons' lowbias32 integer hash.
__device__ __forceinline__ u32 lowbias32(u32 x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

// Uniform in [0, 1) on a 2^-24 grid for element i under the key (k0, k1): block_scaled.uniform_noise.
__device__ __forceinline__ float uniform_noise(i64 i, u32 k0, u32 k1) {
    const u32 h = lowbias32(lowbias32((u32)i ^ k0) ^ (u32)((unsigned long long)i >> 32) ^ k1);
    return (float)(h >> 8) * 5.9604644775390625e-8f;  // exact: a 24-bit integer times 2^-24
}

// ------------------------------------------------------------------ packing

// The GROUP codes of values base..base+3 (base a multiple of 4) packed to `bits` at their byte
// offset; bytes at or past nbytes are not written.
__device__ __forceinline__ void store_packed(u8* __restrict__ out, i64 base, const u32 (&c)[GROUP], int bits,
                                             i64 nbytes) {
    u32 w;
    int len;
    i64 at;
    if (bits == 8) {
        w = c[0] | c[1] << 8 | c[2] << 16 | c[3] << 24, len = 4, at = base;
    } else if (bits == 6) {
        w = c[0] | c[1] << 6 | c[2] << 12 | c[3] << 18, len = 3, at = base / 4 * 3;
    } else {
        w = c[0] | c[1] << 4 | c[2] << 8 | c[3] << 12, len = 2, at = base / 2;
    }
    for (int j = 0; j < len; ++j)
        if (at + j < nbytes) out[at + j] = (u8)(w >> (8 * j));
}

// Inverse of store_packed: the GROUP codes of values base..base+3 (bytes past nbytes read as 0).
__device__ __forceinline__ void load_packed(const u8* __restrict__ in, i64 base, u32 (&c)[GROUP], int bits,
                                            i64 nbytes) {
    const int len = bits == 8 ? 4 : bits == 6 ? 3 : 2;
    const i64 at = base * bits / 8;
    u32 w = 0;
    for (int j = 0; j < len; ++j)
        if (at + j < nbytes) w |= (u32)in[at + j] << (8 * j);
    const u32 mask = (1u << bits) - 1;
#pragma unroll
    for (int j = 0; j < GROUP; ++j) c[j] = (w >> (bits * j)) & mask;
}

// The GROUP values of a thread (0 past n) and their absmax bits.
template <class D>
__device__ __forceinline__ u32 load_group(const typename D::raw* __restrict__ x, i64 base, i64 n, float (&v)[GROUP]) {
    u32 m = 0;
#pragma unroll
    for (int j = 0; j < GROUP; ++j) {
        v[j] = base + j < n ? D::load(x + base + j) : 0.f;
        m = umax(m, abs_bits(v[j]));
    }
    return m;
}

// ------------------------------------------------------------------ MX encode

// codes: ceil(n * bits / 8) packed bytes; scales: one biased E8M0 byte per block; *nonfinite is
// set to 1 when a block holds NaN or Inf (the caller raises or saturates and encodes again).
template <class D>
__device__ __forceinline__ void mx_encode(const typename D::raw* __restrict__ x, u8* __restrict__ codes,
                                          u8* __restrict__ scales, int* __restrict__ nonfinite, i64 n,
                                          const Elem& E, int rceil) {
    const Team t(MX_BLOCK / GROUP);
    const i64 nblocks = (n + MX_BLOCK - 1) / MX_BLOCK;
    const i64 nbytes = (n * E.bits + 7) / 8;
    for (i64 k = t.id; k < nblocks; k += t.count) {
        const i64 base = k * MX_BLOCK + (i64)t.lane * GROUP;
        float v[GROUP];
        const u32 m = t.max(load_group<D>(x, base, n, v), nullptr);
        if (m >= 0x7f800000u && t.lane == 0) atomicExch(nonfinite, 1);  // many CTAs may set it
        const int b = e8m0_scale(m, E, rceil);
        if (t.lane == 0) scales[k] = (u8)b;
        const float X = e8m0_value(b);
        u32 c[GROUP];
#pragma unroll
        for (int j = 0; j < GROUP; ++j) c[j] = round_element(__fdiv_rn(v[j], X), E, false, 0.f);
        store_packed(codes, base, c, E.bits, nbytes);
    }
}

// ------------------------------------------------------------------ NVFP4 encode

#define E4M3_MAX 448.f
#define E2M1_MAX 6.f

// codes: ceil(n / 2) bytes of E2M1 pairs; scales: one E4M3 byte per block; tscale: the one fp32
// tensor scale s (0 for an all-zero tensor). stochastic: noise of uniform_noise(i, k0, k1).
template <class D>
__device__ __forceinline__ void nvfp4_encode(const typename D::raw* __restrict__ x, u8* __restrict__ codes,
                                             u8* __restrict__ scales, const float* __restrict__ tscale, i64 n,
                                             int stochastic, u32 k0, u32 k1) {
    const Elem e2m1{4, 1, 1, 2, 0, E2M1_MAX};
    const Elem e4m3{8, 3, 7, 8, 0, E4M3_MAX};
    const Team t(NV_BLOCK / GROUP);
    const float ts = *tscale;
    const float safe = ts > 0.f ? ts : 1.f;
    const float inv_s = __fdiv_rn(1.f, safe);
    const i64 nblocks = (n + NV_BLOCK - 1) / NV_BLOCK;
    const i64 nbytes = (n + 1) / 2;
    for (i64 k = t.id; k < nblocks; k += t.count) {
        const i64 base = k * NV_BLOCK + (i64)t.lane * GROUP;
        float v[GROUP];
        const float bamax = __uint_as_float(t.max(load_group<D>(x, base, n, v), nullptr));
        const float want = fminf(fmaxf(__fdiv_rn(__fdiv_rn(bamax, E2M1_MAX), safe), 0.015625f), E4M3_MAX);
        u32 sc = round_element(want, e4m3, false, 0.f);  // a normal E4M3: 2^-6 <= want <= 448
        float scale = __uint_as_float(((sc >> 3) + 120) << 23 | (sc & 7) << 20);
        if (stochastic && scale < want) {  // round the scale up: no block maximum clamps at 6 (bias)
            ++sc;
            scale = __uint_as_float(((sc >> 3) + 120) << 23 | (sc & 7) << 20);
        }
        if (t.lane == 0) scales[k] = (u8)sc;
        const float recip = __fdiv_rn(inv_s, scale);
        u32 c[GROUP];
#pragma unroll
        for (int j = 0; j < GROUP; ++j) {
            const float a = fminf(fmaxf(__fmul_rn(v[j], recip), -E2M1_MAX), E2M1_MAX);
            c[j] = round_element(a, e2m1, stochastic, stochastic ? uniform_noise(base + j, k0, k1) : 0.f);
        }
        store_packed(codes, base, c, 4, nbytes);
    }
}

// ------------------------------------------------------------------ decode (MX and NVFP4)

// float32 of an exact double rounded to odd (truncated, the last bit set when inexact): rounding
// that to fp16/bf16 to nearest is then one correct rounding of p (block_scaled.round_to_odd_f32).
__device__ __forceinline__ float round_to_odd(double p) {
    float f = (float)p;
    if ((double)f != p && p == p) {
        u32 b = __float_as_uint(f);
        if (fabs((double)f) > fabs(p)) b -= 1u;
        f = __uint_as_float(b | 1u);
    }
    return f;
}

// One rounding of the exact p to the output dtype.
template <class D>
__device__ __forceinline__ void store_rounded(typename D::raw* p, double y) { D::store(p, round_to_odd(y)); }
template <>
__device__ __forceinline__ void store_rounded<F32>(float* p, double y) { *p = (float)y; }

// out[i] = values[code_i] · scale_values[scales[i / block]] (· *tscale when given), clamped to
// ± big (the output dtype's largest finite value; NaN stays NaN) and rounded to the output dtype.
// One thread per GROUP values, grid-stride.
template <class D>
__device__ __forceinline__ void block_decode(const u8* __restrict__ codes, const float* __restrict__ values,
                                             const u8* __restrict__ scales, const float* __restrict__ scale_values,
                                             const float* __restrict__ tscale, typename D::raw* __restrict__ out,
                                             i64 n, int block, int bits, float big) {
    const i64 ngroups = (n + GROUP - 1) / GROUP;
    const i64 nbytes = (n * bits + 7) / 8;
    const double ts = tscale ? (double)*tscale : 1.0;
    const double lim = big;
    for (i64 g = (i64)blockIdx.x * blockDim.x + threadIdx.x; g < ngroups; g += (i64)gridDim.x * blockDim.x) {
        const i64 base = g * GROUP;
        const double s = (double)__ldg(scale_values + scales[base / block]) * ts;  // exact
        u32 c[GROUP];
        load_packed(codes, base, c, bits, nbytes);
#pragma unroll
        for (int j = 0; j < GROUP; ++j) {
            if (base + j >= n) break;
            double y = (double)__ldg(values + c[j]) * s;  // exact: at most 8 + 4 + 24 significant bits
            y = y > lim ? lim : y < -lim ? -lim : y;      // NaN (a NaN scale byte) stays NaN
            store_rounded<D>(out + base + j, y);
        }
    }
}

// ------------------------------------------------------------------ exported kernels
//
// mx_encode_{f32,f16,bf16}(x, codes, scales, nonfinite, n, bits, mbits, bias, emax, is_int, max_normal, rceil)
// nvfp4_encode_{f32,f16,bf16}(x, codes, scales, tscale, n, stochastic, k0, k1)
// block_decode_{f32,f16,bf16}(codes, values256, scales, scale_values256, tscale | null, out, n, block, bits, big)

#define BLOCK_SCALED_KERNELS(NAME, D)                                                                         \
    extern "C" __global__ void __launch_bounds__(MAX_THREADS) mx_encode_##NAME(                                \
        const D::raw* x, u8* codes, u8* scales, int* nonfinite, i64 n, int bits, int mbits, int bias, int emax, \
        int is_int, float max_normal, int rceil) {                                                            \
        const Elem E{bits, mbits, bias, emax, is_int, max_normal};                                            \
        mx_encode<D>(x, codes, scales, nonfinite, n, E, rceil);                                               \
    }                                                                                                         \
    extern "C" __global__ void __launch_bounds__(MAX_THREADS) nvfp4_encode_##NAME(                             \
        const D::raw* x, u8* codes, u8* scales, const float* tscale, i64 n, int stochastic, u32 k0, u32 k1) { \
        nvfp4_encode<D>(x, codes, scales, tscale, n, stochastic, k0, k1);                                     \
    }                                                                                                         \
    extern "C" __global__ void __launch_bounds__(MAX_THREADS) block_decode_##NAME(                             \
        const u8* codes, const float* values, const u8* scales, const float* scale_values, const float* tscale, \
        D::raw* out, i64 n, int block, int bits, float big) {                                                  \
        block_decode<D>(codes, values, scales, scale_values, tscale, out, n, block, bits, big);               \
    }

BLOCK_SCALED_KERNELS(f32, F32)
BLOCK_SCALED_KERNELS(f16, F16)
BLOCK_SCALED_KERNELS(bf16, BF16)
