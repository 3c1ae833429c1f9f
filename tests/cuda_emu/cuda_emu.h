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
// every thread), real PTX. Inside a CTA, every __shared__ byte keeps, for the barrier interval it is in, its last
// writer thread and two reader threads: an access by another thread in the same interval (a write, or a read of
// another thread's write) not atomic on both sides is a race; a read of a byte no thread of the CTA has written yet
// is a read of uninitialised shared memory. An access that reaches a buffer's guard zone (the harness's red zones)
// stops the launch, a read as well as a write.
//
// Where the state lives: everything a launch needs is in its `Launch` (the buffers and guard zones, the __shared__
// arrays its kernel declared, the shadows, the fiber flavour, the fiber stacks the harness lends it); the running
// launch is a per-host-thread pointer (`t_active`, thread_local and private to each library), so a hook that fires
// in a thread running no launch (a library being loaded, another thread's code) returns at once, and no state is
// shared between libraries or between launches. The emulator's own code that runs on a fiber marks it untracked
// (`Fiber::untracked`) so its loads and stores (a vector growing, the scheduler's bookkeeping) never reach the
// detectors. The static __shared__ arrays themselves are one per library (or, for template kernels, one per
// process), so the harness runs one launch at a time per process.
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
#include <tuple>
#include <dlfcn.h>
#include <sys/mman.h>
#include <ucontext.h>

// ------------------------------------------------------------------ qualifiers

// The memory hooks and what they call are not instrumented; what they reach in instrumented code
// (library templates) re-enters a hook, which returns at once while the running fiber is marked untracked.
#define EMU_PLAIN __attribute__((no_sanitize_thread, noinline))

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// harness.preprocess turns `__shared__ T name[N];` into EMU_SHARED(T, name, N): one static array
// per declaration, which a thread reaching the declaration adds to its launch's arrays (`emu::use_shared`: the
// first time in a launch it is poisoned; every CTA starts with its own poisoned copy).
#define EMU_SHARED(T, name, N) \
    static T name[N];          \
    emu::use_shared(name, sizeof(name))

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
// (`Launch::ucontext`: tests/test_cuda_emu.py runs the same batteries both ways), the fibers use ucontext.
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

inline void switch_to(Context& from, const Context& to, bool ucontext) {
#if defined(__x86_64__)
    if (!ucontext) {
        emu_switch(&from.sp, to.sp);
        return;
    }
#endif
    swapcontext(&from.uc, &to.uc);
}

// A context that starts `entry` (which never returns) on the `size` bytes of stack at `stack`. For emu_switch: the
// frame it pops (control words, six registers, then `entry` as the return address) at the stack's top, with the
// stack aligned as at a call (rsp % 16 == 8 on entry).
inline void make_context(Context& c, char* stack, size_t size, void (*entry)(), bool ucontext) {
#if defined(__x86_64__)
    if (!ucontext) {
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
    bool untracked = false;  // the emulator's own code (or an atomic's body) runs: the hooks ignore its accesses
};

// One resident CTA: its threads, its barrier count and (while another CTA's shared memory is in
// the static arrays) a saved copy of its own shared memory.
struct Block {
    dim3 idx;
    unsigned slot = 0;     // which fiber stacks it uses
    unsigned cursor = 0;   // round robin over its threads
    unsigned at_barrier = 0;
    unsigned done = 0;  // threads that have exited
    unsigned epoch = 0;  // the barrier interval it is in (unique over the launch)
    unsigned serial = 0;  // which CTA of the launch this is (unique over the launch, from 1)
    std::vector<Fiber> fibers;
    std::vector<std::vector<unsigned char>> shared;  // per array of the launch (Launch::shared); missing: poison
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

// Shadow state of one byte of __shared__ memory for the race detector inside a CTA: the barrier interval it
// describes, the last writer thread and up to two reader threads in that interval (each as thread + 1; 0: none).
// `written`: the CTA (Block::serial) that last wrote the byte, kept across intervals: a read of a byte the running
// CTA never wrote is a read of uninitialised shared memory.
struct SharedShadow {
    unsigned epoch;
    unsigned written;
    unsigned short w, r1, r2;
    unsigned char watomic, r1atomic, r2atomic;
    uintptr_t wpc, r1pc, r2pc;
};

// A __shared__ array a launch's kernel declared: where it is, its size, where its bytes start in the shadows.
struct SharedArray {
    uintptr_t p;
    size_t n, base;
};

// Warp divergence at one branch (a counted `if` of a library built with branch counting) of one warp: each lane's
// k-th arrival at the branch is the warp's k-th pass; per pass, the lanes that arrived and the lanes that took it.
struct BranchTrack {
    unsigned arrivals[32] = {};
    std::vector<std::pair<unsigned, unsigned>> passes;  // (arrived mask, taken mask)
};
struct BranchStat {
    long passes = 0, taken_passes = 0, lanes_arrived = 0, lanes_taken = 0;
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

// Counted loops and branches of this library's launches on this host thread, until the harness takes them.
static thread_local std::map<std::pair<std::string, int>, LoopStat> t_loops;
static thread_local std::map<std::pair<std::string, int>, BranchStat> t_branches;
inline std::map<std::pair<std::string, int>, LoopStat>& loops() { return t_loops; }

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
    bool greedy = false;  // the first runnable thread in order runs next (lowest or, reversed, highest first)
    bool ucontext = false;  // the fibers are ucontext's (emu_switch's otherwise)
    unsigned epochs = 0;  // barrier intervals begun so far
    unsigned serials = 0;  // CTAs admitted so far
    unsigned char poison = 0xff;  // what a CTA's __shared__ memory holds before it writes it
    char* stacks = nullptr;  // the fiber stacks (lent by the harness: one arena per host thread)
    size_t stack_bytes = 0;
    uintptr_t lo = 0, span = 0;  // the global buffers and their guard zones lie in [lo, lo + span)
    uintptr_t redzone = 0;  // bytes of guard zone before and after each buffer: an access there is an error
    std::vector<SharedArray> shared;  // the __shared__ arrays the kernel declared, in the order reached
    uintptr_t shared_lo = 0, shared_span = 0;  // they lie in [shared_lo, shared_lo + shared_span)
    size_t shared_bytes = 0;
    size_t last_array = 0;  // the array of the last shared access (a loop touches one again and again)
    std::vector<std::vector<SharedShadow>> shared_shadow;  // per fiber-stack slot, over the launch's arrays
    bool count_branches = false;
    std::map<std::tuple<std::string, int, unsigned, unsigned>, BranchTrack> branch_tracks;  // file, line, CTA, warp
    unsigned long long rng = 0;
    unsigned switch_mask = 0;  // a global access switches CTA when (rng & mask) == 0
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

// The launch this host thread runs (private to this library: another library's launch, or another thread's, is
// never seen here).
static thread_local Launch* t_active = nullptr;

inline Launch*& active() { return t_active; }

// The running fiber's accesses are the emulator's own while one of these lives (the hooks ignore them).
struct Quiet {
    Fiber* f;
    bool was;
    EMU_PLAIN explicit Quiet(Fiber* fiber) : f(fiber), was(fiber ? fiber->untracked : false) {
        if (f) f->untracked = true;
    }
    EMU_PLAIN ~Quiet() {
        if (f) f->untracked = was;
    }
};

// A thread reached the declaration of __shared__ array p (n bytes): the first time in this launch it joins the
// launch's arrays, poisoned (it holds no CTA's data yet; a CTA swapped in later starts from poison as well).
EMU_PLAIN inline void use_shared(void* p, size_t n) {
    Launch* l = active();
    if (!l || !l->current) return;
    for (const SharedArray& a : l->shared)
        if (a.p == (uintptr_t)p) return;
    Quiet quiet(l->current);
    l->shared.push_back(SharedArray{(uintptr_t)p, n, l->shared_bytes});
    l->shared_bytes += n;
    const uintptr_t lo = l->shared_span ? std::min(l->shared_lo, (uintptr_t)p) : (uintptr_t)p;
    const uintptr_t hi = std::max(l->shared_lo + l->shared_span, (uintptr_t)p + n);
    l->shared_lo = lo, l->shared_span = hi - lo;
    memset(p, l->poison, n);
}

EMU_PLAIN inline unsigned long long next_random(Launch* l) {  // xorshift64*: the seeded interleaving
    l->rng ^= l->rng >> 12;
    l->rng ^= l->rng << 25;
    l->rng ^= l->rng >> 27;
    return l->rng * 0x2545F4914F6CDD1Dull;
}

constexpr size_t STACK = 256 * 1024;

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
    f->untracked = true;
    switch_to(f->ctx, l->scheduler, l->ucontext);
    abort();  // never resumed
}

inline void yield() {
    Launch* l = active();
    switch_to(l->current->ctx, l->scheduler, l->ucontext);
    if (l->failed) fail(l->error);
}

inline void fiber_main() {
    Launch* l = active();
    l->body(l->args);
    l->current->untracked = true;
    l->current->state = DONE;
    ++l->current->blk->done;
    switch_to(l->current->ctx, l->scheduler, l->ucontext);
    abort();  // never resumed
}

inline unsigned live_threads(const Block* b) {
    return (unsigned)b->fibers.size() - b->done;
}

inline void syncthreads(int line) {
    Launch* l = active();
    Fiber* me = l->current;
    Quiet quiet(me);
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
        b->epoch = ++l->epochs;
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
    Quiet quiet(me);
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
    Quiet quiet(f);
    if (c) {
        LoopStat& st = loop_stat(l, file, line);
        if (f->stepped == line) ++st.again;
        else ++st.entered;
    }
    f->stepped = 0;
    return c;
}

inline int loop_step(int line) {
    Fiber* f = active()->current;
    Quiet quiet(f);
    f->stepped = line;
    return 0;
}

// A counted branch (harness.preprocess with branch counting wraps every `if` condition): the running lane arrived
// at the branch at `line` and took it when c. Per warp, each lane's k-th arrival is the warp's k-th pass.
inline bool branch(const char* file, int line, bool c) {
    Launch* l = active();
    if (!l || !l->current || !l->count_branches) return c;
    Fiber* f = l->current;
    Quiet quiet(f);
    BranchTrack& t = l->branch_tracks[{file, line, f->blk->serial, f->tid / 32}];
    const unsigned lane = f->tid % 32, k = t.arrivals[lane]++;
    if (t.passes.size() <= k) t.passes.resize(k + 1, {0u, 0u});
    t.passes[k].first |= 1u << lane;
    if (c) t.passes[k].second |= 1u << lane;
    return c;
}

// Fold a launch's branch passes into t_branches, per kernel, file and line.
inline void keep_branches(Launch* l) {
    for (auto& [key, t] : l->branch_tracks) {
        BranchStat& st = t_branches[{std::string(l->kernel) + "@" + std::get<0>(key), std::get<1>(key)}];
        for (const auto& [arrived, taken] : t.passes) {
            ++st.passes;
            st.taken_passes += taken != 0;
            st.lanes_arrived += __builtin_popcount(arrived);
            st.lanes_taken += __builtin_popcount(taken);
        }
    }
}

// ------------------------------------------------------------------ the race detector

// Offset of a code address in the library that holds it (addr2line turns it into a source line).
EMU_PLAIN inline unsigned code_offset(uintptr_t pc) {
    Dl_info info;
    if (!dladdr((void*)pc, &info)) return 0;
    return (unsigned)(pc - (uintptr_t)info.dli_fbase - 1);
}

EMU_PLAIN inline Buffer* buffer_of(Launch* l, uintptr_t a) {
    if (a - l->lo >= l->span) return nullptr;
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

// An access of n bytes at a that reaches a guard zone around a buffer (its first byte in one, or its last past the
// buffer's end): stops the launch, as memcheck's invalid global read or write on a GPU.
EMU_PLAIN inline void out_of_bounds(Launch* l, uintptr_t a, size_t n, bool write, void* ret) {
    for (size_t i = 0; i < l->nbufs; ++i) {
        const Buffer& b = l->bufs[i];
        long off;
        const char* side;
        if (a >= b.lo && a < b.hi) {
            if (a + n <= b.hi) continue;
            off = (long)(a + n - b.hi), side = "past the end";
        } else if (a < b.lo && a + l->redzone >= b.lo) {
            off = (long)(b.lo - a), side = "before the start";
        } else if (a >= b.hi && a < b.hi + l->redzone) {
            off = (long)(a + n - b.hi), side = "past the end";
        } else {
            continue;
        }
        char buf[300];
        snprintf(buf, sizeof buf,
                 "out-of-bounds %s of %lu bytes in kernel %s: %ld bytes %s of parameter %d (%lu bytes) {pc:%x}",
                 write ? "write" : "read", (unsigned long)n, l->kernel, off, side, b.param,
                 (unsigned long)(b.hi - b.lo), code_offset((uintptr_t)ret));
        fail(buf);
    }
}

// A global-memory access: maybe let another CTA run first (the seeded interleaving).
EMU_PLAIN inline void global_access(Launch* l, void* p, size_t n, bool write, void* ret) {
    const uintptr_t a = (uintptr_t)p;
    Buffer* b = buffer_of(l, a);
    if (!b || a + n > b->hi) out_of_bounds(l, a, n, write, ret);
    if (!b) return;
    if (l->switch_mask != ~0u && (next_random(l) & l->switch_mask) == 0) {
        l->want_switch = true;
        yield();
    }
    record(l, b, a, n, write, false, ret);
}

[[noreturn]] inline void shared_race(Launch* l, const SharedArray& r, uintptr_t a, const char* first, unsigned other,
                                     uintptr_t opc, const char* second, uintptr_t pc) {
    char buf[400];
    snprintf(buf, sizeof buf,
             "race inside a CTA in kernel %s, block %u: byte %lu of a %lu-byte __shared__ array, %s by thread %u "
             "{pc:%x} and %s by thread %u {pc:%x} between the same two barriers with no atomic",
             l->kernel, l->current->blk->idx.x, (unsigned long)(a - r.p), (unsigned long)r.n, first, other,
             code_offset(opc), second, l->current->tid, code_offset(pc));
    fail(buf);
}

[[noreturn]] inline void uninitialised(Launch* l, const SharedArray& r, uintptr_t a, size_t n, uintptr_t pc) {
    char buf[300];
    snprintf(buf, sizeof buf,
             "read of uninitialised __shared__ memory in kernel %s: %lu bytes at byte %lu of a %lu-byte array, which "
             "no thread of block %u has written {pc:%x}",
             l->kernel, (unsigned long)n, (unsigned long)(a - r.p), (unsigned long)r.n, l->current->blk->idx.x,
             code_offset(pc));
    fail(buf);
}

// A __shared__ access of n bytes at a by the running thread: one by another thread of its CTA in the same barrier
// interval (at least one side a write, not both atomic) stops the launch, whatever order the threads ran in, and so
// does a read of a byte no thread of its CTA has written.
EMU_PLAIN inline void shared_access(Launch* l, uintptr_t a, size_t n, bool write, bool atomic, void* ret) {
    const SharedArray* in = nullptr;
    const size_t count = l->shared.size();
    if (l->last_array < count && a - l->shared[l->last_array].p < l->shared[l->last_array].n) {
        in = &l->shared[l->last_array];
    } else {
        for (size_t i = 0; i < count; ++i)
            if (a - l->shared[i].p < l->shared[i].n) {
                in = &l->shared[i], l->last_array = i;
                break;
            }
    }
    if (!in) return;  // another variable between the arrays
    Block* b = l->current->blk;
    if (l->shared_shadow.size() <= b->slot) l->shared_shadow.resize(b->slot + 1);
    std::vector<SharedShadow>& sh = l->shared_shadow[b->slot];
    if (sh.size() < l->shared_bytes) sh.resize(l->shared_bytes, SharedShadow{});
    const unsigned short me = (unsigned short)(l->current->tid + 1);
    const uintptr_t pc = (uintptr_t)ret, end = std::min(a + n, in->p + in->n);
    if (!write && !atomic)
        for (uintptr_t x = a; x < end; ++x)
            if (sh[in->base + (x - in->p)].written != b->serial) uninitialised(l, *in, a, n, pc);
    for (uintptr_t x = a; x < end; ++x) {
        SharedShadow& s = sh[in->base + (x - in->p)];
        if (s.epoch != b->epoch) {
            const unsigned written = s.written;
            s = SharedShadow{}, s.epoch = b->epoch, s.written = written;
        }
        if (s.w && s.w != me && !(atomic && s.watomic))
            shared_race(l, *in, x, "written", s.w - 1u, s.wpc, write ? "written" : "read", pc);
        if (write) {
            if (s.r1 && s.r1 != me && !(atomic && s.r1atomic))
                shared_race(l, *in, x, "read", s.r1 - 1u, s.r1pc, "written", pc);
            if (s.r2 && s.r2 != me && !(atomic && s.r2atomic))
                shared_race(l, *in, x, "read", s.r2 - 1u, s.r2pc, "written", pc);
            s.w = me, s.wpc = pc, s.watomic = atomic, s.written = b->serial;
        } else if (!s.r1 || s.r1 == me) {
            s.r1 = me, s.r1pc = pc, s.r1atomic = atomic;
        } else if (!s.r2 || s.r2 == me) {
            s.r2 = me, s.r2pc = pc, s.r2atomic = atomic;
        }
    }
}

// Every instrumented load and store: only a fiber of this host thread's launch, running the kernel's own code,
// reaches the detectors.
EMU_PLAIN inline void hook(void* p, size_t n, bool write, void* ret) {
    Launch* l = active();
    if (!l) return;
    Fiber* f = l->current;
    if (!f || f->untracked) return;
    const uintptr_t a = (uintptr_t)p;
    if (a - l->lo < l->span) {
        f->untracked = true;
        global_access(l, p, n, write, ret);
        f->untracked = false;
    } else if (a - l->shared_lo < l->shared_span) {
        f->untracked = true;
        shared_access(l, a, n, write, false, ret);
        f->untracked = false;
    }
}

// An atomic read-modify-write of n bytes: a switch point; the thread stays untracked until atomic_end, so the
// plain loads and stores that implement it are not counted again.
EMU_PLAIN inline void atomic_begin(void* p, size_t n) {
    void* ret = __builtin_return_address(0);
    Launch* l = active();
    if (!l || !l->current) return;
    Fiber* f = l->current;
    f->untracked = true;
    if (next_random(l) & 1) {
        l->want_switch = true;
        yield();
    }
    if (Buffer* b = buffer_of(l, (uintptr_t)p)) record(l, b, (uintptr_t)p, n, true, true, ret);
    else if ((uintptr_t)p - l->shared_lo < l->shared_span) shared_access(l, (uintptr_t)p, n, true, true, ret);
}

EMU_PLAIN inline void atomic_end() {
    Launch* l = active();
    if (l && l->current) l->current->untracked = false;
}

// ------------------------------------------------------------------ running a grid

// Save the shared memory of the CTA in the static arrays and bring in b's.
inline void switch_shared(Launch* l, Block* b) {
    if (l->in_shared == b) return;
    const std::vector<SharedArray>& arrays = l->shared;
    if (Block* old = l->in_shared) {
        old->shared.resize(arrays.size());
        for (size_t i = 0; i < arrays.size(); ++i)
            old->shared[i].assign((unsigned char*)arrays[i].p, (unsigned char*)arrays[i].p + arrays[i].n);
    }
    for (size_t i = 0; i < arrays.size(); ++i) {
        if (i < b->shared.size() && b->shared[i].size() == arrays[i].n)
            memcpy((void*)arrays[i].p, b->shared[i].data(), arrays[i].n);
        else
            memset((void*)arrays[i].p, l->poison, arrays[i].n);
    }
    l->in_shared = b;
}

inline Block* admit(Launch* l, unsigned idx, unsigned slot, char* st) {
    Block* b = new Block;
    b->idx.x = idx;
    b->slot = slot;
    b->epoch = ++l->epochs;
    b->serial = ++l->serials;
    const unsigned n = l->block.x;
    b->fibers.assign(n, Fiber{});
    for (unsigned t = 0; t < n; ++t) {
        Fiber& f = b->fibers[t];
        f.tid = t;
        f.blk = b;
        make_context(f.ctx, st + ((size_t)slot * n + t) * STACK, STACK, fiber_main, l->ucontext);
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
    char* st = l->stacks;
    if (!st || l->stack_bytes < (size_t)window * n * STACK) {
        l->failed = true;
        l->error = "the fiber stacks lent to the launch are too small: " + std::to_string(l->stack_bytes) +
                   " bytes for " + std::to_string(window * n) + " threads";
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
            const unsigned j = l->greedy ? k : (b->cursor + k) % n;
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
        switch_to(l->scheduler, f->ctx, l->ucontext);
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
    active()->current->untracked = true;
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

// Run kernel k over grid x block threads. flags: 1 = threads in reverse order, 2 = blocks admitted
// in reverse order, 8 = a CTA runs its first runnable thread in that order (lowest first, or with 1 highest first)
// instead of round robin, 4 = the threads are ucontext fibers (x86-64: emu_switch's otherwise), 16 = count the lanes
// at every counted branch (a library built with branch counting; emu_branches_take). Up to `window` CTAs are
// resident at once; `seed` drives which resident CTA runs next and whether a global access switches (when a random word & switch_mask is 0; ~0u:
// never). buffers: nbuf (start, end, parameter) triples of the global buffers, for the race
// detector; redzone: bytes of guard zone around each (an access there stops the launch); stacks: stack_bytes of
// memory for the fibers (at least min(window, grid) * block * 256 KiB; the harness keeps one arena per host thread).
// Returns 0, or -1 with the message in err.
int emu_launch(int k, unsigned grid, unsigned block, void** args, int flags, unsigned char poison,
               unsigned long long seed, unsigned window, unsigned switch_mask, const unsigned long long* buffers,
               int nbuf, unsigned long redzone, char* stacks, unsigned long stack_bytes, char* err, int errlen) {
    if (emu::active()) {
        snprintf(err, errlen, "a launch of kernel %s while kernel %s runs on the same host thread",
                 emu::kernels()[k].name, emu::active()->kernel);
        return -1;
    }
    emu::Launch l;
    l.kernel = emu::kernels()[k].name;
    l.grid.x = grid;
    l.block.x = block;
    l.body = emu::kernels()[k].call;
    l.args = args;
    l.reverse = flags & 1;
    l.greedy = flags & 8;
    l.ucontext = flags & 4;
    l.count_branches = flags & 16;
    l.poison = poison;
    l.stacks = stacks;
    l.stack_bytes = stack_bytes;
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
    l.redzone = redzone;
    l.lo = lo - redzone, l.span = hi > lo ? hi - lo + 2 * redzone : 0;
    emu::active() = &l;
    const bool ok = emu::run_grid(&l, window, flags & 2);
    emu::active() = nullptr;
    emu::keep_loops(&l);
    emu::keep_branches(&l);
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

// Counted branches since the last call (this host thread's launches): writes up to cap (line, passes, passes with a
// lane that took the branch, lanes arrived, lanes that took it) quintuples and their "kernel@file" names (joined by
// '\n' into names), clears them; returns how many.
int emu_branches_take(long* out, int cap, char* names, int names_len) {
    int i = 0;
    std::string all;
    for (auto& [key, st] : emu::t_branches) {
        if (i >= cap) break;
        long* o = out + 5 * i;
        o[0] = key.second, o[1] = st.passes, o[2] = st.taken_passes, o[3] = st.lanes_arrived, o[4] = st.lanes_taken;
        all += key.first + "\n";
        ++i;
    }
    emu::t_branches.clear();
    snprintf(names, names_len, "%s", all.c_str());
    return i;
}
}
