// Mini-batch SGD over the flat parameter buffer, in one pass (one launch on the GPU).
//   g = grad + weight_decay * w
//   classical momentum: v = mu * v + g;  w -= lr * v
//   Nesterov momentum:  v = mu * v + g;  w -= lr * (g + mu * v)
//   plain SGD (mu = 0): w -= lr * g      (the book's W(t+1) = W(t) - lambda dE/dW)
// The gradient is already the batch mean (the loss gradient carries the 1/n).
#pragma once

#include <cstddef>

namespace lenet5 {

struct SgdSettings {
  double momentum = 0;
  bool nesterov = false;
  double weight_decay = 0;
};

// SGD's name in the optimizers' table (core/optimizer.hpp), and the name of its one state buffer,
// the velocity v, kept only when momentum is above 0 (checkpoint tensors "<tensor>.momentum").
constexpr const char* kSgdName = "sgd";
constexpr const char* kMomentumState = "momentum";

}  // namespace lenet5
