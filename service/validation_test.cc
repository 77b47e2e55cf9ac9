#include "service/validation.h"

#include <gtest/gtest.h>

#include <cmath>

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
