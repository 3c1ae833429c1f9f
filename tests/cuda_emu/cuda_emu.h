// A CPU emulation of the CUDA built-ins that kernels/*.cu use, so the unchanged sources compile
// as C++17 with g++ and run thread by thread (tests/cuda_emu/harness.py drives it).
//
// Every CUDA thread is a ucontext fiber; one OS thread runs them all. Up to `window` CTAs of a
// launch are resident at once: a seeded choice picks the CTA that runs next, which runs its
// threads round robin, each until it finishes, waits at a __syncthreads or a warp shuffle, or
// stops at a switch point (a global-memory access, with probability 1/switch_every; an atomic,
// 1/2), where another resident CTA may take over. So a barrier is a real barrier, a shuffle a real
// exchange between the lanes its mask names, and atomics are indivisible steps that interleave.
// Misuse (a lane outside its own mask, masks that disagree, a lane reading one outside the mask,
// a barrier some threads never reach, a deadlock) stops the launch with a message naming the
// kernel, block, thread and source line. __shared__ memory lives in one linker section per
// declaration; each resident CTA keeps its own copy (swapped in when it runs), poisoned at its
// start. The race detector: the kernels are compiled with -fsanitize=thread and linked without its
// runtime, so every load and store calls the __tsan_* hooks below; for the launch's global buffers
// they keep per byte the last writer CTA and two reader CTAs, and an access from another CTA (a
// write, or a read of another CTA's write) not atomic on both sides stops the launch naming both
// CTAs and code addresses (harness.py turns them into source lines). Floating point is IEEE
// binary32 with contraction off and no flush-to-zero; the PTX conversions the kernels use are done
// in software (emu_cvt_* below). Misaligned vector accesses are caught by -fsanitize=alignment
// through the handlers below. Not emulated: timing, the memory model (a write is seen at once by
// every thread), races inside one CTA, real PTX.
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
#include <algorithm>
#include <map>
#include <dlfcn.h>
#include <sys/mman.h>
#include <ucontext.h>

// ------------------------------------------------------------------ qualifiers

// The memory hooks and what they call are not instrumented; what they reach in instrumented code
// (library templates) re-enters a hook, which returns at once while `emu_in_hook` is set.
#define EMU_PLAIN __attribute__((no_sanitize_thread, noinline))
static bool emu_in_hook = false;
static uintptr_t emu_lo = 0, emu_span = 0;  // the global buffers of the launch lie in [lo, lo + span)

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

// Switching between fibers. glibc's swapcontext saves and restores the signal mask with a system call at every
// switch (and getcontext at every thread's start). On x86-64 `emu_switch` saves only what the ABI says a callee
// keeps (rbx, rbp, r12-r15, the stack pointer) and the SSE and x87 control words: the emulated thread-order tests
// took 0.63x the CPU with it (and the shadow memory below). Elsewhere, and on x86-64 for a launch with flag 4
// (`emu_ucontext`: tests/test_cuda_emu.py runs the same batteries both ways), the fibers use ucontext.
static bool emu_ucontext = false;
#if defined(__x86_64__)
extern "C" __attribute__((visibility("hidden"))) void emu_switch(void** save_sp, void* to_sp);
asm(R"(
    .text
    .weak emu_switch
    .hidden emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
)");
#endif

namespace emu {

struct Context {
    void* sp = nullptr;  // x86-64: where emu_switch left this fiber's registers
    ucontext_t uc;
};

inline void switch_to(Context& from, const Context& to) {
#if defined(__x86_64__)
    if (!emu_ucontext) {
        emu_switch(&from.sp, to.sp);
        return;
    }
#endif
    swapcontext(&from.uc, &to.uc);
}

// A context that starts `entry` (which never returns) on the `size` bytes of stack at `stack`. For emu_switch: the
// frame it pops (control words, six registers, then `entry` as the return address) at the stack's top, with the
// stack aligned as at a call (rsp % 16 == 8 on entry).
inline void make_context(Context& c, char* stack, size_t size, void (*entry)()) {
#if defined(__x86_64__)
    if (!emu_ucontext) {
        void** sp = (void**)((((uintptr_t)stack + size) & ~(uintptr_t)15) - 72);
        unsigned control[2] = {0, 0};
        asm volatile("stmxcsr %0" : "=m"(control[0]));
        asm volatile("fnstcw %0" : "=m"(control[1]));
        memcpy(&sp[0], control, sizeof control);
        for (int k = 1; k <= 6; ++k) sp[k] = nullptr;
        sp[7] = (void*)entry;
        c.sp = sp;
        return;
    }
#endif
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack;
    c.uc.uc_stack.ss_size = size;
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, entry, 0);
}

enum State { RUNNABLE, AT_BARRIER, AT_SHFL, DONE };

struct Block;

struct Fiber {
    Context ctx;
    unsigned tid = 0;
    State state = RUNNABLE;
    Block* blk = nullptr;
    int stepped = 0;  // line of the counted loop whose step this thread just took
    unsigned shfl_mask = 0, shfl_value = 0, shfl_src = 0, shfl_result = 0;
    int shfl_line = 0;
};

// One resident CTA: its threads, its barrier count and (while another CTA's shared memory is in
// the static arrays) a saved copy of its own shared memory.
struct Block {
    dim3 idx;
    unsigned slot = 0;     // which fiber stacks it uses
    unsigned cursor = 0;   // round robin over its threads
    unsigned at_barrier = 0;
    unsigned done = 0;  // threads that have exited
    std::vector<Fiber> fibers;
    std::vector<std::vector<unsigned char>> shared;  // per registered region; missing: poison
};

// Shadow state of one byte of a global buffer for the race detector: the last writer CTA and up
// to two reader CTAs of this launch (each as block + 1; 0: none, so a fresh shadow is all zero bytes: calloc's
// pages, mapped as the kernel touches them, with no constructor pass over them), with the code addresses of those
// accesses.
struct Shadow {
    unsigned w, r1, r2;
    unsigned char watomic, r1atomic, r2atomic;
    uintptr_t wpc, r1pc, r2pc;  // return addresses of the hooks
};

// A global buffer of a launch (the harness's guarded copy of one tensor's storage).
struct Buffer {
    uintptr_t lo = 0, hi = 0;
    int param = 0;
    Shadow* shadow = nullptr;  // allocated at the first access (plain pointers: the hooks call no library code)
};

// A counted loop (harness.preprocess wraps grid-stride and block loops): per (kernel, line), how
// often a thread entered it and how often one went round a second time.
struct LoopStat {
    long entered = 0, again = 0;
};

inline std::map<std::pair<std::string, int>, LoopStat>& loops() {
    static std::map<std::pair<std::string, int>, LoopStat> m;
    return m;
}

struct Launch {
    const char* kernel = "";
    dim3 grid, block;
    std::vector<Block*> resident;
    Fiber* current = nullptr;
    Block* in_shared = nullptr;  // the CTA whose shared memory the static arrays hold
    Context scheduler;
    bool failed = false;
    std::string error;
    void (*body)(void**) = nullptr;
    void** args = nullptr;
    bool reverse = false;
    unsigned long long rng = 0;
    unsigned switch_mask = 0;  // a global access switches CTA when (rng & mask) == 0
    bool in_atomic = false;
    bool want_switch = false;  // the running thread stopped at a switch point
    std::vector<Buffer> buffers;
    Buffer* bufs = nullptr;  // = buffers.data(), size nbufs
    size_t nbufs = 0;
    std::vector<std::pair<const char*, std::vector<LoopStat>>> loop_files;  // per source file, by line
    ~Launch() {
        for (Buffer& b : buffers) free(b.shadow);
    }
};

inline LoopStat& loop_stat(Launch* l, const char* file, int line) {
    for (auto& [f, v] : l->loop_files)
        if (f == file) {
            if ((size_t)line >= v.size()) v.resize(line + 1);
            return v[line];
        }
    l->loop_files.push_back({file, std::vector<LoopStat>(line + 1)});
    return l->loop_files.back().second[line];
}

// Fold a launch's loop counts into loops().
inline void keep_loops(Launch* l) {
    for (auto& [f, v] : l->loop_files)
        for (size_t line = 0; line < v.size(); ++line)
            if (v[line].entered || v[line].again) {
                LoopStat& st = loops()[{std::string(l->kernel) + "@" + f, (int)line}];
                st.entered += v[line].entered;
                st.again += v[line].again;
            }
}

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

EMU_PLAIN inline unsigned long long next_random(Launch* l) {  // xorshift64*: the seeded interleaving
    l->rng ^= l->rng >> 12;
    l->rng ^= l->rng << 25;
    l->rng ^= l->rng >> 27;
    return l->rng * 0x2545F4914F6CDD1Dull;
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
        snprintf(buf, sizeof buf, "kernel %s, block %u, thread %u", l->kernel, l->current->blk->idx.x, l->current->tid);
    else
        snprintf(buf, sizeof buf, "kernel %s", l->kernel);
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
    switch_to(f->ctx, l->scheduler);
    abort();  // never resumed
}

inline void yield() {
    Launch* l = active();
    switch_to(l->current->ctx, l->scheduler);
    if (l->failed) fail(l->error);
}

inline void fiber_main() {
    Launch* l = active();
    l->body(l->args);
    l->current->state = DONE;
    ++l->current->blk->done;
    switch_to(l->current->ctx, l->scheduler);
    abort();  // never resumed
}

inline unsigned live_threads(const Block* b) {
    return (unsigned)b->fibers.size() - b->done;
}

inline void syncthreads(int line) {
    Launch* l = active();
    Fiber* me = l->current;
    Block* b = me->blk;
    const unsigned threads = (unsigned)b->fibers.size();
    if (live_threads(b) != threads) {
        char buf[160];
        snprintf(buf, sizeof buf, "__syncthreads at line %d reached while %u of %u threads have exited", line,
                 threads - live_threads(b), threads);
        fail(buf);
    }
    me->state = AT_BARRIER;
    if (++b->at_barrier == threads) {
        b->at_barrier = 0;
        for (Fiber& f : b->fibers) f.state = RUNNABLE;
        return;
    }
    yield();
}

// A warp shuffle: every lane named in `mask` must call it with the same mask; each gets the
// value of lane `src`, which must be in the mask.
inline unsigned shfl(unsigned mask, unsigned value, unsigned src_lane, int line) {
    Launch* l = active();
    Fiber* me = l->current;
    std::vector<Fiber>& fibers = me->blk->fibers;
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
        if (warp0 + k >= fibers.size()) {
            snprintf(buf, sizeof buf, "__shfl_xor_sync at line %d: mask 0x%08x names lane %u, past the block's threads",
                     line, mask, k);
            fail(buf);
        }
        const Fiber& f = fibers[warp0 + k];
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
            Fiber& f = fibers[warp0 + k];
            f.shfl_result = fibers[warp0 + f.shfl_src].shfl_value;
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

// A counted loop's condition: a thread entering it, or going round again after its step.
inline bool loop_test(const char* file, int line, bool c) {
    Launch* l = active();
    Fiber* f = l->current;
    if (c) {
        LoopStat& st = loop_stat(l, file, line);
        if (f->stepped == line) ++st.again;
        else ++st.entered;
    }
    f->stepped = 0;
    return c;
}

inline int loop_step(int line) {
    active()->current->stepped = line;
    return 0;
}

// ------------------------------------------------------------------ the race detector

// Offset of a code address in the library that holds it (addr2line turns it into a source line).
EMU_PLAIN inline unsigned code_offset(uintptr_t pc) {
    Dl_info info;
    if (!dladdr((void*)pc, &info)) return 0;
    return (unsigned)(pc - (uintptr_t)info.dli_fbase - 1);
}

EMU_PLAIN inline Buffer* buffer_of(Launch* l, uintptr_t a) {
    if (a - emu_lo >= emu_span) return nullptr;
    Buffer* b = l->bufs;
    for (size_t i = 0, n = l->nbufs; i < n; ++i)
        if (a >= b[i].lo && a < b[i].hi) return &b[i];
    return nullptr;
}

[[noreturn]] inline void race(Launch* l, const Buffer& b, uintptr_t a, const char* first, int other, uintptr_t opc,
                              const char* second, uintptr_t pc) {
    char buf[400];
    snprintf(buf, sizeof buf,
             "race between CTAs in kernel %s: byte %lu of parameter %d, %s by block %d {pc:%x} and %s by block %u "
             "{pc:%x} with no atomic",
             l->kernel, (unsigned long)(a - b.lo), b.param, first, other, code_offset(opc), second,
             l->current->blk->idx.x, code_offset(pc));
    fail(buf);
}

// Record an access of n bytes at a (in buffer b) by the running CTA; a conflict with another CTA of this
// launch (at least one side a write, not both atomic) stops the launch.
EMU_PLAIN inline void record(Launch* l, Buffer* b, uintptr_t a, size_t n, bool write, bool atomic, void* ret) {
    if (!b->shadow) {
        b->shadow = (Shadow*)calloc(b->hi - b->lo, sizeof(Shadow));
        if (!b->shadow) fail("cannot allocate the race detector's shadow of a buffer");
    }
    const unsigned me = l->current->blk->idx.x + 1;
    const uintptr_t pc = (uintptr_t)ret;
    const size_t end = n < b->hi - a ? n : b->hi - a;
    Shadow* sh = b->shadow + (a - b->lo);
    for (size_t i = 0; i < end; ++i) {
        Shadow& s = sh[i];
        if (s.w && s.w != me && !(atomic && s.watomic))
            race(l, *b, a + i, "written", s.w - 1, s.wpc, write ? "written" : "read", pc);
        if (write) {
            if (s.r1 && s.r1 != me && !(atomic && s.r1atomic))
                race(l, *b, a + i, "read", s.r1 - 1, s.r1pc, "written", pc);
            if (s.r2 && s.r2 != me && !(atomic && s.r2atomic))
                race(l, *b, a + i, "read", s.r2 - 1, s.r2pc, "written", pc);
            s.w = me, s.wpc = pc, s.watomic = atomic;
        } else if (!s.r1 || s.r1 == me) {
            s.r1 = me, s.r1pc = pc, s.r1atomic = atomic;
        } else if (!s.r2 || s.r2 == me) {
            s.r2 = me, s.r2pc = pc, s.r2atomic = atomic;
        }
    }
}

// A global-memory access: maybe let another CTA run first (the seeded interleaving).
EMU_PLAIN inline void global_access(void* p, size_t n, bool write, void* ret) {
    Launch* l = active();
    if (!l || !l->current || l->in_atomic) return;
    const uintptr_t a = (uintptr_t)p;
    Buffer* b = buffer_of(l, a);
    if (!b) return;
    if (l->switch_mask != ~0u && (next_random(l) & l->switch_mask) == 0) {
        emu_in_hook = false;
        l->want_switch = true;
        yield();
        emu_in_hook = true;
    }
    record(l, b, a, n, write, false, ret);
}

EMU_PLAIN inline void hook(void* p, size_t n, bool write, void* ret) {
    if (emu_in_hook || (uintptr_t)p - emu_lo >= emu_span) return;
    emu_in_hook = true;
    global_access(p, n, write, ret);
    emu_in_hook = false;
}

// An atomic read-modify-write of n bytes: a switch point; returns with the guard on, so the
// plain loads and stores that implement it are not counted again.
EMU_PLAIN inline void atomic_begin(void* p, size_t n) {
    void* ret = __builtin_return_address(0);
    emu_in_hook = true;
    struct Leave {
        ~Leave() { emu_in_hook = false; }
    } leave;
    Launch* l = active();
    if (!l || !l->current) return;
    if (next_random(l) & 1) {
        emu_in_hook = false;
        l->want_switch = true;
        yield();
        emu_in_hook = true;
    }
    if (Buffer* b = buffer_of(l, (uintptr_t)p)) record(l, b, (uintptr_t)p, n, true, true, ret);
    l->in_atomic = true;
}

inline void atomic_end() {
    if (active()) active()->in_atomic = false;
}

// ------------------------------------------------------------------ running a grid

// Save the shared memory of the CTA in the static arrays and bring in b's.
inline void switch_shared(Launch* l, Block* b) {
    if (l->in_shared == b) return;
    const std::vector<Region>& regions = shared_regions();
    if (Block* old = l->in_shared) {
        old->shared.resize(regions.size());
        for (size_t i = 0; i < regions.size(); ++i)
            old->shared[i].assign((unsigned char*)regions[i].p, (unsigned char*)regions[i].p + regions[i].n);
    }
    for (size_t i = 0; i < regions.size(); ++i) {
        if (i < b->shared.size() && b->shared[i].size() == regions[i].n)
            memcpy(regions[i].p, b->shared[i].data(), regions[i].n);
        else
            memset(regions[i].p, shared_poison(), regions[i].n);
    }
    l->in_shared = b;
}

inline Block* admit(Launch* l, unsigned idx, unsigned slot, char* st) {
    Block* b = new Block;
    b->idx.x = idx;
    b->slot = slot;
    const unsigned n = l->block.x;
    b->fibers.assign(n, Fiber{});
    for (unsigned t = 0; t < n; ++t) {
        Fiber& f = b->fibers[t];
        f.tid = t;
        f.blk = b;
        make_context(f.ctx, st + ((size_t)slot * n + t) * STACK, STACK, fiber_main);
    }
    return b;
}

inline std::string deadlock(Launch* l, Block* b) {
    std::string msg = "deadlock: no thread can run;";
    unsigned shown = 0;
    for (const Fiber& f : b->fibers) {
        if (f.state == DONE || shown++ >= 6) continue;
        msg += " thread " + std::to_string(f.tid) + " " + state_name(f.state) +
               (f.state == AT_SHFL ? " (line " + std::to_string(f.shfl_line) + ")" : "") + ";";
    }
    return msg + " (kernel " + l->kernel + ", block " + std::to_string(b->idx.x) + ")";
}

// Run the grid with up to `window` CTAs resident at once; the next thread to run is a seeded
// choice among the resident CTAs (round robin inside a CTA). Returns false with l->error.
inline bool run_grid(Launch* l, unsigned window, bool reverse_blocks) {
    const unsigned n = l->block.x, grid = l->grid.x;
    window = std::max(1u, std::min(window, grid));
    char* st = stacks((size_t)window * n);
    if (!st) {
        l->failed = true;
        l->error = "cannot map fiber stacks";
        return false;
    }
    std::vector<unsigned> free_slots;
    for (unsigned s = window; s-- > 0;) free_slots.push_back(s);
    unsigned next = 0;
    auto admit_more = [&]() {
        while (next < grid && !free_slots.empty()) {
            const unsigned slot = free_slots.back();
            free_slots.pop_back();
            l->resident.push_back(admit(l, reverse_blocks ? grid - 1 - next : next, slot, st));
            ++next;
        }
    };
    auto retire = [&](size_t i) {
        Block* b = l->resident[i];
        if (l->in_shared == b) l->in_shared = nullptr;
        free_slots.push_back(b->slot);
        l->resident.erase(l->resident.begin() + (long)i);
        delete b;
    };
    admit_more();
    bool ok = true;
    size_t i = 0;  // the running CTA: it runs until a switch point, its end or a deadlock
    bool pick = true;
    while (!l->resident.empty()) {
        if (pick) i = l->resident.size() == 1 ? 0 : (size_t)(next_random(l) % l->resident.size());
        pick = false;
        Block* b = l->resident[i];
        Fiber* f = nullptr;
        bool done = true;
        for (unsigned k = 0; k < n; ++k) {
            const unsigned j = (b->cursor + k) % n;
            Fiber& g = b->fibers[l->reverse ? n - 1 - j : j];
            if (g.state != DONE) done = false;
            if (g.state == RUNNABLE) {
                f = &g;
                b->cursor = j + 1;
                break;
            }
        }
        if (!f) {
            if (!done) {
                l->failed = true;
                l->error = deadlock(l, b);
                ok = false;
                break;
            }
            retire(i);
            admit_more();
            pick = true;
            continue;
        }
        switch_shared(l, b);
        l->current = f;
        l->want_switch = false;
        switch_to(l->scheduler, f->ctx);
        l->current = nullptr;
        if (l->failed) {
            ok = false;
            break;
        }
        pick = l->want_switch;
    }
    while (!l->resident.empty()) retire(l->resident.size() - 1);
    return ok;
}

}  // namespace emu

// ------------------------------------------------------------------ memory hooks
//
// The kernels are compiled with -fsanitize=thread but linked without its runtime: every load and
// store calls these, and only those into a launch's global buffers count.

extern "C" {
void __tsan_init() {}
#define EMU_TSAN_HOOK(N)                                                                                         \
    EMU_PLAIN void __tsan_read##N(void* p) { emu::hook(p, N, false, __builtin_return_address(0)); }              \
    EMU_PLAIN void __tsan_write##N(void* p) { emu::hook(p, N, true, __builtin_return_address(0)); }              \
    EMU_PLAIN void __tsan_unaligned_read##N(void* p) { emu::hook(p, N, false, __builtin_return_address(0)); }    \
    EMU_PLAIN void __tsan_unaligned_write##N(void* p) { emu::hook(p, N, true, __builtin_return_address(0)); }    \
    EMU_PLAIN void __tsan_volatile_read##N(void* p) { emu::hook(p, N, false, __builtin_return_address(0)); }     \
    EMU_PLAIN void __tsan_volatile_write##N(void* p) { emu::hook(p, N, true, __builtin_return_address(0)); }
EMU_TSAN_HOOK(1)
EMU_TSAN_HOOK(2)
EMU_TSAN_HOOK(4)
EMU_TSAN_HOOK(8)
EMU_TSAN_HOOK(16)
EMU_PLAIN void __tsan_read_range(void* p, unsigned long n) { emu::hook(p, n, false, __builtin_return_address(0)); }
EMU_PLAIN void __tsan_write_range(void* p, unsigned long n) { emu::hook(p, n, true, __builtin_return_address(0)); }
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void*, void*) {}
void __tsan_vptr_read(void*) {}
}

// ------------------------------------------------------------------ built-ins

#define threadIdx (dim3{emu::active()->current->tid, 0, 0})
#define blockIdx (emu::active()->current->blk->idx)
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
// Atomics: one indivisible step (one OS thread runs every fiber); before it another CTA may run.
inline unsigned atomicMax(unsigned* p, unsigned v) {
    emu::atomic_begin(p, sizeof *p);
    const unsigned old = *p;
    if (v > old) *p = v;
    emu::atomic_end();
    return old;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
    emu::atomic_begin(p, sizeof *p);
    const unsigned old = *p;
    *p = old + v;
    emu::atomic_end();
    return old;
}
inline int atomicExch(int* p, int v) {
    emu::atomic_begin(p, sizeof *p);
    const int old = *p;
    *p = v;
    emu::atomic_end();
    return old;
}
inline unsigned atomicCAS(unsigned* p, unsigned compare, unsigned v) {
    emu::atomic_begin(p, sizeof *p);
    const unsigned old = *p;
    if (old == compare) *p = v;
    emu::atomic_end();
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

// Run kernel k over grid x block threads. flags: 1 = threads in reverse order, 2 = blocks admitted
// in reverse order, 4 = the threads are ucontext fibers (x86-64: emu_switch's otherwise). Up to `window` CTAs are
// resident at once; `seed` drives which resident CTA runs next and whether a global access switches (when a random word & switch_mask is 0; ~0u:
// never). buffers: nbuf (start, end, parameter) triples of the global buffers, for the race
// detector. Returns 0, or -1 with the message in err.
int emu_launch(int k, unsigned grid, unsigned block, void** args, int flags, unsigned char poison,
               unsigned long long seed, unsigned window, unsigned switch_mask, const unsigned long long* buffers,
               int nbuf, char* err, int errlen) {
    emu::Launch l;
    l.kernel = emu::kernels()[k].name;
    l.grid.x = grid;
    l.block.x = block;
    l.body = emu::kernels()[k].call;
    l.args = args;
    l.reverse = flags & 1;
    emu_ucontext = flags & 4;
    l.rng = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    l.switch_mask = switch_mask;
    for (int i = 0; i < nbuf; ++i) {
        emu::Buffer b;
        b.lo = buffers[3 * i];
        b.hi = buffers[3 * i + 1];
        b.param = (int)buffers[3 * i + 2];
        l.buffers.push_back(std::move(b));
    }
    l.bufs = l.buffers.data();
    l.nbufs = l.buffers.size();
    uintptr_t lo = ~(uintptr_t)0, hi = 0;
    for (const emu::Buffer& b : l.buffers) lo = std::min(lo, b.lo), hi = std::max(hi, b.hi);
    emu_lo = lo, emu_span = hi > lo ? hi - lo : 0;
    emu::active() = &l;
    emu::shared_poison() = poison;
    emu_in_hook = false;
    const bool ok = emu::run_grid(&l, window, flags & 2);
    emu_in_hook = false;  // a race report leaves its hook for good
    emu::keep_loops(&l);
    emu_lo = emu_span = 0;
    emu::active() = nullptr;
    if (ok) return 0;
    snprintf(err, errlen, "%s", l.error.c_str());
    return -1;
}

// Counted loops since the last call: writes up to cap (line, entered, again) triples and their
// file names (joined by '\n' into files), clears the counts; returns how many.
int emu_loops_take(long* out, int cap, char* files, int files_len) {
    int i = 0;
    std::string names;
    for (auto& [key, st] : emu::loops()) {
        if (i >= cap) break;
        out[3 * i] = key.second;
        out[3 * i + 1] = st.entered;
        out[3 * i + 2] = st.again;
        names += std::string(key.first) + "\n";
        ++i;
    }
    emu::loops().clear();
    snprintf(files, files_len, "%s", names.c_str());
    return i;
}
}
