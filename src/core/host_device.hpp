// LENET5_HD marks a function that the CPU reference and the CUDA kernels both compile: one
// definition of the arithmetic, so that host and device cannot drift apart.
#pragma once

#ifdef __CUDACC__
#define LENET5_HD __host__ __device__
#else
#define LENET5_HD
#endif
