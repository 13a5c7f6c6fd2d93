// Every fusion switch (GPUOPT_DISABLE_FUSION's names), defined once: FusionSwitches::validate
// and its error message read this table, and tests/passes/fusion_table_test.cpp checks that
// docs/environment.md describes exactly these names.
//
//   for (const FusionInfo& f : fusion_table()) fmt::print("{}: {}\n", f.name, f.what);
#pragma once

#include <span>
#include <string_view>

namespace gpuopt {

struct FusionInfo {
  std::string_view name;
  std::string_view what;  // one line; docs/environment.md has the long form
};

std::span<const FusionInfo> fusion_table();
bool is_fusion_name(std::string_view name);

}  // namespace gpuopt
