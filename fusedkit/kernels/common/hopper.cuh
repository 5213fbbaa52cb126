// Hopper (sm_90a) building blocks of the wgmma steps, written once: mbarriers, TMA bulk tensor
// copies, wgmma shared-memory descriptors, the wgmma fence / commit / wait sequence, setmaxnreg,
// the accumulator fragment's (row, column) map, and a host helper that encodes a CUtensorMap
// without linking libcuda. Pure CUDA (no torch): only the .cu steps that use wgmma include it,
// and fusedkit.build compiles exactly those with -gencode=arch=compute_90a,code=sm_90a.
#pragma once

#include <cstdint>
#include <cuda.h>           // CUtensorMap and its enums: types only, no libcuda call is linked
#include <cuda_runtime.h>   // cudaGetDriverEntryPoint*: the driver function through the runtime

// wgmma and setmaxnreg exist only on the architecture-specific target sm_90a (they are not
// forward compatible, so plain sm_90 rejects them): fail early with one clear line.
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "hopper.cuh needs the sm_90a target: compile with -gencode=arch=compute_90a,code=sm_90a"
#endif

namespace fusedkit::sm90 {

// ---------------------------------------------------------------------------------------------
// Shared-memory addresses. PTX's shared-memory operands are 32-bit offsets in the shared window,
// not the 64-bit generic pointers C++ holds.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------------------------------------
// mbarrier: a 64-bit shared-memory object that counts thread arrivals and, for TMA, bytes.
// A phase completes when the expected arrivals have arrived and the expected bytes have landed;
// the barrier then starts the next phase. Waiters name the phase by its parity (0, 1, 0, ...):
// a stage used for the r-th time is waited on with parity r & 1. A fresh barrier is in phase 0,
// and waiting on parity 1 (the phase "before" it) returns at once, which is how a producer
// passes its first wait on a stage nobody has used yet.
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(arrivals)
                 : "memory");
}

// Makes the initialised barriers visible to the TMA unit (the async proxy) and to the other
// threads; follow it with __syncthreads() before anyone uses them.
__device__ __forceinline__ void mbar_fence_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// One arrival that also announces `bytes` more to come from TMA copies in this phase.
// Announcing before issuing the copies keeps the phase open until every byte has landed.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
                 "r"(bytes)
                 : "memory");
}

// One plain arrival (release semantics: this thread's earlier accesses are ordered before it).
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Blocks until the phase of parity `parity` has completed (acquire semantics: what the arrivals
// and the TMA copies wrote is visible afterwards). try_wait suspends the thread for a while in
// hardware before it reports "not yet", so the loop does not hammer shared memory.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
    const uint32_t addr = smem_addr(bar);
    uint32_t done = 0;
    do {
        asm volatile(
            "{\n\t.reg .pred p;\n\t"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
            "selp.u32 %0, 1, 0, p;\n\t}"
            : "=r"(done)
            : "r"(addr), "r"(parity)
            : "memory");
    } while (!done);
}

// ---------------------------------------------------------------------------------------------
// TMA: one thread asks the copy engine for a whole 2-D box of a global tensor; it lands in shared
// memory (swizzled as the tensor map says) and counts its bytes on `bar`. Coordinates are in
// elements, innermost first: (column, row). Parts of the box outside the tensor are filled with
// zeros and still counted, so edge tiles need no special case. The tensor map is a kernel
// parameter declared __grid_constant__: its address is a generic address of parameter space.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                            int col, int row) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_addr(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(col), "r"(row), "r"(smem_addr(bar))
        : "memory");
}

// Pulls the 128-byte tensor map into the TMA unit's cache before the first copy needs it.
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// ---------------------------------------------------------------------------------------------
// Thread-block clusters (sm_90): blocks launched as a group onto one GPC, each able to reach the
// others' shared memory. A TMA copy can then multicast: one read from L2 lands at the same
// shared-memory offset in every block named in `cta_mask` (bit r = the block of cluster rank r),
// and counts its bytes on the mbarrier at `bar`'s offset in each of them. A barrier in another
// block is reached through mapa, the address of the same variable in block `cta`.
__device__ __forceinline__ uint32_t cluster_ctarank() {
    uint32_t rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return rank;
}

__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map,
                                                      uint64_t* bar, int col, int row,
                                                      uint16_t cta_mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_addr(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(col), "r"(row), "r"(smem_addr(bar)),
        "h"(cta_mask)
        : "memory");
}

// One arrival on the barrier at `bar`'s offset in block `cta` of this cluster (itself or
// another). PTX's default semantics, release at CTA scope, as CUTLASS's cluster barriers use: the
// stage reads it announces are wgmmas already waited for. Release at cluster scope compiles to a
// fence before every arrival (ERRBAR, CGAERRBAR in SASS), and waiting with acquire at cluster
// scope to an L1 invalidate after every poll (CCTL.IVALL): in p12's step 16 the two together
// held 31% of the warps' stall samples (Nsight Compute's source page, H200).
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta) {
    asm volatile(
        "{\n\t.reg .b32 remote;\n\t"
        "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n\t}" ::"r"(smem_addr(bar)), "r"(cta)
        : "memory");
}

// Every thread of every block of the cluster arrives, then waits for all the others: after
// barrier set-up (a block's barriers must be initialised before another block's copies or
// arrivals reach them) and before exit (no block may leave while another still writes into it).
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::
                     : "memory");
}

// ---------------------------------------------------------------------------------------------
constexpr uint32_t kSwizzleAtomBytes = 1024;  // 8 rows x 128 bytes

// The 128-byte swizzle (TMA's CU_TENSOR_MAP_SWIZZLE_128B, wgmma's "128B swizzling", CuTe's
// Swizzle<3, 4, 3>): in a tile of 128-byte rows that starts on a 1024-byte boundary, byte
// `offset` of the plain row-major tile lands at the returned offset: bits 4-6 (the 16-byte
// chunk c within its row) are XORed with bits 7-9 (the row r, mod 8), so chunk c of row r sits
// at chunk position c ^ (r % 8). The 8 chunks of one column (same c, rows r .. r + 7) then lie
// in 8 different 16-byte slots, i.e. in all 32 banks: reading a column is conflict-free.
__host__ __device__ __forceinline__ constexpr uint32_t sw128_offset(uint32_t offset) {
    return offset ^ (((offset >> 7) & 7u) << 4);
}

// wgmma operand descriptors. A and B live in shared memory as TMA wrote them with 128-byte
// swizzle: each row of a tile is 64 fp16 (128 bytes, one k-slice of BK = 64), and in row r the
// 16-byte chunk c sits at chunk position c ^ (r % 8). Eight rows (1024 bytes) form one swizzle
// atom; atoms follow each other every 1024 bytes down the tile. That is exactly wgmma's
// "K-major, 128B swizzle" canonical layout, described by a 64-bit descriptor:
//   bits  0-13  start address >> 4
//   bits 16-29  leading byte offset >> 4: unused for a swizzled K-major operand whose k-extent
//               (16 fp16 = 32 bytes) stays inside one 128-byte row; set to 1 by convention
//   bits 32-45  stride byte offset >> 4: 1024 bytes from one 8-row atom to the next
//   bits 49-51  base offset: 0, because every tile starts on a 1024-byte boundary
//   bits 62-63  layout: 1 = 128-byte swizzle
// The k-th 16-wide slice of the 64-wide row starts 32 * k bytes in: the hardware applies the
// swizzle XOR to the address it computes, so advancing the start address by 32 bytes (2 in the
// >> 4 units) selects the slice, as long as the tile itself is 1024-byte aligned.
// Host and device: fusedkit.hopper_layout mirrors it, and its tests run this one on the host.
__host__ __device__ __forceinline__ constexpr uint64_t sw128_desc(uint32_t smem_byte_addr) {
    return static_cast<uint64_t>((smem_byte_addr & 0x3FFFF) >> 4)  // start address
           | (static_cast<uint64_t>(16 >> 4) << 16)                 // leading byte offset (unused)
           | (static_cast<uint64_t>(kSwizzleAtomBytes >> 4) << 32)  // stride byte offset
           | (1ull << 62);                                          // 128-byte swizzle
}

// ---------------------------------------------------------------------------------------------
// The wgmma sequence of one warpgroup (4 consecutive warps, 128 threads):
//   wgmma_fence()        before the first wgmma that reads or writes accumulators that ordinary
//                        instructions touched (zeroing them, the epilogue of the previous tile)
//   wgmma ... wgmma      issued asynchronously; they chain on the same accumulator registers
//   wgmma_commit()       closes the batch into one "group"
//   wgmma_wait<N>()      blocks until at most N groups are still running; after wait<0> the
//                        accumulators hold the result and the shared tiles may be overwritten.
// fence_accumulators() is for the compiler, not the hardware: an empty asm that "writes" every
// accumulator, so that no read of them is moved above the wait and no write below the fence.
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
    static_assert(kPending >= 0 && kPending <= 7, "wgmma.wait_group takes 0..7");
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

template <int R>
__device__ __forceinline__ void fence_accumulators(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D (64 x 128, fp32, registers) += A (64 x 16, smem) * B (16 x 128, smem), both operands K-major
// (imm-trans-a = imm-trans-b = 0) and 16-bit, of the PTX type AB ("f16" or "bf16"). scale_d = 0
// would ignore D's old value.
#define FUSEDKIT_WGMMA_M64N128K16(AB)                                                                             \
    asm volatile(                                                                                                 \
        "{\n\t.reg .pred p;\n\t"                                                                                  \
        "setp.ne.b32 p, %66, 0;\n\t"                                                                              \
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." AB "." AB " {"                                             \
        "%0, %1, %2, %3, %4, %5, %6, %7, "                                                                        \
        "%8, %9, %10, %11, %12, %13, %14, %15, "                                                                  \
        "%16, %17, %18, %19, %20, %21, %22, %23, "                                                                \
        "%24, %25, %26, %27, %28, %29, %30, %31, "                                                                \
        "%32, %33, %34, %35, %36, %37, %38, %39, "                                                                \
        "%40, %41, %42, %43, %44, %45, %46, %47, "                                                                \
        "%48, %49, %50, %51, %52, %53, %54, %55, "                                                                \
        "%56, %57, %58, %59, %60, %61, %62, %63}, "                                                               \
        "%64, %65, p, 1, 1, 0, 0;\n\t}"                                                                           \
        :                                                                                                         \
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),         \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),   \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])  \
        : "l"(desc_a), "l"(desc_b), "r"(scale_d)                                                                  \
        : "memory")

__device__ __forceinline__ void wgmma_m64n128k16_f16(float (&d)[64], uint64_t desc_a,
                                                     uint64_t desc_b, int scale_d = 1) {
    FUSEDKIT_WGMMA_M64N128K16("f16");
}

__device__ __forceinline__ void wgmma_m64n128k16_bf16(float (&d)[64], uint64_t desc_a,
                                                      uint64_t desc_b, int scale_d = 1) {
    FUSEDKIT_WGMMA_M64N128K16("bf16");
}

// D (64 x 256) += A (64 x 16) * B (16 x 256): the widest wgmma, 128 fp32 accumulators a thread.
__device__ __forceinline__ void wgmma_m64n256k16_f16(float (&d)[128], uint64_t desc_a,
                                                     uint64_t desc_b, int scale_d = 1) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "setp.ne.b32 p, %130, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, "
        "%8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, "
        "%24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, "
        "%40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, "
        "%56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, "
        "%72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, "
        "%88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, "
        "%104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, "
        "%120, %121, %122, %123, %124, %125, %126, %127}, "
        "%128, %129, p, 1, 1, 0, 0;\n\t}"
        :
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d)
        : "memory");
}

// Accumulator fragment of wgmma .m64nNk16 with fp32 D (PTX ISA, "wgmma register fragment
// layout for matrix D"): thread t of the warpgroup (warp w = t / 32, lane l = t % 32) holds N / 2
// floats; for every 8-column slab j = 0 .. N / 8 - 1
//   d[4j + 0], d[4j + 1]  at row 16w + l / 4,      columns 8j + 2 (l % 4) + {0, 1}
//   d[4j + 2], d[4j + 3]  at row 16w + l / 4 + 8,  the same two columns
// i.e. mma.sync's m16n8 C fragment, stacked over the four warps (16 rows each).
__host__ __device__ __forceinline__ constexpr int accumulator_row(int thread_in_warpgroup) {
    return 16 * (thread_in_warpgroup / 32) + (thread_in_warpgroup % 32) / 4;
}

__host__ __device__ __forceinline__ constexpr int accumulator_col(int thread_in_warpgroup) {
    return 2 * (thread_in_warpgroup % 4);
}

// ---------------------------------------------------------------------------------------------
// setmaxnreg: a warpgroup hands registers back to (dec) or takes them from (inc) the SM's pool.
// It only works when the kernel is compiled with a fixed register budget at entry
// (__launch_bounds__(threads, 1)) and every warp of the warpgroup executes the same instruction.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
    static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: 24..256, step 8");
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}

template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
    static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: 24..256, step 8");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}

// ---------------------------------------------------------------------------------------------
// The pipeline's prologue, written once for every wgmma step. A ring of kStages stages has two
// mbarriers a stage: full[s] takes one arrival (the copying thread's expect_tx) and the stage's
// TMA bytes; empty[s] takes `consumer_arrivals`, one per warp (of every block of a cluster that
// reads the stage) once its wgmmas no longer read it. Thread 0 initialises them and fences the
// init; the caller's block-wide (or cluster-wide) barrier right after makes them visible before
// anyone waits on them, and is the last one: from there on the roles meet only at mbarriers.
template <int kStages>
__device__ __forceinline__ void init_ring(uint64_t (&full)[kStages], uint64_t (&empty)[kStages],
                                          uint32_t consumer_arrivals) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], consumer_arrivals);
        }
        mbar_fence_init();
    }
}

// Warpgroup 0 of a warp-specialised kernel becomes the producer: all its 128 threads hand
// registers back to the consumers (setmaxnreg.dec down to kRegs), and its thread 0, which issues
// every copy, prefetches the descriptors of the tensor maps it will read. True on that thread.
template <int kRegs, class... Maps>
__device__ __forceinline__ bool become_producer(const Maps*... maps) {
    setmaxnreg_dec<kRegs>();
    if (threadIdx.x != 0) return false;
    (tma_prefetch_map(maps), ...);
    return true;
}

// ---------------------------------------------------------------------------------------------
// Host: the tensor map (TMA descriptor) of a row-major fp16 or fp32 matrix (rows, cols), read in
// boxes of box_rows x 128 bytes (64 fp16 or 32 fp32: the 128-byte swizzle span). The driver function
// cuTensorMapEncodeTiled is fetched through the runtime (cudaGetDriverEntryPoint*), so the
// extension needs no -lcuda. Returns nullptr on success, else a message naming what is wrong.

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

inline EncodeTiledFn encode_tiled_fn() {
    static EncodeTiledFn fn = []() -> EncodeTiledFn {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult status{};
#if CUDART_VERSION >= 12050
        // The 12.0 ABI of the function, whatever driver is installed.
        const cudaError_t err =
            cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &status);
#else
        const cudaError_t err =
            cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p, cudaEnableDefault, &status);
#endif
        if (err != cudaSuccess || status != cudaDriverEntryPointSuccess) return nullptr;
        return reinterpret_cast<EncodeTiledFn>(p);
    }();
    return fn;
}

constexpr uint32_t kBoxBytes = 128;  // bytes per box row, any element type

inline const char* make_tensor_map_2d(CUtensorMap* map, const void* base, uint64_t rows,
                                      uint64_t cols, uint32_t box_rows, CUtensorMapDataType type,
                                      uint32_t elem_bytes, const char* stride_hint) {
    if (rows == 0 || cols == 0) return "tensor map: the matrix is empty";
    if (reinterpret_cast<uintptr_t>(base) % 16 != 0)
        return "tensor map: the base address must be 16-byte aligned";
    if ((cols * elem_bytes) % 16 != 0) return stride_hint;
    if (box_rows == 0 || box_rows > 256) return "tensor map: box rows must be 1..256";
    const EncodeTiledFn encode = encode_tiled_fn();
    if (encode == nullptr) return "tensor map: cuTensorMapEncodeTiled not found in the CUDA driver";
    const cuuint64_t dims[2] = {cols, rows};            // innermost first
    const cuuint64_t strides[1] = {cols * elem_bytes};  // bytes from one row to the next
    const cuuint32_t box[2] = {kBoxBytes / elem_bytes, box_rows};
    const cuuint32_t element_strides[2] = {1, 1};
    const CUresult r = encode(map, type, 2, const_cast<void*>(base), dims, strides, box,
                              element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // NONE: zeros past the edges
    return r == CUDA_SUCCESS ? nullptr : "tensor map: cuTensorMapEncodeTiled rejected the arguments";
}

// fp16: boxes of box_rows x 64 columns.
inline const char* make_tensor_map_f16(CUtensorMap* map, const void* base, uint64_t rows,
                                       uint64_t cols, uint32_t box_rows) {
    return make_tensor_map_2d(map, base, rows, cols, box_rows, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
                              "tensor map: the row stride must be a multiple of 16 bytes (K % 8 == 0 in fp16)");
}

// fp32: boxes of box_rows x 32 columns, swizzled exactly as an fp16 box (16-byte chunks).
inline const char* make_tensor_map_f32(CUtensorMap* map, const void* base, uint64_t rows,
                                       uint64_t cols, uint32_t box_rows) {
    return make_tensor_map_2d(map, base, rows, cols, box_rows, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4,
                              "tensor map: the row stride must be a multiple of 16 bytes (K % 4 == 0 in fp32)");
}

}  // namespace fusedkit::sm90
