// The fast CPU layers (fast_cpu.hpp) as Layer<T>s, in the fused form: each splits the batch into
// chunks of kCpuChunkSamples (fixed, whatever the number of threads), runs the chunks in parallel
// (OpenMP), and sums the chunks' weight gradients in chunk order. Each output element is written
// by exactly one chunk and every sum runs in an order fixed by the batch size alone, so the
// results do not depend on the number of threads.
#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "layers/blas_cpu.hpp"
#include "layers/cpu_layers.hpp"
#include "layers/fast_cpu.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5 {
namespace {

// body(chunk, first sample, samples in the chunk) for every chunk of a batch of n, in parallel
// (a single chunk, as `classify` of one image has, without starting the threads).
template <class Body>
void for_each_chunk(int n, Body body) {
  const int chunks = cpu_chunk_count(n);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int c = 0; c < chunks; ++c)
    body(c, c * kCpuChunkSamples, std::min(kCpuChunkSamples, n - c * kCpuChunkSamples));
}

// `buffer` grown to at least `count` elements (never shrunk); its data.
template <class T>
T* grown(std::vector<T>& buffer, std::size_t count) {
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

// Each chunk's weight and bias gradients (chunk c's at c * count of each tensor), and their sum in
// chunk order.
template <class T>
class ChunkGradients {
 public:
  ChunkGradients(std::size_t weights, std::size_t biases) : m_weights(weights), m_biases(biases) {}

  // Room for the chunks of a batch of n; before the chunks run (a layer that only ever runs
  // forward, as in `classify`, never allocates it).
  void prepare(int n) {
    grown(m_weight_partials, m_weights * cpu_chunk_count(n));
    grown(m_bias_partials, m_biases * cpu_chunk_count(n));
  }

  T* weight(int chunk) { return m_weight_partials.data() + chunk * m_weights; }
  T* bias(int chunk) { return m_biases ? m_bias_partials.data() + chunk * m_biases : nullptr; }

  // Sums the chunks of a batch of n, in chunk order, into the layer's gradient slices.
  void sum(int n, T* dL_dweight, T* dL_dbias) const {
    const int chunks = cpu_chunk_count(n);
    if (m_weights) sum_chunks_cpu(m_weight_partials.data(), chunks, m_weights, dL_dweight);
    if (m_biases) sum_chunks_cpu(m_bias_partials.data(), chunks, m_biases, dL_dbias);
  }

 private:
  std::size_t m_weights, m_biases;
  std::vector<T> m_weight_partials, m_bias_partials;
};

// C1, C3: unroll + GEMM, one unroll buffer per chunk. No fused activation (the subsampling after
// them applies it, or with --conv-units squashed a1 and a3 do) and a bias only with --conv-units
// squashed (Fig 16.5 puts the book's in the subsampling).
template <class T>
class ConvolutionFast final : public Layer<T> {
 public:
  ConvolutionFast(const LayerSpec& spec, T* weight, T* weight_grad, T* bias, T* bias_grad,
                  const float* mask)
      : Layer<T>(spec.name, spec.in, spec.out),
        m_k(spec.kernel),
        m_weight(weight),
        m_weight_grad(weight_grad),
        m_bias(bias),
        m_bias_grad(bias_grad),
        m_mask(mask),
        m_chunks(weight_count(shape(1)), bias ? std::size_t(spec.out.c) : 0) {}

  void forward(const T* x, T* y, int n) override {
    grown(m_unrolled, unrolled_count(shape(1)) * cpu_chunk_count(n));
    for_each_chunk(n, [&](int c, int first, int count) {
      conv_forward_fast_cpu(shape(count), x + first * this->in().size(), m_weight, m_bias,
                            y + first * this->out().size(), unrolled(c));
    });
  }
  void backward_input(const T*, const T*, const T* dL_dy, T* dL_dx, int n) override {
    grown(m_unrolled, unrolled_count(shape(1)) * cpu_chunk_count(n));
    for_each_chunk(n, [&](int c, int first, int count) {
      conv_backward_input_fast_cpu(shape(count), dL_dy + first * this->out().size(), m_weight,
                                   dL_dx + first * this->in().size(), unrolled(c));
    });
  }
  void backward_weights(const T* x, const T*, const T* dL_dy, int n) override {
    grown(m_unrolled, unrolled_count(shape(1)) * cpu_chunk_count(n));
    m_chunks.prepare(n);
    for_each_chunk(n, [&](int c, int first, int count) {
      conv_backward_weights_fast_cpu(shape(count), x + first * this->in().size(),
                                     dL_dy + first * this->out().size(), m_chunks.weight(c),
                                     m_chunks.bias(c), unrolled(c));
    });
    m_chunks.sum(n, m_weight_grad, m_bias_grad);
    if (m_mask)
      for (std::size_t i = 0; i < weight_count(shape(1)); ++i) m_weight_grad[i] *= T(m_mask[i]);
  }

 private:
  ConvShape shape(int n) const {
    return {n, this->in().c, this->in().h, this->in().w, this->out().c, m_k};
  }
  T* unrolled(int chunk) { return m_unrolled.data() + chunk * unrolled_count(shape(1)); }

  int m_k;
  T *m_weight, *m_weight_grad, *m_bias, *m_bias_grad;
  const float* m_mask;
  std::vector<T> m_unrolled;
  ChunkGradients<T> m_chunks;
};

// a1, a3 (--conv-units squashed): the activation of C1's and C3's output, which no fast
// convolution fuses. Element by element and chunk by chunk, with the fast layers' tanh.
template <class T>
class ActivationFast final : public Layer<T> {
 public:
  ActivationFast(const LayerSpec& spec, Activation kind)
      : Layer<T>(spec.name, spec.in, spec.out), m_kind(kind) {}

  void forward(const T* x, T* y, int n) override {
    const std::size_t size = this->in().size();
    for_each_chunk(n, [&](int, int first, int count) {
      activation_forward_fast_cpu(m_kind, x + first * size, y + first * size, count * size);
    });
  }
  void backward_input(const T*, const T* y, const T* dL_dy, T* dL_dx, int n) override {
    const std::size_t size = this->in().size();
    for_each_chunk(n, [&](int, int first, int count) {
      const std::size_t offset = first * size;
      activation_gradient_fast_cpu(FusedActivation{true, m_kind}, y + offset, dL_dy + offset,
                                   dL_dx + offset, count * size);
    });
  }

 private:
  Activation m_kind;
};

// F6, the output layer, and C5: a convolution whose filter covers its whole input (5x5 on 5x5, a
// 1x1 output) is a fully connected layer, with W[m][c][p][q] already the (out, in) matrix's row
// m and X[n][c][h][w] the input vector of sample n. One GEMM per chunk instead of one GEMV per
// sample.
template <class T>
class DenseFast final : public Layer<T> {
 public:
  DenseFast(const LayerSpec& spec, FusedActivation activation, T* weight, T* weight_grad, T* bias,
            T* bias_grad)
      : Layer<T>(spec.name, spec.in, spec.out),
        m_activation(activation),
        m_weight(weight),
        m_weight_grad(weight_grad),
        m_bias(bias),
        m_bias_grad(bias_grad),
        m_chunks(spec.in.size() * spec.out.size(), spec.out.size()) {}

  void forward(const T* x, T* y, int n) override {
    for_each_chunk(n, [&](int, int first, int count) {
      dense_forward_fast_cpu(shape(count), m_activation, x + first * in_size(), m_weight, m_bias,
                             y + first * out_size());
    });
  }
  void backward_input(const T*, const T* y, const T* dL_dy, T* dL_dx, int n) override {
    grown(m_dL_dz, out_size() * n);
    for_each_chunk(n, [&](int, int first, int count) {
      dense_backward_input_fast_cpu(shape(count), dL_dz(y, dL_dy, first, count), m_weight,
                                    dL_dx + first * in_size());
    });
  }
  void backward_weights(const T* x, const T* y, const T* dL_dy, int n) override {
    grown(m_dL_dz, out_size() * n);
    m_chunks.prepare(n);
    for_each_chunk(n, [&](int c, int first, int count) {
      dense_backward_weights_fast_cpu(shape(count), x + first * in_size(),
                                      dL_dz(y, dL_dy, first, count), m_chunks.weight(c),
                                      m_chunks.bias(c));
    });
    m_chunks.sum(n, m_weight_grad, m_bias_grad);
  }

 private:
  FcShape shape(int n) const { return {n, int(in_size()), int(out_size())}; }
  std::size_t in_size() const { return this->in().size(); }
  std::size_t out_size() const { return this->out().size(); }
  // dE/dZ of samples [first, first + count): dE/dY itself without an activation, else formed in
  // this layer's buffer (each chunk its own rows).
  const T* dL_dz(const T* y, const T* dL_dy, int first, int count) {
    const std::size_t offset = first * out_size();
    if (!m_activation.enabled) return dL_dy + offset;
    activation_gradient_fast_cpu(m_activation, y + offset, dL_dy + offset, m_dL_dz.data() + offset,
                                 count * out_size());
    return m_dL_dz.data() + offset;
  }

  FusedActivation m_activation;
  T *m_weight, *m_weight_grad, *m_bias, *m_bias_grad;
  std::vector<T> m_dL_dz;
  ChunkGradients<T> m_chunks;
};

// S2, S4: the reference's pooling on each chunk, the activation fused after it. With trainable
// subsampling, a per-map coefficient (the layer's weight) too.
template <class T>
class SubsamplingFast final : public Layer<T> {
 public:
  SubsamplingFast(const LayerSpec& spec, Subsampling kind, FusedActivation activation, T* coef,
                  T* coef_grad, T* bias, T* bias_grad)
      : Layer<T>(spec.name, spec.in, spec.out),
        m_kind(kind),
        m_activation(activation),
        m_k(spec.kernel),
        m_coef(coef),
        m_coef_grad(coef_grad),
        m_bias(bias),
        m_bias_grad(bias_grad),
        m_chunks(coef ? std::size_t(spec.out.c) : 0, spec.out.c) {}

  void forward(const T* x, T* y, int n) override {
    for_each_chunk(n, [&](int, int first, int count) {
      subsample_forward_fast_cpu(shape(count), m_kind, m_activation, x + first * this->in().size(),
                                 m_bias, y + first * this->out().size(), m_coef);
    });
  }
  void backward_input(const T* x, const T* y, const T* dL_dy, T* dL_dx, int n) override {
    grown(m_dL_dz, this->out().size() * n);
    for_each_chunk(n, [&](int, int first, int count) {
      subsample_backward_input_fast_cpu(shape(count), m_kind, x + first * this->in().size(),
                                        dL_dz(y, dL_dy, first, count),
                                        dL_dx + first * this->in().size(), m_coef);
    });
  }
  void backward_weights(const T* x, const T* y, const T* dL_dy, int n) override {
    grown(m_dL_dz, this->out().size() * n);
    m_chunks.prepare(n);
    for_each_chunk(n, [&](int c, int first, int count) {
      const T* dz = dL_dz(y, dL_dy, first, count);
      subsample_backward_bias_cpu(shape(count), dz, m_chunks.bias(c));
      if (m_coef)
        subsample_backward_coef_cpu(shape(count), x + first * this->in().size(), dz,
                                    m_chunks.weight(c));
    });
    m_chunks.sum(n, m_coef_grad, m_bias_grad);
  }

 private:
  PoolShape shape(int n) const { return {n, this->in().c, this->in().h, this->in().w, m_k}; }
  const T* dL_dz(const T* y, const T* dL_dy, int first, int count) {
    const std::size_t offset = first * this->out().size();
    activation_gradient_fast_cpu(m_activation, y + offset, dL_dy + offset, m_dL_dz.data() + offset,
                                 count * this->out().size());
    return m_dL_dz.data() + offset;
  }

  Subsampling m_kind;
  FusedActivation m_activation;
  int m_k;
  T *m_coef, *m_coef_grad, *m_bias, *m_bias_grad;
  std::vector<T> m_dL_dz;
  ChunkGradients<T> m_chunks;
};

}  // namespace

template <class T>
std::unique_ptr<Layer<T>> make_fast_cpu_layer(const LayerSpec& spec, const NetConfig& config,
                                              T* weight, T* weight_grad, T* bias, T* bias_grad,
                                              const float* c3_mask) {
  use_single_threaded_blas();
  const FusedActivation activation{spec.activate, config.activation};
  const bool covers_input =
      spec.out.h == 1 && spec.out.w == 1 && spec.kernel == spec.in.h && spec.kernel == spec.in.w;
  switch (spec.kind) {
    case LayerKind::convolution:
      if (covers_input && !c3_mask)
        return std::make_unique<DenseFast<T>>(spec, activation, weight, weight_grad, bias,
                                              bias_grad);
      if (spec.activate)
        throw Error("internal: the fast CPU convolution fuses no activation (" + spec.name + ")");
      return std::make_unique<ConvolutionFast<T>>(spec, weight, weight_grad, bias, bias_grad,
                                                  c3_mask);
    case LayerKind::fully_connected:
      return std::make_unique<DenseFast<T>>(spec, activation, weight, weight_grad, bias, bias_grad);
    case LayerKind::subsampling:
      return std::make_unique<SubsamplingFast<T>>(spec, config.subsampling, activation, weight,
                                                  weight_grad, bias, bias_grad);
    case LayerKind::rbf:
      return make_rbf_cpu_layer<T>(spec);
    case LayerKind::activation:  // a1, a3: after a convolution, which fuses none
      if (!spec.activate) return std::make_unique<ActivationFast<T>>(spec, config.activation);
      break;
  }
  throw Error("internal: the fast CPU layers run the fused topology, which has no layer like " +
              spec.name);
}

template std::unique_ptr<Layer<float>> make_fast_cpu_layer<float>(const LayerSpec&,
                                                                  const NetConfig&, float*, float*,
                                                                  float*, float*, const float*);
template std::unique_ptr<Layer<double>> make_fast_cpu_layer<double>(const LayerSpec&,
                                                                    const NetConfig&, double*,
                                                                    double*, double*, double*,
                                                                    const float*);

}  // namespace lenet5
