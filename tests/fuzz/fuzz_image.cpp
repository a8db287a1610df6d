// Image decoding, from a file (`classify`) and from memory (`serve`'s uploads), then the
// preprocessing that turns any digit image into the 28x28 the network reads. From memory the side
// is capped at a quarter of a file's (serve caps uploads at 4096 too): past the size check the code
// is the same, and an input grown to the largest accepted size costs one full decode, not two
// (the costliest, an 8192x4096 HDR, takes 10 s here; scripts/fuzz.sh says why that is allowed).
#include <string>

#include "fuzz_util.hpp"
#include "image/image_io.hpp"
#include "image/preprocess.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lenet5;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  fuzz::refusals_allowed([&] {
    const GrayImage image = decode_gray_image(bytes, kMaxImageSide / 4, "fuzzed image");
    preprocess_digit(image, InvertMode::automatic, "fuzzed image");
  });
  const auto file = fuzz::as_file(data, size, "digit");
  fuzz::refusals_allowed([&] {
    const GrayImage image = load_gray_image(file);
    preprocess_digit(image, InvertMode::yes, "fuzzed image");
  });
  return 0;
}
