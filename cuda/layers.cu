#include "cuda/layers.hpp"

#include "core/error.hpp"

namespace lenet5 {

bool gpu_layers_available() { return false; }

std::unique_ptr<Layer<float>> make_gpu_layer(const LayerSpec& spec, const NetConfig&, float*,
                                             float*, float*, float*, const float*) {
  throw Error("layer " + spec.name + ": this build has no CUDA kernels yet; use --device cpu");
}

}  // namespace lenet5
