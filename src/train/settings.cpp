// The declaration table of every train setting (flag, default, range, help) and the checks that
// read it.
#include "train/settings.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <type_traits>

#include "core/conv_algo.hpp"
#include "core/cpu_threads.hpp"
#include "core/error.hpp"
#include "data/augment.hpp"
#include "data/datasets.hpp"
#include "data/mnist.hpp"
#include "engine/optimizers.hpp"
#include "train/run_folder.hpp"

namespace lenet5 {
namespace {

// The default's type is the field's, so that a literal of another type (0 for a double) converts
// here instead of failing to deduce.
template <typename T>
struct Same {
  using type = T;
};

template <typename T>
SettingDeclaration setting(T TrainSettings::*field, std::string flag,
                           typename Same<T>::type default_value, std::string help) {
  SettingDeclaration declaration;
  declaration.flag = std::move(flag);
  declaration.field = field;
  declaration.default_value = std::move(default_value);
  declaration.help = std::move(help);
  return declaration;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : "|") + n;
  return out;
}

// "book (the chapter's kernels, ...), fast (fused layers) or whole-step (...)": every kernel set.
std::string kernels_help() {
  const std::vector<GpuKernelSet>& sets = gpu_kernel_sets();
  std::string out;
  for (std::size_t i = 0; i < sets.size(); ++i) {
    const char* before = i == 0 ? "" : i + 1 == sets.size() ? " or " : ", ";
    out += before + std::string(sets[i].name) + " (" + sets[i].help + ")";
  }
  return out;
}

// The data set --dataset names; a UsageError naming the flag and the accepted names otherwise.
const DatasetDescription& described_dataset(const std::string& name) {
  const std::vector<std::string> known = dataset_names();
  if (std::find(known.begin(), known.end(), name) == known.end())
    throw UsageError("--dataset: unknown data set '" + name + "' (accepted: " + joined(known) +
                     ")");
  return find_dataset(name);
}

// "mnist (MNIST's mean 0.1307 and std 0.3081), ...": every input scaling of the table.
std::vector<std::string> augment_choices() {
  std::vector<std::string> names{"dataset"};
  for (const std::string& name : augment_kind_names()) names.push_back(name);
  return names;
}

std::string input_scaling_help() {
  std::string out;
  for (const InputScalingInfo& info : input_scalings())
    out += std::string(out.empty() ? "" : ", ") + info.name + " (" + info.help + ")";
  return out;
}

std::vector<std::string> input_scaling_choices() {
  std::vector<std::string> names{"dataset"};
  for (const std::string& name : input_scaling_names()) names.push_back(name);
  return names;
}

// "1 direct (PMPP Fig 16.12), 2 tiled (...), ...": every registered convolution version.
std::string conv_algo_help() {
  std::string out;
  for (const ConvAlgoInfo& info : conv_algorithms())
    out += std::string(out.empty() ? "" : ", ") + std::to_string(info.number) + " " + info.name +
           " (" + info.source + ")";
  return out;
}

// The table. Its order is the effective config text's (settings.hpp says why it must not change):
// the general settings, then the network's, which --help and the text show under their own group.
// Names that a parser checks (activation, schedule, ...) are listed from the parser's own list; the
// parser's error names the setting and the accepted names.
std::vector<SettingDeclaration> declare_train_settings() {
  using S = TrainSettings;
  return {
      setting(&S::dataset, "--dataset", "mnist",
              "data set to train on; its class names are what evaluate and classify print")
          .one_of(dataset_names())
          .in_checkpoint_unless_default(),
      setting(&S::data_dir, "--data", "",
              "data folder (default: $LENET5_DATA, else data/mnist or data/fashion-mnist by "
              "--dataset)"),
      setting(&S::train_limit, "--train-limit", 0,
              "train on the first N training images only (0: all), of those not held out")
          .within(at_least(0)),
      setting(&S::validation, "--validation", kDefaultValidationImages,
              std::string("hold out the last N training images and save ") + kBestCheckpointFile +
                  " at the epoch that reads them best (the test set only reports); 0: train on "
                  "all of them, choose no best epoch, keep " +
                  kLastCheckpointFile + " only")
          .within(at_least(0)),
      setting(&S::epochs, "--epochs", 20, "passes over the training set").within(at_least(1)),
      setting(&S::batch_size, "--batch-size", 128, "images per SGD step").within(between(1, 60000)),
      setting(&S::lr, "--lr", 0.05, "learning rate (peak rate for one-cycle)").within(above(0)),
      setting(&S::schedule, "--schedule", "cosine",
              "learning-rate schedule (lecun1998: LeCun 1998's rate per pass, --lr times 1 for "
              "passes 1-2, 0.4 for 3-5, 0.2 for 6-8, 0.1 for 9-12, 0.02 after)")
          .one_of(schedule_names()),
      setting(&S::lr_gamma, "--lr-gamma", 0.1, "step/exponential: decay factor").within(above(0)),
      setting(&S::lr_step_epochs, "--lr-step-epochs", 1, "step: epochs between decays")
          .within(above(0)),
      setting(&S::min_lr, "--min-lr", 0, "cosine/one-cycle: final learning rate (at most --lr)")
          .within(at_least(0)),
      setting(&S::warmup_epochs, "--warmup-epochs", 0, "linear warm-up length in epochs (0: none)")
          .within(at_least(0)),
      setting(&S::one_cycle_start, "--one-cycle-start", 0.25,
              "one-cycle: fraction of training spent rising")
          .within(above(0).below(1)),
      setting(&S::momentum, "--momentum", 0.9, "SGD momentum (0: the book's plain SGD)")
          .within(at_least(0).below(1)),
      setting(&S::nesterov, "--nesterov", false,
              "Nesterov momentum instead of classical (needs --momentum above 0)"),
      setting(&S::weight_decay, "--weight-decay", 5e-4, "L2 weight decay").within(at_least(0)),
      setting(
          &S::optimizer, "--optimizer", kSgdName,
          "sgd (mini-batch SGD, with --momentum) or sdlm (LeCun 1998's stochastic diagonal "
          "Levenberg-Marquardt: each parameter's step is lr / (sdlm-mu + h), h its Hessian "
          "diagonal estimated before each pass; the paper updates after every sample, i.e. "
          "--batch-size 1; needs --momentum 0 and --kernels fast or book; weight decay adds its "
          "own curvature to h)")
          .one_of(optimizer_names())
          .in_checkpoint_unless_default(),
      setting(&S::sdlm_mu, "--sdlm-mu", 0.02,
              "sdlm: the damping mu that bounds each step (LeCun 1998: 0.02)")
          .within(above(0))
          .in_checkpoint_unless_default(),
      setting(&S::sdlm_samples, "--sdlm-samples", 500,
              "sdlm: samples at the start of each pass that estimate the Hessian diagonal (LeCun "
              "1998: 500)")
          .within(at_least(1))
          .in_checkpoint_unless_default(),
      setting(&S::seed, "--seed", 1, "seed of the initial weights and of every epoch's shuffle"),
      setting(&S::device, "--device", "auto", "auto|gpu|cpu"),
      // How many threads compute a CPU run changes neither its results nor its checkpoints.
      setting(&S::threads, "--threads", available_cpu_threads(),
              "CPU threads (default: the cores this process may use)")
          .within(at_least(1))
          .not_in_checkpoint(),
      // Where a run is written is not a training setting: kept out of config.toml and checkpoints,
      // so that same-seed runs into different folders write byte-identical checkpoints.
      setting(&S::out, "--out", "",
              "run folder (default: runs/<date-time>; runs/latest points at the newest)")
          .not_in_config(),
      setting(&S::evaluate_every_epoch, "--evaluate", true,
              "evaluate on the test set after each epoch"),
      // What a run records, not what it computes: kept out of the checkpoints, so that they stay
      // byte-identical whether it is on or off.
      setting(&S::evaluate_training_set, "--evaluate-training-set", false,
              std::string("also evaluate the undistorted training set after each epoch, "
                          "recorded in ") +
                  kMetricsFile +
                  " as train_eval_loss and train_eval_acc (LeCun 1998's Fig. 5 plots that error; "
                  "train_acc is the running accuracy during the epoch); costs a forward pass over "
                  "the training set per epoch")
          .not_in_checkpoint(),

      setting(&S::activation, "--activation", "relu", "activation function")
          .one_of(activation_names())
          .in_group("Network"),
      setting(&S::subsampling, "--subsampling", "max",
              "S2 and S4 subsampling: average or max (the book), or trainable (LeCun et al. 1998, "
              "section II.B: each window's sum times a trainable coefficient per map, plus the "
              "bias; not with --kernels whole-step)")
          .one_of(subsampling_names())
          .in_group("Network"),
      setting(&S::c3_table, "--c3-table", "full",
              "C3 connectivity: full (the book) or lecun (LeCun 1998)")
          .in_group("Network"),
      // Stored in checkpoints only as rbf, so that every checkpoint written before it existed,
      // and every softmax one after, keeps its bytes.
      setting(&S::output, "--output", "softmax",
              "output layer and training criterion: softmax (the book: a linear layer and softmax "
              "cross-entropy) or rbf (LeCun, Bottou, Bengio, Haffner 1998, section II.B: Euclidean "
              "RBF units with the fixed 7x12 digit bitmaps of its Fig. 3 as prototypes, trained "
              "with its MAP criterion, equation (9); the class is the nearest prototype's; not "
              "with --kernels whole-step)")
          .one_of(output_layer_names())
          .in_checkpoint_unless_default()
          .in_group("Network"),
      // Stored in checkpoints only as squashed, as --output is only as rbf.
      setting(&S::conv_units, "--conv-units", "linear",
              "C1 and C3 units: linear (the book: a plain convolution; the bias and activation "
              "come after the subsampling) or squashed (LeCun, Bottou, Bengio, Haffner 1998, "
              "section II.A: each C1 and C3 map adds its own bias and applies the activation "
              "before S2 and S4, 22 more parameters; not with --kernels whole-step)")
          .one_of(conv_units_names())
          .in_checkpoint_unless_default()
          .in_group("Network"),
      setting(&S::kernels, "--kernels", "whole-step",
              "kernels: " + kernels_help() +
                  "; on the CPU, book runs the sequential reference layers, fast and whole-step "
                  "the fast CPU layers, and tensor is refused")
          .in_group("Network"),
      setting(&S::conv_algo, "--conv-algo", "auto",
              "GPU convolution version for C1 and C3, by name or number: auto (direct with "
              "--kernels book, staged with fast; whole-step trains with its own convolution "
              "stages and takes only auto), " +
                  conv_algo_help())
          .in_group("Network"),
      // Stored in checkpoints only as tf32 or bf16, as --output only as rbf: a resumed tf32 run
      // goes on in tf32 (its bits are its own), and every fp32 checkpoint keeps its bytes.
      setting(&S::precision, "--precision", "fp32",
              "arithmetic of the training step's matrix products. fp32: float multiply-adds "
              "(with --kernels tensor, each product as three TF32 products of the operands' "
              "halves, within about 2^-22 of float's); tf32: operands rounded to TensorFloat-32 on "
              "the tensor cores, "
              "sums in float (--kernels whole-step: C3's forward pass and gradients and, for "
              "batches of 256 and more, the dense layers' weight gradients; --kernels tensor: "
              "every product); bf16: operands rounded to bfloat16 (--kernels tensor only). On a "
              "GPU the build has tensor-core kernels for (the default build's sm_90: the H100 and "
              "H200); each deterministic, with bits of its own. --kernels tensor evaluates in "
              "tf32 whatever it says; a sweep's packed models train with the whole-step kernels "
              "in fp32 or tf32, and bf16 models one at a time")
          .one_of(precision_names())
          .in_checkpoint_unless_default()
          .in_group("Network"),
      // Added after checkpoints were written without it, all of them under MNIST's scaling: the
      // checkpoints record the resolved scaling in their metadata instead (train/checkpoint.cpp).
      setting(&S::input_scaling, "--input-scaling", "dataset",
              "how grey levels become the input, (grey/255 - mean) / std: dataset (the data set's "
              "own statistics), " +
                  input_scaling_help())
          .one_of(input_scaling_choices())
          .in_group("Network")
          .in_checkpoint_unless_default(),

      // "dataset" resolves through the data set's table (data/datasets.hpp says why each).
      // Before it was the default, elastic was: an MNIST run reads the same either way.
      setting(&S::augment, "--augment", "dataset",
              "transform each training image, new each epoch: dataset (MNIST's elastic, none "
              "for Fashion-MNIST), none, affine (rotation, scale, shear, translation) or elastic "
              "(affine, then Simard's elastic distortion)")
          .one_of(augment_choices())
          .in_group("Augmentation"),
      setting(&S::augment_rotation, "--augment-rotation", 10, "rotation drawn from [-X, X] degrees")
          .within(between(0, kMaxRotationDegrees))
          .in_group("Augmentation"),
      setting(&S::augment_scale, "--augment-scale", 0.1, "scale factor drawn from [1 - X, 1 + X]")
          .within(at_least(0).below(kScaleBelow))
          .in_group("Augmentation"),
      setting(&S::augment_shear, "--augment-shear", 10,
              "horizontal shear drawn from [-X, X] degrees")
          .within(between(0, kMaxShearDegrees))
          .in_group("Augmentation"),
      setting(&S::augment_translation, "--augment-translation", 2,
              "shift drawn from [-X, X] pixels on each axis")
          .within(between(0, kMaxTranslationPixels))
          .in_group("Augmentation"),
      setting(&S::elastic_alpha, "--elastic-alpha", 10,
              "elastic: pixels of displacement per unit of the smoothed random field")
          .within(between(0, kMaxElasticAlpha))
          .in_group("Augmentation"),
      setting(&S::elastic_sigma, "--elastic-sigma", 4,
              "elastic: width in pixels of the Gaussian that smooths the field")
          .within(above(0).at_most(kMaxElasticSigma))
          .in_group("Augmentation"),
      // Added after checkpoints were written without them, which meant 0 (and its range unused).
      setting(&S::augment_low_resolution, "--augment-low-resolution", 0,
              "the share of training images also seen as a small scan enlarged: after the "
              "transform, reduced (area averaging) so that the digit is scanned at between "
              "--augment-low-resolution-scan and 20 px, then enlarged back bilinearly (blur)")
          .within(between(0, 1))
          .in_group("Augmentation")
          .in_checkpoint_unless_default(),
      setting(&S::augment_low_resolution_scan, "--augment-low-resolution-scan", 8,
              "the smallest scan --augment-low-resolution simulates, in pixels of the digit's 20")
          .within(between(kMinScanPixels, kMaxScanPixels))
          .in_group("Augmentation")
          .in_checkpoint_unless_default(),
  };
}

template <typename Field>
using FieldType =
    std::remove_reference_t<decltype(std::declval<TrainSettings&>().*std::declval<Field>())>;

// A numeric field's value as a double (exact for every int and for the doubles themselves).
std::optional<double> numeric_value(const TrainSettings& settings, const SettingField& field) {
  return std::visit(
      [&](auto member) -> std::optional<double> {
        using T = FieldType<decltype(member)>;
        if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
          return static_cast<double>(settings.*member);
        return std::nullopt;
      },
      field);
}

// 15 significant digits: every value a person types comes back as typed (0.0700001, 1000000),
// without the last-bit noise of 17 (0.07000000000000001).
std::string number_text(double value) {
  std::ostringstream out;
  out << std::setprecision(15) << value;
  return out.str();
}

// The ranges of single settings are declared with them; these are the settings that depend on
// each other.
void check_combinations(const TrainSettings& s) {
  if (s.min_lr > s.lr)
    throw UsageError("--min-lr " + number_text(s.min_lr) + " is above --lr " + number_text(s.lr) +
                     ": the final learning rate must be at most the starting one");
  if (s.nesterov && s.momentum == 0) throw UsageError("--nesterov needs --momentum above 0");
  if (s.optimizer == kSdlmName && s.momentum > 0)
    throw UsageError(
        "--optimizer sdlm takes no momentum (LeCun 1998's method has none), not "
        "--momentum " +
        number_text(s.momentum) + ": add --momentum 0");
  // Caught here for --device cpu, before any data is read; backend.cpp's make_engine catches a
  // run that --device auto puts on the CPU.
  if (s.precision != "fp32" && s.device == "cpu")
    throw UsageError("--precision " + s.precision +
                     " runs on a GPU's tensor cores, not with --device cpu, which computes in "
                     "fp32: use --precision fp32, or --device gpu");
  const GpuKernelSet& set = gpu_kernel_set(parse_gpu_kernels(s.kernels));
  if (s.optimizer == kSdlmName && set.whole_step)
    throw UsageError("--optimizer sdlm does not run in --kernels " + std::string(set.name) +
                     ", whose kernels apply SGD themselves: choose --kernels fast (or book)");
  if (set.tensor_evaluation && s.device == "cpu")
    throw UsageError("--kernels " + std::string(set.name) +
                     " trains and evaluates on a GPU's tensor cores, not with --device cpu: use "
                     "--kernels whole-step (or fast), or --device gpu");
}

// Every declared range, then the combinations: what schedule_config() and sgd() need.
void check_values(const TrainSettings& settings) {
  for (const SettingDeclaration& declaration : train_setting_declarations())
    declaration.check(settings);
  check_combinations(settings);
}

}  // namespace

SettingRange SettingRange::below(double limit) const {
  SettingRange range = *this;
  range.high = limit;
  range.high_included = false;
  return range;
}

SettingRange SettingRange::at_most(double limit) const {
  SettingRange range = *this;
  range.high = limit;
  range.high_included = true;
  return range;
}

bool SettingRange::contains(double value) const {
  const bool above_low = low_included ? value >= low : value > low;
  const bool below_high = high_included ? value <= high : value < high;
  return above_low && below_high;  // false for NaN
}

std::string SettingRange::text() const {
  const bool has_low = low > -std::numeric_limits<double>::infinity();
  const bool has_high = high < std::numeric_limits<double>::infinity();
  if (has_low && has_high && low_included && high_included)
    return "between " + number_text(low) + " and " + number_text(high);
  std::string out;
  if (has_low) out = (low_included ? "at least " : "above ") + number_text(low);
  if (has_high)
    out += (out.empty() ? "" : " and ") + std::string(high_included ? "at most " : "below ") +
           number_text(high);
  return out;
}

SettingRange at_least(double limit) {
  return {limit, true};
}
SettingRange above(double limit) {
  return {limit, false};
}
SettingRange between(double low, double high) {
  return SettingRange{low, true}.at_most(high);
}

bool SettingDeclaration::same_in(const TrainSettings& a, const TrainSettings& b) const {
  return std::visit([&](auto member) { return a.*member == b.*member; }, field);
}

std::string SettingDeclaration::help_text() const {
  if (!names.empty()) return help + ": " + joined(names);
  if (range) return help + "; " + range->text();
  return help;
}

void SettingDeclaration::check(const TrainSettings& settings) const {
  if (!range) return;
  const double value = *numeric_value(settings, field);
  if (!range->contains(value))
    throw UsageError(flag + " must be " + range->text() + ", not " + number_text(value));
}

SettingDeclaration SettingDeclaration::within(SettingRange accepted) const {
  SettingDeclaration declaration = *this;
  declaration.range = accepted;
  return declaration;
}

SettingDeclaration SettingDeclaration::one_of(std::vector<std::string> accepted) const {
  SettingDeclaration declaration = *this;
  declaration.names = std::move(accepted);
  return declaration;
}

SettingDeclaration SettingDeclaration::in_group(std::string heading) const {
  SettingDeclaration declaration = *this;
  declaration.group = std::move(heading);
  return declaration;
}

SettingDeclaration SettingDeclaration::not_in_config() const {
  SettingDeclaration declaration = *this;
  declaration.in_config = false;
  return declaration;
}

SettingDeclaration SettingDeclaration::in_checkpoint_unless_default() const {
  if (std::holds_alternative<bool>(default_value))
    throw Error("internal: " + flag + ": a bool setting is always stored");
  SettingDeclaration declaration = *this;
  declaration.in_checkpoint_at_default = false;
  return declaration;
}

SettingDeclaration SettingDeclaration::not_in_checkpoint() const {
  SettingDeclaration declaration = *this;
  declaration.in_checkpoint = false;
  return declaration;
}

const std::vector<SettingDeclaration>& train_setting_declarations() {
  static const std::vector<SettingDeclaration> declarations = declare_train_settings();
  return declarations;
}

const SettingDeclaration& train_setting_declaration(const std::string& flag) {
  for (const SettingDeclaration& declaration : train_setting_declarations())
    if (declaration.flag == flag) return declaration;
  throw Error("internal: no setting " + flag);
}

namespace {

// Whether `value`, as CLI11 writes it in a config line, is the declaration's default: a string as
// "value", a number as its digits, compared as a number (0.02 is 0.02 however it is written).
bool is_default_line(const SettingDeclaration& declaration, const std::string& value) {
  if (const auto* text = std::get_if<std::string>(&declaration.default_value))
    return value == "\"" + *text + "\"";
  const double default_number = std::visit(
      [](const auto& v) -> double {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_arithmetic_v<T>) return static_cast<double>(v);
        return 0;
      },
      declaration.default_value);
  std::istringstream in(value);
  double number = 0;
  return in >> number && in.peek() == std::char_traits<char>::eof() && number == default_number;
}

}  // namespace

std::string checkpoint_config(const std::string& config_toml) {
  std::istringstream in(config_toml);
  std::string out, line;
  while (std::getline(in, line)) {
    const std::string key = line.substr(0, line.find('='));
    const bool dropped = std::any_of(
        train_setting_declarations().begin(), train_setting_declarations().end(),
        [&](const SettingDeclaration& d) {
          if (key != d.flag.substr(2)) return false;
          return !d.in_checkpoint || (!d.in_checkpoint_at_default && line.size() > key.size() &&
                                      is_default_line(d, line.substr(key.size() + 1)));
        });
    if (!dropped) out += line + "\n";
  }
  return out;
}

TrainSettings::TrainSettings() {
  for (const SettingDeclaration& declaration : train_setting_declarations())
    std::visit(
        [&](auto member) {
          using T = FieldType<decltype(member)>;
          this->*member = std::get<T>(declaration.default_value);
        },
        declaration.field);
}

NetConfig TrainSettings::net_config() const {
  NetConfig config;
  config.activation = parse_activation(activation);
  config.subsampling = parse_subsampling(subsampling);
  config.c3_table = parse_c3_table(c3_table);
  config.output = parse_output_layer(output);
  config.kernels = parse_gpu_kernels(kernels);
  config.input_scaling = parse_input_scaling(
      input_scaling == "dataset" ? described_dataset(dataset).input_scaling : input_scaling);
  const GpuKernelSet& set = gpu_kernel_set(config.kernels);
  if (set.whole_step && config.output == OutputLayer::rbf)
    throw UsageError("--output rbf does not run in the whole-step kernel set (--kernels " +
                     std::string(set.name) +
                     "), whose kernels compute the softmax output "
                     "themselves: choose --kernels fast (or book)");
  if (conv_algo == "auto") {
    config.conv_algo = set.default_conv_algo;
  } else {
    // Accepting the option and ignoring it would make a comparison silently measure something
    // else: such a kernel set trains with its own convolution stages.
    if (!set.takes_conv_algo)
      throw UsageError("--conv-algo " + conv_algo + " does not apply to --kernels " + set.name +
                       ", which trains with its own convolution stages: leave --conv-algo at "
                       "auto, or choose --kernels fast");
    config.conv_algo = parse_conv_algo(conv_algo);
  }
  // The whole-step kernels compute the book's subsampling only.
  if (set.whole_step && config.subsampling == Subsampling::trainable)
    throw UsageError("--subsampling trainable does not apply to --kernels " +
                     std::string(set.name) +
                     ", whose kernels have no trainable subsampling: choose --kernels fast");
  config.precision = parse_precision(precision);
  if (config.precision == Precision::tf32 && !set.whole_step)
    throw UsageError(
        "--precision tf32 runs in the whole-step and tensor-core kernels only, not in --kernels " +
        std::string(set.name) + ": choose --kernels whole-step or tensor, or --precision fp32");
  if (config.precision == Precision::bf16 && !set.tensor_gradient)
    throw UsageError(
        "--precision bf16 runs in the tensor-core kernels' training step only, not "
        "in --kernels " +
        std::string(set.name) + ": choose --kernels tensor, or --precision fp32");
  config.conv_units = parse_conv_units(conv_units);
  if (set.whole_step && config.conv_units == ConvUnits::squashed)
    throw UsageError("--conv-units squashed does not apply to --kernels " + std::string(set.name) +
                     ", whose kernels compute the book's linear C1 and C3: choose --kernels fast");
  return config;
}

Schedule TrainSettings::schedule_config() const {
  check_values(*this);
  Schedule s;
  s.kind = parse_schedule(schedule);
  s.lr = lr;
  s.gamma = lr_gamma;
  s.step_epochs = lr_step_epochs;
  s.min_lr = min_lr;
  s.warmup_epochs = warmup_epochs;
  s.one_cycle_start = one_cycle_start;
  s.total_epochs = epochs;
  return s;
}

SgdSettings TrainSettings::sgd() const {
  check_values(*this);
  const std::vector<std::string> known = optimizer_names();
  if (std::find(known.begin(), known.end(), optimizer) == known.end())
    throw UsageError("--optimizer: unknown optimizer '" + optimizer +
                     "' (accepted: " + joined(known) + ")");
  SgdSettings sgd{momentum, nesterov, weight_decay};
  sgd.optimizer = optimizer;
  sgd.sdlm_mu = sdlm_mu;
  sgd.sdlm_samples = sdlm_samples;
  return sgd;
}

std::string TrainSettings::augment_kind() const {
  if (augment == "dataset") return described_dataset(dataset).augment;
  const std::vector<std::string> choices = augment_choices();
  if (std::find(choices.begin(), choices.end(), augment) == choices.end())
    throw UsageError("--augment: unknown augmentation '" + augment +
                     "' (accepted: " + joined(choices) + ")");
  return augment;
}

Augmentation TrainSettings::augmentation() const {
  check_values(*this);
  Augmentation result;
  result.settings.kind = parse_augment_kind(augment_kind());
  result.settings.rotation_degrees = augment_rotation;
  result.settings.scale = augment_scale;
  result.settings.shear_degrees = augment_shear;
  result.settings.translation_pixels = augment_translation;
  result.settings.elastic_alpha = elastic_alpha;
  result.settings.elastic_sigma = elastic_sigma;
  result.settings.low_resolution = augment_low_resolution;
  result.settings.low_resolution_scan = augment_low_resolution_scan;
  result.seed = seed;
  return result;
}

void TrainSettings::validate() const {
  check_values(*this);
  augmentation();
  net_config();
  sgd();
  parse_schedule(schedule);
  described_dataset(dataset);
}

std::string stored_setting(const std::string& config_toml, const std::string& key) {
  const auto trimmed = [](std::string text) {
    const std::string blanks = " \t\r\"";
    text.erase(0, text.find_first_not_of(blanks));
    text.erase(text.find_last_not_of(blanks) + 1);
    return text;
  };
  std::istringstream lines(config_toml);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t equals = line.find('=');
    if (equals != std::string::npos && trimmed(line.substr(0, equals)) == key)
      return trimmed(line.substr(equals + 1));
  }
  return "";
}

}  // namespace lenet5
