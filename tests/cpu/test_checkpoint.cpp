// Checkpoints: what is written is read back exactly, and anything that is not a complete lenet5
// checkpoint is refused with the file and the problem named.
#include <gtest/gtest.h>

#include "checkpoint_edit.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/sgd.hpp"
#include "io/safetensors.hpp"
#include "test_util.hpp"
#include "train/checkpoint.hpp"

namespace lenet5 {
namespace {

using testing::TempDir;

Checkpoint sample_checkpoint(bool with_momentum) {
  Checkpoint c;
  c.net.activation = Activation::relu;
  c.net.subsampling = Subsampling::max;
  c.net.c3_table = C3Table::lecun;
  const ParamLayout layout = lenet5_layout(c.net);
  c.parameters.resize(layout.buffer_floats);
  initialise_parameters(layout, c.net, 7, c.parameters.data());
  if (with_momentum) {
    c.optimizer_state.push_back({kMomentumState, {}});
    for (float p : c.parameters) c.optimizer_state.back().values.push_back(0.5f * p);
  }
  c.config_toml = "[train]\nepochs=3\nlr=0.05\n";
  c.position = {2, 17, {12.5, 1000, 1088}, 0.9871};
  c.learning_rate = 0.0123456789;
  c.seed = 18446744073709551615ull;  // the largest seed must survive the round trip
  c.test_accuracy = 0.9871;
  c.data = {1, 2, 3, 4294967295u};
  return c;
}

using testing::complaint;
using testing::Tensors;

TEST(Checkpoint, RoundTripKeepsEverything) {
  TempDir dir;
  for (bool momentum : {false, true}) {
    const Checkpoint saved = sample_checkpoint(momentum);
    save_checkpoint(dir / "c.safetensors", saved);
    const Checkpoint loaded = load_checkpoint(dir / "c.safetensors");
    EXPECT_EQ(loaded.parameters, saved.parameters);
    EXPECT_EQ(loaded.optimizer_state.size(), momentum ? 1u : 0u);
    EXPECT_TRUE(loaded.optimizer_state == saved.optimizer_state);
    EXPECT_EQ(loaded.net.activation, Activation::relu);
    EXPECT_EQ(loaded.net.subsampling, Subsampling::max);
    EXPECT_EQ(loaded.net.c3_table, C3Table::lecun);
    EXPECT_EQ(loaded.config_toml, saved.config_toml);
    EXPECT_EQ(loaded.position.epoch, 2);
    EXPECT_EQ(loaded.position.step, 17);
    EXPECT_EQ(loaded.position.partial.loss_sum, 12.5);
    EXPECT_EQ(loaded.position.partial.correct, 1000);
    EXPECT_EQ(loaded.position.partial.seen, 1088);
    EXPECT_EQ(loaded.position.best_accuracy, 0.9871);
    EXPECT_EQ(loaded.learning_rate, 0.0123456789);  // printed with 17 digits: exact
    EXPECT_EQ(loaded.seed, saved.seed);
    EXPECT_TRUE(loaded.data == saved.data);
    EXPECT_EQ(loaded.dataset, "mnist");
  }
}

// The data set is a metadata string; a file without it (written before data sets were recorded)
// is MNIST's, and one naming a data set this lenet5 does not know is refused.
TEST(Checkpoint, RecordsTheDataSetAndOldFilesAreMnist) {
  TempDir dir;
  Checkpoint fashion = sample_checkpoint(false);
  fashion.dataset = "fashion-mnist";
  save_checkpoint(dir / "c.safetensors", fashion);
  EXPECT_EQ(load_checkpoint(dir / "c.safetensors").dataset, "fashion-mnist");
  const SafetensorsFile original = read_safetensors(dir / "c.safetensors");
  EXPECT_EQ(original.metadata.at("dataset"), "fashion-mnist");

  EXPECT_EQ(complaint(dir, original, [](Tensors&, Metadata& m) { m.erase("dataset"); }), "");
  EXPECT_EQ(load_checkpoint(dir / "bad.safetensors").dataset, "mnist");

  const std::string unknown =
      complaint(dir, original, [](Tensors&, Metadata& m) { m["dataset"] = "cifar"; });
  EXPECT_TRUE(testing::mentions(unknown, "metadata 'dataset': unknown data set 'cifar'"))
      << unknown;
}

// LeCun et al. 1998's trainable subsampling: the coefficients are two more tensors (with their
// momentum) in the same format, and read back exactly.
TEST(Checkpoint, TrainableSubsamplingCarriesTheCoefficients) {
  TempDir dir;
  Checkpoint saved = sample_checkpoint(true);
  saved.net.subsampling = Subsampling::trainable;
  const ParamLayout layout = lenet5_layout(saved.net);
  saved.parameters.assign(layout.buffer_floats, 0.0f);
  initialise_parameters(layout, saved.net, 7, saved.parameters.data());
  std::vector<float>& momentum = saved.optimizer_state.back().values;
  momentum.clear();  // the padding between tensors stays 0, as it is never written
  for (float p : saved.parameters) momentum.push_back(0.5f * p);
  save_checkpoint(dir / "c.safetensors", saved);

  const SafetensorsFile file = read_safetensors(dir / "c.safetensors");
  for (const auto& [name, maps] : {std::pair{"s2.weight", 6}, std::pair{"s4.weight", 16}}) {
    ASSERT_TRUE(file.tensors.count(name)) << name;
    EXPECT_EQ(file.tensors.at(name).shape, (std::vector<std::int64_t>{maps})) << name;
    EXPECT_TRUE(file.tensors.count(std::string(name) + ".momentum")) << name;
  }
  const Checkpoint loaded = load_checkpoint(dir / "c.safetensors");
  EXPECT_EQ(loaded.net.subsampling, Subsampling::trainable);
  EXPECT_EQ(loaded.parameters, saved.parameters);
  EXPECT_TRUE(loaded.optimizer_state == saved.optimizer_state);
}

// The input scaling is recorded only when it is not MNIST's, so that the checkpoints of every
// other run stay as they were; a file without it (all those written before it was a setting) is
// MNIST's, and a name this lenet5 does not know is refused.
TEST(Checkpoint, RecordsTheInputScalingAndOldFilesAreMnists) {
  TempDir dir;
  save_checkpoint(dir / "mnist.safetensors", sample_checkpoint(false));
  EXPECT_EQ(read_safetensors(dir / "mnist.safetensors").metadata.count("input_scaling"), 0u);
  EXPECT_EQ(load_checkpoint(dir / "mnist.safetensors").net.input_scaling, InputScaling::mnist);

  Checkpoint lecun = sample_checkpoint(false);
  lecun.net.input_scaling = InputScaling::lecun1998;
  save_checkpoint(dir / "c.safetensors", lecun);
  const SafetensorsFile original = read_safetensors(dir / "c.safetensors");
  EXPECT_EQ(original.metadata.at("input_scaling"), "lecun1998");
  EXPECT_EQ(load_checkpoint(dir / "c.safetensors").net.input_scaling, InputScaling::lecun1998);

  EXPECT_EQ(complaint(dir, original, [](Tensors&, Metadata& m) { m.erase("input_scaling"); }), "");
  EXPECT_EQ(load_checkpoint(dir / "bad.safetensors").net.input_scaling, InputScaling::mnist);
  const std::string unknown =
      complaint(dir, original, [](Tensors&, Metadata& m) { m["input_scaling"] = "unit"; });
  EXPECT_TRUE(testing::mentions(unknown, "unknown input scaling 'unit'")) << unknown;
}

TEST(Checkpoint, IsAStandardSafetensorsFileWithTheDocumentedTensors) {
  TempDir dir;
  save_checkpoint(dir / "c.safetensors", sample_checkpoint(true));
  const SafetensorsFile file = read_safetensors(dir / "c.safetensors");
  const std::vector<std::pair<std::string, std::vector<std::int64_t>>> expected{
      {"c1.weight", {6, 1, 5, 5}}, {"s2.bias", {6}},          {"c3.weight", {16, 6, 5, 5}},
      {"s4.bias", {16}},           {"c5.weight", {120, 16, 5, 5}}, {"c5.bias", {120}},
      {"f6.weight", {84, 120}},    {"f6.bias", {84}},         {"output.weight", {10, 84}},
      {"output.bias", {10}}};
  for (const auto& [name, shape] : expected) {
    ASSERT_TRUE(file.tensors.count(name)) << name;
    EXPECT_EQ(file.tensors.at(name).shape, shape) << name;
    ASSERT_TRUE(file.tensors.count(name + ".momentum")) << name;
  }
  EXPECT_EQ(file.tensors.size(), 2 * expected.size());
  EXPECT_EQ(file.metadata.at("format"), "lenet5-checkpoint");
  EXPECT_EQ(file.metadata.at("epoch"), "2");
}

TEST(Checkpoint, RefusesFilesThatAreNotCompleteCheckpoints) {
  TempDir dir;
  const Checkpoint good = sample_checkpoint(false);
  const ParamLayout layout = lenet5_layout(good.net);
  save_checkpoint(dir / "good.safetensors", good);
  const SafetensorsFile original = read_safetensors(dir / "good.safetensors");

  // Rewrites the good file with one change and returns the loader's complaint.
  auto complaint = [&](const std::function<void(Tensors&, Metadata&)>& edit) {
    return testing::complaint(dir, original, edit);
  };
  EXPECT_NE(complaint([](Tensors& t, Metadata&) { t.erase("f6.bias"); }).find("'f6.bias' is missing"),
            std::string::npos);
  EXPECT_NE(complaint([](Tensors& t, Metadata&) { t["c1.weight"].shape = {6, 25}; })
                .find("'c1.weight' has shape [6,25], expected [6,1,5,5]"),
            std::string::npos);
  EXPECT_NE(complaint([](Tensors& t, Metadata&) { t["extra"] = {{1}, {1.0f}}; }).find("extra tensors"),
            std::string::npos);
  EXPECT_NE(complaint([](Tensors&, Metadata& m) { m.erase("format"); }).find("not a lenet5 checkpoint"),
            std::string::npos);
  EXPECT_NE(complaint([](Tensors&, Metadata& m) { m["format_version"] = "99"; }).find("version 99"),
            std::string::npos);
  EXPECT_NE(complaint([](Tensors&, Metadata& m) { m["epoch"] = "three"; }).find("'epoch' is not a number"),
            std::string::npos);
  EXPECT_NE(complaint([](Tensors&, Metadata& m) { m.erase("seed"); }).find("'seed' is missing"),
            std::string::npos);
  EXPECT_NE(complaint([](Tensors&, Metadata& m) { m["activation"] = "softplus"; }).find("softplus"),
            std::string::npos);
  // Every complaint names the file.
  EXPECT_NE(complaint([](Tensors& t, Metadata&) { t.erase("s2.bias"); }).find("bad.safetensors"),
            std::string::npos);
  (void)layout;
}

// The optimizer state loads by name: a state buffer must be complete and of the parameters'
// shapes, and a tensor that is neither a parameter nor a known state buffer is named.
TEST(Checkpoint, RefusesIncompleteOrMisshapenOptimizerState) {
  TempDir dir;
  save_checkpoint(dir / "good.safetensors", sample_checkpoint(true));
  const SafetensorsFile original = read_safetensors(dir / "good.safetensors");
  auto complaint = [&](const std::function<void(Tensors&)>& edit) {
    return testing::complaint(dir, original, [&](Tensors& tensors, Metadata&) { edit(tensors); });
  };
  EXPECT_PRED2(testing::mentions, complaint([](Tensors& t) { t.erase("c3.weight.momentum"); }),
               "tensor 'c3.weight.momentum' is missing");
  // Even the first tensor's buffer missing: the others still show that momentum was saved.
  EXPECT_PRED2(testing::mentions, complaint([](Tensors& t) { t.erase("c1.weight.momentum"); }),
               "tensor 'c1.weight.momentum' is missing");
  EXPECT_PRED2(testing::mentions,
               complaint([](Tensors& t) { t["f6.bias.momentum"] = {{83}, std::vector<float>(83)}; }),
               "tensor 'f6.bias.momentum' has shape [83], expected [84]");
  EXPECT_PRED2(testing::mentions,
               complaint([](Tensors& t) { t["f6.bias.second_moment"] = t["f6.bias"]; }),
               "unknown extra tensors ('f6.bias.second_moment')");
  EXPECT_EQ(complaint([](Tensors&) {}), "");  // the unedited file loads
}

// The metadata's tensors_xxh64 is the checksum of the data area: a file whose header and data do
// not belong together (two saves mixed, a flipped bit) is refused, and a file saved before the
// checksum existed still loads.
TEST(Checkpoint, ContentChecksumRefusesDataThatIsNotTheSavedData) {
  TempDir dir;
  save_checkpoint(dir / "good.safetensors", sample_checkpoint(true));
  const SafetensorsFile original = read_safetensors(dir / "good.safetensors");
  ASSERT_EQ(original.metadata.at("tensors_xxh64").size(), 16u) << "16 hex digits";
  const std::string changed =
      complaint(dir, original, [](Tensors& t, Metadata&) { t["f6.bias"].values[3] += 1.0f; });
  EXPECT_PRED2(testing::mentions, changed, "XXH64");
  EXPECT_PRED2(testing::mentions, changed, "bad.safetensors");
  EXPECT_EQ(complaint(dir, original, [](Tensors&, Metadata& m) { m.erase("tensors_xxh64"); }), "");

  // One flipped bit in the last byte of the file, inside output.weight.momentum's data.
  std::string bytes = testing::read_text(dir / "good.safetensors");
  bytes.back() = char(bytes.back() ^ 0x01);
  { std::ofstream(dir / "flipped.safetensors", std::ios::binary) << bytes; }
  EXPECT_PRED2(testing::mentions, testing::load_error(dir / "flipped.safetensors"), "XXH64");
}

TEST(Checkpoint, TruncatedFileIsRefusedAndTheOldFileSurvivesAFailedSave) {
  TempDir dir;
  save_checkpoint(dir / "c.safetensors", sample_checkpoint(false));
  const std::string bytes = testing::read_text(dir / "c.safetensors");
  {
    std::ofstream out(dir / "cut.safetensors", std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size() / 2));
  }
  EXPECT_NE(testing::load_error(dir / "cut.safetensors").find("cut.safetensors"),
            std::string::npos);
  // Saving into a folder that does not exist fails cleanly and leaves nothing behind.
  EXPECT_THROW(save_checkpoint(dir / "missing" / "c.safetensors", sample_checkpoint(false)), Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "missing"));
}

}  // namespace
}  // namespace lenet5
