// 8-bit table codecs (lab/codecs/cuda.py launches these; the CPU reference defines the result).
//
// Encode: a = x * inv (inv = 1/absmax, or 0 when absmax is 0; x / absmax where 1/absmax overflows,
//         a subnormal absmax below 2**-128), code = #{j : bounds[j] <= a}.
// Decode: out = values[code] * scale, rounded to the output dtype.
//
// A "team" of threads owns one quantization block at a time: a power of two up to 32 threads
// inside a warp for small blocks, or the whole CTA for large ones. The blockwise encoders reduce
// the absmax inside the team, then encode the block from registers (re-reading from memory only
// what does not fit in ENCODE_ITEMS groups per thread). Per-tensor scaling uses the same code on
// fixed-size chunks with the given scale. A group is one element, or 16 bytes of elements when
// the launcher found the data aligned for vector loads ("vec").
//
// Built without CUDA headers (NVRTC may not find cuda_fp16.h); common.cuh holds what both files share.

#include "common.cuh"

#define ENCODE_ITEMS 4       // groups per thread kept in registers (lab/codecs/cuda.py knows it)
#define DECODE_ITEMS 4       // groups per thread loaded before any is stored
#define DECODE_GROUP 8       // codes per vector group in decode

// ------------------------------------------------------------------ element types

struct F32 {
    typedef float raw;
    enum { VEC = 4 };
    static __device__ __forceinline__ float to_float(u32 bits) { return __uint_as_float(bits); }
    static __device__ __forceinline__ u32 from_float(float f) { return __float_as_uint(f); }
};

struct F16 {
    typedef u16 raw;
    enum { VEC = 8 };
    static __device__ __forceinline__ float to_float(u32 bits) {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((u16)bits));
        return f;
    }
    static __device__ __forceinline__ u32 from_float(float f) {
        u16 h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
        return h;
    }
};

struct BF16 {
    typedef u16 raw;
    enum { VEC = 8 };
    static __device__ __forceinline__ float to_float(u32 bits) { return __uint_as_float(bits << 16); }
    static __device__ __forceinline__ u32 from_float(float f) {
        u16 h;
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
        return h;
    }
};

template <class D>
__device__ __forceinline__ float load_float(const typename D::raw* p) {
    if constexpr (sizeof(typename D::raw) == 4) return *p;
    else return D::to_float(*p);
}

template <class D>
__device__ __forceinline__ void store_float(typename D::raw* p, float f) {
    if constexpr (sizeof(typename D::raw) == 4) *p = f;
    else *p = (u16)D::from_float(f);
}

// N consecutive elements of type D: one (VEC = false) or D::VEC in 16 bytes (VEC = true).
template <class D, bool VEC>
struct Group {
    enum { N = D::VEC };
    uint4 v;
    __device__ __forceinline__ void load(const typename D::raw* p) { v = *reinterpret_cast<const uint4*>(p); }
    __device__ __forceinline__ float get(int i) const {  // i is a constant after unrolling
        const u32 w[4] = {v.x, v.y, v.z, v.w};
        if constexpr (N == 4) return D::to_float(w[i]);
        else return D::to_float((w[i / 2] >> (16 * (i % 2))) & 0xffffu);
    }
};

template <class D>
struct Group<D, false> {
    enum { N = 1 };
    float f;
    __device__ __forceinline__ void load(const typename D::raw* p) { f = load_float<D>(p); }
    __device__ __forceinline__ float get(int) const { return f; }
};

template <int N>
__device__ __forceinline__ void store_codes(u8* p, const u32 (&c)[N]) {
    if constexpr (N == 1) {
        *p = (u8)c[0];
    } else {
        u32 w[N / 4];
#pragma unroll
        for (int i = 0; i < N / 4; ++i)
            w[i] = c[4 * i] | c[4 * i + 1] << 8 | c[4 * i + 2] << 16 | c[4 * i + 3] << 24;
        if constexpr (N == 4) *reinterpret_cast<u32*>(p) = w[0];
        else *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
    }
}




// ------------------------------------------------------------------ encode


template <class D, bool VEC, bool LUT>
__device__ __forceinline__ void encode_group(const Group<D, VEC>& g, const Scale& sc, const Search<LUT>& search,
                                             u8* out) {
    u32 c[Group<D, VEC>::N];
#pragma unroll
    for (int i = 0; i < Group<D, VEC>::N; ++i) c[i] = search(sc(g.get(i)));
    store_codes(out, c);
}


template <class D, bool VEC>
__device__ __forceinline__ u32 group_absmax(const Group<D, VEC>& g, u32 m) {
#pragma unroll
    for (int i = 0; i < Group<D, VEC>::N; ++i) m = umax(m, abs_bits(g.get(i)));
    return m;
}

// BLOCKWISE: computes and writes one absmax per block. Otherwise one given scale, and `block` is
// only the chunk a team takes at a time.
template <class D, bool BLOCKWISE, bool VEC, bool LUT>
__device__ __forceinline__ void encode_blocks(const typename D::raw* __restrict__ x, u8* __restrict__ codes,
                                              float* __restrict__ absmax, const float* __restrict__ scale,
                                              i64 n, int block, const Team& t, const Search<LUT>& search,
                                              u32* red) {
    constexpr int G = Group<D, VEC>::N;
    Scale sc(BLOCKWISE ? 0.f : *scale);
    const i64 nblocks = (n + block - 1) / block;
    for (i64 k = t.id; k < nblocks; k += t.count) {
        const i64 start = k * block;
        const int len = (int)min((i64)block, n - start);
        const typename D::raw* xb = x + start;
        u8* cb = codes + start;
        const int ngroups = len / G;
        const int rest = ngroups * G;  // elements [rest, len) have no full group: len % G of them

        Group<D, VEC> cache[ENCODE_ITEMS];
        u32 m = 0;
#pragma unroll
        for (int j = 0; j < ENCODE_ITEMS; ++j) {
            const int g = t.lane + j * t.size;
            if (g < ngroups) {
                cache[j].load(xb + g * G);
                if constexpr (BLOCKWISE) m = group_absmax(cache[j], m);
            }
        }
        if constexpr (BLOCKWISE) {
            for (int g = t.lane + ENCODE_ITEMS * t.size; g < ngroups; g += t.size) {
                Group<D, VEC> v;
                v.load(xb + g * G);
                m = group_absmax(v, m);
            }
            for (int i = rest + t.lane; i < len; i += t.size) m = umax(m, abs_bits(load_float<D>(xb + i)));
            const float am = __uint_as_float(t.max(m, red));
            if (t.lane == 0) absmax[k] = am;
            sc = Scale(am);
        }

#pragma unroll
        for (int j = 0; j < ENCODE_ITEMS; ++j) {
            const int g = t.lane + j * t.size;
            if (g < ngroups) encode_group(cache[j], sc, search, cb + g * G);
        }
        for (int g = t.lane + ENCODE_ITEMS * t.size; g < ngroups; g += t.size) {
            Group<D, VEC> v;
            v.load(xb + g * G);
            encode_group(v, sc, search, cb + g * G);
        }
        for (int i = rest + t.lane; i < len; i += t.size)
            cb[i] = (u8)search(sc(load_float<D>(xb + i)));
    }
}

template <class D, bool BLOCKWISE, bool LUT>
__device__ __forceinline__ void encode(const typename D::raw* __restrict__ x, u8* __restrict__ codes,
                                       float* __restrict__ absmax, const float* __restrict__ scale, i64 n,
                                       int block, int team, int vec, const float* __restrict__ bpad, int nbpad,
                                       const u8* __restrict__ lut, int K) {
    __shared__ float sb[NBPAD];
    __shared__ u32 red[32];
    for (int i = threadIdx.x; i < NBPAD; i += blockDim.x) sb[i] = i < nbpad ? bpad[i] : INF;
    __syncthreads();
    const Search<LUT> search{sb, lut, K, search_binary(sb, FLT_MAX_)};
    const Team t(team);
    if (vec) encode_blocks<D, BLOCKWISE, true, LUT>(x, codes, absmax, scale, n, block, t, search, red);
    else encode_blocks<D, BLOCKWISE, false, LUT>(x, codes, absmax, scale, n, block, t, search, red);
}

// ------------------------------------------------------------------ decode

template <bool C, class T, class F> struct Pick { typedef T type; };
template <class T, class F> struct Pick<false, T, F> { typedef F type; };

template <class D, bool VEC>
__device__ __forceinline__ void decode_blocks(const u8* __restrict__ codes, const float* sv,
                                              const float* __restrict__ scales, int scale_stride,
                                              typename D::raw* __restrict__ out, i64 n, int block,
                                              const Team& t) {
    constexpr int G = VEC ? DECODE_GROUP : 1;
    typedef typename Pick<VEC, uint2, u8>::type Codes;
    const i64 nblocks = (n + block - 1) / block;
    for (i64 k = t.id; k < nblocks; k += t.count) {
        const float s = scales[k * scale_stride];
        const i64 start = k * block;
        const int len = (int)min((i64)block, n - start);
        const Codes* cb = reinterpret_cast<const Codes*>(codes + start);
        typename D::raw* ob = out + start;
        const int ngroups = len / G;
        for (int g0 = t.lane; g0 < ngroups; g0 += DECODE_ITEMS * t.size) {
            Codes c[DECODE_ITEMS];
#pragma unroll
            for (int j = 0; j < DECODE_ITEMS; ++j) {
                const int g = g0 + j * t.size;
                if (g < ngroups) c[j] = cb[g];
            }
#pragma unroll
            for (int j = 0; j < DECODE_ITEMS; ++j) {
                const int g = g0 + j * t.size;
                if (g >= ngroups) continue;
                if constexpr (!VEC) {
                    store_float<D>(ob + g, __fmul_rn(sv[c[j]], s));
                } else {
                    u32 bits[DECODE_GROUP];
#pragma unroll
                    for (int i = 0; i < DECODE_GROUP; ++i) {
                        const u32 code = ((i < 4 ? c[j].x : c[j].y) >> (8 * (i % 4))) & 0xffu;
                        bits[i] = D::from_float(__fmul_rn(sv[code], s));
                    }
                    uint4* o = reinterpret_cast<uint4*>(ob + g * G);
                    if constexpr (sizeof(typename D::raw) == 4) {
                        o[0] = make_uint4(bits[0], bits[1], bits[2], bits[3]);
                        o[1] = make_uint4(bits[4], bits[5], bits[6], bits[7]);
                    } else {
                        o[0] = make_uint4(bits[0] | bits[1] << 16, bits[2] | bits[3] << 16,
                                          bits[4] | bits[5] << 16, bits[6] | bits[7] << 16);
                    }
                }
            }
        }
        const u8* cbytes = codes + start;
        for (int i = ngroups * G + t.lane; i < len; i += t.size)
            store_float<D>(ob + i, __fmul_rn(sv[cbytes[i]], s));
    }
}

template <class D>
__device__ __forceinline__ void decode(const u8* __restrict__ codes, const float* __restrict__ values,
                                       const float* __restrict__ scales, int scale_stride,
                                       typename D::raw* __restrict__ out, i64 n, int block, int team, int vec) {
    __shared__ float sv[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) sv[i] = values[i];
    __syncthreads();
    const Team t(team);
    if (vec) decode_blocks<D, true>(codes, sv, scales, scale_stride, out, n, block, t);
    else decode_blocks<D, false>(codes, sv, scales, scale_stride, out, n, block, t);
}

// ------------------------------------------------------------------ exported kernels
//
// encode_{block,scale}_{f32,f16,bf16}_{lut,binary}(x, codes, absmax | scale, n, block, team, vec,
//                                                  bpad, nbpad, lut, K)   (binary ignores lut, K)
// decode_{block,scale}_{f32,f16,bf16}(codes, values256, scales, out, n, block, team, vec)

#define ENCODE_KERNELS(NAME, D, SEARCH, LUT)                                                                   \
    extern "C" __global__ void __launch_bounds__(MAX_THREADS) encode_block_##NAME##_##SEARCH(                  \
        const D::raw* x, u8* codes, float* absmax, i64 n, int block, int team, int vec, const float* bpad,     \
        int nbpad, const u8* lut, int K) {                                                                     \
        encode<D, true, LUT>(x, codes, absmax, nullptr, n, block, team, vec, bpad, nbpad, lut, K);             \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(MAX_THREADS) encode_scale_##NAME##_##SEARCH(                  \
        const D::raw* x, u8* codes, const float* scale, i64 n, int block, int team, int vec,                   \
        const float* bpad, int nbpad, const u8* lut, int K) {                                                  \
        encode<D, false, LUT>(x, codes, nullptr, scale, n, block, team, vec, bpad, nbpad, lut, K);             \
    }

#define DECODE_KERNELS(NAME, D)                                                                                \
    extern "C" __global__ void __launch_bounds__(MAX_THREADS) decode_block_##NAME(                             \
        const u8* codes, const float* values, const float* scales, D::raw* out, i64 n, int block, int team,    \
        int vec) {                                                                                             \
        decode<D>(codes, values, scales, 1, out, n, block, team, vec);                                         \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(MAX_THREADS) decode_scale_##NAME(                             \
        const u8* codes, const float* values, const float* scale, D::raw* out, i64 n, int block, int team,     \
        int vec) {                                                                                             \
        decode<D>(codes, values, scale, 0, out, n, block, team, vec);                                          \
    }

ENCODE_KERNELS(f32, F32, lut, true)
ENCODE_KERNELS(f32, F32, binary, false)
ENCODE_KERNELS(f16, F16, lut, true)
ENCODE_KERNELS(f16, F16, binary, false)
ENCODE_KERNELS(bf16, BF16, lut, true)
ENCODE_KERNELS(bf16, BF16, binary, false)
DECODE_KERNELS(f32, F32)
DECODE_KERNELS(f16, F16)
DECODE_KERNELS(bf16, BF16)
