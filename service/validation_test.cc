#include "service/validation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace zv::service {
namespace {

namespace pb = zerovec::v1;

pb::UpsertRequest TwoItems() {
  pb::UpsertRequest req;
  req.set_collection("c");
  for (const char* id : {"a", "b"}) {
    pb::Item* item = req.add_items();
    item->set_id(id);
    item->add_vector(1);
    item->add_vector(2);
  }
  return req;
}

TEST(ValidationTest, AcceptsAWellFormedUpsert) {
  EXPECT_TRUE(ValidateUpsert(TwoItems(), Limits()).ok());
  EXPECT_TRUE(ValidateUpsertDims(TwoItems(), 2, false).ok());
}

TEST(ValidationTest, DimensionMismatchNamesTheItem) {
  Status s = ValidateUpsertDims(TwoItems(), 3, false);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "items[0].vector: expected 3 values, got 2");
}

TEST(ValidationTest, BatchLimitIsResourceExhausted) {
  Limits limits;
  limits.max_batch = 1;
  EXPECT_EQ(ValidateUpsert(TwoItems(), limits).code(),
            StatusCode::kResourceExhausted);
}

TEST(ValidationTest, InfinityIsRejected) {
  pb::UpsertRequest req = TwoItems();
  req.mutable_items(1)->set_vector(1, INFINITY);
  Status s = ValidateUpsert(req, Limits());
  EXPECT_EQ(s.message(), "items[1].vector[1]: not a finite number");
}

// In-process requests skip protobuf's parse: validation holds the same rules.
TEST(ValidationTest, StringsMustBeUtf8AndTextNotBlank) {
  struct Case {
    std::function<void(pb::UpsertRequest*)> mutate;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](auto* r) { r->mutable_items(1)->set_id("b\xff"); },
       "items[1].id: not valid UTF-8 (byte 1)"},
      {[](auto* r) { r->mutable_items(0)->set_text("\xc3"); },
       "items[0].text: not valid UTF-8 (byte 0)"},
      {[](auto* r) { r->mutable_items(0)->set_text(" \r\n\t"); },
       "items[0].text: only whitespace"},
      {[](auto* r) { r->mutable_items(1)->set_namespace_("\x80"); },
       "items[1].namespace: not valid UTF-8 (byte 0)"},
      {[](auto* r) {
         (*r->mutable_items(0)->mutable_metadata())["\xfe"] = "v";
       },
       "items[0].metadata key: not valid UTF-8 (byte 0)"},
      {[](auto* r) {
         (*r->mutable_items(0)->mutable_metadata())["k"] = "\xfe";
       },
       "items[0].metadata[k]: not valid UTF-8 (byte 0)"},
      {[](auto* r) { r->mutable_items(1)->set_vector(0, 2e19f); },
       "items[1].vector: squared norm 4e+38 is over the limit 8.51e+37"},
  };
  for (const Case& c : cases) {
    pb::UpsertRequest req = TwoItems();
    c.mutate(&req);
    Status s = ValidateUpsert(req, Limits());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message().rfind(c.message, 0), 0u) << s.message();
  }
  pb::UpsertRequest ok = TwoItems();
  ok.mutable_items(0)->set_text("caf\xc3\xa9 \xe2\x82\xac");
  ok.mutable_items(1)->set_vector(0, 9e18f);  // big, still bounded
  EXPECT_TRUE(ValidateUpsert(ok, Limits()).ok());

  pb::SearchRequest search;
  search.set_collection("c");
  search.mutable_query()->set_text("\t");
  EXPECT_EQ(ValidateSearch(search, Limits()).message(),
            "query.text: only whitespace");
  pb::EmbedRequest embed;
  embed.add_texts("\xe2\x82");
  EXPECT_EQ(ValidateEmbed(embed, Limits(), true).message(),
            "texts[0]: not valid UTF-8 (byte 0)");
}

TEST(ValidationTest, TraversalNamesAreInvalid) {
  for (const char* name : {"..", "../a", "a/b", "a\\b", "", "-a", "a.b"}) {
    EXPECT_EQ(ValidateCollectionName("collection", name).code(),
              StatusCode::kInvalidArgument)
        << name;
  }
  EXPECT_TRUE(ValidateCollectionName("collection", "ok_name-1").ok());
}

TEST(ValidationTest, SearchKAndFilter) {
  pb::SearchRequest req;
  req.set_collection("c");
  req.mutable_query()->mutable_vector()->add_values(1);
  EXPECT_TRUE(ValidateSearch(req, Limits()).ok());
  req.set_k(1001);
  EXPECT_EQ(ValidateSearch(req, Limits()).code(),
            StatusCode::kResourceExhausted);
  req.set_k(5);
  req.mutable_filter()->set_min_timestamp_ms(9);
  req.mutable_filter()->set_max_timestamp_ms(3);
  EXPECT_EQ(ValidateSearch(req, Limits()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EffectiveK(0), 10);
}

TEST(ValidationTest, CreateNeedsDimOrModel) {
  pb::CreateCollectionRequest req;
  req.set_name("c");
  EXPECT_EQ(ValidateCreateCollection(req, 0).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateCreateCollection(req, 384).ok());
  req.set_index("IVF1024,PQ48");
  EXPECT_TRUE(ValidateCreateCollection(req, 384).ok());
  req.set_index("../../x");
  EXPECT_EQ(ValidateCreateCollection(req, 384).code(),
            StatusCode::kInvalidArgument);
}

TEST(ValidationTest, EmbedNeedsTextsAndModel) {
  pb::EmbedRequest req;
  EXPECT_EQ(ValidateEmbed(req, Limits(), true).code(),
            StatusCode::kInvalidArgument);
  req.add_texts("hi");
  EXPECT_TRUE(ValidateEmbed(req, Limits(), true).ok());
  EXPECT_EQ(ValidateEmbed(req, Limits(), false).code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace zv::service
