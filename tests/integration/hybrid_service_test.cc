// Lexical and hybrid search (issue 17) through a real server on 127.0.0.1:
// mode and fusion fields, ranks in hits, filters, errors; with the bundled
// model (hybrid embeds the query text) and without one (lexical needs none).
#include <gtest/gtest.h>

#include <set>

#include "tests/integration/test_util.h"

namespace zv::testing {
namespace {

namespace pb = zerovec::v1;

class HybridServiceTest : public ::testing::Test {
 protected:
  void Start(bool with_model) {
    service::ServerOptions options;
    options.data_dir = MakeTempDir("hybrid_service");
    if (with_model) {
      options.model_dir = BundledModelDir();
      ASSERT_FALSE(options.model_dir.empty()) << "no bundled model";
      options.device = "cpu";
    }
    rs_ = StartServer(options);
    ASSERT_NE(rs_.server, nullptr);
  }
  grpc::Status Create(const std::string& name, uint32_t dim, bool lexical) {
    grpc::ClientContext ctx;
    pb::CreateCollectionRequest req;
    req.set_name(name);
    req.set_dim(dim);
    req.set_lexical(lexical);
    pb::CreateCollectionResponse resp;
    return rs_.stub->CreateCollection(&ctx, req, &resp);
  }
  pb::Item TextItem(const std::string& id, const std::string& text,
                    const std::string& ns, uint32_t vector_dim = 0) {
    pb::Item item;
    if (vector_dim > 0) item = VectorItem(id, VectorFor(id, vector_dim), ns);
    item.set_id(id);
    item.set_text(text);
    item.set_namespace_(ns);
    return item;
  }
  grpc::Status Search(const pb::SearchRequest& req, pb::SearchResponse* resp) {
    grpc::ClientContext ctx;
    return rs_.stub->Search(&ctx, req, resp);
  }
  pb::SearchRequest TextQuery(const std::string& coll, const std::string& text,
                              pb::SearchMode mode, int k = 5) {
    pb::SearchRequest req;
    req.set_collection(coll);
    req.mutable_query()->set_text(text);
    req.set_mode(mode);
    req.set_k(k);
    return req;
  }
  RunningServer rs_;
};

TEST_F(HybridServiceTest, HybridAndLexicalWithTheModel) {
  Start(/*with_model=*/true);
  ASSERT_TRUE(Create("notes", 0, true).ok());
  pb::UpsertRequest up;
  up.set_collection("notes");
  *up.add_items() = TextItem("n1", "the dog chased a cat in the park", "ann");
  *up.add_items() =
      TextItem("n2", "ticket KX-7731 is about the login bug", "ann");
  *up.add_items() = TextItem("n3", "a puppy played with a kitten", "bob");
  *up.add_items() = TextItem("n4", "quarterly revenue grew strongly", "bob");
  {
    grpc::ClientContext ctx;
    pb::UpsertResponse resp;
    ASSERT_TRUE(rs_.stub->Upsert(&ctx, up, &resp).ok());
  }
  {
    grpc::ClientContext ctx;
    pb::DescribeCollectionRequest req;
    req.set_name("notes");
    pb::CollectionInfo info;
    ASSERT_TRUE(rs_.stub->DescribeCollection(&ctx, req, &info).ok());
    EXPECT_TRUE(info.lexical());
    EXPECT_EQ(info.lexical_documents(), 4u);
  }
  // Lexical: the exact code, BM25 score, lexical rank 1, no dense rank.
  pb::SearchResponse resp;
  ASSERT_TRUE(
      Search(TextQuery("notes", "KX-7731", pb::SEARCH_MODE_LEXICAL), &resp)
          .ok());
  ASSERT_EQ(resp.hits_size(), 1);
  EXPECT_EQ(resp.hits(0).id(), "n2");
  EXPECT_EQ(resp.hits(0).lexical_rank(), 1u);
  EXPECT_EQ(resp.hits(0).dense_rank(), 0u);
  EXPECT_GT(resp.hits(0).score(), 0.0f);

  // Hybrid: every hit has a dense rank (4 items, depth 100) and the fused
  // score; the code's item comes first.
  resp.Clear();
  auto hybrid = TextQuery("notes", "what was ticket KX-7731 about",
                          pb::SEARCH_MODE_HYBRID, 4);
  ASSERT_TRUE(Search(hybrid, &resp).ok());
  ASSERT_EQ(resp.hits_size(), 4);
  EXPECT_EQ(resp.hits(0).id(), "n2");
  EXPECT_EQ(resp.hits(0).lexical_rank(), 1u);
  for (const auto& h : resp.hits()) EXPECT_GT(h.dense_rank(), 0u);
  EXPECT_NEAR(resp.hits(0).score(),
              1.0 / (60 + resp.hits(0).dense_rank()) + 1.0 / 61, 1e-6);
  // Fusion fields: rrf_k 1 changes the fused score accordingly.
  hybrid.mutable_fusion()->set_rrf_k(1);
  resp.Clear();
  ASSERT_TRUE(Search(hybrid, &resp).ok());
  EXPECT_NEAR(resp.hits(0).score(),
              1.0 / (1 + resp.hits(0).dense_rank()) + 1.0 / 2, 1e-6);

  // Filters apply in both modes.
  auto filtered =
      TextQuery("notes", "dog cat puppy kitten ticket", pb::SEARCH_MODE_HYBRID);
  filtered.mutable_filter()->set_namespace_("bob");
  resp.Clear();
  ASSERT_TRUE(Search(filtered, &resp).ok());
  for (const auto& h : resp.hits()) EXPECT_EQ(h.namespace_(), "bob");
  EXPECT_EQ(resp.hits_size(), 2);
  filtered.set_mode(pb::SEARCH_MODE_LEXICAL);
  resp.Clear();
  ASSERT_TRUE(Search(filtered, &resp).ok());
  ASSERT_EQ(resp.hits_size(), 1);
  EXPECT_EQ(resp.hits(0).id(), "n3");

  // SearchBatch takes the mode for every query.
  grpc::ClientContext ctx;
  pb::SearchBatchRequest batch;
  batch.set_collection("notes");
  batch.set_mode(pb::SEARCH_MODE_LEXICAL);
  batch.add_queries()->set_text("revenue");
  batch.add_queries()->set_text("login");
  pb::SearchBatchResponse batch_resp;
  ASSERT_TRUE(rs_.stub->SearchBatch(&ctx, batch, &batch_resp).ok());
  ASSERT_EQ(batch_resp.results_size(), 2);
  EXPECT_EQ(batch_resp.results(0).hits(0).id(), "n4");
  EXPECT_EQ(batch_resp.results(1).hits(0).id(), "n2");
}

TEST_F(HybridServiceTest, LexicalNeedsNoModelAndErrorsNameTheField) {
  Start(/*with_model=*/false);
  ASSERT_TRUE(Create("docs", 4, true).ok());
  ASSERT_TRUE(Create("plain", 4, false).ok());
  for (const char* coll : {"docs", "plain"}) {
    pb::UpsertRequest up;
    up.set_collection(coll);
    *up.add_items() = TextItem("a", "solar panels on the roof", "", 4);
    *up.add_items() = TextItem("b", "wind turbines offshore", "", 4);
    grpc::ClientContext ctx;
    pb::UpsertResponse resp;
    ASSERT_TRUE(rs_.stub->Upsert(&ctx, up, &resp).ok());
  }
  pb::SearchResponse resp;
  ASSERT_TRUE(
      Search(TextQuery("docs", "turbine", pb::SEARCH_MODE_LEXICAL), &resp)
          .ok());
  ASSERT_EQ(resp.hits_size(), 1);
  EXPECT_EQ(resp.hits(0).id(), "b");

  // A collection without a lexical index.
  grpc::Status s =
      Search(TextQuery("plain", "turbine", pb::SEARCH_MODE_LEXICAL), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("lexical"), std::string::npos);
  // A vector query has no words.
  pb::SearchRequest vec;
  vec.set_collection("docs");
  vec.set_mode(pb::SEARCH_MODE_HYBRID);
  for (float x : VectorFor("a", 4))
    vec.mutable_query()->mutable_vector()->add_values(x);
  s = Search(vec, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("query.text"), std::string::npos)
      << s.error_message();
  // Hybrid needs the text embedded: no model here.
  s = Search(TextQuery("docs", "turbine", pb::SEARCH_MODE_HYBRID), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << s.error_message();
  // Unknown mode, bad fusion.
  auto bad = TextQuery("docs", "turbine", static_cast<pb::SearchMode>(9));
  EXPECT_EQ(Search(bad, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  bad = TextQuery("docs", "turbine", pb::SEARCH_MODE_LEXICAL);
  bad.mutable_fusion()->set_rrf_k(-1);
  s = Search(bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("rrf_k"), std::string::npos);
}

}  // namespace
}  // namespace zv::testing
