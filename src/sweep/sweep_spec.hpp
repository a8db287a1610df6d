// What `lenet5 sweep` trains: lists of values for [train] settings (train/settings.hpp's
// declarations), whose product is the sweep, and the slice of it this process runs (--shard K/N).
//
// The order of the models is fixed, whatever the order the lists were given in: the settings in
// the declaration table's order (that of `lenet5 train --help`), the first varying slowest, and
// the seed last, varying fastest, so that the seeds of one setting are neighbours. Each list keeps
// its values in the order written. Model i (0-based) belongs to shard (i mod N) + 1: round-robin,
// so every shard gets a share of every setting.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lenet5 {

// More models than this is a usage error: a typo in a range (1-10000) must not start a week of
// work.
constexpr int kMaxSweepModels = 1024;

// One setting's values, each as written ("0.05"), ranges already expanded ("1-3" -> 1, 2, 3).
struct SweepList {
  std::string key;  // the config key: the flag without its dashes ("lr", "batch-size", "seed")
  std::vector<std::string> values;
  bool operator==(const SweepList& other) const {
    return key == other.key && values == other.values;
  }
};

// K of N: this process trains the models i with i mod N == K - 1.
struct SweepShard {
  int index = 1;  // K, 1-based
  int count = 1;  // N
  bool operator==(const SweepShard& other) const {
    return index == other.index && count == other.count;
  }
};

// The lists in the sweep's order (see above); at most one per key.
struct SweepSpec {
  std::vector<SweepList> lists;
  SweepShard shard;
};

// One model of the sweep: its place in the whole sweep and its values, one per list.
struct SweepModel {
  int index = 0;                  // 0-based, in the whole sweep (not in the shard)
  std::vector<SweepList> values;  // each list with the one value of this model
  // "lr=0.1,seed=3": the folder under the sweep folder (characters unsafe in file names replaced
  // by '_').
  std::string name;
  // The same without the seed: the setting whose seeds the summary gathers ("(all)" when only the
  // seed varies).
  std::string setting;
};

// UsageError unless `key` names a [train] setting a sweep may vary: not an unknown one, and none of
// those that say where or how a run happens (out, data, device, threads) rather than what it
// computes, nor config or resume. `origin` is where the list was given, for the message ("--seeds",
// "[sweep] lr"); empty: "--set KEY".
void check_sweep_key(const std::string& key, const std::string& origin = "");

// "1,2,5", "1-16", "0.05,0.1", "relu,tanh": the values of `key`'s list. Integer settings accept
// inclusive ranges LOW-HIGH. UsageError naming the setting for an empty list or value, a malformed
// or reversed range, or an unknown key. (Each value's type and range are checked where it is turned
// into settings: make_sweep_settings in the command.)
SweepList parse_sweep_list(const std::string& key, const std::string& text,
                           const std::string& origin = "");

// Adds `list` to `spec` at its place in the sweep's order; UsageError if its key already has one.
void add_sweep_list(SweepSpec& spec, SweepList list);

// "K/N" with 1 <= K <= N; UsageError otherwise.
SweepShard parse_sweep_shard(const std::string& text);

// Every model of the sweep, in order (all shards). UsageError when there are no lists, or more
// than kMaxSweepModels models, or two models would share a folder.
std::vector<SweepModel> expand_sweep(const SweepSpec& spec);

// The models of the spec's shard.
std::vector<SweepModel> models_of_shard(const SweepSpec& spec);

// The spec as a TOML [sweep] table (each list as an array of its values as written, and the
// shard), for the sweep folder's sweep.toml.
std::string sweep_table_toml(const SweepSpec& spec);

// The spec back from a text holding sweep_table_toml's [sweep] table (a sweep folder's sweep.toml,
// whose other tables are skipped): its lists, each key checked as check_sweep_key does, and its
// shard. Error naming `origin` (the file) for a missing table, a line it did not write, or a list
// or shard that a command line's would be refused for.
SweepSpec parse_sweep_table_toml(const std::string& text, const std::string& origin);

}  // namespace lenet5
