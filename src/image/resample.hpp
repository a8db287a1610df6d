// Resizing a grey image: area averaging (the digit's scaling to 20 px, as MNIST's was
// anti-aliased), and the bilinear and nearest-neighbour enlargements that scanners, phones and
// image editors apply to small pictures.
//
// Layout: row-major (height, width) floats, as in image_io.hpp.
#pragma once

#include <vector>

namespace lenet5 {

// Output pixel o covers the source interval [o*step, (o+1)*step) with step = n_in / n_out on each
// axis; its value is the mean over that footprint. Downscales and upscales alike.
std::vector<float> resample_area(const std::vector<float>& src, int width, int height,
                                 int out_width, int out_height);

// Output pixel centres mapped onto the source's (x_src = (x + 0.5) * width / out_width - 0.5),
// then interpolated between the four nearest source pixels, the edges clamped: what most image
// editors call bilinear.
std::vector<float> resample_bilinear(const std::vector<float>& src, int width, int height,
                                     int out_width, int out_height);

// Each output pixel takes the source pixel its centre falls in: the blocks of an enlarged
// low-resolution scan.
std::vector<float> resample_nearest(const std::vector<float>& src, int width, int height,
                                    int out_width, int out_height);

}  // namespace lenet5
