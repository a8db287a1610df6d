#include "data/batch.hpp"

#include <cstddef>

#include "data/augment.hpp"

namespace lenet5 {

template <class T>
void gather_batch_cpu(const std::uint8_t* images, const std::int32_t* indices, int n, T* out) {
  constexpr int side = 28, padded = side + 2 * kPad;
  const T background = T(normalise_pixel(0));
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i) {
    const std::size_t source = indices ? std::size_t(indices[i]) : std::size_t(i);
    const std::uint8_t* image = images + source * side * side;
    T* field = out + std::size_t(i) * padded * padded;
    for (int h = 0; h < padded; ++h)
      for (int w = 0; w < padded; ++w) {
        const int y = h - kPad, x = w - kPad;
        const bool inside = y >= 0 && y < side && x >= 0 && x < side;
        field[h * padded + w] = inside ? T(normalise_pixel(image[y * side + x])) : background;
      }
  }
}

void gather_augmented_batch_cpu(const std::uint8_t* images, const std::int32_t* indices, int n,
                                const Augmentation& augmentation, std::uint32_t epoch,
                                float* out) {
  if (!augmentation.enabled()) return gather_batch_cpu(images, indices, n, out);
  validate(augmentation.settings);
  const float background = normalise_pixel(0);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i) {
    const std::uint32_t source = std::uint32_t(indices[i]);
    double grey[kImageBytes];
    augment_image_cpu(images + std::size_t(source) * kImageBytes, augmentation.settings,
                      augmentation.seed, epoch, source, grey);
    float* field = out + std::size_t(i) * kInputFloats;
    for (int h = 0; h < kInputSide; ++h)
      for (int w = 0; w < kInputSide; ++w) {
        const int y = h - kPad, x = w - kPad;
        const bool inside = y >= 0 && y < kImageSide && x >= 0 && x < kImageSide;
        field[h * kInputSide + w] =
            inside ? normalise_intensity(float(grey[y * kImageSide + x])) : background;
      }
  }
}

template void gather_batch_cpu<float>(const std::uint8_t*, const std::int32_t*, int, float*);
template void gather_batch_cpu<double>(const std::uint8_t*, const std::int32_t*, int, double*);

}  // namespace lenet5
