// cudaStream_t and cudaEvent_t for host code that is also compiled without the CUDA toolkit (a
// build without GPU support, CMakeLists.txt): the runtime's own declarations (driver_types.h),
// repeated, so that naming a stream needs no CUDA header. Where cuda_runtime.h is included too,
// both declare the same types.
#pragma once

struct CUstream_st;
struct CUevent_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
