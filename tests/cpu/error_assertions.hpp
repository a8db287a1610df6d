// Helpers shared by the data-file tests: the CRC-32 of a byte string, and an assertion that a call
// throws lenet5::Error with a message naming every given part.
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace lenet5::testing_support {

inline std::uint32_t crc_of(const std::vector<std::uint8_t>& bytes) {
  return static_cast<std::uint32_t>(crc32(0L, bytes.data(), static_cast<uInt>(bytes.size())));
}

// Passes if f throws lenet5::Error whose message contains every one of parts.
template <class F>
::testing::AssertionResult throws_error_mentioning(F f, std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const lenet5::Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts) {
      if (message.find(part) == std::string::npos) {
        return ::testing::AssertionFailure()
               << "message \"" << message << "\" lacks \"" << part << "\"";
      }
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no lenet5::Error thrown";
}

}  // namespace lenet5::testing_support
