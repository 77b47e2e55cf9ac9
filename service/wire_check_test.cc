#include "service/wire_check.h"

#include <gtest/gtest.h>

#include "zerovec/v1/zerovec.pb.h"

namespace zv::service {
namespace {

namespace pb = zerovec::v1;

// protobuf writes invalid UTF-8 (logging it) but will not read it back.
std::string Wire(const google::protobuf::Message& m) {
  return m.SerializeAsString();
}

TEST(WireCheckTest, NamesTheFirstInvalidString) {
  pb::SearchBatchRequest req;
  req.set_collection("c");
  req.add_queries()->set_text("fine");
  req.add_queries()->mutable_vector()->add_values(1);
  req.add_queries()->set_text("bad \xff");
  req.mutable_filter()->set_namespace_("\xfe");  // later on the wire
  pb::SearchBatchRequest parsed;
  ASSERT_FALSE(parsed.ParseFromString(Wire(req)));
  Status s = DiagnoseUnparsedRequest(Wire(req), *req.GetDescriptor());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "queries[2].text: not valid UTF-8 (byte 4)");
}

TEST(WireCheckTest, MapKeysAndValues) {
  pb::UpsertRequest req;
  req.add_items()->set_id("a");
  pb::Item* item = req.add_items();
  item->set_id("b");
  (*item->mutable_metadata())["lang"] = "\xc3\x28";
  EXPECT_EQ(DiagnoseUnparsedRequest(Wire(req), *req.GetDescriptor()).message(),
            "items[1].metadata[lang]: not valid UTF-8 (byte 0)");
  item->mutable_metadata()->clear();
  (*item->mutable_metadata())["\xff"] = "v";
  EXPECT_EQ(DiagnoseUnparsedRequest(Wire(req), *req.GetDescriptor()).message(),
            "items[1].metadata key: not valid UTF-8 (byte 0)");
}

TEST(WireCheckTest, MalformedBytesAreInternal) {
  for (const std::string& wire :
       {std::string("\x12\x64\x0a", 3), std::string("\xff\xff\xff", 3),
        std::string("\x0a\x05"
                    "ab",
                    4)}) {
    Status s = DiagnoseUnparsedRequest(wire, *pb::UpsertRequest::descriptor());
    EXPECT_EQ(s.code(), StatusCode::kInternal);
    EXPECT_EQ(s.message(),
              "cannot parse the request as zerovec.v1.UpsertRequest");
  }
}

}  // namespace
}  // namespace zv::service
