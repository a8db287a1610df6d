#include "cuda/engine.hpp"

#include "core/error.hpp"

namespace lenet5 {

std::unique_ptr<Engine> make_gpu_engine(const NetConfig&, const SgdSettings&, int) {
  throw Error("this build has no GPU engine yet; use --device cpu");
}

}  // namespace lenet5
