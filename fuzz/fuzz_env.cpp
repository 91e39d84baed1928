// libFuzzer target: Env::parse with a lookup built from the input, lines "NAME=VALUE".
// Contract checked: parse either returns values inside every documented range, or throws
// Error(InvalidArgument) naming a TILECOMM_ variable; nothing else (no other exception, no crash,
// no UB under ASan+UBSan).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "fuzz_common.hpp"
#include "tilecomm/env.hpp"
#include "tilecomm/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::map<std::string, std::string> vars;
  std::string text(reinterpret_cast<const char*>(data), size);
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    const std::size_t eq = line.find('=');
    if (eq != std::string::npos) vars[line.substr(0, eq)] = line.substr(eq + 1);
    pos = end + 1;
  }
  try {
    const tilecomm::Env e =
        tilecomm::Env::parse([&](const std::string& name) -> std::optional<std::string> {
          auto it = vars.find(name);
          if (it == vars.end()) return std::nullopt;
          return it->second;
        });
    fuzz::require(e.cus >= 0 && e.cus <= 4096, "TILECOMM_CUS range");
    fuzz::require(e.wg_slots >= 1 && e.wg_slots <= 64, "TILECOMM_WG_SLOTS range");
    fuzz::require(e.lds_bytes <= (std::size_t{1} << 30), "TILECOMM_LDS_BYTES range");
    fuzz::require(std::isfinite(e.spin_us) && e.spin_us >= 0 && e.spin_us <= 1e6,
                  "TILECOMM_SPIN_US range");
    fuzz::require(std::isfinite(e.timeout_s) && e.timeout_s >= 0 && e.timeout_s <= 1e7,
                  "TILECOMM_TIMEOUT_S range");
    fuzz::require(e.node_size >= 0 && e.node_size <= (1 << 20), "TILECOMM_NODE_SIZE range");
    fuzz::require(e.shm_bytes <= (std::size_t{64} << 30), "TILECOMM_SHM_BYTES range");
    for (const auto& row : e.describe())
      fuzz::require(row.name.rfind("TILECOMM_", 0) == 0, "describe() names");
  } catch (const tilecomm::Error& err) {
    fuzz::require(err.code() == tilecomm::ErrorCode::InvalidArgument,
                  "error code is InvalidArgument");
    fuzz::require(err.message().find("environment variable TILECOMM_") != std::string::npos,
                  "error names the variable");
  }
  return 0;
}
