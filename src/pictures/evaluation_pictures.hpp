// Pictures of how a network does on a labelled test set: the confusion matrix as a heat map with
// its counts written in, and a gallery of the images it gets wrong.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "pictures/image.hpp"

namespace lenet5::pictures {

using ConfusionCounts = std::array<std::array<std::int64_t, 10>, 10>;  // [true][predicted]

// Cells coloured by log(1 + count) (white to dark red), so that a dozen confusions still show
// beside a diagonal of a thousand; rows are the true digit, columns the predicted one.
RgbImage confusion_picture(const ConfusionCounts& confusion);

struct Mistake {
  std::vector<std::uint8_t> image;  // 28x28, MNIST's convention: 0 background, 255 ink
  int truth = 0, predicted = 0;
  float probability = 0;  // the network's probability for `predicted`
  int test_index = -1;    // the image's place in its test set
};

// At most kMaxMistakesShown of `mistakes`, in the order given (find_mistakes's: most confident
// first), each labelled "7->2 93%", drawn as dark ink on white; the title counts all
// `total_mistakes` of `images` test images and says the order.
inline constexpr int kMaxMistakesShown = 100;
RgbImage mistakes_picture(const std::vector<Mistake>& mistakes, int total_mistakes, int images);

}  // namespace lenet5::pictures
