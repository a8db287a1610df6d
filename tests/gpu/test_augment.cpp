// The augmented gather on the device (cuda/kernels/batch.cuh, gather_augmented_batch) against the
// double reference (gather_augmented_batch_reference of data/batch.hpp): affine and elastic,
// moderate settings and every range at its limit, for fixed (seed, epoch, sample) keys, the epoch
// read from device memory as the engine keeps it. The resampled pixels agree within the float bound
// of tests/common/augment_tolerance.hpp; the padding border and the labels agree exactly.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/augment_tolerance.hpp"
#include "core/net_config.hpp"
#include "core/rng.hpp"
#include "cuda/kernels/batch.cuh"
#include "cuda/runtime/buffer.hpp"
#include "data/batch.hpp"
#include "gpu_test_util.hpp"

namespace lenet5 {
namespace {

// The scaling these tests gather under (the gathers only pass it to the normalisation).
const PixelScaling kMnistScaling = pixel_scaling(InputScaling::mnist);

constexpr int kSetSize = 8;
// Every image once, in a shuffled order, and image 1 again at the end: its two copies share a
// key (the index, not the position), so they must come out bit for bit the same.
const std::vector<std::int32_t> kIndices{6, 1, 4, 0, 7, 2, 5, 3, 1};

// Digit-like images whose resampling errors are as large as they get: a block of random grey
// levels (neighbours differ by up to 255) and a full-intensity stroke, on a black background.
std::vector<std::uint8_t> test_images() {
  SplitMix64 rng(0xA11);
  std::vector<std::uint8_t> images(std::size_t(kSetSize) * kImageBytes, 0);
  for (int i = 0; i < kSetSize; ++i) {
    std::uint8_t* image = images.data() + std::size_t(i) * kImageBytes;
    const int top = 2 + int(rng.next() % 8), left = 2 + int(rng.next() % 8);
    for (int y = top; y < top + 16; ++y)
      for (int x = left; x < left + 14; ++x)
        image[y * kImageSide + x] = std::uint8_t(rng.next() % 256);
    for (int y = 4; y < 24; ++y) image[y * kImageSide + 13] = 255;
  }
  return images;
}

struct Case {
  const char* name;
  AugmentSettings settings;
};

const Case kCases[] = {
    {"moderate affine", test::moderate_augmentation(AugmentKind::affine)},
    {"moderate elastic", test::moderate_augmentation(AugmentKind::elastic)},
    {"extreme affine", test::extreme_affine()},
    {"alpha 100, sigma 28", test::extreme_elastic(kMaxElasticSigma)},
    {"alpha 100, sigma 0.5", test::extreme_elastic(0.5)},
    {"moderate elastic, every sample scanned at 8 to 20 px",
     [] {
       AugmentSettings s = test::moderate_augmentation(AugmentKind::elastic);
       s.low_resolution = 1;
       s.low_resolution_scan = 8;
       return s;
     }()},
};
// Seeds and epochs of the keys: the epoch 0 of a fresh run, a later one, and the largest (the
// key's upper 32 bits all set).
const std::uint64_t kSeeds[] = {7, 0x9E3779B97F4A7C15ull};
const std::uint32_t kEpochs[] = {0, 3, 0xFFFFFFFFu};

struct DeviceSet {
  Buffer<std::uint8_t> images, labels;
  Buffer<std::int32_t> indices;
  Buffer<std::uint32_t> epoch{Device::gpu, 1};  // as the engine keeps it
  DeviceSet(const std::vector<std::uint8_t>& host_images,
            const std::vector<std::uint8_t>& host_labels)
      : images(Device::gpu, host_images.size()),
        labels(Device::gpu, host_labels.size()),
        indices(Device::gpu, kIndices.size()) {
    images.copy_from_host(host_images.data());
    labels.copy_from_host(host_labels.data());
    indices.copy_from_host(kIndices.data());
  }
};

bool on_border(int p) {
  const int y = p / kInputSide - kPad, x = p % kInputSide - kPad;
  return y < 0 || y >= kImageSide || x < 0 || x >= kImageSide;
}

TEST(AugmentedGather, MatchesTheDoubleReferenceForFixedKeys) {
  LENET5_REQUIRE_GPU();
  const std::vector<std::uint8_t> images = test_images();
  std::vector<std::uint8_t> labels(kSetSize);
  for (int i = 0; i < kSetSize; ++i) labels[i] = std::uint8_t((3 * i + 1) % 10);
  DeviceSet device(images, labels);
  const int n = int(kIndices.size());
  const float background = normalise_pixel(0, kMnistScaling);
  Buffer<std::uint8_t> labels_out(Device::gpu, n);
  double worst_share = 0;  // the largest error seen, as a fraction of its tolerance
  for (const Case& c : kCases)
    for (const std::uint64_t seed : kSeeds)
      for (const std::uint32_t epoch : kEpochs) {
        const std::string key = std::string(c.name) + ", seed " + std::to_string(seed) +
                                ", epoch " + std::to_string(epoch);
        SCOPED_TRACE(key);
        device.epoch.copy_from_host(&epoch);
        const cuda::DeviceAugmentation augmentation{c.settings, seed, device.epoch.data()};
        CUDA_CHECK(cudaMemset(labels_out.data(), 0xFF, labels_out.bytes()));
        const std::vector<float> got =
            test::gpu_output(std::size_t(n) * kInputFloats, [&](float* out) {
              cuda::gather_augmented_batch(device.images.data(), device.labels.data(),
                                           device.indices.data(), n, augmentation, kMnistScaling,
                                           out, labels_out.data(), cudaStreamPerThread);
            });
        std::vector<float> want(std::size_t(n) * kInputFloats);
        gather_augmented_batch_reference(images.data(), kIndices.data(), n,
                                         Augmentation{c.settings, seed}, epoch, kMnistScaling,
                                         want.data());

        int ink = 0;
        for (int i = 0; i < n; ++i) {
          const double tolerance =
              test::augmented_pixel_tolerance(c.settings, seed, epoch, std::uint32_t(kIndices[i]));
          for (int p = 0; p < kInputSide * kInputSide; ++p) {
            const std::size_t at = std::size_t(i) * kInputFloats + p;
            if (on_border(p)) {
              ASSERT_EQ(got[at], background) << "sample " << i << " border pixel " << p;
              continue;
            }
            ink += want[at] != background;
            const double error = std::fabs(double(got[at]) - double(want[at]));
            ASSERT_LE(error, tolerance) << "sample " << i << " (image " << kIndices[i] << ") pixel "
                                        << p << ": " << got[at] << ", reference " << want[at];
            worst_share = std::max(worst_share, error / tolerance);
          }
        }
        // The comparison compares images, not background: the sparsest case (alpha 100 with
        // sigma 0.5 throws most pixels outside the image) keeps over 100 ink pixels in the batch.
        EXPECT_GE(ink, 50);
        // The repeated image: same key, same pixels.
        EXPECT_TRUE(std::equal(got.begin() + kInputFloats, got.begin() + 2 * kInputFloats,
                               got.begin() + 8 * kInputFloats));
        const std::vector<std::uint8_t> got_labels = labels_out.to_vector();
        for (int i = 0; i < n; ++i) EXPECT_EQ(got_labels[i], labels[kIndices[i]]) << "sample " << i;
      }
  RecordProperty("largest_error_share_of_tolerance", std::to_string(worst_share));
}

// The epoch comes from device memory at run time: the same launch arguments with another value
// in the buffer give that epoch's images (the reference's), not the first one's.
TEST(AugmentedGather, ReadsTheEpochFromDeviceMemory) {
  LENET5_REQUIRE_GPU();
  const std::vector<std::uint8_t> images = test_images();
  const std::vector<std::uint8_t> labels(kSetSize, 0);
  DeviceSet device(images, labels);
  const int n = int(kIndices.size());
  const AugmentSettings settings = test::moderate_augmentation(AugmentKind::elastic);
  const cuda::DeviceAugmentation augmentation{settings, 11, device.epoch.data()};
  Buffer<float> out(Device::gpu, std::size_t(n) * kInputFloats);
  std::vector<std::vector<float>> by_epoch;
  for (const std::uint32_t epoch : {0u, 1u}) {
    device.epoch.copy_from_host(&epoch);
    test::poison(out);
    cuda::gather_augmented_batch(device.images.data(), nullptr, device.indices.data(), n,
                                 augmentation, kMnistScaling, out.data(), nullptr,
                                 cudaStreamPerThread);
    by_epoch.push_back(test::download(out));
    std::vector<float> want(std::size_t(n) * kInputFloats);
    gather_augmented_batch_reference(images.data(), kIndices.data(), n, Augmentation{settings, 11},
                                     epoch, kMnistScaling, want.data());
    // Within the bound of the test above, the largest of the batch's samples (no NaN either).
    double tolerance = 0;
    for (const std::int32_t index : kIndices)
      tolerance = std::max(
          tolerance, test::augmented_pixel_tolerance(settings, 11, epoch, std::uint32_t(index)));
    EXPECT_TRUE(
        test::all_close(by_epoch.back(), want, std::vector<float>(want.size(), 1.0f), tolerance))
        << "epoch " << epoch;
  }
  // Epochs 0 and 1 draw unrelated transforms: far more than a rounding error apart.
  double largest = 0;
  for (std::size_t i = 0; i < by_epoch[0].size(); ++i)
    largest = std::max(largest, double(std::fabs(by_epoch[0][i] - by_epoch[1][i])));
  EXPECT_GT(largest, 1.0) << "epoch 1's images are epoch 0's";
}

}  // namespace
}  // namespace lenet5
