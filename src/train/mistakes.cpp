// The test images a network reads wrong, most confident first.
#include "train/mistakes.hpp"

#include <algorithm>
#include <cstddef>

#include "core/shapes.hpp"

namespace lenet5 {

std::vector<pictures::Mistake> find_mistakes(Engine& engine, const Dataset& test) {
  std::vector<std::int32_t> classes;
  const std::vector<float> probabilities = engine.classify(test.images.data(), test.count, classes);
  std::vector<pictures::Mistake> mistakes;
  for (int i = 0; i < test.count; ++i) {
    const float* p = probabilities.data() + std::size_t(i) * kClasses;
    const int predicted = classes[std::size_t(i)];
    if (predicted == test.labels[std::size_t(i)]) continue;
    const auto first = test.images.begin() + std::ptrdiff_t(std::size_t(i) * kImageBytes);
    mistakes.push_back({std::vector<std::uint8_t>(first, first + std::ptrdiff_t(kImageBytes)),
                        int(test.labels[std::size_t(i)]), predicted, p[predicted], i});
  }
  // Test order going in, so a stable sort on the probability alone leaves ties by test index.
  std::stable_sort(mistakes.begin(), mistakes.end(),
                   [](const pictures::Mistake& a, const pictures::Mistake& b) {
                     return a.probability > b.probability;
                   });
  return mistakes;
}

}  // namespace lenet5
