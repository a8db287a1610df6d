// Network<T>: the fixed LeNet-5 on one device. One flat parameter buffer and one flat gradient
// buffer (same layout, core/layout.hpp); layers hold views into them. Activations for a batch of
// up to max_batch samples are kept for the backward pass.
#pragma once

#include <memory>
#include <vector>

#include "core/layer.hpp"
#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "core/topology.hpp"
#include "cuda/runtime/buffer.hpp"
#include "engine/engine.hpp"

namespace lenet5::cuda {
class SideStream;
}

namespace lenet5 {

template <class T>
class Network {
 public:
  Network(const NetConfig& config, Device device, int max_batch);
  ~Network();

  const NetConfig& config() const { return m_config; }
  const ParamLayout& layout() const { return m_layout; }
  Device device() const { return m_device; }
  int max_batch() const { return m_max_batch; }

  Buffer<T>& parameters() { return m_params; }
  const Buffer<T>& parameters() const { return m_params; }
  Buffer<T>& gradients() { return m_grads; }

  // Seeded fan-in initialisation of all parameters (core/layout.hpp).
  void initialise(std::uint64_t seed);

  // input: (n, 1, 32, 32) on this network's device, n <= max_batch.
  void forward(const T* input, int n);
  // The output layer's (n, 10): logits (softmax output) or the RBF units' squared distances to
  // the prototypes (--output rbf), whichever config().output makes.
  const T* logits() const { return m_activations.back().data(); }
  // Back-propagates dL/dlogits (n, 10) through every layer; OVERWRITES gradients().
  void backward(const T* dL_dlogits, int n);

  const std::vector<std::unique_ptr<Layer<T>>>& layers() const { return m_layers; }
  // The input and the output of layer `layer` of the last forward(), on this network's device.
  const T* input() const { return m_input; }
  const T* output(std::size_t layer) const { return m_activations.at(layer + 1).data(); }

  // Sample `sample` of the last forward(), layer by layer as the topology names them (c1 ...
  // output), each after its activation: in the plain form the activation layer's output replaces
  // that of the layer before it, in the fused form the layer applied it itself. On the GPU each
  // layer's slice of the sample is copied back (seven small copies, which wait for the forward).
  std::vector<LayerOutput> layer_outputs(int sample) const;
  // The input of sample `sample` of the last forward(), (1, 32, 32), read back likewise.
  std::vector<float> input_values(int sample) const;

 private:
  NetConfig m_config;
  Device m_device;
  int m_max_batch;
  ParamLayout m_layout;
  Buffer<T> m_params, m_grads;
  Buffer<float> m_c3_mask;
  std::vector<LayerSpec> m_specs;  // the form in use, plain or fused, one per layer
  std::vector<std::unique_ptr<Layer<T>>> m_layers;
  std::vector<Buffer<T>> m_activations;  // [0] input copy slot unused; [i+1] = output of layer i
  std::vector<Buffer<T>> m_activation_grads;
  const T* m_input = nullptr;
  std::unique_ptr<cuda::SideStream> m_side;  // GPU only: where the weight gradients run
};

}  // namespace lenet5
