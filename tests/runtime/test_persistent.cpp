// Persistent kernels: task order, coverage, default size.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "helpers.hpp"

namespace tilecomm {
namespace {

using test::config;

std::vector<std::size_t> shuffled(std::size_t n, unsigned seed) {
  std::vector<std::size_t> v(n);
  std::iota(v.begin(), v.end(), std::size_t{0});
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  return v;
}

TEST(Persistent, SingleWorkgroupRunsTasksInExactlyTheGivenOrder) {
  Device d(config(2, 2));
  const auto order = shuffled(200, 1);
  std::vector<std::size_t> ran;  // one WG: no concurrent access
  d.default_stream().launch_persistent({"p", 1, 0}, order,
                                       [&](const WorkgroupContext& wg, std::size_t task) {
                                         EXPECT_EQ(wg.id, 0u);
                                         ran.push_back(task);
                                       });
  d.synchronize();
  EXPECT_EQ(ran, order);
}

// Several WGs take tasks from one shared counter, so tasks *start* (are claimed) in list order.
// A claim cannot be observed exactly from inside fn when WGs race (a thread may be preempted
// between claim and its first instruction), so the order is made observable: the tasks at list
// positions 0 and 1 block until every other task has run, which leaves a single WG to run
// positions 2..n-1 -- they must arrive in exactly list order. A static partition of the list would
// deadlock here (and time out); an unordered hand-out would show in the order.
TEST(Persistent, ManyWorkgroupsStartTasksInListOrder) {
  Device d(config(2, 2));
  constexpr std::size_t kWgs = 3, kTasks = 300;
  const auto order = shuffled(kTasks, 2);
  std::vector<std::size_t> pos(kTasks);
  for (std::size_t i = 0; i < kTasks; ++i)
    pos[order[i]] = i;
  std::mutex mu;
  std::vector<std::size_t> starts;                     // observed start order
  std::vector<std::vector<std::size_t>> per_wg(kWgs);  // list positions, per WG
  std::atomic<std::size_t> finished{0};
  d.default_stream().launch_persistent(
      {"p", kWgs, 1024}, order, [&](const WorkgroupContext& wg, std::size_t task) {
        {
          std::lock_guard lock(mu);
          starts.push_back(task);
          per_wg.at(wg.id).push_back(pos[task]);
        }
        if (pos[task] < 2)
          test::wait_for([&] { return finished.load() == kTasks - 2; }, "the other tasks");
        else
          finished.fetch_add(1);
      });
  d.synchronize();
  ASSERT_EQ(starts.size(), kTasks);
  EXPECT_EQ(std::set<std::size_t>(starts.begin(), starts.end()).size(), kTasks);
  for (std::size_t w = 0; w < kWgs; ++w)
    EXPECT_TRUE(std::is_sorted(per_wg[w].begin(), per_wg[w].end())) << "WG " << w;
  // Apart from positions 0 and 1 (blocked in two WGs), one WG ran everything in list order.
  std::vector<std::size_t> rest;
  for (std::size_t t : starts)
    if (pos[t] >= 2) rest.push_back(t);
  EXPECT_EQ(rest, std::vector<std::size_t>(order.begin() + 2, order.end()));
}

TEST(Persistent, EveryTaskExactlyOnceAndDefaultSizeIsOneWgPerCu) {
  Device d(config(3, 2));
  constexpr std::size_t kTasks = 1000;
  std::vector<std::atomic<int>> count(kTasks);
  std::atomic<std::size_t> grid_x{0};
  std::vector<std::atomic<int>> wg_used(3);
  d.default_stream().launch_persistent({"p", 0, 0}, shuffled(kTasks, 3),
                                       [&](const WorkgroupContext& wg, std::size_t task) {
                                         grid_x = wg.grid.x;
                                         wg_used.at(wg.id) = 1;
                                         count[task].fetch_add(1);
                                       });
  d.synchronize();
  EXPECT_EQ(grid_x.load(), 3u);
  for (std::size_t t = 0; t < kTasks; ++t)
    EXPECT_EQ(count[t].load(), 1) << "task " << t;
  // A task list may repeat or skip ids: tasks are just numbers handed to fn in order.
  std::vector<std::size_t> ran;
  d.default_stream().launch_persistent(
      {"p", 1, 0}, {5, 5, 2}, [&](const WorkgroupContext&, std::size_t t) { ran.push_back(t); });
  d.default_stream().launch_persistent(
      {"empty", 0, 0}, {}, [&](const WorkgroupContext&, std::size_t t) { ran.push_back(t); });
  d.synchronize();
  EXPECT_EQ(ran, (std::vector<std::size_t>{5, 5, 2}));
}

}  // namespace
}  // namespace tilecomm
