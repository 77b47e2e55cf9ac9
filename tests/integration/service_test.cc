// Every RPC of zerovec.v1.ZeroVec against a real server on 127.0.0.1 through
// real stubs: happy paths, each error code, auth on and off, health and
// reflection. Over 600 lines: one fixture and server for every RPC's cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <thread>

#include "tests/integration/test_util.h"

namespace zv::testing {
namespace {

namespace pb = zerovec::v1;
constexpr uint32_t kDim = 8;

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service::ServerOptions options;
    options.data_dir = MakeTempDir("service_test");
    options.limits.max_batch = 16;
    options.limits.max_k = 50;
    options.limits.max_text_bytes = 1000;
    options.limits.max_message_bytes = 1 << 20;
    rs_ = StartServer(options);
    ASSERT_NE(rs_.server, nullptr);
  }

  grpc::Status Create(const std::string& name, uint32_t dim = kDim,
                      pb::Metric metric = pb::METRIC_INNER_PRODUCT) {
    grpc::ClientContext ctx;
    pb::CreateCollectionRequest req;
    req.set_name(name);
    req.set_dim(dim);
    req.set_metric(metric);
    pb::CreateCollectionResponse resp;
    return rs_.stub->CreateCollection(&ctx, req, &resp);
  }

  grpc::Status Upsert(const pb::UpsertRequest& req,
                      pb::UpsertResponse* resp = nullptr) {
    grpc::ClientContext ctx;
    pb::UpsertResponse local;
    return rs_.stub->Upsert(&ctx, req, resp ? resp : &local);
  }

  pb::UpsertRequest VectorBatch(const std::string& coll, int first, int n,
                                const std::string& ns = "") {
    pb::UpsertRequest req;
    req.set_collection(coll);
    for (int i = first; i < first + n; ++i) {
      const std::string id = "id-" + std::to_string(i);
      *req.add_items() = VectorItem(id, VectorFor(id, kDim), ns);
    }
    return req;
  }

  pb::CollectionInfo Describe(const std::string& name) {
    grpc::ClientContext ctx;
    pb::DescribeCollectionRequest req;
    req.set_name(name);
    pb::CollectionInfo info;
    EXPECT_TRUE(rs_.stub->DescribeCollection(&ctx, req, &info).ok());
    return info;
  }

  pb::SearchResponse SearchVector(const std::string& coll,
                                  const std::vector<float>& v, int k,
                                  grpc::Status* status,
                                  const pb::Filter* filter = nullptr) {
    grpc::ClientContext ctx;
    pb::SearchRequest req;
    req.set_collection(coll);
    req.mutable_query()->mutable_vector()->mutable_values()->Add(v.begin(),
                                                                 v.end());
    req.set_k(k);
    req.set_include_documents(true);
    if (filter) *req.mutable_filter() = *filter;
    pb::SearchResponse resp;
    *status = rs_.stub->Search(&ctx, req, &resp);
    return resp;
  }

  RunningServer rs_;
};

TEST_F(ServiceTest, CollectionLifecycle) {
  ASSERT_TRUE(Create("alpha").ok());
  ASSERT_TRUE(Create("beta", 4, pb::METRIC_L2).ok());
  {
    grpc::ClientContext ctx;
    pb::ListCollectionsResponse resp;
    ASSERT_TRUE(rs_.stub->ListCollections(&ctx, {}, &resp).ok());
    ASSERT_EQ(resp.collections_size(), 2);
    EXPECT_EQ(resp.collections(0).name(), "alpha");
    EXPECT_EQ(resp.collections(1).name(), "beta");
    EXPECT_EQ(resp.collections(1).dim(), 4u);
    EXPECT_EQ(resp.collections(1).metric(), pb::METRIC_L2);
  }
  pb::CollectionInfo info = Describe("alpha");
  EXPECT_EQ(info.dim(), kDim);
  EXPECT_EQ(info.index(), "Flat");
  EXPECT_EQ(info.rows(), 0u);
  {
    grpc::ClientContext ctx;
    pb::DropCollectionRequest req;
    req.set_name("alpha");
    pb::DropCollectionResponse resp;
    ASSERT_TRUE(rs_.stub->DropCollection(&ctx, req, &resp).ok());
  }
  grpc::ClientContext ctx;
  pb::DescribeCollectionRequest req;
  req.set_name("alpha");
  pb::CollectionInfo gone;
  EXPECT_EQ(rs_.stub->DescribeCollection(&ctx, req, &gone).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServiceTest, CreateErrors) {
  ASSERT_TRUE(Create("dup").ok());
  grpc::Status s = Create("dup");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(s.error_message().find("name"), std::string::npos);
  for (const char* bad : {"../etc", "a/b", "..", "", "-x", "x y"}) {
    s = Create(bad);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_EQ(s.error_message().rfind("name:", 0), 0u) << s.error_message();
  }
  EXPECT_EQ(Create(std::string(65, 'a')).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // dim 0 means the model's dimension; this server has no model.
  s = Create("nomodel", 0);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("dim:", 0), 0u) << s.error_message();
  grpc::ClientContext ctx;
  pb::DropCollectionRequest drop;
  drop.set_name("never");
  pb::DropCollectionResponse resp;
  EXPECT_EQ(rs_.stub->DropCollection(&ctx, drop, &resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServiceTest, UpsertGetSearchDelete) {
  ASSERT_TRUE(Create("docs").ok());
  pb::UpsertResponse up;
  ASSERT_TRUE(Upsert(VectorBatch("docs", 0, 10, "agent-a"), &up).ok());
  EXPECT_EQ(up.upserted(), 10u);
  ASSERT_TRUE(Upsert(VectorBatch("docs", 10, 5, "agent-b")).ok());
  EXPECT_EQ(Describe("docs").live_rows(), 15u);

  grpc::Status s;
  pb::SearchResponse found =
      SearchVector("docs", VectorFor("id-3", kDim), 5, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(found.hits_size(), 5);
  EXPECT_EQ(found.hits(0).id(), "id-3");
  EXPECT_NEAR(found.hits(0).score(), 1.0, 1e-4);
  EXPECT_EQ(found.hits(0).namespace_(), "agent-a");
  EXPECT_EQ(found.hits(0).text(), "doc id-3");
  for (int i = 1; i < found.hits_size(); ++i) {
    EXPECT_GE(found.hits(i - 1).score(), found.hits(i).score());
  }

  pb::Filter filter;
  filter.set_namespace_("agent-b");
  found = SearchVector("docs", VectorFor("id-3", kDim), 50, &s, &filter);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(found.hits_size(), 5);
  for (const auto& h : found.hits()) EXPECT_EQ(h.namespace_(), "agent-b");

  {
    grpc::ClientContext ctx;
    pb::GetRequest req;
    req.set_collection("docs");
    req.add_ids("id-7");
    req.add_ids("missing");
    req.add_ids("id-12");
    req.set_include_vectors(true);
    pb::GetResponse resp;
    ASSERT_TRUE(rs_.stub->Get(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.items_size(), 2);
    EXPECT_EQ(resp.items(0).id(), "id-7");
    EXPECT_EQ(resp.items(1).id(), "id-12");
    EXPECT_EQ(resp.items(1).namespace_(), "agent-b");
    const auto expected = VectorFor("id-7", kDim);
    ASSERT_EQ(resp.items(0).vector_size(), static_cast<int>(kDim));
    for (uint32_t d = 0; d < kDim; ++d)
      EXPECT_EQ(resp.items(0).vector(d), expected[d]);
  }
  {
    grpc::ClientContext ctx;
    pb::DeleteRequest req;
    req.set_collection("docs");
    req.add_ids("id-3");
    req.add_ids("nope");
    pb::DeleteResponse resp;
    ASSERT_TRUE(rs_.stub->Delete(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.deleted(), 1u);
  }
  found = SearchVector("docs", VectorFor("id-3", kDim), 3, &s);
  ASSERT_TRUE(s.ok());
  for (const auto& h : found.hits()) EXPECT_NE(h.id(), "id-3");
  EXPECT_EQ(Describe("docs").live_rows(), 14u);

  // Replacing an id keeps one live row for it.
  ASSERT_TRUE(Upsert(VectorBatch("docs", 0, 2)).ok());
  EXPECT_EQ(Describe("docs").live_rows(), 14u);
}

// Scan pages through every live item once, in id byte order, with vectors
// on request; deleted and replaced items as they are now; limits checked.
TEST_F(ServiceTest, ScanPagesThroughLiveItemsInIdOrder) {
  ASSERT_TRUE(Create("scan").ok());
  ASSERT_TRUE(Upsert(VectorBatch("scan", 0, 16)).ok());
  ASSERT_TRUE(Upsert(VectorBatch("scan", 16, 9)).ok());
  pb::UpsertRequest replaced = VectorBatch("scan", 3, 1);
  replaced.mutable_items(0)->set_text("replaced");
  ASSERT_TRUE(Upsert(replaced).ok());
  {
    grpc::ClientContext ctx;
    pb::DeleteRequest del;
    del.set_collection("scan");
    del.add_ids("id-7");
    del.add_ids("id-20");
    pb::DeleteResponse r;
    ASSERT_TRUE(rs_.stub->Delete(&ctx, del, &r).ok());
  }
  std::vector<std::string> seen;
  pb::ScanRequest req;
  req.set_collection("scan");
  req.set_limit(4);
  req.set_include_vectors(true);
  int pages = 0;
  for (;; ++pages) {
    grpc::ClientContext ctx;
    pb::ScanResponse page;
    grpc::Status s = rs_.stub->Scan(&ctx, req, &page);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_LE(page.items_size(), 4);
    for (const auto& item : page.items()) {
      seen.push_back(item.id());
      EXPECT_EQ(item.vector_size(), static_cast<int>(kDim));
      if (item.id() == "id-3") EXPECT_EQ(item.text(), "replaced");
    }
    if (page.next_after_id().empty()) break;
    req.set_after_id(page.next_after_id());
  }
  EXPECT_GE(pages, 6);
  std::vector<std::string> want;
  for (int i = 0; i < 25; ++i)
    if (i != 7 && i != 20) want.push_back("id-" + std::to_string(i));
  std::sort(want.begin(), want.end());
  EXPECT_EQ(seen, want);

  grpc::ClientContext ctx;
  pb::ScanResponse page;
  req.set_limit(17);  // over max_batch
  EXPECT_EQ(rs_.stub->Scan(&ctx, req, &page).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  grpc::ClientContext ctx2;
  req.set_limit(0);
  req.set_collection("nope");
  EXPECT_EQ(rs_.stub->Scan(&ctx2, req, &page).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServiceTest, SearchBatchAndStream) {
  ASSERT_TRUE(Create("batch").ok());
  // Client stream of three batches.
  {
    grpc::ClientContext ctx;
    pb::UpsertResponse resp;
    auto writer = rs_.stub->UpsertStream(&ctx, &resp);
    for (int b = 0; b < 3; ++b)
      ASSERT_TRUE(writer->Write(VectorBatch("batch", b * 10, 10)));
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.upserted(), 30u);
  }
  grpc::ClientContext ctx;
  pb::SearchBatchRequest req;
  req.set_collection("batch");
  req.set_k(2);
  for (const char* id : {"id-1", "id-22", "id-29"}) {
    auto v = VectorFor(id, kDim);
    req.add_queries()->mutable_vector()->mutable_values()->Add(v.begin(),
                                                               v.end());
  }
  pb::SearchBatchResponse resp;
  ASSERT_TRUE(rs_.stub->SearchBatch(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.results_size(), 3);
  EXPECT_EQ(resp.results(0).hits(0).id(), "id-1");
  EXPECT_EQ(resp.results(1).hits(0).id(), "id-22");
  EXPECT_EQ(resp.results(2).hits(0).id(), "id-29");
  EXPECT_EQ(resp.results(2).hits_size(), 2);
  EXPECT_TRUE(resp.results(0).hits(0).text().empty());  // no include_documents
}

TEST_F(ServiceTest, StreamStopsAtBadMessage) {
  ASSERT_TRUE(Create("stream").ok());
  grpc::ClientContext ctx;
  pb::UpsertResponse resp;
  auto writer = rs_.stub->UpsertStream(&ctx, &resp);
  writer->Write(VectorBatch("stream", 0, 4));
  pb::UpsertRequest bad = VectorBatch("stream", 4, 2);
  bad.mutable_items(1)->mutable_vector()->RemoveLast();
  writer->Write(bad);
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("message 1"), std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("items[1].vector: expected 8 values, got 7"),
            std::string::npos)
      << s.error_message();
  EXPECT_EQ(Describe("stream").live_rows(), 4u);
}

// A streamed message protobuf refuses (invalid UTF-8) ends the stream with
// its reason, not with OK as if the client had finished.
TEST_F(ServiceTest, StreamStopsAtUnparsableMessage) {
  ASSERT_TRUE(Create("stream").ok());
  grpc::ClientContext ctx;
  pb::UpsertResponse resp;
  auto writer = rs_.stub->UpsertStream(&ctx, &resp);
  writer->Write(VectorBatch("stream", 0, 4));
  pb::UpsertRequest bad = VectorBatch("stream", 4, 2);
  bad.mutable_items(1)->set_text("x\xff");
  writer->Write(bad);
  writer->Write(VectorBatch("stream", 6, 2));
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "message 1 (the 4 items of earlier messages are stored): "
            "items[1].text: not valid UTF-8 (byte 1)");
  EXPECT_EQ(Describe("stream").live_rows(), 4u);
}

TEST_F(ServiceTest, UnparsableRequestIsInternalWithAReason) {
  grpc::ClientContext ctx;
  std::string resp;
  // Field 2 (items) claims 100 bytes that are not there.
  grpc::Status s = RawUnaryCall(rs_.channel.get(), "/zerovec.v1.ZeroVec/Upsert",
                                std::string("\x12\x64\x0a", 3), &resp, &ctx);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(s.error_message(),
            "cannot parse the request as zerovec.v1.UpsertRequest");
}

TEST_F(ServiceTest, UpsertValidationNamesFieldAndChangesNothing) {
  ASSERT_TRUE(Create("v").ok());
  struct Case {
    std::function<void(pb::UpsertRequest*)> mutate;
    grpc::StatusCode code;
    std::string message;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<Case> cases = {
      {[](auto* r) { r->mutable_items(3)->mutable_vector()->Truncate(2); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "items[3].vector: expected 8 values, got 2"},
      {[&](auto* r) { r->mutable_items(2)->set_vector(5, nan); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "items[2].vector[5]: not a finite number"},
      {[](auto* r) { r->mutable_items(1)->set_id("id-0"); },
       grpc::StatusCode::INVALID_ARGUMENT, "items[1].id: duplicate id"},
      {[](auto* r) { r->mutable_items(0)->set_id(""); },
       grpc::StatusCode::INVALID_ARGUMENT, "items[0].id: empty"},
      {[](auto* r) { r->mutable_items(0)->set_id(std::string(600, 'x')); },
       grpc::StatusCode::INVALID_ARGUMENT, "items[0].id: id of 600 bytes"},
      {[](auto* r) { r->mutable_items(4)->set_text(std::string(1001, 't')); },
       grpc::StatusCode::RESOURCE_EXHAUSTED, "items[4].text: 1001 bytes"},
      {[](auto* r) { r->clear_items(); }, grpc::StatusCode::INVALID_ARGUMENT,
       "items: empty"},
      {[](auto* r) { r->set_collection("missing"); },
       grpc::StatusCode::NOT_FOUND,
       "collection: no collection named \"missing\""},
      {[](auto* r) { r->set_collection("../x"); },
       grpc::StatusCode::INVALID_ARGUMENT, "collection:"},
      {[](auto* r) {
         r->mutable_items(0)->clear_vector();
         r->mutable_items(0)->clear_text();
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       "items[0]: has neither text nor vector"},
      // Text without a server model.
      {[](auto* r) { r->mutable_items(0)->clear_vector(); },
       grpc::StatusCode::FAILED_PRECONDITION, "items[0].text"},
      // Invalid UTF-8 fails protobuf's parse, before validation: still
      // INVALID_ARGUMENT naming the field, not INTERNAL with no message.
      {[](auto* r) { r->mutable_items(2)->set_text("ok \xff"); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "items[2].text: not valid UTF-8 (byte 3)"},
      {[](auto* r) { r->mutable_items(1)->set_id("\xc3("); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "items[1].id: not valid UTF-8 (byte 0)"},
      {[](auto* r) { r->mutable_items(4)->set_namespace_("ns\xed\xa0\x80"); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "items[4].namespace: not valid UTF-8 (byte 2)"},
      {[](auto* r) {
         (*r->mutable_items(0)->mutable_metadata())["k"] = "\x80";
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       "items[0].metadata[k]: not valid UTF-8 (byte 0)"},
      {[](auto* r) { r->set_collection("v\xfe"); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "collection: not valid UTF-8 (byte 1)"},
      {[](auto* r) { r->mutable_items(3)->set_text(" \t\n "); },
       grpc::StatusCode::INVALID_ARGUMENT, "items[3].text: only whitespace"},
      // Finite, but its scores would overflow to inf.
      {[](auto* r) { r->mutable_items(1)->set_vector(0, 3e38f); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "items[1].vector: squared norm 9e+76 is over the limit"},
  };
  for (const auto& c : cases) {
    pb::UpsertRequest req = VectorBatch("v", 0, 5);
    c.mutate(&req);
    grpc::Status s = Upsert(req);
    EXPECT_EQ(s.error_code(), c.code)
        << c.message << " / " << s.error_message();
    EXPECT_EQ(s.error_message().rfind(c.message, 0), 0u) << s.error_message();
  }
  // Over max_batch (16).
  grpc::Status s = Upsert(VectorBatch("v", 0, 17));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("max_batch"), std::string::npos);
  EXPECT_EQ(Describe("v").rows(), 0u);
}

TEST_F(ServiceTest, SearchValidation) {
  ASSERT_TRUE(Create("s").ok());
  ASSERT_TRUE(Upsert(VectorBatch("s", 0, 3)).ok());
  grpc::Status s;
  SearchVector("s", std::vector<float>(3, 0.5f), 1, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "query.vector: expected 8 values, got 3");
  SearchVector("s", VectorFor("a", kDim), 51, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message().rfind("k:", 0), 0u);
  SearchVector("s", VectorFor("a", kDim), -1, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  SearchVector("nope", VectorFor("a", kDim), 1, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  pb::Filter filter;
  filter.set_min_timestamp_ms(10);
  filter.set_max_timestamp_ms(5);
  SearchVector("s", VectorFor("a", kDim), 1, &s, &filter);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("filter:", 0), 0u);
  // k = 0 means 10.
  pb::SearchResponse r = SearchVector("s", VectorFor("a", kDim), 0, &s);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(r.hits_size(), 3);
  // No query at all; text without a model.
  {
    grpc::ClientContext ctx;
    pb::SearchRequest req;
    req.set_collection("s");
    pb::SearchResponse resp;
    s = rs_.stub->Search(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(s.error_message(), "query: set either text or vector");
  }
  {
    grpc::ClientContext ctx;
    pb::SearchRequest req;
    req.set_collection("s");
    req.mutable_query()->set_text("hello");
    pb::SearchResponse resp;
    EXPECT_EQ(rs_.stub->Search(&ctx, req, &resp).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
  }
  {
    grpc::ClientContext ctx;
    pb::EmbedRequest req;
    req.add_texts("hello");
    pb::EmbedResponse resp;
    EXPECT_EQ(rs_.stub->Embed(&ctx, req, &resp).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
  }
}

// INVALID_ARGUMENT whose message starts with `message`.
void ExpectInvalid(const grpc::Status& s, const std::string& message) {
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << message << " / " << s.error_message();
  EXPECT_EQ(s.error_message().rfind(message, 0), 0u) << s.error_message();
}

TEST_F(ServiceTest, StringsAreUtf8InEveryRpc) {
  ASSERT_TRUE(Create("u").ok());
  ASSERT_TRUE(Upsert(VectorBatch("u", 0, 3)).ok());
  const auto expect = ExpectInvalid;
  {
    grpc::ClientContext ctx;
    pb::SearchRequest req;
    req.set_collection("u");
    req.mutable_query()->set_text("caf\xc3");
    pb::SearchResponse resp;
    expect(rs_.stub->Search(&ctx, req, &resp),
           "query.text: not valid UTF-8 (byte 3)");
  }
  {
    grpc::ClientContext ctx;
    pb::SearchRequest req;
    req.set_collection("u");
    req.mutable_query()->set_text("   ");
    pb::SearchResponse resp;
    expect(rs_.stub->Search(&ctx, req, &resp), "query.text: only whitespace");
  }
  {
    grpc::ClientContext ctx;
    pb::SearchBatchRequest req;
    req.set_collection("u");
    req.add_queries()->set_text("fine");
    req.add_queries()->set_text("\xff");
    pb::SearchBatchResponse resp;
    expect(rs_.stub->SearchBatch(&ctx, req, &resp),
           "queries[1].text: not valid UTF-8 (byte 0)");
  }
  {
    grpc::ClientContext ctx;
    pb::SearchRequest req;
    req.set_collection("u");
    req.mutable_filter()->set_namespace_("\xff");
    req.mutable_query()->mutable_vector()->add_values(1);
    pb::SearchResponse resp;
    expect(rs_.stub->Search(&ctx, req, &resp),
           "filter.namespace: not valid UTF-8 (byte 0)");
  }
  {
    grpc::ClientContext ctx;
    pb::EmbedRequest req;
    req.add_texts("a");
    req.add_texts("\n");
    pb::EmbedResponse resp;
    expect(rs_.stub->Embed(&ctx, req, &resp), "texts[1]: only whitespace");
  }
  {
    grpc::ClientContext ctx;
    pb::EmbedRequest req;
    req.add_texts("a\xc0\xaf");
    pb::EmbedResponse resp;
    expect(rs_.stub->Embed(&ctx, req, &resp),
           "texts[0]: not valid UTF-8 (byte 1)");
  }
  {
    grpc::ClientContext ctx;
    pb::GetRequest req;
    req.set_collection("u");
    req.add_ids("id-0");
    req.add_ids("id-\xff");
    pb::GetResponse resp;
    expect(rs_.stub->Get(&ctx, req, &resp), "ids[1]: not valid UTF-8 (byte 3)");
  }
  {
    grpc::ClientContext ctx;
    pb::CreateCollectionRequest req;
    req.set_name("\xe2\x82");
    req.set_dim(4);
    pb::CreateCollectionResponse resp;
    expect(rs_.stub->CreateCollection(&ctx, req, &resp),
           "name: not valid UTF-8 (byte 0)");
  }
}

TEST_F(ServiceTest, VectorsAreBoundedInEveryRpc) {
  ASSERT_TRUE(Create("u").ok());
  ASSERT_TRUE(Upsert(VectorBatch("u", 0, 3)).ok());
  const auto expect = ExpectInvalid;
  // A query of 3e38 used to score inf.
  std::vector<float> huge(kDim, 0);
  huge[0] = 3e38f;
  grpc::Status s;
  SearchVector("u", huge, 1, &s);
  expect(s, "query.vector: squared norm 9e+76 is over the limit 8.51e+37");
  EXPECT_NE(s.error_message().find("overflow to inf"), std::string::npos);
  // Big but bounded values still answer, with finite scores.
  std::vector<float> big(kDim, 1e18f);
  pb::SearchResponse r = SearchVector("u", big, 3, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(r.hits_size(), 3);
  for (const auto& hit : r.hits()) EXPECT_TRUE(std::isfinite(hit.score()));
  EXPECT_EQ(Describe("u").rows(), 3u);
}

TEST_F(ServiceTest, TimestampAndMetadataFilters) {
  ASSERT_TRUE(Create("f").ok());
  pb::UpsertRequest req;
  req.set_collection("f");
  for (int i = 0; i < 6; ++i) {
    const std::string id = "t" + std::to_string(i);
    pb::Item item = VectorItem(id, VectorFor(id, kDim));
    item.set_timestamp_ms(1000 * (i + 1));
    (*item.mutable_metadata())["parity"] = i % 2 ? "odd" : "even";
    *req.add_items() = item;
  }
  ASSERT_TRUE(Upsert(req).ok());
  pb::Filter filter;
  filter.set_min_timestamp_ms(2000);
  filter.set_max_timestamp_ms(5000);
  (*filter.mutable_metadata_equals())["parity"] = "odd";
  grpc::Status s;
  pb::SearchResponse r =
      SearchVector("f", VectorFor("x", kDim), 10, &s, &filter);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::set<std::string> ids;
  for (const auto& h : r.hits()) ids.insert(h.id());
  EXPECT_EQ(ids, (std::set<std::string>{"t1", "t3"}));
  EXPECT_EQ(r.hits(0).metadata().at("parity"), "odd");
}

TEST_F(ServiceTest, OversizedMessageIsResourceExhausted) {
  ASSERT_TRUE(Create("big").ok());
  pb::UpsertRequest req = VectorBatch("big", 0, 1);
  req.mutable_items(0)->set_text(std::string(2 << 20, 'x'));  // over 1 MiB
  grpc::Status s = Upsert(req);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(ServiceTest, StatsCountsCallsAndRows) {
  ASSERT_TRUE(Create("st").ok());
  ASSERT_TRUE(Upsert(VectorBatch("st", 0, 8)).ok());
  grpc::Status s;
  for (int i = 0; i < 5; ++i) SearchVector("st", VectorFor("q", kDim), 3, &s);
  SearchVector("st", std::vector<float>(2), 3, &s);  // an error
  grpc::ClientContext ctx;
  pb::StatsRequest req;
  pb::StatsResponse resp;
  ASSERT_TRUE(rs_.stub->Stats(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.collections_size(), 1);
  EXPECT_EQ(resp.collections(0).rows(), 8u);
  EXPECT_EQ(resp.collections(0).index(), "Flat");
  EXPECT_EQ(resp.search().count(), 6u);
  EXPECT_EQ(resp.search().errors(), 1u);
  EXPECT_GT(resp.search().p50_us(), 0);
  EXPECT_LE(resp.search().p50_us(), resp.search().p99_us());
  EXPECT_EQ(resp.upsert().count(), 1u);
  EXPECT_EQ(resp.model(), "");
  EXPECT_EQ(resp.in_flight(), 1u);  // this call
}

TEST_F(ServiceTest, HealthAndReflectionAnswer) {
  grpc::ClientContext ctx;
  std::string resp;
  grpc::Status s = RawUnaryCall(
      rs_.channel.get(), "/grpc.health.v1.Health/Check", "", &resp, &ctx);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp, std::string("\x08\x01", 2));  // status: SERVING

  // ServerReflectionRequest{list_services: ""} is field 7, length 0.
  grpc::ClientContext rctx;
  std::string listing;
  s = RawBidiCall(
      rs_.channel.get(),
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      std::string("\x3a\x00", 2), &listing, &rctx);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_NE(listing.find("zerovec.v1.ZeroVec"), std::string::npos);
  EXPECT_NE(listing.find("grpc.health.v1.Health"), std::string::npos);
}

TEST_F(ServiceTest, HealthKnowsTheServiceByName) {
  // HealthCheckRequest{service: "zerovec.v1.ZeroVec"}.
  const std::string name = "zerovec.v1.ZeroVec";
  grpc::ClientContext ctx;
  std::string resp;
  grpc::Status s = RawUnaryCall(
      rs_.channel.get(), "/grpc.health.v1.Health/Check",
      std::string("\x0a") + static_cast<char>(name.size()) + name, &resp, &ctx);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp, std::string("\x08\x01", 2));  // status: SERVING

  grpc::ClientContext uctx;
  const std::string other = "no.such.Service";
  s = RawUnaryCall(
      rs_.channel.get(), "/grpc.health.v1.Health/Check",
      std::string("\x0a") + static_cast<char>(other.size()) + other, &resp,
      &uctx);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServiceTest, ReflectionDescribesHealth) {
  // ServerReflectionRequest{file_containing_symbol: ...} is field 4.
  for (const std::string symbol :
       {"grpc.health.v1.Health", "zerovec.v1.ZeroVec"}) {
    grpc::ClientContext ctx;
    std::string resp;
    grpc::Status s = RawBidiCall(
        rs_.channel.get(),
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        std::string("\x22") + static_cast<char>(symbol.size()) + symbol, &resp,
        &ctx);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.find("not found"), std::string::npos)
        << symbol << ": " << resp;
    if (symbol == "grpc.health.v1.Health") {
      EXPECT_NE(resp.find("grpc/health/v1/health.proto"), std::string::npos);
      EXPECT_NE(resp.find("HealthCheckResponse"), std::string::npos);
    } else {
      EXPECT_NE(resp.find("zerovec/v1/zerovec.proto"), std::string::npos);
    }
  }
}

TEST(ServiceLimitsTest, ConcurrentRequestLimitIsResourceExhausted) {
  service::ServerOptions options;
  options.data_dir = MakeTempDir("limits_test");
  options.limits.max_concurrent_requests = 1;
  RunningServer rs = StartServer(options);
  ASSERT_NE(rs.server, nullptr);
  {
    grpc::ClientContext ctx;
    pb::CreateCollectionRequest req;
    req.set_name("c");
    req.set_dim(kDim);
    pb::CreateCollectionResponse resp;
    ASSERT_TRUE(rs.stub->CreateCollection(&ctx, req, &resp).ok());
  }
  // An open UpsertStream holds the one slot until it finishes. A probe that
  // is in flight when the stream arrives takes the slot instead and the
  // stream is refused (seen under ASan on a loaded machine): then open a new
  // stream and probe again.
  grpc::Status busy;
  for (int attempt = 0; attempt < 5 && busy.ok(); ++attempt) {
    grpc::ClientContext stream_ctx;
    pb::UpsertResponse stream_resp;
    auto writer = rs.stub->UpsertStream(&stream_ctx, &stream_resp);
    pb::UpsertRequest first;
    first.set_collection("c");
    *first.add_items() = VectorItem("a", VectorFor("a", kDim));
    ASSERT_TRUE(writer->Write(first));
    // Give the server time to have the stream in flight, then probe.
    std::this_thread::sleep_for(std::chrono::milliseconds(100 << attempt));
    for (int i = 0; i < 200; ++i) {
      grpc::ClientContext ctx;
      pb::ListCollectionsResponse resp;
      busy = rs.stub->ListCollections(&ctx, {}, &resp);
      if (!busy.ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    writer->WritesDone();
    const grpc::Status stream_status = writer->Finish();
    if (!busy.ok()) {
      // The stream held the slot: it completes normally.
      EXPECT_TRUE(stream_status.ok()) << stream_status.error_message();
    } else {
      EXPECT_EQ(stream_status.error_code(),
                grpc::StatusCode::RESOURCE_EXHAUSTED)
          << "neither the stream nor a probe was refused";
    }
  }
  EXPECT_EQ(busy.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(busy.error_message().find("max_concurrent_requests"),
            std::string::npos);
  grpc::ClientContext ctx;
  pb::ListCollectionsResponse resp;
  EXPECT_TRUE(rs.stub->ListCollections(&ctx, {}, &resp).ok());
}

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service::ServerOptions options;
    options.data_dir = MakeTempDir("auth_test");
    options.auth_token = "s3cret-token";
    rs_ = StartServer(options);
    ASSERT_NE(rs_.server, nullptr);
  }
  grpc::Status List(const std::string& header) {
    grpc::ClientContext ctx;
    if (!header.empty()) ctx.AddMetadata("authorization", header);
    pb::ListCollectionsResponse resp;
    return rs_.stub->ListCollections(&ctx, {}, &resp);
  }
  RunningServer rs_;
};

TEST_F(AuthTest, EveryRpcButHealthNeedsTheToken) {
  EXPECT_EQ(List("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(List("Bearer wrong").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(List("Bearer s3cret-token-longer").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(List("s3cret-token").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(List("Bearer s3cret-token").ok());
  {
    // Other methods too, checked before validation.
    grpc::ClientContext ctx;
    pb::SearchRequest req;
    pb::SearchResponse resp;
    EXPECT_EQ(rs_.stub->Search(&ctx, req, &resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;
    pb::UpsertResponse resp;
    auto writer = rs_.stub->UpsertStream(&ctx, &resp);
    writer->WritesDone();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  // Health is exempt.
  grpc::ClientContext hctx;
  std::string health;
  EXPECT_TRUE(RawUnaryCall(rs_.channel.get(), "/grpc.health.v1.Health/Check",
                           "", &health, &hctx)
                  .ok());
  // Reflection needs the token as well.
  const std::string method =
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  grpc::ClientContext denied_ctx;
  std::string listing;
  EXPECT_FALSE(RawBidiCall(rs_.channel.get(), method,
                           std::string("\x3a\x00", 2), &listing, &denied_ctx)
                   .ok());
  EXPECT_EQ(listing.find("zerovec.v1.ZeroVec"), std::string::npos);
  grpc::ClientContext ok_ctx;
  ok_ctx.AddMetadata("authorization", "Bearer s3cret-token");
  listing.clear();
  EXPECT_TRUE(RawBidiCall(rs_.channel.get(), method, std::string("\x3a\x00", 2),
                          &listing, &ok_ctx)
                  .ok());
  EXPECT_NE(listing.find("zerovec.v1.ZeroVec"), std::string::npos);
}

// Text requests, with the bundled default model.
class ModelServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::filesystem::path model = BundledModelDir();
    ASSERT_FALSE(model.empty())
        << "models/zerovec-mini is missing from the runfiles";
    service::ServerOptions options;
    options.data_dir = MakeTempDir("model_test");
    options.model_dir = model;
    options.device = "cpu";
    rs_ = StartServer(options);
    ASSERT_NE(rs_.server, nullptr);
  }
  RunningServer rs_;
};

TEST_F(ModelServiceTest, TextUpsertSearchAndEmbed) {
  pb::CreateCollectionResponse created;
  {
    grpc::ClientContext ctx;
    pb::CreateCollectionRequest req;
    req.set_name("text");  // dim 0: the model's
    ASSERT_TRUE(rs_.stub->CreateCollection(&ctx, req, &created).ok());
  }
  const uint32_t dim = created.collection().dim();
  ASSERT_GT(dim, 0u);
  const std::vector<std::string> docs = {
      "the cat and the dog", "the river in the city", "red fire and blue water",
      "fast train music"};
  pb::UpsertRequest up;
  up.set_collection("text");
  for (size_t i = 0; i < docs.size(); ++i) {
    pb::Item* item = up.add_items();
    item->set_id("doc" + std::to_string(i));
    item->set_text(docs[i]);
  }
  // A vector item in the same batch.
  *up.add_items() = VectorItem("vec", VectorFor("vec", dim));
  {
    grpc::ClientContext ctx;
    pb::UpsertResponse resp;
    grpc::Status s = rs_.stub->Upsert(&ctx, up, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.upserted(), 5u);
  }
  for (size_t i = 0; i < docs.size(); ++i) {
    grpc::ClientContext ctx;
    pb::SearchRequest req;
    req.set_collection("text");
    req.mutable_query()->set_text(docs[i]);
    req.set_k(2);
    req.set_include_documents(true);
    pb::SearchResponse resp;
    ASSERT_TRUE(rs_.stub->Search(&ctx, req, &resp).ok());
    ASSERT_GE(resp.hits_size(), 1);
    EXPECT_EQ(resp.hits(0).id(), "doc" + std::to_string(i));
    EXPECT_NEAR(resp.hits(0).score(), 1.0, 1e-3);
    EXPECT_EQ(resp.hits(0).text(), docs[i]);
  }
  grpc::ClientContext ctx;
  pb::EmbedRequest req;
  req.add_texts(docs[0]);
  req.add_texts("something else");
  pb::EmbedResponse emb;
  ASSERT_TRUE(rs_.stub->Embed(&ctx, req, &emb).ok());
  ASSERT_EQ(emb.vectors_size(), 2);
  EXPECT_EQ(emb.dim(), dim);
  EXPECT_EQ(emb.vectors(0).values_size(), static_cast<int>(dim));
  // Same text, same vector as stored.
  grpc::ClientContext gctx;
  pb::GetRequest get;
  get.set_collection("text");
  get.add_ids("doc0");
  get.set_include_vectors(true);
  pb::GetResponse got;
  ASSERT_TRUE(rs_.stub->Get(&gctx, get, &got).ok());
  for (uint32_t d = 0; d < dim; ++d) {
    EXPECT_NEAR(got.items(0).vector(d), emb.vectors(0).values(d), 1e-5);
  }
  grpc::ClientContext sctx;
  pb::StatsResponse stats;
  ASSERT_TRUE(rs_.stub->Stats(&sctx, pb::StatsRequest(), &stats).ok());
  EXPECT_EQ(stats.model_dim(), dim);
  EXPECT_GE(stats.embed().count(), 6u);
  EXPECT_FALSE(stats.embed_device().empty());
}

pb::CollectionInfo DescribeCollection(pb::ZeroVec::Stub* stub,
                                      const std::string& name) {
  grpc::ClientContext ctx;
  pb::DescribeCollectionRequest req;
  req.set_name(name);
  pb::CollectionInfo info;
  EXPECT_TRUE(stub->DescribeCollection(&ctx, req, &info).ok());
  return info;
}

pb::CollectionInfo CreateCollection(pb::ZeroVec::Stub* stub,
                                    const std::string& name, uint32_t dim) {
  grpc::ClientContext ctx;
  pb::CreateCollectionRequest req;
  req.set_name(name);
  req.set_dim(dim);
  pb::CreateCollectionResponse resp;
  EXPECT_TRUE(stub->CreateCollection(&ctx, req, &resp).ok());
  return resp.collection();
}

// One Upsert into "long": a long and a short text, and a vector item with a
// long text (stored, not embedded), so one text is truncated.
void UpsertOneLongText(pb::ZeroVec::Stub* stub, uint32_t dim,
                       const std::string& long_text,
                       const std::string& short_text) {
  pb::UpsertRequest up;
  up.set_collection("long");
  for (const auto& [id, text] :
       {std::pair{"long", long_text}, std::pair{"short", short_text}}) {
    pb::Item* item = up.add_items();
    item->set_id(id);
    item->set_text(text);
  }
  *up.add_items() = VectorItem("vec", VectorFor("vec", dim));
  up.mutable_items(2)->set_text(long_text);  // stored, not embedded
  grpc::ClientContext ctx;
  pb::UpsertResponse resp;
  grpc::Status s = stub->Upsert(&ctx, up, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.upserted(), 3u);
  EXPECT_EQ(resp.truncated(), 1u);
}

// Two UpsertStream messages into "long", a long text in each.
void StreamTwoLongTexts(pb::ZeroVec::Stub* stub, const std::string& long_text,
                        const std::string& short_text) {
  grpc::ClientContext ctx;
  pb::UpsertResponse resp;
  auto writer = stub->UpsertStream(&ctx, &resp);
  for (int m = 0; m < 2; ++m) {
    pb::UpsertRequest req;
    req.set_collection("long");
    pb::Item* item = req.add_items();
    item->set_id("stream" + std::to_string(m));
    item->set_text(long_text + std::to_string(m));
    item = req.add_items();
    item->set_id("stream-short" + std::to_string(m));
    item->set_text(short_text);
    ASSERT_TRUE(writer->Write(req));
  }
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(resp.upserted(), 4u);
  EXPECT_EQ(resp.truncated(), 2u);
}

void EmbedTexts(pb::ZeroVec::Stub* stub, const std::vector<std::string>& texts,
                pb::EmbedResponse* resp) {
  grpc::ClientContext ctx;
  pb::EmbedRequest req;
  for (const auto& t : texts) req.add_texts(t);
  ASSERT_TRUE(stub->Embed(&ctx, req, resp).ok());
}

// Stats after the upserts, embeds and query of TruncatedTextsAreReported.
void ExpectTruncationStats(pb::ZeroVec::Stub* stub) {
  grpc::ClientContext ctx;
  pb::StatsResponse stats;
  ASSERT_TRUE(stub->Stats(&ctx, pb::StatsRequest(), &stats).ok());
  EXPECT_EQ(stats.truncated_texts(), 5u);  // 3 upserted, 1 embedded, 1 query
  EXPECT_EQ(stats.model_max_length(), 128u);
  ASSERT_EQ(stats.collections_size(), 2);
  EXPECT_EQ(stats.collections(0).name(), "long");
  EXPECT_EQ(stats.collections(0).truncated_texts(), 3u);
  EXPECT_EQ(stats.collections(1).truncated_texts(), 0u);
}

// Texts over the model's window (128 tokens for zerovec-mini): Upsert,
// UpsertStream and Embed say how many were truncated, Stats counts them in
// total and per collection, Describe shows the window.
TEST_F(ModelServiceTest, TruncatedTextsAreReported) {
  std::string long_text;  // 200 words: well over 126 wordpieces
  for (int i = 0; i < 40; ++i) long_text += "the river in the city ";
  const std::string short_text = "the cat and the dog";
  auto stub = rs_.stub.get();
  const pb::CollectionInfo created = CreateCollection(stub, "long", 0);
  EXPECT_EQ(created.model_max_length(), 128u);
  EXPECT_EQ(created.truncated_texts(), 0u);
  const uint32_t dim = created.dim();
  // A vector-only collection of another dimension: the model cannot embed
  // for it, so no window is shown.
  EXPECT_EQ(CreateCollection(stub, "vec4", 4).model_max_length(), 0u);

  ASSERT_NO_FATAL_FAILURE(UpsertOneLongText(stub, dim, long_text, short_text));
  ASSERT_NO_FATAL_FAILURE(StreamTwoLongTexts(stub, long_text, short_text));
  {  // The stored text is whole.
    grpc::ClientContext ctx;
    pb::GetRequest req;
    req.set_collection("long");
    req.add_ids("long");
    pb::GetResponse resp;
    ASSERT_TRUE(stub->Get(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.items_size(), 1);
    EXPECT_EQ(resp.items(0).text(), long_text);
  }
  pb::EmbedResponse embedded;
  ASSERT_NO_FATAL_FAILURE(EmbedTexts(stub, {short_text, long_text}, &embedded));
  EXPECT_EQ(embedded.truncated(), 1u);
  EXPECT_EQ(embedded.max_length(), 128u);
  pb::EmbedResponse embedded_short;
  ASSERT_NO_FATAL_FAILURE(EmbedTexts(stub, {short_text}, &embedded_short));
  EXPECT_EQ(embedded_short.truncated(), 0u);
  {  // A long text query counts in the total, in no collection.
    grpc::ClientContext ctx;
    pb::SearchRequest req;
    req.set_collection("long");
    req.mutable_query()->set_text(long_text);
    pb::SearchResponse resp;
    ASSERT_TRUE(stub->Search(&ctx, req, &resp).ok());
  }
  EXPECT_EQ(DescribeCollection(stub, "long").truncated_texts(), 3u);
  EXPECT_EQ(DescribeCollection(stub, "long").model_max_length(), 128u);
  ASSERT_NO_FATAL_FAILURE(ExpectTruncationStats(stub));
  {  // A dropped collection's count goes with it.
    grpc::ClientContext ctx;
    pb::DropCollectionRequest req;
    req.set_name("long");
    pb::DropCollectionResponse resp;
    ASSERT_TRUE(stub->DropCollection(&ctx, req, &resp).ok());
  }
  EXPECT_EQ(CreateCollection(stub, "long", 0).truncated_texts(), 0u);
}

}  // namespace
}  // namespace zv::testing
