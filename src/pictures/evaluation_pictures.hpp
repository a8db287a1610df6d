// Pictures of how a network does on a labelled test set: the confusion matrix as a heat map with
// its counts written in, and a gallery of the images it gets wrong.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "pictures/image.hpp"

namespace lenet5::pictures {

using ConfusionCounts = std::array<std::array<std::int64_t, 10>, 10>;  // [true][predicted]

// Cells coloured by log(1 + count) (white to dark red), so that a dozen confusions still show
// beside a diagonal of a thousand; rows are the true class, columns the predicted one. Columns are
// headed by the class number, rows by the number and, where the class is not its own number
// (Fashion-MNIST's "T-shirt/top"), its name: class_names has one name per class.
RgbImage confusion_picture(const ConfusionCounts& confusion,
                           const std::vector<std::string>& class_names);

struct Mistake {
  std::vector<std::uint8_t> image;  // 28x28, MNIST's convention: 0 background, 255 ink
  int truth = 0, predicted = 0;
  float probability = 0;  // the network's probability for `predicted`
  int test_index = -1;    // the image's place in its test set
};

// At most kMaxMistakesShown of `mistakes`, in the order given (find_mistakes's: most confident
// first), each labelled by class numbers "7->2 93%", drawn as dark ink on white; the title counts
// all `total_mistakes` of `images` test images and says the order, and where the classes are not
// their numbers a key under it names them.
inline constexpr int kMaxMistakesShown = 100;
RgbImage mistakes_picture(const std::vector<Mistake>& mistakes, int total_mistakes, int images,
                          const std::vector<std::string>& class_names);

// "0 T-shirt/top, 1 Trouser, ...": the classes by number, or empty where every class is named by
// its number (MNIST's digits).
std::string class_key(const std::vector<std::string>& class_names);

}  // namespace lenet5::pictures
