// Checkpoints written and read: tensors by name, the optimizer's state, and the metadata a resume
// needs, with a checksum of the tensors' bytes that a load verifies.
#include "train/checkpoint.hpp"

#include <spdlog/fmt/fmt.h>

#include <cstdlib>
#include <exception>
#include <map>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/rbf_prototypes.hpp"
#include "core/xxh64.hpp"
#include "data/datasets.hpp"
#include "engine/optimizers.hpp"
#include "io/safetensors.hpp"

namespace lenet5 {
namespace {

// The checksum of a checkpoint's content: XXH64 of every tensor's bytes in name order, which is
// the file's data area as encode_safetensors lays it out. Kept in the metadata (written before
// the data), it lets a load tell a file whose data is not the data its header was written with
// (bytes of two saves mixed, or changed on disk) from a good one. Files of earlier versions lack
// it and load without the check.
constexpr const char* kContentChecksumKey = "tensors_xxh64";

std::string content_checksum(const std::map<std::string, const float*>& data,
                             const std::map<std::string, std::size_t>& n_floats) {
  std::string bytes;
  for (const auto& [name, values] : data)
    bytes.append(reinterpret_cast<const char*>(values), n_floats.at(name) * sizeof(float));
  return fmt::format("{:016x}", xxh64(bytes.data(), bytes.size()));
}

std::string content_checksum(const std::vector<TensorView>& tensors) {
  std::map<std::string, const float*> data;
  std::map<std::string, std::size_t> n_floats;
  for (const TensorView& tensor : tensors) {
    std::size_t count = 1;
    for (const std::int64_t dim : tensor.shape) count *= std::size_t(dim);
    data[tensor.name] = tensor.data;
    n_floats[tensor.name] = count;
  }
  return content_checksum(data, n_floats);
}

std::string content_checksum(const SafetensorsFile& file) {
  std::map<std::string, const float*> data;
  std::map<std::string, std::size_t> n_floats;
  for (const auto& [name, tensor] : file.tensors) {
    data[name] = tensor.values.data();
    n_floats[name] = tensor.values.size();
  }
  return content_checksum(data, n_floats);
}

void verify_content_checksum(const SafetensorsFile& file) {
  const auto recorded = file.metadata.find(kContentChecksumKey);
  if (recorded == file.metadata.end()) return;  // saved before the checksum existed
  const std::string actual = content_checksum(file);
  if (actual != recorded->second)
    throw Error(
        fmt::format("its tensors' XXH64 is {}, but its metadata records {}: the file is "
                    "corrupt or was changed after it was saved",
                    actual, recorded->second));
}

Metadata checkpoint_metadata(const Checkpoint& c) {
  const TrainingPosition& p = c.position;
  Metadata metadata{
      {"format", kCheckpointFormat},
      {"format_version", std::to_string(checkpoint_version(c.net))},
      {"lenet5_version", LENET5_VERSION},
      {"activation", to_string(c.net.activation)},
      {"subsampling", to_string(c.net.subsampling)},
      {"c3_table", to_string(c.net.c3_table)},
      {"config", c.config_toml},
      {"epoch", std::to_string(p.epoch)},
      {"step", std::to_string(p.step)},
      {"partial_loss_sum", fmt::format("{:.17g}", p.partial.loss_sum)},
      {"partial_correct", std::to_string(p.partial.correct)},
      {"partial_seen", std::to_string(p.partial.seen)},
      {"best_accuracy", fmt::format("{:.17g}", p.best_accuracy)},
      {"learning_rate", fmt::format("{:.17g}", c.learning_rate)},
      {"seed", std::to_string(c.seed)},
      // The epoch permutations are a pure function of (seed, epoch): that pair is the RNG state.
      {"rng", fmt::format("splitmix64 seed={} next_epoch={}", c.seed, p.epoch)},
      {"test_accuracy", fmt::format("{:.17g}", c.test_accuracy)},
      {"train_images_crc32", std::to_string(c.data.train_images)},
      {"train_labels_crc32", std::to_string(c.data.train_labels)},
      {"test_images_crc32", std::to_string(c.data.test_images)},
      {"test_labels_crc32", std::to_string(c.data.test_labels)},
      {"dataset", c.dataset},
  };
  // Recorded only when it is not MNIST's, the scaling of every checkpoint written before it was a
  // setting: those stay byte-identical, and a checkpoint without the key means MNIST's.
  if (c.net.input_scaling != InputScaling::mnist)
    metadata["input_scaling"] = to_string(c.net.input_scaling);
  // Absent means softmax: version 1's files have no such key.
  if (c.net.output != OutputLayer::softmax) metadata["output"] = to_string(c.net.output);
  // Absent means linear, the only units versions 1 and 2 describe.
  if (c.net.conv_units != ConvUnits::linear) metadata["conv_units"] = to_string(c.net.conv_units);
  // Absent means not measured: no images held out (as in every file written before they were),
  // or saved in mid-epoch.
  if (c.validation_accuracy >= 0)
    metadata["validation_accuracy"] = fmt::format("{:.17g}", c.validation_accuracy);
  // Absent means none: every file written before images were held out trained on all of them.
  if (c.validation_images > 0) metadata["validation_images"] = std::to_string(c.validation_images);
  return metadata;
}

const std::vector<std::int64_t> kPrototypesShape{kClasses, kRbfUnits};

// An RBF checkpoint's prototypes must be this build's, value for value (checkpoint.hpp says why
// they are stored).
void check_prototypes(const SafetensorsFile& file) {
  const auto it = file.tensors.find(kRbfPrototypesTensor);
  if (it == file.tensors.end())
    throw Error(std::string("tensor '") + kRbfPrototypesTensor +
                "' (the RBF prototypes) is missing");
  const std::vector<float>& values = it->second.values;
  const auto& expected = rbf_prototypes();
  if (it->second.shape != kPrototypesShape ||
      !std::equal(values.begin(), values.end(), expected.begin(), expected.end()))
    throw Error(std::string("tensor '") + kRbfPrototypesTensor +
                "' differs from this lenet5's RBF prototypes (LeCun 1998, Fig. 3): the weights "
                "were trained against other prototypes and mean something else here");
}

const std::string& required(const Metadata& metadata, const std::string& key) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) throw Error("metadata key '" + key + "' is missing");
  return it->second;
}

template <class Number>
Number number(const Metadata& metadata, const std::string& key) {
  const std::string& text = required(metadata, key);
  try {
    std::size_t used = 0;
    Number value;
    if constexpr (std::is_floating_point_v<Number>)
      value = Number(std::stod(text, &used));
    else
      value = Number(std::stoll(text, &used));
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw Error("metadata key '" + key + "' is not a number: '" + text + "'");
}

std::vector<float> flat_tensors(const SafetensorsFile& file, const ParamLayout& layout,
                                const std::string& suffix) {
  std::vector<float> flat(layout.buffer_floats, 0.0f);
  for (const ParamSpec& spec : layout.tensors) {
    const std::string name = spec.name + suffix;
    const auto it = file.tensors.find(name);
    if (it == file.tensors.end()) throw Error("tensor '" + name + "' is missing");
    if (it->second.shape != spec.shape)
      throw Error(fmt::format("tensor '{}' has shape [{}], expected [{}]", name,
                              fmt::join(it->second.shape, ","), fmt::join(spec.shape, ",")));
    std::copy(it->second.values.begin(), it->second.values.end(), flat.begin() + spec.offset);
  }
  return flat;
}

bool holds_state(const SafetensorsFile& file, const ParamLayout& layout, const std::string& state) {
  for (const ParamSpec& spec : layout.tensors)
    if (file.tensors.count(spec.name + "." + state)) return true;
  return false;
}

// Every state buffer of the optimizers' table that the file holds a tensor of; such a buffer must
// then be complete, a tensor for every parameter tensor, each of the parameter's shape.
OptimizerState optimizer_state(const SafetensorsFile& file, const ParamLayout& layout) {
  OptimizerState state;
  for (const std::string& name : all_state_names())
    if (holds_state(file, layout, name))
      state.push_back({name, flat_tensors(file, layout, "." + name)});
  return state;
}

// The names of the tensors that are neither parameters nor optimizer state.
std::vector<std::string> unknown_tensors(const SafetensorsFile& file, const ParamLayout& layout,
                                         const OptimizerState& state, bool rbf) {
  std::vector<std::string> unknown;
  for (const auto& entry : file.tensors) {
    bool known = rbf && entry.first == kRbfPrototypesTensor;
    for (const ParamSpec& spec : layout.tensors) {
      known = known || entry.first == spec.name;
      for (const StateBuffer& buffer : state)
        known = known || entry.first == spec.name + "." + buffer.name;
    }
    if (!known) unknown.push_back("'" + entry.first + "'");
  }
  return unknown;
}

Checkpoint decode_checkpoint(const SafetensorsFile& file) {
  const Metadata& m = file.metadata;
  if (m.count("format") == 0 || m.at("format") != kCheckpointFormat)
    throw Error("not a lenet5 checkpoint (metadata 'format' is not '" +
                std::string(kCheckpointFormat) + "')");
  const int version = number<int>(m, "format_version");
  if (version < kCheckpointVersion || version > kCheckpointVersionConvUnits)
    throw Error(fmt::format(
        "checkpoint format version {} is not supported (this lenet5 reads versions {} to {}){}",
        m.at("format_version"), kCheckpointVersion, kCheckpointVersionConvUnits,
        version > kCheckpointVersionConvUnits ? ": it was written by a newer lenet5" : ""));
  Checkpoint c;
  try {
    c.net.activation = parse_activation(required(m, "activation"));
    c.net.subsampling = parse_subsampling(required(m, "subsampling"));
    c.net.c3_table = parse_c3_table(required(m, "c3_table"));
    const auto scaling = m.find("input_scaling");
    if (scaling != m.end()) c.net.input_scaling = parse_input_scaling(scaling->second);
    const auto output = m.find("output");
    if (output != m.end()) c.net.output = parse_output_layer(output->second);
    const auto conv_units = m.find("conv_units");
    if (conv_units != m.end()) c.net.conv_units = parse_conv_units(conv_units->second);
  } catch (const UsageError& e) {
    throw Error(std::string("network settings: ") + e.what());
  }
  if (version != checkpoint_version(c.net))
    throw Error(fmt::format(
        "format version {} with the output layer {} and {} convolution units: this "
        "network is written as version {}",
        version, to_string(c.net.output), to_string(c.net.conv_units), checkpoint_version(c.net)));
  c.config_toml = required(m, "config");
  c.position.epoch = number<int>(m, "epoch");
  c.position.step = number<int>(m, "step");
  c.position.partial = {number<double>(m, "partial_loss_sum"),
                        number<std::int64_t>(m, "partial_correct"),
                        number<std::int64_t>(m, "partial_seen")};
  c.position.best_accuracy = number<double>(m, "best_accuracy");
  c.learning_rate = number<double>(m, "learning_rate");
  c.seed = std::uint64_t(std::stoull(required(m, "seed")));
  c.test_accuracy = number<double>(m, "test_accuracy");
  if (m.count("validation_accuracy"))
    c.validation_accuracy = number<double>(m, "validation_accuracy");
  if (m.count("validation_images")) c.validation_images = number<int>(m, "validation_images");
  c.data = {number<std::uint32_t>(m, "train_images_crc32"),
            number<std::uint32_t>(m, "train_labels_crc32"),
            number<std::uint32_t>(m, "test_images_crc32"),
            number<std::uint32_t>(m, "test_labels_crc32")};
  const auto dataset = m.find("dataset");
  if (dataset != m.end()) {
    try {
      c.dataset = find_dataset(dataset->second).name;
    } catch (const UsageError& e) {
      throw Error(std::string("metadata 'dataset': ") + e.what() +
                  ": it was written by a lenet5 that knows more data sets than this one");
    }
  }
  if (c.position.epoch < 0 || c.position.step < 0 || c.validation_images < 0)
    throw Error("negative epoch, step or validation_images in the metadata");

  const ParamLayout layout = lenet5_layout(c.net);
  c.parameters = flat_tensors(file, layout, "");
  c.optimizer_state = optimizer_state(file, layout);
  const bool rbf = c.net.output == OutputLayer::rbf;
  if (rbf) check_prototypes(file);
  const std::size_t expected = layout.tensors.size() * (1 + c.optimizer_state.size()) + rbf;
  if (file.tensors.size() != expected)
    throw Error(fmt::format(
        "holds {} tensors, expected {}: unknown extra tensors ({})", file.tensors.size(), expected,
        fmt::join(unknown_tensors(file, layout, c.optimizer_state, rbf), ", ")));
  verify_content_checksum(file);  // last: a missing or misshapen tensor is named as such first
  return c;
}

}  // namespace

int checkpoint_version(const NetConfig& net) {
  if (net.conv_units != ConvUnits::linear) return kCheckpointVersionConvUnits;
  return net.output == OutputLayer::softmax ? kCheckpointVersion : kCheckpointVersionRbf;
}

void save_checkpoint(const std::filesystem::path& file, const Checkpoint& c) {
  const ParamLayout layout = lenet5_layout(c.net);
  bool sizes_match = c.parameters.size() == layout.buffer_floats;
  for (const StateBuffer& buffer : c.optimizer_state)
    sizes_match = sizes_match && buffer.values.size() == layout.buffer_floats;
  if (!sizes_match) throw Error("internal: checkpoint buffers do not match the network layout");
  std::vector<TensorView> tensors;
  for (const ParamSpec& spec : layout.tensors)
    tensors.push_back({spec.name, spec.shape, c.parameters.data() + spec.offset});
  for (const StateBuffer& buffer : c.optimizer_state)
    for (const ParamSpec& spec : layout.tensors)
      tensors.push_back(
          {spec.name + "." + buffer.name, spec.shape, buffer.values.data() + spec.offset});
  if (c.net.output == OutputLayer::rbf)
    tensors.push_back({kRbfPrototypesTensor, kPrototypesShape, rbf_prototypes().data()});
  Metadata metadata = checkpoint_metadata(c);
  metadata[kContentChecksumKey] = content_checksum(tensors);
  write_safetensors(file, tensors, metadata);
}

Checkpoint load_checkpoint(const std::filesystem::path& file) {
  const SafetensorsFile contents = read_safetensors(file);  // structural checks, names the file
  try {
    return decode_checkpoint(contents);
  } catch (const Error& e) {
    throw Error("checkpoint " + file.string() + ": " + e.what());
  }
}

}  // namespace lenet5
