// What the frame of a picture says about a digit cropped to its ink, and the margin that
// preprocess.cpp gives such a picture back: the edge of the picture is where its paper is most
// often found when the ink covers most of the rest.
//
// Layout: images are row-major (height, width) as in image_io.hpp, grey in [0, 1].
#pragma once

#include "image/image_io.hpp"

namespace lenet5 {

// What the frame of a picture says, for a digit cropped to its ink.
// - Which of the picture's two extremes is the paper. A digit's box is its ink's, so the ink
//   reaches every side of the frame; but it covers less than half of the frame's ring, and less
//   than half of its corners (digits are rounded), measured as the coverage (L - v) / (L - D)
//   between the lightest and the darkest grey (the 98th and 2nd percentiles). Either can fail
//   alone on a digit scanned at 8 px; their mean, less than half for the ink's side, fails less
//   often. The further the mean is from a half, the surer the answer.
// - The noise from one pixel to the next: the median difference of horizontal neighbours, over
//   0.954 (for independent normal noise of sigma s, the difference's median is 0.954 s), or of
//   vertical ones where that is smaller: in a "1" a few pixels wide, most horizontal pairs cross
//   the stroke's edge. A picture enlarged smoothly has less of it than its paper had.
// - Whether the picture holds two levels at all: its range (L - D) at least 8 times that noise.
//   Flat noise spans about 4 of its sigma between the 2nd and 98th percentiles.
struct FrameReading {
  bool paper_is_light = true;
  double certainty = 0;  // |mean coverage - 1/2| * 2, 0 (a toss) to 1
  float local_noise = 0;
  bool two_levels = false;
};
FrameReading read_frame(const GrayImage& image);

// The frame's paper: its level is the most common grey (the peak of the histogram, smoothed over
// 2 of 256 bins either way, about 2 sigma of scanner noise) among the quarter of the ring's pixels
// nearest the paper's extreme, which are paper even where strokes and their anti-aliased edges
// hold most of the ring. Its noise is measured on the side away from the ink, where only paper
// lies: 1.4826 times the median departure there, as for normal noise (the peak of the extreme
// quarter lies a little beyond the paper's mean, so this reads somewhat low: about 0.6 of the
// sigma of a clean frame's paper).
struct FramePaper {
  float level = 1.0f, sigma = 0.0f;
};
FramePaper frame_paper(const GrayImage& image, bool paper_is_light);

// A picture at least 2.5 times longer than wide has the shape of a single stroke cropped to its
// ink: a "1" (MNIST's are 20 px tall and at most about 8 wide), which may fill its frame.
bool stroke_shaped(const GrayImage& image);

// The margin given back to a picture cropped to its ink: half its longer side on every side, so
// that the paper is at least three quarters of the whole.
int margin_for(const GrayImage& image);

// The picture in the middle of `margin` pixels of `paper` on every side: its level with normal
// noise of its sigma, drawn from a fixed seed, so the same picture always gives the same digit.
GrayImage with_paper_margin(const GrayImage& image, const FramePaper& paper, int margin);

}  // namespace lenet5
