// The tables that registrations at namespace scope fill before main() runs: the convolution
// versions (core/conv_algo.hpp and their factories) and the subcommands (cli/commands.hpp).
#pragma once

namespace lenet5 {

// The one `Table` of the registrations of `Owner` (a tag: two owners with tables of one type keep
// two tables). A function-local static, so that it exists before the first registration runs,
// whatever the order in which the files' static initialisers run.
template <class Owner, class Table>
Table& registration_table() {
  static Table table;
  return table;
}

}  // namespace lenet5
