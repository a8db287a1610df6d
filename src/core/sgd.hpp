// Mini-batch SGD over the flat parameter buffer, in one pass (one launch on the GPU).
//   g = grad + weight_decay * w
//   classical momentum: v = mu * v + g;  w -= lr * v
//   Nesterov momentum:  v = mu * v + g;  w -= lr * (g + mu * v)
//   plain SGD (mu = 0): w -= lr * g      (the book's W(t+1) = W(t) - lambda dE/dW)
// The gradient is already the batch mean (the loss gradient carries the 1/n).
#pragma once

#include <cstddef>
#include <string>

namespace lenet5 {

// The optimizers' names in their table (engine/optimizers.hpp).
constexpr const char* kSgdName = "sgd";
constexpr const char* kSdlmName = "sdlm";

struct SgdSettings {
  double momentum = 0;
  bool nesterov = false;
  double weight_decay = 0;
  // Which optimizer of the table (engine/optimizers.hpp) applies the update: kSgdName, or
  // kSdlmName with the two settings below (core/sdlm.hpp has its formulas).
  std::string optimizer = kSgdName;
  double sdlm_mu = 0.02;   // SDLM's damping mu (LeCun et al. 1998: 0.02)
  int sdlm_samples = 500;  // samples of each pass that estimate SDLM's Hessian diagonal
};

// The name of SGD's one state buffer, the velocity v, kept only when momentum is above 0
// (checkpoint tensors "<tensor>.momentum").
constexpr const char* kMomentumState = "momentum";

}  // namespace lenet5
