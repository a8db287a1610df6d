// The whole-step kernels (see whole_step.cuh for the contract and the plan).
//
// Shapes (core/topology.hpp): input 32x32 -> C1 6@28x28 -> S2 6@14x14 -> C3 16@10x10 -> S4 16@5x5
// -> C5 120 -> F6 84 -> output 10. One block of kThreads threads per sample; every stage
// (whole_step_forward.cuh, whole_step_backward.cuh, and whole_step_tf32.cuh's C3 stages with
// --precision tf32) is a short function that all threads of the block call, separated by
// __syncthreads().
//
// The convolution stages are register-blocked: a thread keeps a strip of outputs in registers and
// reuses every shared-memory value it loads for several multiply-adds, because shared-memory
// loads, not multiply-adds, bound a block that works alone on one sample.
#include <algorithm>
#include <iterator>
#include <string>
#include <type_traits>

#include "core/error.hpp"
#include "core/topology.hpp"
#include "cuda/engine/whole_step.cuh"
#include "cuda/engine/whole_step_backward.cuh"
#include "cuda/engine/whole_step_device.cuh"
#include "cuda/engine/whole_step_forward.cuh"
#include "cuda/engine/whole_step_tf32.cuh"
#include "cuda/engine/whole_step_update.cuh"
#include "cuda/kernels/block_reduce.cuh"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/runtime.hpp"

namespace lenet5::cuda {

// ---- the kernels -----------------------------------------------------------------------------

// One sample's step, every stage of it: the body of both sample kernels below. Without Train, the
// forward pass and the loss only, the evaluation kernel's body: the same stages, so a sample's
// logits are those its training step computes from the same weights, and no record is written.
// R picks C3's stages: the float ones, or the tensor cores' (whole_step_tf32.cuh). SamplesPerSm:
// the sample blocks an SM holds at once (the kernel's version below), which picks C5's rows in
// flight and where C3's fp32 weight gradient runs.
template <Activation A, Subsampling P, Precision R, bool Train = true, int SamplesPerSm = 1>
__device__ __forceinline__ void sample_step(const SampleArgs& group_args) {
  const SampleArgs args = args_of_model(group_args, int(blockIdx.y));
  extern __shared__ float4 shared_storage[];
  SampleShared& s = *reinterpret_cast<SampleShared*>(shared_storage);
  const int sample = blockIdx.x;
  const WholeStepOffsets& at = args.at;
  const float* params = args.params;
  float* record = Train ? args.records + std::size_t(sample) * record::floats : nullptr;
  const auto in_record = [record](int at_in_record) {
    return Train ? record + at_in_record : nullptr;
  };
  // Where this block starts in a dense layer's rows (see dense_forward): spread over the rows.
  const auto row_shift = [sample](int rows) { return sample * 13 % rows; };
  // C5's rows in flight per warp. Four rows of 400 floats hold 64 registers of weights, all that
  // a thread has with two samples per SM: there they spilled, and two rows at a time measured
  // faster. The same bits either way: dense_forward sums each row
  // alone, and in dense_backward_rows warp w still takes rows w, w + 16, ... in order, padding
  // rows included (kC5 / kWarps rounds up to 8 rows a warp, a multiple of both 2 and 4).
  constexpr int kC5Rows = SamplesPerSm > 1 ? 2 : 4;

  allow_next_grid();
  load_image(s, args, sample);
  wait_for_previous_grid();
  if constexpr (R == Precision::tf32)
    load_weights(s, args, RoundedW3{});
  else
    load_weights(s, args);
  __syncthreads();
  c1_forward(s);
  __syncthreads();
  pool_forward<A, P>(s.c1, kMaps1, kSide2, params + at.s2_bias, s.a2);
  __syncthreads();
  if constexpr (R == Precision::tf32)
    c3_forward_tf32(s);
  else
    c3_forward(s);
  __syncthreads();
  pool_forward<A, P>(s.c3, kMaps3, kSide4, params + at.s4_bias, s.a4);
  __syncthreads();
  if constexpr (Train)
    for (int i = threadIdx.x; i < kFlat4; i += kThreads) record[record::a4 + i] = s.a4[i];
  dense_forward<A, true, kFlat4, kC5, kC5Rows>(params + at.c5_weight, params + at.c5_bias, s.a4,
                                               s.a5, in_record(record::a5), row_shift(kC5));
  __syncthreads();
  dense_forward<A, true, kC5, kF6, 6>(params + at.f6_weight, params + at.f6_bias, s.a5, s.a6,
                                      in_record(record::a6), row_shift(kF6));
  __syncthreads();
  dense_forward<A, false, kF6, kOut, 1>(params + at.output_weight, params + at.output_bias, s.a6,
                                        s.z, nullptr, 0);
  __syncthreads();
  loss_and_gradient(s, args, sample, in_record(record::d7));
  if constexpr (!Train) return;
  __syncthreads();
  dense_backward_columns<A, kF6, kOut>(params + at.output_weight, s.d7, s.a6, s.d6,
                                       record + record::d6);
  __syncthreads();
  dense_backward_rows<A, kC5, kF6, 6>(params + at.f6_weight, s.d6, s.a5, s.d5, record + record::d5,
                                      s.scratch, row_shift(kF6), [](int, float) {});
  __syncthreads();
  dense_backward_rows<A, kFlat4, kC5, kC5Rows>(
      params + at.c5_weight, s.d5, s.a4, s.d4, nullptr, s.scratch, row_shift(kC5),
      [&s](int i, float dz) { s4_backward_window<P>(s, i, dz); });
  __syncthreads();
  bias_gradient(s.d4, kMaps3, kSide4 * kSide4, record + record::gb4);
  // fp32: C3's weight gradient (240 threads of 1,000 multiply-adds) is the long pole of the
  // weight-gradient stage, where C1's partials (168 of 700) wait for it. With two samples per SM,
  // its first half runs on the warps that C3's input gradient leaves idle (120 of their 128
  // threads: half is what fits), the second half beside C1's partials below. Each thread computes
  // the same sums either way: the same bits. Measured against running it after: batch-256 epochs
  // shorter and packed sweeps faster; with one sample per SM, batch-64 and batch-128 epochs no
  // shorter (within what two builds differ by), so version 1 (SamplesPerSm 1) keeps it after and
  // compiles none of it.
  constexpr int kC3WeightGradientBeside = SamplesPerSm > 1 ? kC3WeightGradientThreads / 2 : 0;
  static_assert(kC3WeightGradientBeside <= kSpareThreads, "the spare warps have room");
  if constexpr (R == Precision::tf32)
    c3_input_gradient_tf32<A, P>(s);
  else
    c3_input_gradient<A, P>(s, [&s, record](int spare) {
      if constexpr (kC3WeightGradientBeside > 0)
        if (spare < kC3WeightGradientBeside) c3_weight_gradient(s, record + record::g3, spare);
    });
  __syncthreads();
  bias_gradient(s.d2, kMaps1, kSide2 * kSide2, record + record::gb2);
  // Side by side: warps 0-5 C1's weight-gradient partials, and C3's weight gradient: in tf32 on
  // warps 8-15, in fp32 its threads from kC3WeightGradientBeside on, on warps 8-15 (8-11 with
  // two samples per SM).
  static_assert(kC1WeightGradientThreads <= kThreads / 2 &&
                    kC3WeightGradientThreads - kC3WeightGradientBeside <= kThreads / 2 &&
                    kC3WeightGradientTf32Threads <= kThreads / 2,
                "each half of the block has room");
  c1_weight_gradient_partials(s, int(threadIdx.x));
  const int upper = int(threadIdx.x) - kThreads / 2;  // < 0 in the lower half
  if constexpr (R == Precision::tf32)
    c3_weight_gradient_tf32(s, record + record::g3, upper);
  else
    c3_weight_gradient(s, record + record::g3, upper < 0 ? upper : upper + kC3WeightGradientBeside);
  __syncthreads();
  c1_weight_gradient_sum(s, record + record::g1);
}

// The sample kernel in two versions of the same stages, and run_samples picks one by the grid's
// size:
//   1. one sample per SM, for grids that fit the SMs (on the H200's 132 SMs, a lone model at batch
//      64 or 128): the block keeps the registers ptxas gives it (80-92 a thread for most networks)
//      and asks for over half an SM's shared memory, the rest of which is L1: the shortest step;
//   2. two per SM (kSampleBlocksPerSm), for larger grids (batch 256, packed sweeps): 64 registers
//      a thread and the largest carveout, so that a second sample's warps issue while the first's
//      wait at barriers or on L2. Measured against version 1 alone: batch-256 epochs shorter and
//      packed sweeps faster by a fifth; but run on grids that fit the SMs, it made batch-64 and
//      batch-128 epochs much longer (fewer registers and 28 KB of L1 beside the largest carveout;
//      which of the two costs more was not measured apart).
// Both compile the same arithmetic in the same order, so they give the same bits (a test checks
// it for every activation, subsampling kind and C3 table): which one ran never shows in the
// weights.
template <Activation A, Subsampling P, Precision R>
__global__ void __launch_bounds__(kThreads) whole_step_sample_kernel1(SampleArgs group_args) {
  sample_step<A, P, R>(group_args);
}

template <Activation A, Subsampling P, Precision R>
__global__ void __launch_bounds__(kThreads, kSampleBlocksPerSm)
    whole_step_sample_kernel2(SampleArgs group_args) {
  sample_step<A, P, R, /*Train=*/true, kSampleBlocksPerSm>(group_args);
}

// The forward pass and the loss of a test set, one block per sample and model
// (WholeStep::evaluate): a set of 10,000 images is a grid far larger than the SMs, hence version
// 2's two samples per SM (where an SM holds only one working set, it runs one at a time, with the
// same 64 registers).
template <Activation A, Subsampling P, Precision R>
__global__ void __launch_bounds__(kThreads, kSampleBlocksPerSm)
    whole_step_evaluation_kernel(SampleArgs group_args) {
  sample_step<A, P, R, /*Train=*/false, kSampleBlocksPerSm>(group_args);
}

// The batch gradient of every parameter of model blockIdx.y, then the SGD update: blocks
// [0, flat_blocks) the flat parameters, the rest the dense weights' tiles (whole_step_update.cuh).
// Every parameter's sum runs in a fixed order, so every run gives the same bits. Warp 0 of block 0
// adds the step's statistics.
// With R = tf32 the dense weights' tiles are the tensor cores' (whole_step_update.cuh), which
// launch_update picks for --precision tf32 and batches of kMmaMinBatch and more; with fp32, the
// tiles of Rows rows per warp (dense_tile_rows).
template <Precision R, int Rows = 1>
__global__ void __launch_bounds__(kUpdateThreads) whole_step_update_kernel(UpdateArgs group_args) {
  allow_next_grid();
  wait_for_previous_grid();
  const UpdateArgs args = args_of_model(group_args, int(blockIdx.y));
  if (blockIdx.x == 0 && threadIdx.x < 32 && args.stats)
    warp_add_sample_stats(args.sample_loss, args.sample_correct, args.n, args.stats,
                          int(threadIdx.x));
  const int flat = flat_blocks(args.at);
  if (int(blockIdx.x) < flat)
    update_flat_parameters(args, int(blockIdx.x));
  else if constexpr (R == Precision::tf32)
    update_dense_weights_tf32(args, int(blockIdx.x) - flat);
  else
    update_dense_weights<Rows>(args, int(blockIdx.x) - flat);
}

namespace {

using SampleKernel = void (*)(SampleArgs);

// Which of the kernels with a sample per block: the two versions of the training step, or the
// evaluation.
enum class SampleKernelKind { step1, step2, evaluation };

template <Activation A, SampleKernelKind Kind>
SampleKernel sample_kernel_for(Subsampling pooling, Precision precision) {
  const auto kernel = [](auto pooled, auto precise) -> SampleKernel {
    constexpr Subsampling kP = decltype(pooled)::value;
    constexpr Precision kR = decltype(precise)::value;
    if constexpr (Kind == SampleKernelKind::step1) return whole_step_sample_kernel1<A, kP, kR>;
    if constexpr (Kind == SampleKernelKind::step2) return whole_step_sample_kernel2<A, kP, kR>;
    return whole_step_evaluation_kernel<A, kP, kR>;
  };
  const auto in_precision = [&](auto pooled) -> SampleKernel {
    if (precision == Precision::tf32)
      return kernel(pooled, std::integral_constant<Precision, Precision::tf32>{});
    return kernel(pooled, std::integral_constant<Precision, Precision::fp32>{});
  };
  switch (pooling) {
    case Subsampling::average:
      return in_precision(std::integral_constant<Subsampling, Subsampling::average>{});
    case Subsampling::max:
      return in_precision(std::integral_constant<Subsampling, Subsampling::max>{});
    case Subsampling::trainable:
      break;  // TrainSettings::net_config refuses it with --kernels whole-step
  }
  throw Error("internal: the whole-step kernels have no trainable subsampling");
}

template <SampleKernelKind Kind>
SampleKernel sample_kernel_for(const NetConfig& config) {
  switch (config.activation) {
    case Activation::tanh:
      return sample_kernel_for<Activation::tanh, Kind>(config.subsampling, config.precision);
    case Activation::sigmoid:
      return sample_kernel_for<Activation::sigmoid, Kind>(config.subsampling, config.precision);
    case Activation::scaled_tanh:
      return sample_kernel_for<Activation::scaled_tanh, Kind>(config.subsampling, config.precision);
    case Activation::relu:
      return sample_kernel_for<Activation::relu, Kind>(config.subsampling, config.precision);
  }
  throw Error("internal: unknown activation");
}

// whole_step_sample_kernel1 runs one sample per SM, whole_step_sample_kernel2 two.
SampleKernel sample_kernel_for(const NetConfig& config, SampleBuild build) {
  return build == SampleBuild::two_per_sm ? sample_kernel_for<SampleKernelKind::step2>(config)
                                          : sample_kernel_for<SampleKernelKind::step1>(config);
}

SampleKernel evaluation_kernel_for(const NetConfig& config) {
  return sample_kernel_for<SampleKernelKind::evaluation>(config);
}

using UpdateKernel = void (*)(UpdateArgs);

// The update kernel for the dense tiles' precision and (fp32) rows per warp, with its number of
// dense-tile blocks: one choice for both, so that the grid fits the kernel.
struct UpdateKernelChoice {
  UpdateKernel kernel;
  int dense_blocks;
};
UpdateKernelChoice update_kernel_for(Precision precision, int rows = 1) {
  if (precision == Precision::tf32)
    return {whole_step_update_kernel<Precision::tf32>, kDenseMmaTiles};
  if (rows == 1) return {whole_step_update_kernel<Precision::fp32, 1>, all_dense_tiles<1>()};
  if (rows == 2) return {whole_step_update_kernel<Precision::fp32, 2>, all_dense_tiles<2>()};
  if (rows == 4) return {whole_step_update_kernel<Precision::fp32, 4>, all_dense_tiles<4>()};
  throw Error("internal: fp32 dense tiles of " + std::to_string(rows) + " rows a warp");
}

// The rows per warp of the fp32 dense tiles (update_dense_tile), for `tiles` as asked. Four rows
// read each input from L2 a quarter as often, but make 73 tiles where one row makes 287, each with
// four times the work; two rows, 144 tiles, are between. Measured, the same bits either way, four
// rows against one: packed sweeps of 16 and 64 models at batch 256 faster, and a lone model's batch
// 128 (a grid that fits the SMs) shorter epochs; but a lone model's batch 64 and batch 256 longer.
// There, two rows against one: batch 256 shorter. Why the lone model's batch sizes differ was not
// measured (a guess: beside 128 sample blocks, 73 tiles' blocks all find room to start early;
// beside 64, even 287 do; a grid larger than the SMs leaves no room).
int dense_tile_rows(int n, const ModelGroup& group, int sms, DenseTiles tiles) {
  if (tiles == DenseTiles::fp32_one_row) return 1;
  if (tiles == DenseTiles::fp32_two_rows) return 2;
  if (tiles == DenseTiles::fp32_four_rows) return 4;
  constexpr int kFourRowsMinBatch = 65;
  if (group.models > 1) return 4;
  if (n > sms) return 2;
  return n >= kFourRowsMinBatch ? 4 : 1;
}

// Whether `kernel` as loaded on this device contains the tensor cores' TF32 instructions (it was
// compiled for sm_80 or newer), which --precision tf32 needs (whole_step_tf32.cuh).
template <class Kernel>
bool has_tensor_float32(Kernel kernel) {
  return loaded_ptx_version(reinterpret_cast<const void*>(kernel)) >= 80;
}

// The batch size, checked before anything is sized by it.
int checked_batch(int max_batch) {
  if (max_batch < 1) throw UsageError("batch size must be at least 1");
  return max_batch;
}

// The group's size, checked before anything is sized by it (the grid's second dimension).
int checked_models(int models) {
  if (models < 1 || models > 65535)
    throw Error("internal: a whole-step group of " + std::to_string(models) + " models");
  return models;
}

int offset_of(const ParamLayout& layout, const char* name) {
  return int(layout.find(name).offset);
}

WholeStepOffsets offsets_of(const ParamLayout& layout) {
  WholeStepOffsets at{};
  at.c1_weight = offset_of(layout, "c1.weight");
  at.s2_bias = offset_of(layout, "s2.bias");
  at.c3_weight = offset_of(layout, "c3.weight");
  at.s4_bias = offset_of(layout, "s4.bias");
  at.c5_weight = offset_of(layout, "c5.weight");
  at.c5_bias = offset_of(layout, "c5.bias");
  at.f6_weight = offset_of(layout, "f6.weight");
  at.f6_bias = offset_of(layout, "f6.bias");
  at.output_weight = offset_of(layout, "output.weight");
  at.output_bias = offset_of(layout, "output.bias");
  at.buffer_floats = int(layout.buffer_floats);
  // The update kernel tells tensors apart by where they start (flat_gradient, flat_segments).
  const int in_order[] = {at.c1_weight,     at.s2_bias,     at.c3_weight,    at.s4_bias,
                          at.c5_weight,     at.c5_bias,     at.f6_weight,    at.f6_bias,
                          at.output_weight, at.output_bias, at.buffer_floats};
  if (!std::is_sorted(std::begin(in_order), std::end(in_order)))
    throw Error("internal: the whole-step kernels expect the tensors in the network's order");
  // c3.weight and the dense rows are read as float4: those tensors must start 16-byte aligned.
  for (int offset : {at.c3_weight, at.c5_weight, at.f6_weight, at.output_weight})
    if (offset % 4 != 0) throw Error("internal: a dense weight tensor is not 16-byte aligned");
  return at;
}

}  // namespace

WholeStep::WholeStep(const NetConfig& config, const ParamLayout& layout, int max_batch, int models)
    : m_config(config),
      m_offsets(offsets_of(layout)),
      m_max_batch(checked_batch(max_batch)),
      m_models(checked_models(models)),
      m_records(Device::gpu, std::size_t(models) * max_batch * record::floats),
      m_sample_loss(Device::gpu, std::size_t(models) * max_batch),
      m_sample_correct(Device::gpu, std::size_t(models) * max_batch),
      m_c3_mask(Device::gpu, kW3) {
  // The stages compute the book's linear C1 and C3: c1.bias and c3.bias would be left out.
  // TrainSettings::net_config refuses --conv-units squashed with --kernels whole-step.
  if (config.conv_units != ConvUnits::linear)
    throw Error("internal: the whole-step kernels have no squashed C1 and C3 units");
  // Their products are fp32 or tf32: sample_kernel_for would run a bf16 network in fp32. The
  // settings allow bf16 with --kernels tensor only, whose lone models train with TensorBackward
  // (gpu_engine.cu), and backend.cpp's packs_models never packs a bf16 model.
  if (config.precision == Precision::bf16)
    throw Error("internal: the whole-step kernels have no bf16 products");
  const std::vector<float> mask = c3_weight_mask(config);
  m_c3_mask.copy_from_host(mask.data());
  int device = 0, shared_limit = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(
      cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (std::size_t(shared_limit) < sizeof(SampleShared))
    throw UsageError("--kernels whole-step keeps a sample in " +
                     std::to_string(sizeof(SampleShared) / 1024) +
                     " KB of shared memory per block; this GPU allows " +
                     std::to_string(shared_limit / 1024) + " KB: use --kernels fast");
  const SampleKernel one = sample_kernel_for(config, SampleBuild::one_per_sm);
  const SampleKernel two = sample_kernel_for(config, SampleBuild::two_per_sm);
  const SampleKernel evaluation = evaluation_kernel_for(config);
  m_programmatic = has_programmatic_launch(one) && has_programmatic_launch(two) &&
                   has_programmatic_launch(update_kernel_for(Precision::fp32, 1).kernel) &&
                   has_programmatic_launch(update_kernel_for(Precision::fp32, 4).kernel) &&
                   has_programmatic_launch(update_kernel_for(config.precision).kernel);
  if (config.precision == Precision::tf32 &&
      !(has_tensor_float32(one) && has_tensor_float32(two) && has_tensor_float32(evaluation) &&
        has_tensor_float32(update_kernel_for(Precision::tf32).kernel))) {
    throw UsageError(
        "--precision tf32 needs the tensor cores of compute capability 8.0 or newer, "
        "and kernels built for them; this GPU is " +
        current_compute_capability() +
        " and runs kernels built for an older one: use "
        "--precision fp32, or rebuild with CMAKE_CUDA_ARCHITECTURES naming it");
  }
  // Version 1 keeps one sample per SM by asking for more than half an SM's shared memory: its
  // registers alone do not (ptxas gives some activations' builds 64 a thread, which would let two
  // blocks share an SM and take each other's issue slots in a grid that fits the SMs).
  int shared_per_sm = 0;
  CUDA_CHECK(
      cudaDeviceGetAttribute(&shared_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  m_one_per_sm_shared = std::min(std::max(sizeof(SampleShared), std::size_t(shared_per_sm) / 2),
                                 std::size_t(shared_limit));
  // Opt in to the working set's shared memory (above the default 48 KB), once per kernel used.
  // Those with two samples per SM also ask for the SM's largest shared-memory carveout: left to
  // itself, the driver may size it for one working set.
  CUDA_CHECK(cudaFuncSetAttribute(one, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(m_one_per_sm_shared)));
  for (const SampleKernel kernel : {two, evaluation}) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(sizeof(SampleShared))));
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    int(cudaSharedmemCarveoutMaxShared)));
  }
  m_sms = current_multiprocessors();
  // Where an SM cannot hold two working sets (less shared memory than sm_90's), version 2 would
  // only run with fewer registers: every grid gets version 1 there.
  m_two_fit = samples_per_sm(SampleBuild::two_per_sm) >= kSampleBlocksPerSm;
}

int WholeStep::samples_per_sm(SampleBuild build) const {
  int blocks = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, sample_kernel_for(m_config, build), kThreads, shared_bytes(build)));
  return blocks;
}

std::size_t WholeStep::shared_bytes(SampleBuild build) const {
  return build == SampleBuild::two_per_sm ? sizeof(SampleShared) : m_one_per_sm_shared;
}

SampleBuild WholeStep::build_for(int n, const ModelGroup& group, SampleBuild asked) const {
  if (asked != SampleBuild::by_grid) return asked;
  const bool grid_exceeds_sms = std::int64_t(n) * group.models > std::int64_t(m_sms);
  return m_two_fit && grid_exceeds_sms ? SampleBuild::two_per_sm : SampleBuild::one_per_sm;
}

void WholeStep::run_samples(const std::uint8_t* images, const std::uint8_t* labels,
                            const std::int32_t* indices, int n,
                            const DeviceAugmentation& augmentation, const float* params,
                            const ModelGroup& group, SampleBuild build, cudaStream_t stream) {
  if (group.models < 1 || group.models > m_models)
    throw Error("internal: whole-step group of " + std::to_string(group.models) +
                " models, room for " + std::to_string(m_models));
  if (n < 1 || n > m_max_batch)
    throw Error("internal: whole-step batch of " + std::to_string(n) + " samples, room for " +
                std::to_string(m_max_batch));
  if (augmentation.enabled() && (!indices || !augmentation.epoch))
    throw Error("internal: an augmented whole-step batch needs indices and the epoch");
  SampleArgs args{images,
                  labels,
                  indices,
                  n,
                  augmentation,
                  pixel_scaling(m_config.input_scaling),
                  params,
                  m_offsets,
                  m_records.data(),
                  m_sample_loss.data(),
                  m_sample_correct.data(),
                  group,
                  std::size_t(m_max_batch),
                  /*predicted=*/nullptr};
  const SampleBuild chosen = build_for(n, group, build);
  launch_kernel({dim3(unsigned(n), unsigned(group.models)), dim3(kThreads), shared_bytes(chosen),
                 stream, m_programmatic},
                sample_kernel_for(m_config, chosen), args);
}

void WholeStep::launch_update(int n, const ModelGroup& group, const SgdSettings* sgd,
                              const float* lr, float* params, float* velocity, float* gradients_out,
                              StepStats* stats, cudaStream_t stream, DenseTiles tiles) {
  UpdateArgs args{};
  args.at = m_offsets;
  args.records = m_records.data();
  args.n = n;
  args.c3_mask = m_c3_mask.data();
  if (sgd) {  // the same float conversions as sgd_step_cpu, done once on the host
    args.mu = float(sgd->momentum);
    args.nesterov = sgd->nesterov;
    args.decay = float(sgd->weight_decay);
  }
  args.lr = lr;
  args.params = params;
  args.velocity = velocity;
  args.gradients_out = gradients_out;
  args.sample_loss = m_sample_loss.data();
  args.sample_correct = m_sample_correct.data();
  args.stats = stats;
  args.group = group;
  args.samples_stride = std::size_t(m_max_batch);
  const bool mma =
      m_config.precision == Precision::tf32 && n >= kMmaMinBatch && tiles == DenseTiles::by_batch;
  const Precision dense = mma ? Precision::tf32 : Precision::fp32;
  const UpdateKernelChoice update =
      update_kernel_for(dense, dense_tile_rows(n, group, m_sms, tiles));
  launch_kernel(
      {dim3(unsigned(flat_blocks(m_offsets) + update.dense_blocks), unsigned(group.models)),
       dim3(kUpdateThreads), 0, stream, m_programmatic},
      update.kernel, args);
}

void WholeStep::train_step(const std::uint8_t* images, const std::uint8_t* labels,
                           const std::int32_t* indices, int n,
                           const DeviceAugmentation& augmentation, const SgdSettings& sgd,
                           const float* lr, float* params, float* velocity, StepStats* stats,
                           cudaStream_t stream, const ModelGroup& group) {
  if (sgd.momentum != 0 && !velocity)
    throw Error("internal: a whole-step update with momentum needs a velocity buffer");
  run_samples(images, labels, indices, n, augmentation, params, group, SampleBuild::by_grid,
              stream);
  launch_update(n, group, &sgd, lr, params, velocity, nullptr, stats, stream);
}

void WholeStep::evaluate(const std::uint8_t* images, const std::uint8_t* labels, int n,
                         const float* params, const ModelGroup& group, double* loss,
                         std::int32_t* predicted, cudaStream_t stream) const {
  checked_models(group.models);
  if (n < 1) throw Error("internal: a whole-step evaluation of no images");
  ModelGroup models = group;
  models.augment_seeds = nullptr;  // evaluated as they are
  const SampleArgs args{images,
                        labels,
                        /*indices=*/nullptr,
                        n,
                        DeviceAugmentation{},
                        pixel_scaling(m_config.input_scaling),
                        params,
                        m_offsets,
                        /*records=*/nullptr,
                        loss,
                        /*sample_correct=*/nullptr,
                        models,
                        std::size_t(n),
                        predicted};
  // A plain launch: the kernel's wait for the previous grid returns at once, and the stream's
  // order alone puts it after the training steps queued before it.
  launch_kernel({dim3(unsigned(n), unsigned(group.models)), dim3(kThreads), sizeof(SampleShared),
                 stream, /*programmatic=*/false},
                evaluation_kernel_for(m_config), args);
}

void WholeStep::gradients(const std::uint8_t* images, const std::uint8_t* labels,
                          const std::int32_t* indices, int n,
                          const DeviceAugmentation& augmentation, const float* params,
                          float* gradients, StepStats* stats, cudaStream_t stream,
                          SampleBuild build, DenseTiles tiles) {
  run_samples(images, labels, indices, n, augmentation, params, ModelGroup{}, build, stream);
  launch_update(n, ModelGroup{}, nullptr, nullptr, nullptr, nullptr, gradients, stats, stream,
                tiles);
}

}  // namespace lenet5::cuda
