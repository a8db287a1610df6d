// A thread block cluster's operations for the kernels that run as one (tensor_backward.cu's dense
// forward kernel): this block's rank, a peer block's copy of a shared-memory address (distributed
// shared memory), and the cluster's barrier, whole or in halves. cooperative_groups' cluster_group
// does the work; it exists where the kernel is compiled for compute capability 9.0 or newer. The
// other builds of such a kernel (the default build's compute_75 PTX) get functions that trap: the
// host launches a cluster kernel only where the loaded kernel's PTX is 9.0 or newer
// (loaded_ptx_version), so they are never reached.
#pragma once

#include <cooperative_groups.h>

namespace lenet5::cuda {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

struct BlockCluster {
  __device__ static int rank() { return int(cooperative_groups::this_cluster().block_rank()); }
  // Where `local`, an address in this block's shared memory, is in block `rank`'s.
  __device__ static float* peer(float* local, int rank) {
    return cooperative_groups::this_cluster().map_shared_rank(local, rank);
  }
  // The barrier in two halves: a block's arrival, then its wait for every block's. A block may
  // write another's shared memory only once that block has started (arrived): compute-sanitizer's
  // racecheck flags a write into "a block that might not have entered yet" otherwise.
  __device__ static void arrive() { cooperative_groups::this_cluster().barrier_arrive(); }
  __device__ static void wait() { cooperative_groups::this_cluster().barrier_wait(); }
  // The whole barrier: every block's shared-memory writes before it, remote ones too, are seen by
  // every block after it (release and acquire).
  __device__ static void sync() { cooperative_groups::this_cluster().sync(); }
};

#else

struct BlockCluster {
  __device__ static int rank() {
    __trap();
    return 0;
  }
  __device__ static float* peer(float* local, int) {
    __trap();
    return local;
  }
  __device__ static void arrive() { __trap(); }
  __device__ static void wait() { __trap(); }
  __device__ static void sync() { __trap(); }
};

#endif

}  // namespace lenet5::cuda
