#include "train/settings.hpp"

#include "core/error.hpp"

namespace lenet5 {

NetConfig TrainSettings::net_config() const {
  NetConfig config;
  config.activation = parse_activation(activation);
  config.subsampling = parse_subsampling(subsampling);
  config.c3_table = parse_c3_table(c3_table);
  config.kernels = parse_gpu_kernels(kernels);
  const GpuKernelSet& set = gpu_kernel_set(config.kernels);
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
  return config;
}

Schedule TrainSettings::schedule_config() const {
  Schedule s;
  s.kind = parse_schedule(schedule);
  s.lr = lr;
  s.gamma = lr_gamma;
  s.step_epochs = lr_step_epochs;
  s.min_lr = min_lr;
  s.warmup_epochs = warmup_epochs;
  s.one_cycle_start = one_cycle_start;
  s.total_epochs = epochs;
  s.validate();
  return s;
}

SgdSettings TrainSettings::sgd() const {
  if (!(momentum >= 0 && momentum < 1)) throw UsageError("--momentum must be in [0, 1)");
  if (!(weight_decay >= 0)) throw UsageError("--weight-decay must not be negative");
  if (nesterov && momentum == 0) throw UsageError("nesterov needs --momentum above 0");
  return {momentum, nesterov, weight_decay};
}

void TrainSettings::validate() const {
  net_config();
  schedule_config();
  sgd();
  if (batch_size < 1 || batch_size > 60000)
    throw UsageError("--batch-size must be between 1 and 60000");
  if (train_limit < 0) throw UsageError("--train-limit must not be negative");
}

}  // namespace lenet5
