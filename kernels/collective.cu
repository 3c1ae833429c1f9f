// Compressed collectives for the table codecs, fp32 data (lab/codecs/cuda_hop.py launches these;
// lab/codecs/hop.py is the reference and defines the result bit for bit).
//
// Dettmers 2016 §3.2 kernel, fused for ring/tree allreduce:
//   hop:        s = values[a] * scale_a + values[b] * scale_b   (hop_codes)
//               s = values[a] * scale_a + x                      (hop_mixed)
//               then encode s like kernels/codec.cu: absmax (per block, per tensor, or none),
//               inv = 1/absmax (0 when absmax is 0), code = #{j : bounds[j] <= s * inv}
//               (s / absmax where 1/absmax overflows: a subnormal absmax below 2**-128).
//   decode_sum: out = (((0 + values[c_0] * s_0) + values[c_1] * s_1) + ...), ranks in order.
// Every product and sum is __fmul_rn / __fadd_rn: never contracted into an FMA, so each step
// rounds exactly as torch's separate multiply and add do on the CPU.
//
// Launch plan. A "team" of threads owns one quantization block at a time (as in codec.cu): a
// power of two up to 32 threads inside a warp for small blocks, or the whole CTA for large
// ones; each thread keeps HOP_ITEMS groups of the sum in registers, so the block absmax and the
// codes come from one read of the inputs (what does not fit is recomputed, never stored).
// Per-tensor absmax takes two passes over fixed-size chunks with team = CTA: hop_*_absmax
// recomputes the sum and reduces |s| into one word with atomicMax (one per CTA), then
// hop_*_scale_* recomputes the sum and encodes it with that scale. scale='none' is one
// hop_*_scale_* pass with scale 1 that also reduces |s| into a word, so the launcher can tell
// a non-finite sum (the codec's error) apart. A group is 4 elements (one u32 of codes, one
// float4 of x) when the launcher found the data aligned, else one element.
// decode_sum is a grid-stride loop over groups; each thread walks the P rows in order.
//
// Built without CUDA headers (NVRTC may not find them); common.cuh holds what both files share.

#include "common.cuh"

#define HOP_ITEMS 4          // groups per thread kept in registers (lab/codecs/cuda_hop.py knows it)
#define GROUP 4              // elements per vector group (lab/codecs/cuda_hop.py knows it)


template <int N>
__device__ __forceinline__ u32 max_bits(const float (&s)[N], u32 m) {
#pragma unroll
    for (int i = 0; i < N; ++i) m = umax(m, abs_bits(s[i]));
    return m;
}




template <int N, bool LUT>
__device__ __forceinline__ void encode_group(const float (&s)[N], const Scale& sc, const Search<LUT>& search, u8* out) {
    u32 c[N];
#pragma unroll
    for (int i = 0; i < N; ++i) c[i] = search(sc(s[i]));
    if constexpr (N == 1) *out = (u8)c[0];
    else *reinterpret_cast<u32*>(out) = c[0] | c[1] << 8 | c[2] << 16 | c[3] << 24;
}

// ------------------------------------------------------------------ the two sums

// decode(a) + decode(b): values[code] * scale of each, added in that order.
struct CodesSum {
    const u8* __restrict__ a;
    const float* __restrict__ sa;
    const u8* __restrict__ b;
    const float* __restrict__ sb;
    int ss;  // scale stride: 1 when block k has scale k, 0 for one scale per tensor
    float da, db;

    __device__ __forceinline__ void block(i64 k) {
        da = sa[k * ss];
        db = sb[k * ss];
    }

    // s[0..N) = the sums of elements i..i+N (N = GROUP: i is a multiple of 4, codes aligned)
    template <int N>
    __device__ __forceinline__ void get(const float* sv, i64 i, float (&s)[N]) const {
        if constexpr (N == 1) {
            s[0] = __fadd_rn(__fmul_rn(sv[a[i]], da), __fmul_rn(sv[b[i]], db));
        } else {
            const u32 ca = *reinterpret_cast<const u32*>(a + i), cb = *reinterpret_cast<const u32*>(b + i);
#pragma unroll
            for (int j = 0; j < N; ++j)
                s[j] = __fadd_rn(__fmul_rn(sv[(ca >> (8 * j)) & 0xffu], da), __fmul_rn(sv[(cb >> (8 * j)) & 0xffu], db));
        }
    }
};

// decode(a) + x.
struct MixedSum {
    const u8* __restrict__ a;
    const float* __restrict__ sa;
    const float* __restrict__ x;
    int ss;
    float da;

    __device__ __forceinline__ void block(i64 k) { da = sa[k * ss]; }

    template <int N>
    __device__ __forceinline__ void get(const float* sv, i64 i, float (&s)[N]) const {
        if constexpr (N == 1) {
            s[0] = __fadd_rn(__fmul_rn(sv[a[i]], da), x[i]);
        } else {
            const u32 ca = *reinterpret_cast<const u32*>(a + i);
            const float4 xv = *reinterpret_cast<const float4*>(x + i);
            const float xs[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
            for (int j = 0; j < N; ++j) s[j] = __fadd_rn(__fmul_rn(sv[(ca >> (8 * j)) & 0xffu], da), xs[j]);
        }
    }
};

// ------------------------------------------------------------------ hop

enum Mode { BLOCKWISE, ABSMAX, SCALED };

// BLOCKWISE: per team block, the sum's absmax (written to scales[k]) and its codes.
// ABSMAX: the max of |sum| over the tensor, atomicMax'ed into *word (bits of a float).
// SCALED: the codes of the sum with the given *scale; when word is not null, |sum| is also
//         reduced into *word (scale='none': the launcher checks the sum is finite).
template <int MODE, int N, class S, bool LUT>
__device__ __forceinline__ void hop_blocks(S src, const float* sv, u8* __restrict__ out, float* __restrict__ scales,
                                           u32* __restrict__ word, const float* __restrict__ scale, i64 n,
                                           int block, const Team& t, const Search<LUT>& search, u32* red) {
    Scale sc(MODE == SCALED ? *scale : 0.f);
    u32 m = 0;  // ABSMAX, SCALED: over everything this thread saw
    const i64 nblocks = (n + block - 1) / block;
    for (i64 k = t.id; k < nblocks; k += t.count) {
        src.block(k);
        const i64 start = k * block;
        const int len = (int)min((i64)block, n - start);
        const int ngroups = len / N;
        const int rest = ngroups * N;  // elements [rest, len) have no full group

        if constexpr (MODE == ABSMAX) {
#pragma unroll 4
            for (int g = t.lane; g < ngroups; g += t.size) {
                float s[N];
                src.get(sv, start + (i64)g * N, s);
                m = max_bits(s, m);
            }
            for (int i = rest + t.lane; i < len; i += t.size) {
                float s[1];
                src.get(sv, start + i, s);
                m = max_bits(s, m);
            }
        } else {
            float cache[HOP_ITEMS][N];
            u32 bm = 0;
#pragma unroll
            for (int j = 0; j < HOP_ITEMS; ++j) {
                const int g = t.lane + j * t.size;
                if (g < ngroups) {
                    src.get(sv, start + (i64)g * N, cache[j]);
                    bm = max_bits(cache[j], bm);
                }
            }
            if constexpr (MODE == BLOCKWISE) {
                for (int g = t.lane + HOP_ITEMS * t.size; g < ngroups; g += t.size) {
                    float s[N];
                    src.get(sv, start + (i64)g * N, s);
                    bm = max_bits(s, bm);
                }
                for (int i = rest + t.lane; i < len; i += t.size) {
                    float s[1];
                    src.get(sv, start + i, s);
                    bm = max_bits(s, bm);
                }
                const float am = __uint_as_float(t.max(bm, red));
                if (t.lane == 0) scales[k] = am;
                sc = Scale(am);
            }
#pragma unroll
            for (int j = 0; j < HOP_ITEMS; ++j) {
                const int g = t.lane + j * t.size;
                if (g < ngroups) encode_group(cache[j], sc, search, out + start + (i64)g * N);
            }
            for (int g = t.lane + HOP_ITEMS * t.size; g < ngroups; g += t.size) {
                float s[N];
                src.get(sv, start + (i64)g * N, s);
                if constexpr (MODE == SCALED) bm = max_bits(s, bm);
                encode_group(s, sc, search, out + start + (i64)g * N);
            }
            for (int i = rest + t.lane; i < len; i += t.size) {
                float s[1];
                src.get(sv, start + i, s);
                if constexpr (MODE == SCALED) bm = max_bits(s, bm);
                encode_group(s, sc, search, out + start + i);
            }
            if constexpr (MODE == SCALED) m = umax(m, bm);
        }
    }
    if constexpr (MODE != BLOCKWISE) {
        if (word != nullptr) {  // uniform over the CTA; the team is the CTA in these modes
            m = t.max(m, red);
            if (threadIdx.x == 0 && m != 0u) atomicMax(word, m);
        }
    }
}

template <int MODE, class S, bool LUT>
__device__ __forceinline__ void hop(S src, u8* out, float* scales, u32* word, const float* scale, i64 n, int block,
                                    int team, int vec, const float* __restrict__ values,
                                    const float* __restrict__ bpad, int nbpad, const u8* __restrict__ lut, int K) {
    __shared__ float sv[256];
    __shared__ float sb[NBPAD];
    __shared__ u32 red[32];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) sv[i] = values[i];
    if constexpr (MODE != ABSMAX)
        for (int i = threadIdx.x; i < NBPAD; i += blockDim.x) sb[i] = i < nbpad ? bpad[i] : INF;
    __syncthreads();
    const Search<LUT> search{sb, lut, K, MODE != ABSMAX ? search_binary(sb, FLT_MAX_) : 0u};
    const Team t(team);
    if (vec) hop_blocks<MODE, GROUP, S, LUT>(src, sv, out, scales, word, scale, n, block, t, search, red);
    else hop_blocks<MODE, 1, S, LUT>(src, sv, out, scales, word, scale, n, block, t, search, red);
}

// ------------------------------------------------------------------ decode_sum

template <int N>
__device__ __forceinline__ void decode_sum_groups(const u8* __restrict__ codes, i64 code_stride,
                                                  const float* __restrict__ scales, i64 scale_stride, int P,
                                                  float* __restrict__ out, i64 n, i64 block, const float* sv) {
    const i64 ngroups = n / N;
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 g = tid; g < ngroups; g += step) {
        const i64 i = g * N;
        const u8* c = codes + i;
        const float* s = scales + (block > 0 ? i / block : 0);
        float acc[N];
#pragma unroll
        for (int j = 0; j < N; ++j) acc[j] = 0.f;
#pragma unroll 4
        for (int p = 0; p < P; ++p) {
            const float sc = s[p * scale_stride];
            if constexpr (N == 1) {
                acc[0] = __fadd_rn(acc[0], __fmul_rn(sv[c[p * code_stride]], sc));
            } else {
                const u32 w = *reinterpret_cast<const u32*>(c + p * code_stride);
#pragma unroll
                for (int j = 0; j < N; ++j) acc[j] = __fadd_rn(acc[j], __fmul_rn(sv[(w >> (8 * j)) & 0xffu], sc));
            }
        }
        if constexpr (N == 1) out[i] = acc[0];
        else *reinterpret_cast<float4*>(out + i) = make_float4(acc[0], acc[1], acc[2], acc[3]);
    }
    if constexpr (N > 1) {  // the last n % N elements, one per thread
        const i64 i = ngroups * N + tid;
        if (i < n) {
            const float* s = scales + (block > 0 ? i / block : 0);
            float acc = 0.f;
            for (int p = 0; p < P; ++p)
                acc = __fadd_rn(acc, __fmul_rn(sv[codes[i + p * code_stride]], s[p * scale_stride]));
            out[i] = acc;
        }
    }
}

// ------------------------------------------------------------------ exported kernels
//
// hop_codes_block_{lut,binary}(a, sa, b, sb, out, scales, n, block, team, vec, values, bpad, nbpad, lut, K)
// hop_codes_absmax(a, sa, b, sb, word, n, block, team, vec, values)
// hop_codes_scale_{lut,binary}(a, sa, b, sb, out, scale, word | null, n, block, team, vec,
//                              values, bpad, nbpad, lut, K)
// hop_mixed_*: the same with x (float32 [n]) in place of (b, sb).
// decode_sum(codes, code_stride, scales, scale_stride, P, out, n, block | 0, vec, values)
// Binary kernels ignore lut and K. Blockwise kernels read scale k of the inputs for block k;
// the others read scale 0.

#define HOP_SEARCH_KERNELS(KIND, SRC_ARGS, SRC_BLOCK, SRC_ONE, SEARCH, LUT)                                     \
    extern "C" __global__ void __launch_bounds__(MAX_THREADS) hop_##KIND##_block_##SEARCH(                       \
        SRC_ARGS, u8* out, float* scales, i64 n, int block, int team, int vec, const float* values,             \
        const float* bpad, int nbpad, const u8* lut, int K) {                                                   \
        hop<BLOCKWISE, decltype(SRC_BLOCK), LUT>(SRC_BLOCK, out, scales, nullptr, nullptr, n, block, team, vec, \
                                                 values, bpad, nbpad, lut, K);                                  \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(MAX_THREADS) hop_##KIND##_scale_##SEARCH(                       \
        SRC_ARGS, u8* out, const float* scale, u32* word, i64 n, int block, int team, int vec,                  \
        const float* values, const float* bpad, int nbpad, const u8* lut, int K) {                              \
        hop<SCALED, decltype(SRC_ONE), LUT>(SRC_ONE, out, nullptr, word, scale, n, block, team, vec, values,    \
                                            bpad, nbpad, lut, K);                                               \
    }

#define HOP_ABSMAX_KERNEL(KIND, SRC_ARGS, SRC_ONE)                                                             \
    extern "C" __global__ void __launch_bounds__(MAX_THREADS) hop_##KIND##_absmax(                               \
        SRC_ARGS, u32* word, i64 n, int block, int team, int vec, const float* values) {                        \
        hop<ABSMAX, decltype(SRC_ONE), false>(SRC_ONE, nullptr, nullptr, word, nullptr, n, block, team, vec,    \
                                              values, nullptr, 0, nullptr, 1);                                  \
    }

#define CODES_ARGS const u8* a, const float* sa, const u8* b, const float* sb
#define CODES_SRC(SS) (CodesSum{a, sa, b, sb, SS, 0.f, 0.f})
#define MIXED_ARGS const u8* a, const float* sa, const float* x
#define MIXED_SRC(SS) (MixedSum{a, sa, x, SS, 0.f})

HOP_SEARCH_KERNELS(codes, CODES_ARGS, CODES_SRC(1), CODES_SRC(0), lut, true)
HOP_SEARCH_KERNELS(codes, CODES_ARGS, CODES_SRC(1), CODES_SRC(0), binary, false)
HOP_SEARCH_KERNELS(mixed, MIXED_ARGS, MIXED_SRC(1), MIXED_SRC(0), lut, true)
HOP_SEARCH_KERNELS(mixed, MIXED_ARGS, MIXED_SRC(1), MIXED_SRC(0), binary, false)
HOP_ABSMAX_KERNEL(codes, CODES_ARGS, CODES_SRC(0))
HOP_ABSMAX_KERNEL(mixed, MIXED_ARGS, MIXED_SRC(0))

extern "C" __global__ void __launch_bounds__(MAX_THREADS) decode_sum(const u8* codes, i64 code_stride,
                                                                     const float* scales, i64 scale_stride, int P,
                                                                     float* out, i64 n, i64 block, int vec,
                                                                     const float* values) {
    __shared__ float sv[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) sv[i] = values[i];
    __syncthreads();
    if (vec) decode_sum_groups<GROUP>(codes, code_stride, scales, scale_stride, P, out, n, block, sv);
    else decode_sum_groups<1>(codes, code_stride, scales, scale_stride, P, out, n, block, sv);
}
