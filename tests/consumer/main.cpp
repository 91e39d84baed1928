// A downstream program built against the installed tilecomm package.
#include <tilecomm/tilecomm.hpp>

#include <atomic>
#include <cstdio>

int main() {
  tilecomm::RuntimeConfig config;
  config.num_cus = 2;
  tilecomm::Device device(config);
  std::atomic<int> sum{0};
  device.default_stream().launch({"consumer", {10, 1}, 0},
                                 [&](const tilecomm::WorkgroupContext& wg) { sum += int(wg.id); });
  device.synchronize();
  std::printf("consumer: sum of workgroup ids = %d\n", sum.load());
  return sum.load() == 45 ? 0 : 1;
}
