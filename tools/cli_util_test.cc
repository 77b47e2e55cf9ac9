#include "tools/cli_util.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "base/test_util.h"

namespace zv::tools {
namespace {

TEST(FlagsTest, ParsesForms) {
  auto flags = Flags::Parse({"--data", "d", "--k=5", "-k", "7", "--json"},
                            {"data", "k"}, {"json"});
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(flags->Get("data"), "d");
  EXPECT_EQ(*flags->GetInt("k", 10, 1, 100), 7);
  EXPECT_TRUE(flags->Has("json"));
  EXPECT_EQ(*flags->GetInt("missing", 10, 1, 100), 10);
}

TEST(FlagsTest, UsageErrors) {
  EXPECT_FALSE(Flags::Parse({"--nope"}, {"data"}, {}).ok());
  EXPECT_FALSE(Flags::Parse({"--data"}, {"data"}, {}).ok());
  EXPECT_FALSE(Flags::Parse({"stray"}, {"data"}, {}).ok());
  EXPECT_FALSE(Flags::Parse({"--json=1"}, {}, {"json"}).ok());
  auto flags = Flags::Parse({"--k", "x"}, {"k"}, {});
  EXPECT_TRUE(IsUsageError(flags->GetInt("k", 1, 1, 10).status()));
  EXPECT_TRUE(IsUsageError(flags->Require("other").status()));
}

TEST(FlagsTest, GetDouble) {
  auto flags = Flags::Parse(
      {"--f", "0.25", "--bad", "1.5", "--nan", "nan", "--text", "x"},
      {"f", "bad", "nan", "text"}, {});
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(*flags->GetDouble("f", 0, 0, 1), 0.25);
  EXPECT_EQ(*flags->GetDouble("missing", 0.5, 0, 1), 0.5);
  EXPECT_TRUE(IsUsageError(flags->GetDouble("bad", 0, 0, 1).status()));
  EXPECT_TRUE(IsUsageError(flags->GetDouble("nan", 0, 0, 1).status()));
  EXPECT_TRUE(IsUsageError(flags->GetDouble("text", 0, 0, 1).status()));
}

TEST(ReadVectorFileTest, AcceptsJsonAndWhitespace) {
  const std::string path =
      (zv::testing::MakeTempDir("cli_util_test") / "v.txt").string();
  std::ofstream(path) << "[1, 2.5,\n -3]";
  auto v = ReadVectorFile(path);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<float>{1, 2.5, -3}));
  std::ofstream(path) << "1 nan";
  EXPECT_FALSE(ReadVectorFile(path).ok());
}

TEST(PrintHitsTest, TableAndJson) {
  std::vector<OutputHit> hits = {{"a", 0.5f, "ns", "line one\nline two"}};
  std::ostringstream table, json;
  PrintHits(hits, false, table);
  PrintHits(hits, true, json);
  EXPECT_NE(table.str().find("line one line two"), std::string::npos);
  EXPECT_EQ(json.str(),
            "{\"hits\":[{\"id\":\"a\",\"namespace\":\"ns\",\"score\":0.5,"
            "\"text\":\"line "
            "one\\nline two\"}]}\n");
}

}  // namespace
}  // namespace zv::tools
