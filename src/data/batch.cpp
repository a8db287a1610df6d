// Gathering a batch: MNIST bytes normalised into 32x32 input fields, plain or augmented.
#include "data/batch.hpp"

#include <cstddef>

#include "data/augment.hpp"

namespace lenet5 {

namespace {

// One sample's (1, 32, 32) input: the 28 x 28 image, each grey level normalised under `scaling`,
// centred in a border of the normalised value of a black pixel.
template <class T, class Grey>
void write_input_field(const Grey* image, PixelScaling scaling, T* field) {
  const T background = T(normalise_pixel(0, scaling));
  for (int h = 0; h < kInputSide; ++h)
    for (int w = 0; w < kInputSide; ++w) {
      const int y = h - kPad, x = w - kPad;
      const bool inside = y >= 0 && y < kImageSide && x >= 0 && x < kImageSide;
      field[h * kInputSide + w] =
          inside ? T(normalise_intensity(float(image[y * kImageSide + x]), scaling)) : background;
    }
}

}  // namespace

template <class T>
void gather_batch_cpu(const std::uint8_t* images, const std::int32_t* indices, int n,
                      PixelScaling scaling, T* out) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i) {
    const std::size_t source = indices ? std::size_t(indices[i]) : std::size_t(i);
    write_input_field(images + source * kImageBytes, scaling, out + std::size_t(i) * kInputFloats);
  }
}

namespace {

// Each sample augmented by augment (augment_image_cpu or augment_image_fast, keyed by the sample's
// index in `images`) into Grey[kImageBytes], then normalised and padded. Each sample's image is a
// function of its key alone, so any split over threads gives the same.
template <class Grey>
void gather_augmented(const std::uint8_t* images, const std::int32_t* indices, int n,
                      const Augmentation& augmentation, std::uint32_t epoch,
                      void (*augment)(const std::uint8_t*, const AugmentPlan&, std::uint64_t,
                                      std::uint32_t, std::uint32_t, Grey*),
                      PixelScaling scaling, float* out) {
  if (!augmentation.enabled()) return gather_batch_cpu(images, indices, n, scaling, out);
  const AugmentPlan plan(augmentation.settings);  // validates; the Gaussian once per batch
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i) {
    const std::uint32_t source = std::uint32_t(indices[i]);
    Grey grey[kImageBytes];
    augment(images + std::size_t(source) * kImageBytes, plan, augmentation.seed, epoch, source,
            grey);
    write_input_field(grey, scaling, out + std::size_t(i) * kInputFloats);
  }
}

}  // namespace

void gather_augmented_batch_reference(const std::uint8_t* images, const std::int32_t* indices,
                                      int n, const Augmentation& augmentation, std::uint32_t epoch,
                                      PixelScaling scaling, float* out) {
  gather_augmented<double>(images, indices, n, augmentation, epoch, augment_image_cpu, scaling,
                           out);
}

void gather_augmented_batch_fast(const std::uint8_t* images, const std::int32_t* indices, int n,
                                 const Augmentation& augmentation, std::uint32_t epoch,
                                 PixelScaling scaling, float* out) {
  gather_augmented<float>(images, indices, n, augmentation, epoch, augment_image_fast, scaling,
                          out);
}

template void gather_batch_cpu<float>(const std::uint8_t*, const std::int32_t*, int, PixelScaling,
                                      float*);
template void gather_batch_cpu<double>(const std::uint8_t*, const std::int32_t*, int, PixelScaling,
                                       double*);

}  // namespace lenet5
