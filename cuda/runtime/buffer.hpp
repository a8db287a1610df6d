// Buffer<T>: an owned array of T on the CPU or the GPU. The only owner of device memory in the
// program (no naked cudaMalloc elsewhere); move-only, freed in the destructor.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "core/device.hpp"
#include "cuda/runtime/runtime.hpp"

namespace lenet5 {

template <class T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(Device device, std::size_t count) : m_device(device), m_count(count) {
    if (device == Device::gpu)
      m_data = static_cast<T*>(cuda::allocate(count * sizeof(T)));
    else if (count > 0)
      m_data = new T[count];
    zero();
  }
  ~Buffer() { reset(); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept { swap(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      reset();
      swap(other);
    }
    return *this;
  }

  T* data() { return m_data; }
  const T* data() const { return m_data; }
  std::size_t size() const { return m_count; }
  std::size_t bytes() const { return m_count * sizeof(T); }
  Device device() const { return m_device; }

  void zero() {
    if (m_device == Device::gpu)
      cuda::fill_zero(m_data, bytes());
    else if (m_count > 0)
      std::memset(static_cast<void*>(m_data), 0, bytes());
  }
  // Copies between this buffer (wherever it lives) and host memory of the same length.
  void copy_from_host(const T* host) {
    if (m_device == Device::gpu)
      cuda::copy_to_device(m_data, host, bytes());
    else if (m_count > 0)
      std::memcpy(static_cast<void*>(m_data), host, bytes());
  }
  void copy_to_host(T* host) const {
    if (m_device == Device::gpu)
      cuda::copy_to_host(host, m_data, bytes());
    else if (m_count > 0)
      std::memcpy(static_cast<void*>(host), m_data, bytes());
  }
  std::vector<T> to_vector() const {
    std::vector<T> host(m_count);
    copy_to_host(host.data());
    return host;
  }

 private:
  void reset() noexcept {
    if (m_device == Device::gpu)
      cuda::release(m_data, bytes());
    else
      delete[] m_data;
    m_data = nullptr;
    m_count = 0;
  }
  void swap(Buffer& other) noexcept {
    std::swap(m_device, other.m_device);
    std::swap(m_count, other.m_count);
    std::swap(m_data, other.m_data);
  }

  Device m_device = Device::cpu;
  std::size_t m_count = 0;
  T* m_data = nullptr;
};

}  // namespace lenet5
