// Errors: library code throws, main() reports (exit code 1 for Error, 2 for UsageError).
// Messages say what was wrong and, where there is one, how to fix it.
#pragma once

#include <stdexcept>
#include <string>

namespace lenet5 {

// A runtime failure: bad data, a corrupt checkpoint, a CUDA error. main() exits with 1.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The user asked for something impossible (bad flag value, conflicting options). main() exits with 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace lenet5
