// Gathering a training batch on the device: MNIST bytes -> the network's (N, 1, 32, 32) input.
// Contract: exactly gather_batch_cpu of data/batch.hpp (same normalisation, same padding, bit for
// bit), plus the labels, on device pointers.
//
// Version 1, gather_batch_kernel1: one block per sample, threads over the 32x32 field.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/shapes.hpp"
#include "cuda/kernels/augment.cuh"

namespace lenet5::cuda {

// out (n, 1, 32, 32) <- images[indices[i]] (each 28*28 bytes), normalised under `scaling` and
// padded by 2;
// labels_out (n) <- labels[indices[i]] when both label pointers are non-null. indices null means
// 0..n-1 (offset the image and label pointers instead). The engine passes the device-resident
// permutation at offset `first`, so a training step reads the data set without a host copy.
void gather_batch(const std::uint8_t* images, const std::uint8_t* labels,
                  const std::int32_t* indices, int n, PixelScaling scaling, float* out,
                  std::uint8_t* labels_out, cudaStream_t stream);

// The same for a training step with augmentation (cuda/kernels/augment.cuh): each image
// augmented first, keyed by its index in `images` and the epoch in device memory, then
// normalised and padded alike. indices must not be null; augmentation must be enabled.
void gather_augmented_batch(const std::uint8_t* images, const std::uint8_t* labels,
                            const std::int32_t* indices, int n,
                            const DeviceAugmentation& augmentation, PixelScaling scaling,
                            float* out, std::uint8_t* labels_out, cudaStream_t stream);

// A training step's batch: the samples images[indices[i]] of the training set and their labels,
// augmented where `augmentation` is enabled, into `field` (n, 1, 32, 32) and `labels_out` (n).
// gather_training_batch gathers it (for --kernels tensor, a few steps' batches in a launch).
struct BatchGather {
  const std::uint8_t* images;
  const std::uint8_t* labels;
  const std::int32_t* indices;
  DeviceAugmentation augmentation;
  PixelScaling scaling;
  float* field;
  std::uint8_t* labels_out;
};

// n samples of `batch`: gather_augmented_batch where it augments, gather_batch where it does not.
void gather_training_batch(const BatchGather& batch, int n, cudaStream_t stream);

}  // namespace lenet5::cuda
