// A CPU emulation of the CUDA built-ins that kernels/*.cu use, so the unchanged sources compile
// as C++17 with g++ and run thread by thread (tests/emu/harness.py drives it).
//
// Every CUDA thread of a block is a ucontext fiber; one OS thread runs the fibers of one block
// at a time, each until it finishes or waits at a __syncthreads or a warp shuffle, so a barrier
// is a real barrier and a shuffle a real exchange between the lanes its mask names. Misuse (a
// lane outside its own mask, masks that disagree, a lane reading one outside the mask, a barrier
// some threads never reach, a deadlock) stops the launch with a message naming the kernel, block,
// thread and source line. __shared__ memory lives in one linker section that is filled with a
// poison pattern before each block. Floating point is IEEE binary32 with contraction off and no
// flush-to-zero; the PTX conversions the kernels use are done in software (emu_cvt_* below).
// Misaligned vector accesses are caught by -fsanitize=alignment through the handlers below.
// Not emulated: timing, the memory model between barriers, real PTX.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#include <sys/mman.h>
#include <ucontext.h>

// ------------------------------------------------------------------ qualifiers

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// harness.preprocess turns `__shared__ T name[N];` into EMU_SHARED(T, name, N): one static array
// per declaration, registered (and poisoned) when a thread first reaches it, poisoned again
// before every later block.
#define EMU_SHARED(T, name, N) \
    static T name[N];          \
    static const bool name##_emu_registered [[maybe_unused]] = emu::register_shared(name, sizeof(name))

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) float4 { float x, y, z, w; };

inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

// ------------------------------------------------------------------ the scheduler

namespace emu {

enum State { RUNNABLE, AT_BARRIER, AT_SHFL, DONE };

struct Fiber {
    ucontext_t ctx;
    unsigned tid = 0;
    State state = RUNNABLE;
    unsigned shfl_mask = 0, shfl_value = 0, shfl_src = 0, shfl_result = 0;
    int shfl_line = 0;
};

struct Launch {
    const char* kernel = "";
    dim3 grid, block, block_idx;
    std::vector<Fiber> fibers;
    Fiber* current = nullptr;
    ucontext_t scheduler;
    unsigned at_barrier = 0;
    bool failed = false;
    std::string error;
    void (*body)(void**) = nullptr;
    void** args = nullptr;
};

struct Region {
    void* p;
    size_t n;
};

inline std::vector<Region>& shared_regions() {
    static std::vector<Region> r;
    return r;
}

inline unsigned char& shared_poison() {
    static unsigned char b = 0xff;
    return b;
}

inline bool register_shared(void* p, size_t n) {
    shared_regions().push_back(Region{p, n});
    memset(p, shared_poison(), n);
    return true;
}

inline Launch*& active() {
    static Launch* l = nullptr;
    return l;
}

constexpr size_t STACK = 256 * 1024;

inline char* stacks(size_t threads) {
    static char* base = nullptr;
    static size_t have = 0;
    if (threads > have) {
        if (base) munmap(base, have * STACK);
        base = (char*)mmap(nullptr, threads * STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                           -1, 0);
        if (base == MAP_FAILED) {
            base = nullptr;
            have = 0;
            return nullptr;
        }
        have = threads;
    }
    return base;
}

inline std::string where() {
    Launch* l = active();
    char buf[160];
    if (l->current)
        snprintf(buf, sizeof buf, "kernel %s, block %u, thread %u", l->kernel, l->block_idx.x, l->current->tid);
    else
        snprintf(buf, sizeof buf, "kernel %s, block %u", l->kernel, l->block_idx.x);
    return buf;
}

// Stop the launch: record the message and leave the fiber for good (the GPU would fault).
[[noreturn]] inline void fail(const std::string& msg) {
    Launch* l = active();
    if (!l->failed) {
        l->failed = true;
        l->error = msg + " (" + where() + ")";
    }
    Fiber* f = l->current;
    swapcontext(&f->ctx, &l->scheduler);
    abort();  // never resumed
}

inline void yield() {
    Launch* l = active();
    swapcontext(&l->current->ctx, &l->scheduler);
    if (l->failed) fail(l->error);
}

inline void fiber_main() {
    Launch* l = active();
    l->body(l->args);
    l->current->state = DONE;
    swapcontext(&l->current->ctx, &l->scheduler);
}

inline unsigned live_threads(const Launch* l) {
    unsigned n = 0;
    for (const Fiber& f : l->fibers) n += f.state != DONE;
    return n;
}

inline void syncthreads(int line) {
    Launch* l = active();
    Fiber* me = l->current;
    const unsigned threads = (unsigned)l->fibers.size();
    if (live_threads(l) != threads) {
        char buf[160];
        snprintf(buf, sizeof buf, "__syncthreads at line %d reached while %u of %u threads have exited", line,
                 threads - live_threads(l), threads);
        fail(buf);
    }
    me->state = AT_BARRIER;
    if (++l->at_barrier == threads) {
        l->at_barrier = 0;
        for (Fiber& f : l->fibers) f.state = RUNNABLE;
        return;
    }
    yield();
}

// A warp shuffle: every lane named in `mask` must call it with the same mask; each gets the
// value of lane `src`, which must be in the mask.
inline unsigned shfl(unsigned mask, unsigned value, unsigned src_lane, int line) {
    Launch* l = active();
    Fiber* me = l->current;
    const unsigned lane = me->tid % 32, warp0 = me->tid - lane;
    char buf[200];
    if (!(mask >> lane & 1u)) {
        snprintf(buf, sizeof buf, "__shfl_xor_sync at line %d: lane %u calls with mask 0x%08x, which does not name it",
                 line, lane, mask);
        fail(buf);
    }
    if (src_lane >= 32 || !(mask >> src_lane & 1u)) {
        snprintf(buf, sizeof buf, "__shfl_xor_sync at line %d: lane %u reads lane %u, outside mask 0x%08x", line, lane,
                 src_lane, mask);
        fail(buf);
    }
    me->state = AT_SHFL;
    me->shfl_mask = mask;
    me->shfl_value = value;
    me->shfl_src = src_lane;
    me->shfl_line = line;
    bool all = true;
    for (unsigned k = 0; k < 32; ++k) {
        if (!(mask >> k & 1u)) continue;
        if (warp0 + k >= l->fibers.size()) {
            snprintf(buf, sizeof buf, "__shfl_xor_sync at line %d: mask 0x%08x names lane %u, past the block's threads",
                     line, mask, k);
            fail(buf);
        }
        const Fiber& f = l->fibers[warp0 + k];
        if (f.state == DONE) {
            snprintf(buf, sizeof buf, "__shfl_xor_sync at line %d: mask 0x%08x names lane %u, which has exited", line,
                     mask, k);
            fail(buf);
        }
        if (f.state == AT_SHFL && f.shfl_mask != mask) {
            snprintf(buf, sizeof buf,
                     "__shfl_xor_sync: lane %u at line %d uses mask 0x%08x, lane %u at line %d mask 0x%08x", lane,
                     line, mask, k, f.shfl_line, f.shfl_mask);
            fail(buf);
        }
        if (f.state != AT_SHFL) all = false;
    }
    if (all) {
        for (unsigned k = 0; k < 32; ++k) {
            if (!(mask >> k & 1u)) continue;
            Fiber& f = l->fibers[warp0 + k];
            f.shfl_result = l->fibers[warp0 + f.shfl_src].shfl_value;
            f.state = RUNNABLE;
        }
    } else {
        yield();
    }
    return me->shfl_result;
}

inline const char* state_name(State s) {
    switch (s) {
        case RUNNABLE: return "runnable";
        case AT_BARRIER: return "at __syncthreads";
        case AT_SHFL: return "at a shuffle";
        default: return "exited";
    }
}

// Run one block to the end. Returns false (with l->error) when it failed.
inline bool run_block(Launch* l, bool reverse) {
    const unsigned n = l->block.x;
    char* st = stacks(n);
    if (!st) {
        l->failed = true;
        l->error = "cannot map fiber stacks";
        return false;
    }
    l->fibers.assign(n, Fiber{});
    l->at_barrier = 0;
    for (unsigned t = 0; t < n; ++t) {
        Fiber& f = l->fibers[t];
        f.tid = t;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = st + (size_t)t * STACK;
        f.ctx.uc_stack.ss_size = STACK;
        f.ctx.uc_link = &l->scheduler;
        makecontext(&f.ctx, fiber_main, 0);
    }
    for (;;) {
        bool ran = false, done = true;
        for (unsigned i = 0; i < n; ++i) {
            Fiber& f = l->fibers[reverse ? n - 1 - i : i];
            if (f.state != DONE) done = false;
            if (f.state != RUNNABLE) continue;
            ran = true;
            l->current = &f;
            swapcontext(&l->scheduler, &f.ctx);
            l->current = nullptr;
            if (l->failed) return false;
        }
        if (done) return true;
        if (!ran) {
            std::string msg = "deadlock: no thread can run;";
            unsigned shown = 0;
            for (const Fiber& f : l->fibers) {
                if (f.state == DONE || shown++ >= 6) continue;
                msg += " thread " + std::to_string(f.tid) + " " + state_name(f.state) +
                       (f.state == AT_SHFL ? " (line " + std::to_string(f.shfl_line) + ")" : "") + ";";
            }
            l->failed = true;
            l->error = msg + " (kernel " + l->kernel + ", block " + std::to_string(l->block_idx.x) + ")";
            return false;
        }
    }
}

}  // namespace emu


// ------------------------------------------------------------------ built-ins

#define threadIdx (dim3{emu::active()->current->tid, 0, 0})
#define blockIdx (emu::active()->block_idx)
#define blockDim (emu::active()->block)
#define gridDim (emu::active()->grid)
#define __syncthreads() emu::syncthreads(__LINE__)
#define __shfl_xor_sync(mask, v, o) \
    emu::shfl((mask), (v), (emu::active()->current->tid % 32) ^ (unsigned)(o), __LINE__)

inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline float __int_as_float(int i) {
    float f;
    memcpy(&f, &i, 4);
    return f;
}
inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
// -ffp-contract=off and SSE arithmetic: one IEEE binary32 rounding per operation.
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fdiv_rn(float a, float b) { return a / b; }
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T min(T a, T b) { return b < a ? b : a; }
template <class T> inline T max(T a, T b) { return a < b ? b : a; }
inline unsigned atomicMax(unsigned* p, unsigned v) {  // one OS thread: no other access in between
    const unsigned old = *p;
    if (v > old) *p = v;
    return old;
}

// PTX cvt.rn.f16.f32: round to nearest even, subnormals kept, overflow to +-inf, NaN stays NaN.
inline unsigned short emu_cvt_rn_f16_f32(float f) {
    const unsigned u = __float_as_uint(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
    if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // rounds to >= 65520: inf
    if (a < 0x38800000u) {  // below 2**-14: a subnormal half (or zero)
        if (a < 0x33000000u) return (unsigned short)sign;  // below half of the least subnormal
        const unsigned e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;  // 14 .. 24
        unsigned h = m >> shift;
        const unsigned rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rest > half || (rest == half && (h & 1u))) ++h;
        return (unsigned short)(sign | h);
    }
    unsigned h = ((a >> 13) - (112u << 10));
    const unsigned rest = a & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return (unsigned short)(sign | h);
}

// PTX cvt.f32.f16: exact.
inline float emu_cvt_f32_f16(unsigned short h) {
    const unsigned sign = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return __uint_as_float(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        if (m == 0) return __uint_as_float(sign);
        const float f = (float)m * 5.9604644775390625e-08f;  // m * 2**-24, exact
        return sign ? -f : f;
    }
    return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}

// PTX cvt.rn.bf16.f32: round to nearest even; NaN becomes the canonical 0x7fff.
inline unsigned short emu_cvt_rn_bf16_f32(float f) {
    const unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// ------------------------------------------------------------------ misaligned accesses

namespace emu {
struct SourceLocation {
    const char* file;
    unsigned line, column;
};
struct TypeDescriptor {
    unsigned short kind, info;
    char name[1];
};
struct TypeMismatchData {
    SourceLocation loc;
    const TypeDescriptor* type;
    unsigned char log_alignment, check_kind;
};

inline void misaligned(void* data, void* ptr) {
    const TypeMismatchData* d = (const TypeMismatchData*)data;
    const unsigned long align = 1ul << d->log_alignment;
    char buf[400];
    if (ptr == nullptr)
        snprintf(buf, sizeof buf, "null pointer access to %s at %s:%u", d->type->name, d->loc.file, d->loc.line);
    else
        snprintf(buf, sizeof buf, "misaligned address %p: %s needs %lu-byte alignment at %s:%u", ptr, d->type->name,
                 align, d->loc.file, d->loc.line);
    if (active() == nullptr || active()->current == nullptr) {
        fprintf(stderr, "%s\n", buf);
        abort();
    }
    fail(buf);
}
}  // namespace emu

extern "C" void __ubsan_handle_type_mismatch_v1(void* data, void* ptr) { emu::misaligned(data, ptr); }
extern "C" void __ubsan_handle_type_mismatch_v1_abort(void* data, void* ptr) { emu::misaligned(data, ptr); }

// ------------------------------------------------------------------ the kernel table and launch

namespace emu {

struct Kernel {
    const char* name;
    void (*call)(void**);
    std::vector<int> sizes;    // bytes of each parameter
    std::vector<int> is_ptr;   // 1: a pointer
};

template <class... A, size_t... I>
void call_with(void (*f)(A...), void** args, std::index_sequence<I...>) {
    f(*reinterpret_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(args[I])...);
}

template <class... A>
Kernel describe(const char* name, void (*)(A...), void (*call)(void**)) {
    return Kernel{name, call, {(int)sizeof(A)...}, {(int)std::is_pointer_v<A>...}};
}

template <class... A>
constexpr size_t arity(void (*)(A...)) { return sizeof...(A); }

template <auto F>
void invoke(void** args) {
    call_with(F, args, std::make_index_sequence<arity(F)>{});
}

std::vector<Kernel>& kernels();

}  // namespace emu

#define EMU_KERNEL(name) emu::describe(#name, &name, &emu::invoke<&name>)

extern "C" {
int emu_kernel_count() { return (int)emu::kernels().size(); }
const char* emu_kernel_name(int k) { return emu::kernels()[k].name; }
int emu_kernel_params(int k) { return (int)emu::kernels()[k].sizes.size(); }
int emu_kernel_param_size(int k, int j) { return emu::kernels()[k].sizes[j]; }
int emu_kernel_param_is_ptr(int k, int j) { return emu::kernels()[k].is_ptr[j]; }
long emu_shared_bytes() {  // registered so far
    long n = 0;
    for (const emu::Region& r : emu::shared_regions()) n += (long)r.n;
    return n;
}

// Run kernel k over grid x block threads. flags: 1 = threads in reverse order, 2 = blocks in
// reverse order. Returns 0, or -1 with the message in err.
int emu_launch(int k, unsigned grid, unsigned block, void** args, int flags, unsigned char poison, char* err,
                      int errlen) {
    emu::Launch l;
    l.kernel = emu::kernels()[k].name;
    l.grid.x = grid;
    l.block.x = block;
    l.body = emu::kernels()[k].call;
    l.args = args;
    emu::active() = &l;
    emu::shared_poison() = poison;
    bool ok = true;
    for (unsigned i = 0; i < grid && ok; ++i) {
        l.block_idx.x = flags & 2 ? grid - 1 - i : i;
        for (const emu::Region& r : emu::shared_regions()) memset(r.p, poison, r.n);
        ok = emu::run_block(&l, flags & 1);
    }
    emu::active() = nullptr;
    if (ok) return 0;
    snprintf(err, errlen, "%s", l.error.c_str());
    return -1;
}
}
