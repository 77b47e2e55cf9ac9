#include "tools/corpus_reader.h"

#include <gtest/gtest.h>

#include <fstream>

namespace zv::tools {
namespace {

TEST(ParseJsonlLineTest, ReadsAllFields) {
  CorpusRecord r;
  ASSERT_TRUE(
      ParseJsonlLine(
          R"({"id":"d1","text":"hello","namespace":"n","metadata":{"a":"x","b":2},)"
          R"("timestamp_ms":17})",
          1, &r)
          .ok());
  EXPECT_EQ(r.id, "d1");
  EXPECT_EQ(r.text, "hello");
  EXPECT_EQ(r.ns, "n");
  EXPECT_EQ(r.metadata.at("a"), "x");
  EXPECT_EQ(r.metadata.at("b"), "2");
  EXPECT_EQ(r.timestamp_ms, 17);
}

TEST(ParseJsonlLineTest, MissingIdUsesLineNumberAndIntegerIdsAreStrings) {
  CorpusRecord r;
  ASSERT_TRUE(ParseJsonlLine(R"({"text":"t"})", 42, &r).ok());
  EXPECT_EQ(r.id, "line-42");
  ASSERT_TRUE(ParseJsonlLine(R"({"id":7,"text":"t"})", 1, &r).ok());
  EXPECT_EQ(r.id, "7");
}

TEST(ParseJsonlLineTest, BadLinesNameTheLine) {
  const char* bad[] = {
      "{",
      "[1,2]",
      "\"str\"",
      R"({"id":"x"})",
      R"({"text":5})",
      R"({"text":"  "})",
      R"({"id":"","text":"t"})",
      R"({"id":1.5,"text":"t"})",
      R"({"text":"t","namespace":3})",
      R"({"text":"t","metadata":[1]})",
      R"({"text":"t","timestamp_ms":-1})",
      R"({"text":"t","metadata":{"":"v"}})",
      "\xff\xfe",
      "",
  };
  for (const char* line : bad) {
    CorpusRecord r;
    Status s = ParseJsonlLine(line, 9, &r);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << line;
    EXPECT_EQ(s.message().rfind("line 9: ", 0), 0u) << s.message();
  }
}

TEST(ParseJsonlLineTest, ReadsPrecomputedVectors) {
  CorpusRecord r;
  ASSERT_TRUE(
      ParseJsonlLine(R"({"id":"v","vector":[1,-0.5,2.5e-3]})", 1, &r).ok());
  EXPECT_EQ(r.text, "");  // text is optional with a vector
  ASSERT_EQ(r.vector.size(), 3u);
  EXPECT_FLOAT_EQ(r.vector[1], -0.5f);
  EXPECT_FLOAT_EQ(r.vector[2], 2.5e-3f);
  ASSERT_TRUE(
      ParseJsonlLine(R"({"id":"w","text":"t","vector":[1]})", 1, &r).ok());
  EXPECT_EQ(r.text, "t");
  ASSERT_TRUE(ParseJsonlLine(R"({"id":"x","text":"t"})", 1, &r).ok());
  EXPECT_TRUE(r.vector.empty());  // reset between lines
  const char* bad[] = {
      R"({"vector":[]})",           R"({"vector":[1,"2"]})",
      R"({"vector":{"a":1}})",      R"({"vector":[1e39]})",
      R"({"vector":[1,[2]]})",      R"({"vector":[1],"text":" "})",
      R"({"vector":[1],"text":3})",
  };
  for (const char* line : bad) {
    Status s = ParseJsonlLine(line, 5, &r);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << line;
    EXPECT_EQ(s.message().rfind("line 5: ", 0), 0u) << s.message();
  }
}

TEST(ParseJsonlLineTest, DeepNestingDoesNotCrash) {
  std::string deep =
      R"({"text":"t","metadata":{"k":)" + std::string(100000, '[') + "}}";
  CorpusRecord r;
  EXPECT_FALSE(ParseJsonlLine(deep, 1, &r).ok());
}

TEST(CorpusReaderTest, ReadsJsonlAndTextSkippingBlankLines) {
  const std::string dir =
      std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string jsonl = dir + "/c.jsonl";
  std::ofstream(jsonl)
      << "{\"id\":\"a\",\"text\":\"x\"}\r\n\n{\"text\":\"y\"}\n{oops\n";
  auto reader = CorpusReader::Open(jsonl, GuessCorpusFormat(jsonl));
  ASSERT_TRUE(reader.ok());
  CorpusRecord r;
  ASSERT_TRUE(*(*reader)->Next(&r));
  EXPECT_EQ(r.id, "a");
  ASSERT_TRUE(*(*reader)->Next(&r));
  EXPECT_EQ(r.id, "line-3");
  auto bad = (*reader)->Next(&r);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "c.jsonl:4: not valid JSON");

  const std::string text = dir + "/c.txt";
  std::ofstream(text) << "first doc\n\nthird doc\n";
  auto plain = CorpusReader::Open(text, GuessCorpusFormat(text));
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(*(*plain)->Next(&r));
  EXPECT_EQ(r.id, "line-1");
  ASSERT_TRUE(*(*plain)->Next(&r));
  EXPECT_EQ(r.id, "line-3");
  EXPECT_EQ(r.text, "third doc");
  EXPECT_FALSE(*(*plain)->Next(&r));
  EXPECT_EQ(CorpusReader::Open(dir + "/missing.jsonl", CorpusFormat::kJsonl)
                .status()
                .code(),
            StatusCode::kNotFound);
}

TEST(CorpusReaderTest, OverlongLineIsAnErrorAndReadingGoesOn) {
  const std::string dir =
      std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string text = dir + "/long.txt";
  std::ofstream(text) << std::string(kMaxCorpusLineBytes + 10, 'a')
                      << "\nnext\n";
  auto reader = CorpusReader::Open(text, CorpusFormat::kText);
  ASSERT_TRUE(reader.ok());
  CorpusRecord r;
  auto bad = (*reader)->Next(&r);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("long.txt:1: longer than"),
            std::string::npos)
      << bad.status();
  ASSERT_TRUE(*(*reader)->Next(&r));  // the next line is read whole
  EXPECT_EQ(r.text, "next");
}

}  // namespace
}  // namespace zv::tools
