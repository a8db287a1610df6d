// Host-side wrappers of the CUDA runtime that the rest of the program needs: is there a GPU,
// which one, and raw device memory (owned by lenet5::Buffer, never by hand).
#pragma once

#include <cstddef>
#include <string>

namespace lenet5::cuda {

// Number of usable CUDA devices; 0 (not an error) when there is no driver or no device.
int device_count();
// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)"; requires device_count() > 0.
std::string device_description(int device = 0);

void* allocate(std::size_t bytes);
void release(void* pointer) noexcept;
void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes);
void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes);
void copy_device_to_device(void* dst, const void* src, std::size_t bytes);
void fill_zero(void* device_pointer, std::size_t bytes);
void synchronize();

}  // namespace lenet5::cuda
