#include "tools/corpus_reader.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

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

std::string TempDir() {
  return std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
}

std::string WriteFile(const std::string& name, const std::string& bytes) {
  const std::string path = TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

TEST(ParseJsonlLineTest, WrongTypesAreClearErrors) {
  struct Case {
    const char* line;
    const char* error;
  } cases[] = {
      {R"({"text":"t","timestamp_ms":1.5})",
       R"("timestamp_ms" must be a non-negative integer)"},
      {R"({"text":"t","timestamp":"17"})",
       R"("timestamp" must be a non-negative integer)"},
      {R"({"text":"t","timestamp_ms":9223372036854775808})",
       R"("timestamp_ms" must be a non-negative integer)"},
      {R"({"vector":[1,"2"]})", R"("vector"[1] is not a number)"},
      {R"({"vector":[1,null]})", R"("vector"[1] is not a number)"},
      {R"({"vector":[1e39]})", R"("vector"[0] is out of float range)"},
      {R"({"vector":[-3.5e38]})", R"("vector"[0] is out of float range)"},
      {R"({"vector":[NaN]})", "not valid JSON"},
      {R"({"vector":[Infinity]})", "not valid JSON"},
      {R"({"vector":[1e400]})", "not valid JSON (a number is malformed"},
      {R"({"vector":1})", R"("vector" must be a non-empty array of numbers)"},
      {R"({"id":true,"text":"t"})", R"("id" must be a string or an integer)"},
      {R"({"id":[1],"text":"t"})", R"("id" must be a string or an integer)"},
      {"{\"text\":\"a\xff\"}", "not valid JSON (invalid UTF-8)"},
      {"{\"text\":\"a\tb\"}", "not valid JSON (a control character"},
      {R"({"text":"t"} {"text":"u"})", "not valid JSON"},
      {R"({"text":"t",})", "not valid JSON"},
      {R"({"text":"t","other":tru})", "not valid JSON"},
      {R"({"text":"t","metadata":"m"})", R"("metadata" must be an object)"},
      {R"({"id":null,"vector":null})", R"("text" must be a string)"},
  };
  for (const auto& c : cases) {
    CorpusRecord r;
    Status s = ParseJsonlLine(c.line, 3, &r);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.line;
    EXPECT_EQ(s.message().rfind(std::string("line 3: ") + c.error, 0), 0u)
        << c.line << " -> " << s.message();
  }
  CorpusRecord r;
  std::string huge = R"({"vector":[)";
  for (size_t i = 0; i <= kMaxCorpusVectorDim; ++i) huge += "0,";
  huge.back() = ']';
  huge += "}";
  EXPECT_EQ(ParseJsonlLine(huge, 1, &r).message(),
            "line 1: \"vector\" longer than 65536");
  EXPECT_EQ(ParseJsonlLine(std::string(kMaxCorpusLineBytes + 1, ' '), 2, &r)
                .message(),
            "line 2: longer than 1048576 bytes");
}

TEST(ParseJsonlLineTest, JsonDetails) {
  CorpusRecord r;
  // The last of a repeated key wins; escaped keys count; unknown keys and
  // nulls are ignored; big unsigned ids stay exact.
  ASSERT_TRUE(ParseJsonlLine(R"({"id":"a","\u0069d":18446744073709551615,)"
                             R"("text":"x","text":"y","extra":{"k":[1]},)"
                             R"("namespace":null,"timestamp_ms":5,)"
                             R"("timestamp":9})",
                             1, &r)
                  .ok());
  EXPECT_EQ(r.id, "18446744073709551615");
  EXPECT_EQ(r.text, "y");
  EXPECT_EQ(r.ns, "");
  EXPECT_EQ(r.timestamp_ms, 9);  // "timestamp" is read after "timestamp_ms"
  ASSERT_TRUE(
      ParseJsonlLine(
          R"({"id":-4,"text":"t \u00e9\n","metadata":{"s":"\"q\"","i":2,)"
          R"("f":2.50,"b":true,"n":null,"a":[1, "x"],"o":{"z":1,"a":{}}}})",
          1, &r)
          .ok());
  EXPECT_EQ(r.id, "-4");
  EXPECT_EQ(r.text, "t \xc3\xa9\n");
  EXPECT_EQ(r.metadata.at("s"), "\"q\"");
  EXPECT_EQ(r.metadata.at("i"), "2");
  EXPECT_EQ(r.metadata.at("f"), "2.5");
  EXPECT_EQ(r.metadata.at("b"), "true");
  EXPECT_EQ(r.metadata.at("n"), "null");
  EXPECT_EQ(r.metadata.at("a"), R"([1,"x"])");
  EXPECT_EQ(r.metadata.at("o"), R"({"z":1,"a":{}})");
  // A line that is not NUL-terminated and has nothing readable after it
  // (ASan would see simdjson read past it).
  const std::string line = R"({"text":"edge","vector":[0.25,-1,3e-5]})";
  std::unique_ptr<char[]> exact(new char[line.size()]);
  std::memcpy(exact.get(), line.data(), line.size());
  ASSERT_TRUE(
      ParseJsonlLine(std::string_view(exact.get(), line.size()), 1, &r).ok());
  EXPECT_EQ(r.text, "edge");
  ASSERT_EQ(r.vector.size(), 3u);
  EXPECT_FLOAT_EQ(r.vector[2], 3e-5f);
}

TEST(CorpusReaderTest, ProgressBytesAndLastLineWithoutNewline) {
  const std::string content =
      "{\"text\":\"a\"}\n\n  \n{\"text\":\"b\"}\r\n{\"text\":\"c\"}";
  const std::string path = WriteFile("p.jsonl", content);
  auto reader = CorpusReader::Open(path, CorpusFormat::kJsonl);
  ASSERT_TRUE(reader.ok());
  CorpusReader& rd = **reader;
  EXPECT_EQ(rd.file_size(), content.size());
  EXPECT_EQ(rd.bytes_read(), 0u);
  CorpusRecord r;
  ASSERT_TRUE(*rd.Next(&r));
  EXPECT_EQ(rd.bytes_read(), 13u);
  ASSERT_TRUE(*rd.Next(&r));  // blank lines are consumed too
  EXPECT_EQ(r.id, "line-4");
  EXPECT_EQ(rd.bytes_read(), 13u + 1 + 3 + 14);
  ASSERT_TRUE(*rd.Next(&r));
  EXPECT_EQ(r.id, "line-5");
  EXPECT_EQ(r.text, "c");
  EXPECT_EQ(rd.bytes_read(), content.size());
  EXPECT_FALSE(*rd.Next(&r));
  EXPECT_FALSE(*rd.Next(&r));
  EXPECT_EQ(rd.line_number(), 5);
}

// Many lines of varied length, so lines straddle every read block.
std::string BigCorpus(int lines) {
  std::string out;
  for (int i = 0; i < lines; ++i) {
    out += R"({"id":"r)" + std::to_string(i) + R"(","text":")" +
           std::string(1 + (i * 7919) % 700, 'a' + i % 26) + "\"";
    if (i % 3 == 0) {
      out += R"(,"vector":[)";
      for (int j = 0; j <= i % 40; ++j) out += std::to_string(j + i) + ",";
      out.back() = ']';
    }
    out += "}\n";
  }
  return out;
}

void CheckBigRecord(int i, const CorpusRecord& r) {
  ASSERT_EQ(r.id, "r" + std::to_string(i));
  ASSERT_EQ(r.text, std::string(1 + (i * 7919) % 700, 'a' + i % 26));
  ASSERT_EQ(r.vector.size(), i % 3 == 0 ? size_t(i % 40 + 1) : 0u);
  if (!r.vector.empty()) {
    ASSERT_EQ(r.vector.back(), float(i % 40 + i));
  }
}

TEST(CorpusReaderTest, ReadsAFileLargerThanItsBuffer) {
  constexpr int kLines = 30000;  // ~11 MiB
  const std::string path = WriteFile("big.jsonl", BigCorpus(kLines));
  auto reader = CorpusReader::Open(path, CorpusFormat::kJsonl);
  ASSERT_TRUE(reader.ok());
  ASSERT_GT((*reader)->file_size(), 8u << 20);
  CorpusRecord r;
  for (int i = 0; i < kLines; ++i) {
    auto more = (*reader)->Next(&r);
    ASSERT_TRUE(more.ok()) << more.status();
    ASSERT_TRUE(*more);
    CheckBigRecord(i, r);
  }
  EXPECT_FALSE(*(*reader)->Next(&r));
  EXPECT_EQ((*reader)->bytes_read(), (*reader)->file_size());

  auto batched = CorpusReader::Open(path, CorpusFormat::kJsonl);
  ASSERT_TRUE(batched.ok());
  std::vector<CorpusRecord> batch;
  int seen = 0;
  while (true) {
    auto n = (*batched)->NextBatch(&batch, 1000);
    ASSERT_TRUE(n.ok()) << n.status();
    ASSERT_EQ(batch.size(), *n);
    if (*n == 0) break;
    for (const CorpusRecord& rec : batch) CheckBigRecord(seen++, rec);
  }
  EXPECT_EQ(seen, kLines);
}

TEST(CorpusReaderTest, NextBatchReusesRecordsAndDefersErrors) {
  const std::string path =
      WriteFile("b.jsonl",
                "{\"vector\":[1,2]}\n{\"vector\":[3,4]}\n{\"vector\":[5,6]}\n"
                "{\"vector\":[7,8]}\n{\"vector\":[}\n{\"vector\":[9,10]}\n");
  auto reader = CorpusReader::Open(path, CorpusFormat::kJsonl);
  ASSERT_TRUE(reader.ok());
  CorpusReader& rd = **reader;
  std::vector<CorpusRecord> batch;
  EXPECT_EQ(rd.NextBatch(&batch, 0).status().code(),
            StatusCode::kInvalidArgument);
  ASSERT_EQ(*rd.NextBatch(&batch, 3), 3u);
  EXPECT_EQ(batch[2].vector[0], 5.0f);
  const float* storage = batch[0].vector.data();
  // Line 4 is good, line 5 bad: the good record comes first, then the error.
  ASSERT_EQ(*rd.NextBatch(&batch, 3), 1u);
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].vector[1], 8.0f);
  EXPECT_EQ(batch[0].vector.data(), storage);  // capacity reused
  auto bad = rd.NextBatch(&batch, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "b.jsonl:5: not valid JSON");
  ASSERT_EQ(*rd.NextBatch(&batch, 3), 1u);
  EXPECT_EQ(batch[0].vector[1], 10.0f);
  EXPECT_EQ(*rd.NextBatch(&batch, 3), 0u);
  EXPECT_TRUE(batch.empty());
}

TEST(CorpusReaderTest, OverlongLinesOfAnySize) {
  // Longer than the whole read buffer, in the middle and at the end (no
  // final newline); and the exact bound, which is fine.
  const std::string path =
      WriteFile("huge.txt", "first\n" + std::string(9 << 20, 'x') + "\n" +
                                std::string(kMaxCorpusLineBytes, 'y') + "\n" +
                                std::string(kMaxCorpusLineBytes + 1, 'z') +
                                "\nlast\n" + std::string(5 << 20, 'w'));
  auto reader = CorpusReader::Open(path, CorpusFormat::kText);
  ASSERT_TRUE(reader.ok());
  CorpusReader& rd = **reader;
  CorpusRecord r;
  ASSERT_TRUE(*rd.Next(&r));
  EXPECT_EQ(r.text, "first");
  auto bad = rd.Next(&r);
  EXPECT_EQ(bad.status().message(), "huge.txt:2: longer than 1048576 bytes");
  ASSERT_TRUE(*rd.Next(&r));
  EXPECT_EQ(r.id, "line-3");
  EXPECT_EQ(r.text.size(), kMaxCorpusLineBytes);
  bad = rd.Next(&r);
  EXPECT_EQ(bad.status().message(), "huge.txt:4: longer than 1048576 bytes");
  ASSERT_TRUE(*rd.Next(&r));
  EXPECT_EQ(r.text, "last");
  bad = rd.Next(&r);
  EXPECT_EQ(bad.status().message(), "huge.txt:6: longer than 1048576 bytes");
  EXPECT_FALSE(*rd.Next(&r));
  EXPECT_EQ(rd.bytes_read(), rd.file_size());
}

TEST(CorpusReaderTest, AFileThatGrowsAfterOpenStillReadsLongLines) {
  const std::string path = WriteFile("grow.txt", "a\n");
  auto reader = CorpusReader::Open(path, CorpusFormat::kText);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->file_size(), 2u);
  std::ofstream(path, std::ios::app) << std::string(300000, 'b') << "\nc\n";
  CorpusRecord r;
  ASSERT_TRUE(*(*reader)->Next(&r));
  EXPECT_EQ(r.text, "a");
  ASSERT_TRUE(*(*reader)->Next(&r));
  EXPECT_EQ(r.text.size(), 300000u);
  ASSERT_TRUE(*(*reader)->Next(&r));
  EXPECT_EQ(r.text, "c");
  EXPECT_FALSE(*(*reader)->Next(&r));
}

TEST(CorpusReaderTest, OpenErrors) {
  const std::string dir = TempDir() + "/corpus_dir.jsonl";
  std::filesystem::create_directories(dir);
  EXPECT_EQ(CorpusReader::Open(dir, CorpusFormat::kJsonl).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zv::tools
