// runtime_perf: what the device model costs. Every figure is host-observed (launch to synchronize
// return), on a device built once per benchmark, so it includes the wake-up of worker threads.
//
//   EmptyKernel/cus:N/wgs:W   launch of W empty WGs + synchronize (N = 0: every core in the mask)
//   Dispatch/wgs:W            one kernel of W empty WGs; per_wg = time per WG
//   EventRecordSync           record an event on an idle stream + synchronize it
//   StreamWaitEvent           kernel on stream A, B waits for its event, kernel on B, sync B
//   PersistentTasks/tasks:T   one persistent kernel (one WG per CU) over T empty tasks; per_task
//
// The bars for a 2-core machine (docs/runtime.md): EmptyKernel/cus:1/wgs:1 <= 20 us, per_wg <= 1
// us.
#include <benchmark/benchmark.h>

#include <numeric>
#include <vector>

#include "tilecomm/device.hpp"
#include "tilecomm/env.hpp"
#include "tilecomm/error.hpp"
#include "tilecomm/runtime_config.hpp"
#include "tilecomm/trace.hpp"

namespace {

using tilecomm::Device;
using tilecomm::RuntimeConfig;
using tilecomm::WorkgroupContext;

RuntimeConfig config(int cus) {
  RuntimeConfig c = RuntimeConfig::from_env();  // honours TILECOMM_WG_SLOTS, _PIN, _SPIN_US
  c.num_cus = cus;
  c.trace = false;
  return c;
}

void EmptyKernel(benchmark::State& state) {
  Device d(config(static_cast<int>(state.range(0))));
  const std::size_t wgs = static_cast<std::size_t>(state.range(1));
  auto& s = d.default_stream();
  for (auto _ : state) {
    s.launch({"empty", {wgs, 1}, 0}, [](const WorkgroupContext&) {});
    s.synchronize();
  }
  state.counters["cus"] = d.num_cus();
}
BENCHMARK(EmptyKernel)
    ->ArgNames({"cus", "wgs"})
    ->Args({1, 1})
    ->Args({0, 1})
    ->Args({1, 2})
    ->Args({0, 4})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void Dispatch(benchmark::State& state) {
  Device d(config(0));
  const std::size_t wgs = static_cast<std::size_t>(state.range(0));
  auto& s = d.default_stream();
  for (auto _ : state) {
    s.launch({"empty", {wgs, 1}, 0}, [](const WorkgroupContext&) {});
    s.synchronize();
  }
  const double total = double(state.iterations()) * double(wgs);
  state.counters["per_wg"] =
      benchmark::Counter(total, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(static_cast<std::int64_t>(total));
}
BENCHMARK(Dispatch)->ArgName("wgs")->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);

void EventRecordSync(benchmark::State& state) {
  Device d(config(0));
  tilecomm::Stream s = d.create_stream();
  for (auto _ : state)
    s.record().synchronize();
}
BENCHMARK(EventRecordSync)->UseRealTime()->Unit(benchmark::kMicrosecond);

void StreamWaitEvent(benchmark::State& state) {
  Device d(config(0));
  tilecomm::Stream a = d.create_stream(), b = d.create_stream(tilecomm::Stream::kHigh);
  for (auto _ : state) {
    a.launch({"a", {1, 1}, 0}, [](const WorkgroupContext&) {});
    b.wait(a.record());
    b.launch({"b", {1, 1}, 0}, [](const WorkgroupContext&) {});
    b.synchronize();
  }
}
BENCHMARK(StreamWaitEvent)->UseRealTime()->Unit(benchmark::kMicrosecond);

void PersistentTasks(benchmark::State& state) {
  Device d(config(0));
  std::vector<std::size_t> order(static_cast<std::size_t>(state.range(0)));
  std::iota(order.begin(), order.end(), std::size_t{0});
  auto& s = d.default_stream();
  std::vector<std::size_t> sink(order.size());
  for (auto _ : state) {
    s.launch_persistent({"tasks", 0, 0}, order,
                        [&](const WorkgroupContext& wg, std::size_t t) { sink[t] = wg.id; });
    s.synchronize();
  }
  benchmark::DoNotOptimize(sink.data());
  const double total = double(state.iterations()) * double(order.size());
  state.counters["per_task"] =
      benchmark::Counter(total, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(PersistentTasks)
    ->ArgName("tasks")
    ->Arg(10000)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
