// How the CPU targets are split over source files (each stays a readable size); only
// chapter_targets.cpp and paper_targets.cpp include this.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/topology.hpp"
#include "figures/figures.hpp"
#include "layers/reference_cpu.hpp"

namespace lenet5::figures {

// §1.13-§1.22: Fig 16.14 and the unroll + GEMM path, Table 16.1, Exercises 4 and 5
// (chapter_gemm_targets.cpp). chapter_cpu_targets() appends them to its own.
std::vector<Target> chapter_gemm_cpu_targets();

// The topology's layer `name` ("c3"), and a convolution layer's shape for a batch of n.
const LayerSpec& layer(const std::string& name);
ConvShape conv_shape(const std::string& name, int n = 1);

// E = sum tanh(y)^2 / 2, the loss the finite-difference checks use, and dE/dy = tanh(y) (1 -
// tanh(y)^2) into *dy when dy is not null.
double tanh_square_loss(const std::vector<double>& y, std::vector<double>* dy);

// Central differences in double (finite_difference_max_rel_error, chapter_math.hpp, says why its
// errors stay near 1e-10) against the analytic dE/dX, dE/dW and dE/db of a layer: prints the
// largest relative errors after `setup` and checks them against the spec's bound 1e-6 (§1.6),
// far above that noise and far below the error of a wrong or missing term.
void check_finite_differences(Block& b, const std::string& setup, const std::string& what,
                              const std::function<double()>& loss, std::vector<double>& x,
                              const std::vector<double>& dx, std::vector<double>& w,
                              const std::vector<double>& dw, std::vector<double>& bias,
                              const std::vector<double>& db);

}  // namespace lenet5::figures
