// Work that waits on the disk, one piece per model of a packed group, run on threads side by side
// (trainer.cpp: each model's files at an epoch's end, written while the next epoch trains; the
// pictures after the last epoch, drawn while the calling thread evaluates the next model). A disk
// takes many fsyncs at once faster than one after another.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <exception>
#include <future>
#include <utility>
#include <vector>

namespace lenet5 {

// For each item in turn, on this thread: `start(item)`, which returns the future of the item's
// work on a thread of its own (std::async). At most `at_once` futures are in flight (at least
// one); each is joined, oldest first, by `join(item, future)` on this thread, whose future.get()
// rethrows what the work threw.
// Once an error is met (from a start, or from a join, which comes when the window is full or at
// the end), no further item starts; every item started is still joined, in the items' order, and
// then the first failing item's error leaves (the later ones are dropped), whichever thread it
// came from. Nothing outlives the call: every future is joined.
template <class Result, class Item, class Start, class Join>
void for_each_side_by_side(const std::vector<Item*>& items, std::size_t at_once, Start start,
                           Join join) {
  at_once = std::max<std::size_t>(at_once, 1);
  std::deque<std::pair<Item*, std::future<Result>>> in_flight;
  std::exception_ptr first_error;  // the first failing item's, in the items' order
  const auto join_oldest = [&] {
    auto [item, work] = std::move(in_flight.front());
    in_flight.pop_front();
    try {
      join(*item, work);
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  };
  for (Item* item : items) {
    if (in_flight.size() >= at_once) join_oldest();
    if (first_error) break;
    try {
      in_flight.emplace_back(item, start(*item));
    } catch (...) {
      const std::exception_ptr start_error = std::current_exception();
      while (!in_flight.empty()) join_oldest();  // the earlier items' errors come first
      if (!first_error) first_error = start_error;
      break;
    }
  }
  while (!in_flight.empty()) join_oldest();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace lenet5
