// The memory-sector model behind the `ex2` figure target (Exercise 2, textbook-figures.md §1.22):
// for Exercise 2's kernels (cuda/figures/conv_layouts.cuh), every warp-level load and store instruction
// they execute, and the distinct 32-byte sectors each touches. Exact, not sampled: the model runs
// the kernels' own thread mappings (direct_thread, unroll_thread) and index helpers over every
// block and warp of the real launch, so it counts the requests Nsight Compute counts as
// l1tex__t_requests_pipe_lsu_mem_global_op_{ld,st} (scripts/ncu_layouts.sh measures them).
//
// Assumptions, as in Exercise 5's model (chapter_math.hpp): every buffer starts on a 128-byte
// boundary (cudaMalloc gives 256); a warp is 32 consecutive linear thread ids of a block; idle
// threads (the kernels' bounds guards return at once) issue nothing, and a warp with no active
// thread issues no request; each loop iteration's load is one request (nothing vectorised).
#pragma once

#include "cuda/figures/conv_layouts.cuh"
#include "layers/reference_cpu.hpp"

namespace lenet5::figures {

// One kind of access summed over a kernel's requests.
struct AccessCount {
  long long requests = 0;  // warp-level instructions (at least one active thread)
  long long sectors = 0;   // distinct 32-byte sectors, summed over the requests
  long long lanes = 0;     // active threads, summed over the requests
  double sectors_per_request() const { return requests ? double(sectors) / requests : 0.0; }
  double lanes_per_request() const { return requests ? double(lanes) / requests : 0.0; }
  // The 4-byte words asked for over the bytes of the sectors moved: 1 when a warp's 32 floats
  // fill 4 sectors, 1/8 when each float costs a sector of its own.
  double efficiency() const { return sectors ? 4.0 * lanes / (32.0 * sectors) : 0.0; }
  AccessCount& operator+=(const AccessCount& o) {
    requests += o.requests, sectors += o.sectors, lanes += o.lanes;
    return *this;
  }
};

struct KernelSectors {
  AccessCount x_loads;         // X, in the layout
  AccessCount w_loads;         // W[M][C][K][K] (direct kernel only)
  AccessCount stores;          // Y (direct) or the unrolled matrix (unroll)
  AccessCount loads() const {  // every global load: what ncu's _op_ld counters see
    AccessCount all = x_loads;
    return all += w_loads;
  }
};

// conv_forward_layout's kernel on shape s: per thread C*K*K X loads and as many W loads, one store.
KernelSectors direct_kernel_sectors(cuda::Layout layout, const ConvShape& s);
// conv_unroll_layout's kernel on shape s: per thread K*K loads of X and K*K stores.
KernelSectors unroll_kernel_sectors(cuda::Layout layout, const ConvShape& s);

}  // namespace lenet5::figures
