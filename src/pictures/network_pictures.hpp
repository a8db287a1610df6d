// Pictures of LeNet-5's learned filters, from the flat parameter buffer (core/layout.hpp):
//   C1: the six 5x5 filters over the input image, side by side;
//   C3: a table like LeCun et al. 1998's Table I, one row per S2 map and one column per C3 map,
//       each cell the 5x5 filter C3 map j applies to S2 map i, a grey cell where the C3 table
//       connects nothing.
// Weights are drawn in the diverging map (blue negative, white zero, red positive), one range for
// all filters of a layer so that their strengths compare, with a legend.
#pragma once

#include <vector>

#include "core/layout.hpp"
#include "core/net_config.hpp"
#include "pictures/image.hpp"

namespace lenet5::pictures {

RgbImage c1_filters_picture(const ParamLayout& layout, const std::vector<float>& parameters);
RgbImage c3_filters_picture(const ParamLayout& layout, const NetConfig& net,
                            const std::vector<float>& parameters);

}  // namespace lenet5::pictures
