// The fusion names are defined once (passes/fusions.h): docs/environment.md's
// GPUOPT_DISABLE_FUSION row describes exactly them, and the validator takes exactly them.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "passes/fusions.h"
#include "passes/passes.h"

namespace gpuopt {
namespace {

std::set<std::string> table_names() {
  std::set<std::string> s;
  for (const FusionInfo& f : fusion_table()) {
    EXPECT_TRUE(s.insert(std::string(f.name)).second) << f.name << " is in the table twice";
    EXPECT_FALSE(f.what.empty()) << f.name;
  }
  return s;
}

TEST(FusionTable, EnvironmentDocDescribesExactlyTheTable) {
  std::ifstream f(std::string(GPUOPT_SOURCE_DIR) + "/docs/environment.md");
  ASSERT_TRUE(f) << "docs/environment.md";
  std::string row, line;
  while (std::getline(f, line))
    if (line.rfind("| `GPUOPT_DISABLE_FUSION` |", 0) == 0) row = line;
  ASSERT_FALSE(row.empty()) << "no GPUOPT_DISABLE_FUSION row in docs/environment.md";
  // Each fusion is described as "`name` (what it does)".
  std::set<std::string> doc;
  const std::regex named("`([a-z][a-z0-9_]*)` \\(");
  for (auto it = std::sregex_iterator(row.begin(), row.end(), named); it != std::sregex_iterator(); ++it)
    doc.insert((*it)[1]);
  EXPECT_EQ(doc, table_names());
}

TEST(FusionTable, ValidatorTakesEveryNameAndNamesThemWhenRefusing) {
  for (const FusionInfo& fi : fusion_table())
    EXPECT_TRUE(FusionSwitches::parse(fi.name).validate().ok()) << fi.name;
  const Status st = FusionSwitches::parse("conv,no_such_fusion").validate();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'no_such_fusion'"), std::string::npos) << st.message();
  for (const FusionInfo& fi : fusion_table())
    EXPECT_NE(st.message().find(std::string(fi.name)), std::string::npos) << fi.name << ": " << st.message();
  EXPECT_TRUE(FusionSwitches::parse("+int8_residual").validate().ok());
  EXPECT_FALSE(FusionSwitches::parse("+conv").validate().ok());
}

}  // namespace
}  // namespace gpuopt
