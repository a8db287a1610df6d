// Network<T>: the layers made for a device, their views into the flat buffers, and the forward
// and backward passes through them.
#include "engine/network.hpp"

#include <algorithm>
#include <string>
#include <type_traits>

#include "core/error.hpp"
#include "core/topology.hpp"
#include "cuda/kernels/gpu_layers.hpp"
#include "cuda/runtime/streams.hpp"
#include "layers/cpu_layers.hpp"

namespace lenet5 {
namespace {

template <class T>
std::unique_ptr<Layer<T>> make_layer(Device device, const LayerSpec& spec, const NetConfig& config,
                                     const ParamLayout& layout, T* params, T* grads,
                                     const float* c3_mask, int max_batch) {
  T *weight = nullptr, *weight_grad = nullptr, *bias = nullptr, *bias_grad = nullptr;
  if (const std::string weight_name = weight_tensor(spec, config); !weight_name.empty()) {
    const std::size_t offset = layout.find(weight_name).offset;
    weight = params + offset;
    weight_grad = grads + offset;
  }
  if (!spec.bias.empty()) {
    const std::size_t offset = layout.find(spec.bias).offset;
    bias = params + offset;
    bias_grad = grads + offset;
  }
  const float* mask = spec.name == "c3" && config.c3_table == C3Table::lecun ? c3_mask : nullptr;
  if (device == Device::cpu)
    return make_cpu_layer<T>(spec, config, weight, weight_grad, bias, bias_grad, mask);
  if constexpr (std::is_same_v<T, float>) {
    return make_gpu_layer(spec, config, weight, weight_grad, bias, bias_grad, mask, max_batch);
  } else {
    throw Error("internal: the GPU backend is float32 only");
  }
}

}  // namespace

template <class T>
Network<T>::Network(const NetConfig& config, Device device, int max_batch)
    : m_config(config), m_device(device), m_max_batch(max_batch),
      m_layout(lenet5_layout(config)), m_params(device, m_layout.buffer_floats),
      m_grads(device, m_layout.buffer_floats) {
  if (max_batch < 1) throw UsageError("batch size must be at least 1");
  const std::vector<float> mask = c3_weight_mask(config);
  m_c3_mask = Buffer<float>(device, mask.size());
  m_c3_mask.copy_from_host(mask.data());
  m_activations.emplace_back();  // the input is not copied: forward() keeps a pointer to it
  m_activation_grads.emplace_back();
  // The book's kernel set runs the plain form, one layer per operation (the sequential reference
  // on the CPU); the fast sets run the fused form (same function, activations computed inside the
  // layers before them), by the fast kernels on the GPU and the fast CPU layers on the CPU.
  const bool fused = gpu_kernel_set(config.kernels).fused_layers;
  const std::vector<LayerSpec>& plain = lenet5_topology(config);
  m_specs = fused ? fused_topology(plain) : plain;
  for (const LayerSpec& spec : m_specs) {
    m_layers.push_back(make_layer<T>(device, spec, config, m_layout, m_params.data(),
                                     m_grads.data(), m_c3_mask.data(), max_batch));
    m_activations.emplace_back(device, spec.out.size() * max_batch);
    m_activation_grads.emplace_back(device, spec.out.size() * max_batch);
  }
  // Only the fused kernel sets: the book's kernel set uses one cuBLAS handle (and workspace),
  // which two streams must not use at the same time; it stays strictly in order.
  if (fused && device == Device::gpu) m_side = std::make_unique<cuda::SideStream>();
}

template <class T>
Network<T>::~Network() = default;

template <class T>
void Network<T>::initialise(std::uint64_t seed) {
  std::vector<T> host(m_layout.buffer_floats);
  initialise_parameters(m_layout, m_config, seed, host.data());
  m_params.copy_from_host(host.data());
}

template <class T>
void Network<T>::forward(const T* input, int n) {
  if (n < 1 || n > m_max_batch)
    throw Error("internal: batch of " + std::to_string(n) + " exceeds the network's " +
                std::to_string(m_max_batch));
  m_input = input;
  const T* x = input;
  for (std::size_t i = 0; i < m_layers.size(); ++i) {
    m_layers[i]->forward(x, m_activations[i + 1].data(), n);
    x = m_activations[i + 1].data();
  }
}

// Layer by layer from the output: the weight gradients of layer i (which only read) and its
// input gradient (which the layers below need next) are independent. On the GPU the weight
// gradients go to the side stream, each branching off the main stream once its dL/dy is ready,
// and the main stream waits for them all at the end (before the optimiser reads them).
template <class T>
void Network<T>::backward(const T* dL_dlogits, int n) {
  const cudaStream_t main = cuda::layer_stream();
  const T* dL_dy = dL_dlogits;
  for (std::size_t i = m_layers.size(); i-- > 0;) {
    const T* x = i == 0 ? m_input : m_activations[i].data();
    if (m_side) {
      m_side->branch_from(main);
      cuda::ScopedLayerStream on_side(m_side->get());
      m_layers[i]->backward_weights(x, m_activations[i + 1].data(), dL_dy, n);
    } else {
      m_layers[i]->backward_weights(x, m_activations[i + 1].data(), dL_dy, n);
    }
    if (i == 0) break;  // nobody needs the gradient with respect to the image
    m_layers[i]->backward_input(x, m_activations[i + 1].data(), dL_dy,
                                m_activation_grads[i].data(), n);
    dL_dy = m_activation_grads[i].data();
  }
  if (m_side) m_side->join_into(main);
}

namespace {

// `count` values at `values` on `device`, as floats on the host.
template <class T>
std::vector<float> host_floats(Device device, const T* values, std::size_t count) {
  std::vector<T> host(count);
  if (device == Device::gpu)
    cuda::copy_to_host(host.data(), values, count * sizeof(T));
  else
    std::copy(values, values + count, host.begin());
  return std::vector<float>(host.begin(), host.end());
}

}  // namespace

template <class T>
std::vector<LayerOutput> Network<T>::layer_outputs(int sample) const {
  if (sample < 0 || sample >= m_max_batch)
    throw Error("internal: no sample " + std::to_string(sample));
  std::vector<LayerOutput> outputs;
  for (std::size_t i = 0; i < m_specs.size(); ++i) {
    const LayerSpec& spec = m_specs[i];
    std::vector<float> values = host_floats(
        m_device, m_activations[i + 1].data() + spec.out.size() * sample, spec.out.size());
    if (spec.kind == LayerKind::activation && !outputs.empty())
      outputs.back().values = std::move(values);
    else
      outputs.push_back({spec.name, spec.out, std::move(values)});
  }
  return outputs;
}

template <class T>
std::vector<float> Network<T>::input_values(int sample) const {
  if (!m_input || sample < 0 || sample >= m_max_batch)
    throw Error("internal: no input of sample " + std::to_string(sample));
  return host_floats(m_device, m_input + std::size_t(kInputFloats) * sample, kInputFloats);
}

template class Network<float>;
template class Network<double>;

}  // namespace lenet5
