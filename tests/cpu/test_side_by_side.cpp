// for_each_side_by_side (src/train/side_by_side.hpp), with plain items in place of a packed
// group's models: every item's work joined in order, at most `at_once` in flight, and on an error
// the first failing item's error leaves, after every started thread has ended.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "train/side_by_side.hpp"

namespace lenet5 {
namespace {

struct Item {
  int index = 0;
  bool started = false;
  std::atomic<bool> work_ended{false};
};

// n items, and pointers to them as for_each_side_by_side takes them.
struct Items {
  explicit Items(int n) : storage(std::size_t(n)) {
    for (int i = 0; i < n; ++i) {
      storage[std::size_t(i)].index = i;
      pointers.push_back(&storage[std::size_t(i)]);
    }
  }
  std::vector<Item> storage;
  std::vector<Item*> pointers;
};

// The work of item i: a short wait (so that later items start while it runs), then its result,
// or an error for the items in `failing`.
std::future<int> work_of(Item& item, std::vector<int> failing = {}) {
  item.started = true;
  return std::async(std::launch::async, [&item, failing] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    item.work_ended = true;
    for (const int f : failing)
      if (f == item.index) throw std::runtime_error("work " + std::to_string(item.index));
    return 10 * item.index;
  });
}

// The message of what `run` throws ("" when nothing).
template <class F>
std::string error_of(F run) {
  try {
    run();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(SideBySide, EveryItemsWorkIsJoinedInOrderWithAtMostAtOnceInFlight) {
  Items items(10);
  int started = 0, joined = 0, most_in_flight = 0;
  std::vector<int> results;
  for_each_side_by_side<int>(
      items.pointers, 3,
      [&](Item& item) {
        ++started;
        most_in_flight = std::max(most_in_flight, started - joined);
        return work_of(item);
      },
      [&](Item& item, std::future<int>& work) {
        ++joined;
        EXPECT_EQ(item.index, int(results.size()));
        results.push_back(work.get());
      });
  EXPECT_EQ(most_in_flight, 3);
  ASSERT_EQ(results.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(results[std::size_t(i)], 10 * i);
}

// Runs items.pointers with `at_once`, the work of `failing` throwing and, when failing_start is
// an item's index, that item's start throwing; returns the error that left and records, in
// `joined`, the items joined in order.
std::string run_failing(Items& items, std::size_t at_once, std::vector<int> failing,
                        std::vector<int>& joined, int failing_start = -1) {
  return error_of([&] {
    for_each_side_by_side<int>(
        items.pointers, at_once,
        [&](Item& item) {
          if (item.index == failing_start)
            throw std::runtime_error("start " + std::to_string(item.index));
          return work_of(item, failing);
        },
        [&](Item& item, std::future<int>& work) {
          joined.push_back(item.index);
          work.get();
        });
  });
}

// Items 1 and 3 fail, all six in flight at once: item 1's error leaves, after every item has been
// joined in order (item 3's error is dropped).
TEST(SideBySide, TheFirstFailingItemsErrorLeavesOnceEveryItemIsJoined) {
  Items items(6);
  std::vector<int> joined;
  EXPECT_EQ(run_failing(items, 8, {1, 3}, joined), "work 1");
  EXPECT_EQ(joined, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  for (const Item& item : items.storage) EXPECT_TRUE(item.work_ended) << item.index;
}

// With the window full, the oldest item's failure is met before the next item starts: the items
// past the window never start, and those in flight are still joined, a later failure among them
// (item 1's) dropped for the first (item 0's).
TEST(SideBySide, AFailureMetWithTheWindowFullStartsNoFurtherItem) {
  Items items(10);
  std::vector<int> joined;
  EXPECT_EQ(run_failing(items, 3, {0, 1}, joined), "work 0");
  EXPECT_EQ(joined, (std::vector<int>{0, 1, 2}));
  for (int i = 3; i < 10; ++i) EXPECT_FALSE(items.storage[std::size_t(i)].started) << i;
}

// A start that throws (as a model's end of epoch may) does not hide an earlier item's failed work.
TEST(SideBySide, AnEarlierItemsFailedWorkLeavesBeforeALaterStartsError) {
  Items items(5);
  std::vector<int> joined;
  EXPECT_EQ(run_failing(items, 8, {1}, joined, /*failing_start=*/3), "work 1");
  EXPECT_EQ(joined, (std::vector<int>{0, 1, 2}));
  EXPECT_FALSE(items.storage[4].started);
}

// A start's own error leaves when no earlier item failed, after the earlier items are joined.
TEST(SideBySide, AStartsErrorLeavesWhenNoEarlierItemFailed) {
  Items items(4);
  std::vector<int> joined;
  EXPECT_EQ(run_failing(items, 8, {}, joined, /*failing_start=*/2), "start 2");
  EXPECT_EQ(joined, (std::vector<int>{0, 1}));
}

// A window of none would start nothing and join nothing: it is taken as one.
TEST(SideBySide, AWindowOfNoneIsAWindowOfOne) {
  Items items(3);
  std::vector<int> joined;
  EXPECT_EQ(run_failing(items, 0, {}, joined), "");
  EXPECT_EQ(joined, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace lenet5
