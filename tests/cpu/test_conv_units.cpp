// LeCun 1998's C1 and C3 units (--conv-units squashed): each map's own bias and activation before
// the subsampling. The topology and the layout (the paper's 60,000 parameters), the fused form
// (a1 and a3 stay layers), the settings' refusal of the whole-step kernels, checkpoints (format
// version 3, refused as such by older readers' rules), resuming, and a short CPU training run. The
// gradients are checked by finite differences in test_gradient_check.cpp, the fast layers against
// the reference in test_fast_layers.cpp, the GPU against the CPU in tests/gpu/test_gpu_engine.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "checkpoint_edit.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/topology.hpp"
#include "engine/network.hpp"
#include "io/atomic_file.hpp"
#include "io/safetensors.hpp"
#include "test_util.hpp"
#include "tiny_mnist.hpp"
#include "train/checkpoint.hpp"
#include "train/settings.hpp"
#include "train/trainer.hpp"

namespace lenet5 {
namespace {

using testing::complaint_without_checksum;
using testing::TempDir;
using testing::Tensors;

NetConfig squashed(NetConfig config = {}) {
  config.conv_units = ConvUnits::squashed;
  return config;
}

// The network configs/lecun1998.toml sets (every part of the paper's that lenet5 has), read from
// the file itself.
NetConfig lecun1998() {
  const std::string config = read_text_file(testing::source_dir() / "configs" / "lecun1998.toml");
  NetConfig net;
  net.activation = parse_activation(stored_setting(config, "activation"));
  net.subsampling = parse_subsampling(stored_setting(config, "subsampling"));
  net.c3_table = parse_c3_table(stored_setting(config, "c3-table"));
  net.output = parse_output_layer(stored_setting(config, "output"));
  net.input_scaling = parse_input_scaling(stored_setting(config, "input-scaling"));
  net.conv_units = parse_conv_units(stored_setting(config, "conv-units"));
  return net;
}

std::vector<std::string> names(const std::vector<LayerSpec>& layers) {
  std::vector<std::string> out;
  for (const LayerSpec& layer : layers) out.push_back(layer.name);
  return out;
}

TEST(ConvUnits, SquashedC1AndC3HaveTheirOwnBiasAndActivation) {
  const std::vector<LayerSpec>& layers = lenet5_topology(squashed());
  EXPECT_EQ(names(layers), (std::vector<std::string>{"c1", "a1", "s2", "a2", "c3", "a3", "s4", "a4",
                                                     "c5", "a5", "f6", "a6", "output"}));
  EXPECT_EQ(layers[0].bias, "c1.bias");
  EXPECT_EQ(layers[4].bias, "c3.bias");
  EXPECT_EQ(layers[1].kind, LayerKind::activation);
  EXPECT_EQ(layers[1].in.size(), layers[0].out.size());
  EXPECT_EQ(layers[5].in.size(), layers[4].out.size());
  // The book's network is unchanged: C1 and C3 without a bias, straight into the subsampling.
  const std::vector<LayerSpec>& book = lenet5_topology(NetConfig{});
  EXPECT_EQ(names(book), (std::vector<std::string>{"c1", "s2", "a2", "c3", "s4", "a4", "c5", "a5",
                                                   "f6", "a6", "output"}));
  EXPECT_TRUE(book[0].bias.empty());
}

TEST(ConvUnits, TheFusedFormKeepsA1AndA3AsLayersOfTheirOwn) {
  const std::vector<LayerSpec> fused = fused_topology(lenet5_topology(squashed()));
  EXPECT_EQ(names(fused),
            (std::vector<std::string>{"c1", "a1", "s2", "c3", "a3", "s4", "c5", "f6", "output"}));
  for (const LayerSpec& layer : fused)
    EXPECT_EQ(layer.activate,
              layer.name == "s2" || layer.name == "s4" || layer.name == "c5" || layer.name == "f6")
        << layer.name;
}

TEST(ConvUnits, LayoutAddsC1AndC3BiasesAndTheWholePaperNetworkHas60000Parameters) {
  const ParamLayout book = lenet5_layout(NetConfig{});
  const ParamLayout layout = lenet5_layout(squashed());
  EXPECT_EQ(layout.trainable_count, book.trainable_count + 6 + 16);
  EXPECT_EQ(layout.find("c1.bias").shape, (std::vector<std::int64_t>{6}));
  EXPECT_EQ(layout.find("c3.bias").shape, (std::vector<std::int64_t>{16}));
  EXPECT_THROW(book.find("c1.bias"), Error);
  // LeCun et al. 1998, section II.B: C1 156, S2 12, C3 1,516, S4 32, C5 48,120, F6 10,164 trainable
  // parameters, "60,000" in all; the RBF output's prototypes are fixed.
  EXPECT_EQ(lenet5_layout(lecun1998()).trainable_count, 60000u);

  // The other tensors start from the same draws with or without the biases, which start at 0.
  std::vector<float> plain(book.buffer_floats), with_biases(layout.buffer_floats);
  initialise_parameters(book, NetConfig{}, 3, plain.data());
  initialise_parameters(layout, squashed(), 3, with_biases.data());
  for (const ParamSpec& tensor : book.tensors) {
    const ParamSpec& same = layout.find(tensor.name);
    for (std::size_t i = 0; i < tensor.count; ++i)
      ASSERT_EQ(plain[tensor.offset + i], with_biases[same.offset + i]) << tensor.name << i;
  }
  for (const char* bias : {"c1.bias", "c3.bias"}) {
    const ParamSpec& tensor = layout.find(bias);
    for (std::size_t i = 0; i < tensor.count; ++i) EXPECT_EQ(with_biases[tensor.offset + i], 0.0f);
  }
}

TEST(ConvUnits, SettingsRefuseTheWholeStepKernelsNamingTheWayOut) {
  TrainSettings settings;
  settings.conv_units = "squashed";
  settings.kernels = "whole-step";
  try {
    settings.net_config();
    FAIL() << "--conv-units squashed with --kernels whole-step was accepted";
  } catch (const UsageError& e) {
    EXPECT_TRUE(testing::mentions(e.what(), "--conv-units squashed")) << e.what();
    EXPECT_TRUE(testing::mentions(e.what(), "--kernels fast")) << e.what();
  }
  for (const char* kernels : {"book", "fast"}) {
    settings.kernels = kernels;
    EXPECT_EQ(settings.net_config().conv_units, ConvUnits::squashed) << kernels;
  }
  settings.conv_units = "sigmoidal";
  EXPECT_THROW(settings.validate(), UsageError);
  EXPECT_TRUE(testing::mentions(train_setting_declaration("--conv-units").help_text(), "LeCun"));
}

// ---- checkpoints

Checkpoint checkpoint_of(const NetConfig& net) {
  Checkpoint c;
  c.net = net;
  const ParamLayout layout = lenet5_layout(net);
  c.parameters.resize(layout.buffer_floats);
  initialise_parameters(layout, net, 5, c.parameters.data());
  if (net.conv_units == ConvUnits::squashed)
    c.parameters[layout.find("c3.bias").offset + 2] = 0.25f;  // a bias that is not 0
  c.config_toml = "[train]\n";
  return c;
}

TEST(ConvUnitsCheckpoint, IsVersionThreeAndRoundTrips) {
  TempDir dir;
  for (const NetConfig& net : {squashed(), lecun1998()}) {
    SCOPED_TRACE(to_string(net.output));
    const Checkpoint saved = checkpoint_of(net);
    save_checkpoint(dir / "squashed.safetensors", saved);
    const SafetensorsFile file = read_safetensors(dir / "squashed.safetensors");
    // Versions 1 and 2 were the only ones earlier builds read: they refuse the file by its
    // version instead of misreading it.
    EXPECT_EQ(file.metadata.at("format_version"), "3");
    EXPECT_EQ(file.metadata.at("conv_units"), "squashed");
    EXPECT_EQ(file.tensors.count("c1.bias"), 1u);
    EXPECT_EQ(file.tensors.at("c3.bias").values[2], 0.25f);
    const Checkpoint loaded = load_checkpoint(dir / "squashed.safetensors");
    EXPECT_EQ(loaded.net.conv_units, ConvUnits::squashed);
    EXPECT_EQ(loaded.net.output, net.output);
    EXPECT_EQ(loaded.parameters, saved.parameters);
  }
  // Linear units keep their files as they were: no key, versions 1 and 2.
  save_checkpoint(dir / "linear.safetensors", checkpoint_of(NetConfig{}));
  const SafetensorsFile linear = read_safetensors(dir / "linear.safetensors");
  EXPECT_EQ(linear.metadata.at("format_version"), "1");
  EXPECT_EQ(linear.metadata.count("conv_units"), 0u);
}

TEST(ConvUnitsCheckpoint, RefusesInconsistentFiles) {
  TempDir dir;
  save_checkpoint(dir / "squashed.safetensors", checkpoint_of(squashed()));
  const SafetensorsFile file = read_safetensors(dir / "squashed.safetensors");
  EXPECT_EQ(complaint_without_checksum(dir, file, [](Tensors&, Metadata&) {}), "");
  const std::string old_version = complaint_without_checksum(
      dir, file, [](Tensors&, Metadata& m) { m["format_version"] = "1"; });
  EXPECT_TRUE(testing::mentions(old_version, "squashed convolution units")) << old_version;
  const std::string newer = complaint_without_checksum(
      dir, file, [](Tensors&, Metadata& m) { m["format_version"] = "4"; });
  EXPECT_TRUE(testing::mentions(newer, "reads versions 1 to 3): it was written by a newer"))
      << newer;
  const std::string zero = complaint_without_checksum(
      dir, file, [](Tensors&, Metadata& m) { m["format_version"] = "0"; });
  EXPECT_TRUE(testing::mentions(zero, "version 0 is not supported")) << zero;
  EXPECT_FALSE(testing::mentions(zero, "newer")) << zero;
  const std::string v2 = complaint_without_checksum(
      dir, file, [](Tensors&, Metadata& m) { m["format_version"] = "2"; });
  EXPECT_TRUE(testing::mentions(v2, "format version 2")) << v2;
  const std::string unknown = complaint_without_checksum(
      dir, file, [](Tensors&, Metadata& m) { m["conv_units"] = "sigmoidal"; });
  EXPECT_TRUE(testing::mentions(unknown, "unknown convolution units 'sigmoidal'")) << unknown;
  // Without the key the file describes linear units, whose layout has no c1.bias.
  const std::string unkeyed = complaint_without_checksum(dir, file, [](Tensors&, Metadata& m) {
    m.erase("conv_units");
    m["format_version"] = "1";
  });
  EXPECT_TRUE(testing::mentions(unkeyed, "unknown extra tensors")) << unkeyed;
}

// ---- training on the CPU

// On MNIST's first 2,000 training images (1,000 trained on, 1,000 held out) and first 1,000 test
// images, which write_squashed_run_data puts in dir/data: an epoch evaluates 2,000 images, not the
// full sets' 15,000.
void write_squashed_run_data(const TempDir& dir) {
  testing::write_tiny_mnist(dir / "data", 2000, 1000);
}

TrainSettings squashed_run(const TempDir& dir, const std::string& name) {
  TrainSettings s;
  s.data_dir = (dir / "data").string();
  s.validation = 1000;
  s.train_limit = 1000;
  s.epochs = 2;
  s.batch_size = 32;
  s.lr = 0.05;
  s.device = "cpu";
  s.threads = 2;
  s.augment = "none";
  s.activation = "tanh";
  s.subsampling = "average";
  s.conv_units = "squashed";
  s.kernels = "fast";
  s.out = (dir / name).string();
  return s;
}

TEST(ConvUnitsTraining, ShortCpuRunLearnsMovesTheBiasesAndResumesOnlyAsSquashed) {
  LENET5_REQUIRE_MNIST();
  TempDir dir;
  write_squashed_run_data(dir);
  const TrainOutcome outcome = train(squashed_run(dir, "a"), "[train]\n");
  ASSERT_EQ(outcome.epochs.size(), 2u);
  EXPECT_LT(outcome.epochs[1].train_loss, outcome.epochs[0].train_loss);
  // Two passes over 1,000 images: chance is 10 %, and 50 % catches a wrong sign or a broken
  // layer (the same run with linear units reaches the high 80s).
  EXPECT_GT(outcome.best_validation_accuracy, 0.5);
  const Checkpoint checkpoint = load_checkpoint(dir / "a" / "last.safetensors");
  EXPECT_EQ(checkpoint.net.conv_units, ConvUnits::squashed);
  const ParamLayout layout = lenet5_layout(checkpoint.net);
  for (const char* bias : {"c1.bias", "c3.bias"}) {
    const ParamSpec& tensor = layout.find(bias);
    double moved = 0;
    for (std::size_t i = 0; i < tensor.count; ++i)
      moved += std::abs(checkpoint.parameters[tensor.offset + i]);
    EXPECT_GT(moved, 0.0) << bias << " never trained";
  }

  // Resuming with linear units would read the weights as another network.
  TrainSettings resumed = squashed_run(dir, "a");
  resumed.conv_units = "linear";
  resumed.epochs = 3;
  try {
    train(resumed, "[train]\n", checkpoint, dir / "a" / "last.safetensors");
    FAIL() << "a squashed checkpoint resumed with linear units";
  } catch (const UsageError& e) {
    EXPECT_TRUE(testing::mentions(e.what(), "conv-units")) << e.what();
  }
}

}  // namespace
}  // namespace lenet5
