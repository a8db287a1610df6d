// Turning MNIST bytes into the network's input: normalise_pixel (core/shapes.hpp) of each byte
// under the network's PixelScaling, the 28x28 image centred in a 32x32 field whose border is the
// normalised value of a black pixel.
#pragma once

#include <cstdint>

#include "core/augment.hpp"
#include "core/shapes.hpp"

namespace lenet5 {

// out (n, 1, 32, 32) <- images[indices[i]] (each 28*28 bytes). indices null means 0..n-1.
template <class T>
void gather_batch_cpu(const std::uint8_t* images, const std::int32_t* indices, int n,
                      PixelScaling scaling, T* out);

// The same for a training step of epoch `epoch`: each image augmented first (data/augment.hpp,
// keyed by its index in `images`), its resampled grey levels then normalised and padded alike.
// indices must not be null. Without augmentation both are gather_batch_cpu.
// The reference resamples in double (augment_image_cpu): what the device's gather and the fast
// one are tested against, and what the CPU's book kernel set trains on.
void gather_augmented_batch_reference(const std::uint8_t* images, const std::int32_t* indices,
                                      int n, const Augmentation& augmentation, std::uint32_t epoch,
                                      PixelScaling scaling, float* out);
// The fast one computes in float as the device does (augment_image_fast), several times faster:
// what the CPU's fast and whole-step kernel sets train on.
void gather_augmented_batch_fast(const std::uint8_t* images, const std::int32_t* indices, int n,
                                 const Augmentation& augmentation, std::uint32_t epoch,
                                 PixelScaling scaling, float* out);

}  // namespace lenet5
