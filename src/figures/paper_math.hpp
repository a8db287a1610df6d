// The computations behind the cuDNN-paper and CUTLASS-blog figure targets (textbook-figures.md
// §3 and §5), free of printing so that tests call them directly: the output-size formulas, the
// paper's Eq. (3) implemented literally, and the quantities derived from Table 2.
// Naming follows the cuDNN paper here (§0.2): K output maps, R x S filters, P x Q outputs.
#pragma once

#include <string>
#include <vector>

namespace lenet5::figures {

// ---- output size (§3.1, §3.2) -----------------------------------------------------------------

// Formula (1) as printed: P = ceil((H - R + 1 + 2 pad) / u), a real division then ceil.
int cudnn_output_size(int H, int R, int u, int pad);
// The usual floor form, P = floor((H + 2 pad - R) / u) + 1. Requires H + 2 pad >= R: C++'s
// division truncates toward zero, so a negative numerator would give 1 instead of 0.
int floor_output_size(int H, int R, int u, int pad);
// Caffe's pooling "ceil mode", ceil((H + 2 pad - R) / u) + 1.
int ceil_mode_output_size(int H, int R, int u, int pad);

struct OutputSizeSweep {
  long long cases = 0;
  long long formula1_vs_floor = 0;  // mismatches between formula (1) and the floor form
  long long off_grid = 0;           // cases with (H + 2 pad - R) mod u != 0
  long long ceil_mode_differs = 0;  // cases where the ceil mode differs from the floor form
  long long ceil_mode_differs_off_grid = 0;  // ... of which off the grid
};
// Every H <= max_h, R <= H, u <= max_u, pad <= max_pad.
OutputSizeSweep sweep_output_sizes(int max_h, int max_u, int max_pad);

// ---- Eq. (3): the forward convolution (§3.2) ---------------------------------------------------

struct ConvParams {
  int n = 1, c = 1, h = 1, w = 1, k = 1, r = 1, s = 1, u = 1, v = 1, pad_h = 0, pad_w = 0;
  int p() const { return cudnn_output_size(h, r, u, pad_h); }
  int q() const { return cudnn_output_size(w, s, v, pad_w); }
};

// O[n,k,p,q] = sum_{c,r,s} D0[n, c, g(p,u,R,r,pad_h), g(q,v,S,s,pad_w)] F[k,c,r,s], with
// g(p,u,R,r,pad) = p u + R - r - 1 - pad (Eq. 2) and D0 the zero-extended D: a true convolution.
std::vector<double> cudnn_eq3(const ConvParams& cp, const std::vector<double>& d,
                              const std::vector<double>& f);
// The chapter's cross-correlation with the same striding and padding: the input row read by
// output row p and filter row r is p u + r - pad.
std::vector<double> cross_correlation(const ConvParams& cp, const std::vector<double>& d,
                                      const std::vector<double>& f);
// F[k][c] turned by 180 degrees: F'[k,c,r,s] = F[k,c,R-1-r,S-1-s].
std::vector<double> rotate180(const ConvParams& cp, const std::vector<double>& f);

// ---- Table 2 (§3.4) ----------------------------------------------------------------------------

struct CudnnLayer {
  int n, c, h, w, k, r, s;
};
// The five layers as printed in the paper's Table 2 (u = v = 1, no padding).
const std::vector<CudnnLayer>& cudnn_table2_paper();
// The same layers with the C of the benchmark the paper cites (convnet-benchmarks: layer 2 has
// C = 64, layer 5 has C = 384), outside knowledge [X] in the specification.
const std::vector<CudnnLayer>& cudnn_table2_convnet_benchmarks();

// The row sets that cudnn.tab3 can time (lenet5 figures --cudnn-table2=NAME; §3.4's caveat asks
// for both and for saying which one ran).
struct CudnnRowSet {
  std::string name;         // the option's value: "paper" or "convnet-benchmarks"
  std::string description;  // "convnet-benchmarks (C = 64 for layer 2, C = 384 for layer 5; D04)"
  std::string file_suffix;  // in output file names, so that both runs' tables coexist
  const std::vector<CudnnLayer>* layers = nullptr;  // cudnn_table2_paper() or ..._benchmarks()
};
// The accepted names, the default ("paper") first.
const std::vector<std::string>& cudnn_row_set_names();
// The row set called `name`; a UsageError naming the accepted values for any other name.
CudnnRowSet cudnn_row_set(const std::string& name);

struct LayerDerived {
  int p = 0, q = 0;
  double flop = 0;        // 2 N K C R S P Q
  long long dm_rows = 0;  // C R S
  long long dm_cols = 0;  // N P Q
  double dm_bytes = 0;    // float32 D_m for the whole batch
  double dm_bytes_per_sample = 0;
  double expansion = 0;  // R S P Q / (H W): unrolled elements per input element
};
LayerDerived derive(const CudnnLayer& layer);

}  // namespace lenet5::figures
