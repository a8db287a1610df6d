// Work that waits on the disk, one piece per model of a packed group, run on threads side by side
// while this thread goes on to the next model (trainer.cpp: the checkpoints at an epoch's end, the
// pictures after the last epoch). A disk takes many fsyncs at once faster than one after another.
#pragma once

#include <cstddef>
#include <deque>
#include <future>
#include <utility>
#include <vector>

namespace lenet5 {

// For each item in turn, on this thread: `start(item)`, which returns the future of the item's
// work on a thread of its own (std::async). At most `at_once` futures are in flight; they are
// joined oldest first by `join(item, future)`, on this thread, whose future.get() rethrows what
// the work threw.
// Before an error leaves, from a start or a join, every future in flight is joined in the items'
// order, so the first failing item's error is the one that leaves, whichever thread it came from;
// the later futures' errors are dropped. A future of std::async waits for its thread when
// destroyed, so no thread outlives the call. Items past the window when an error leaves are
// never started.
template <class Result, class Item, class Start, class Join>
void for_each_side_by_side(const std::vector<Item*>& items, std::size_t at_once, Start start,
                           Join join) {
  std::deque<std::pair<Item*, std::future<Result>>> in_flight;
  const auto join_oldest = [&in_flight, &join] {
    auto [item, work] = std::move(in_flight.front());
    in_flight.pop_front();
    join(*item, work);
  };
  try {
    for (Item* item : items) {
      if (in_flight.size() == at_once) join_oldest();
      in_flight.emplace_back(item, start(*item));
    }
  } catch (...) {
    while (!in_flight.empty()) join_oldest();
    throw;
  }
  while (!in_flight.empty()) join_oldest();
}

}  // namespace lenet5
