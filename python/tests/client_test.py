"""zerovec.Client against a real `zerovec serve` on 127.0.0.1: every RPC, numpy
in and out, and errors (bad input, unknown names, auth) as exceptions that keep
the server's message."""

import unittest

import numpy as np

import zerovec
from server import Server

TOKEN = "py-client-test-token"
DOCS = {
    "tea": "Green tea is steeped at 80 degrees for two minutes.",
    "bike": "Check the tyre pressure of a bicycle before every ride.",
    "bread": "Bread dough rises in a warm place for an hour.",
}


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(token=TOKEN)
        cls.client = zerovec.Client(cls.server.address, token=TOKEN, timeout=60)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop()

    def test_text_collection_round_trip(self):
        c = self.client
        info = c.create_collection("text_docs")
        self.assertEqual(info.dim, 256)  # the bundled model's
        self.assertIn("text_docs", [i.name for i in c.list_collections()])
        stored = c.upsert("text_docs", list(DOCS), texts=list(DOCS.values()),
                          namespaces=["drink", "sport", "food"],
                          metadata=[{"lang": "en"}, {}, {"lang": "en"}],
                          timestamps=[1000, 2000, 3000])
        self.assertEqual(stored, 3)
        hits = c.search("text_docs", text="steeping green tea", k=3)
        self.assertEqual(hits[0].id, "tea")
        self.assertEqual(hits[0].text, DOCS["tea"])
        self.assertEqual(hits[0].namespace, "drink")
        self.assertEqual(hits[0].metadata, {"lang": "en"})
        self.assertGreater(hits[0].score, hits[1].score)
        # Filters: namespace, metadata, timestamp range (as a dict or a Filter).
        self.assertEqual([h.id for h in c.search("text_docs", text="tea", k=3,
                                                 filter={"namespace": "food"})],
                         ["bread"])
        ids = {h.id for h in c.search("text_docs", text="tea", k=3,
                                      filter=zerovec.Filter(metadata={"lang": "en"}))}
        self.assertEqual(ids, {"tea", "bread"})
        ids = {h.id for h in c.search("text_docs", text="tea", k=3,
                                      filter={"min_timestamp_ms": 1500,
                                              "max_timestamp_ms": 2500})}
        self.assertEqual(ids, {"bike"})
        batch = c.search_batch("text_docs", texts=["bicycle tyres", "baking bread"], k=1)
        self.assertEqual([[h.id for h in r] for r in batch], [["bike"], ["bread"]])
        # embed: numpy out, the same vectors the server stored.
        vectors = c.embed(list(DOCS.values()))
        self.assertEqual(vectors.shape, (3, 256))
        self.assertEqual(vectors.dtype, np.float32)
        got = c.get("text_docs", ["bike", "missing", "tea"], include_vectors=True)
        self.assertEqual([i.id for i in got], ["bike", "tea"])
        np.testing.assert_allclose(got[0].vector, vectors[1], atol=1e-5)
        self.assertIsNone(c.get("text_docs", ["tea"])[0].vector)
        stats = c.stats("text_docs")
        self.assertEqual(stats["model_dim"], 256)
        self.assertGreaterEqual(int(stats["search"]["count"]), 5)
        self.assertEqual(stats["collections"][0].live_rows, 3)
        self.assertEqual(c.delete("text_docs", ["tea", "nope"]), 1)
        self.assertEqual(c.describe("text_docs").tombstones, 1)
        self.assertNotIn("tea", [h.id for h in c.search("text_docs", text="tea", k=3)])
        self.assertEqual(c.compact("text_docs")["tombstones_removed"], 1)
        c.drop_collection("text_docs")
        self.assertNotIn("text_docs", [i.name for i in c.list_collections()])

    def test_lexical_and_hybrid_modes(self):
        c = self.client
        info = c.create_collection("memory", lexical=True)
        self.assertTrue(info.lexical)
        c.upsert("memory", ["m1", "m2", "m3"],
                 texts=["Order QZ-90417 shipped late from the warehouse",
                        "The user prefers green tea in the morning",
                        "Order QZ-90418 arrived on time"],
                 namespaces=["agent-a", "agent-a", "agent-b"])
        self.assertEqual(c.describe("memory").lexical_documents, 3)
        hits = c.search("memory", text="QZ-90417", k=2, mode="lexical")
        self.assertEqual([h.id for h in hits], ["m1"])
        self.assertEqual((hits[0].dense_rank, hits[0].lexical_rank), (0, 1))
        hits = c.search("memory", text="what happened to order QZ-90417", k=3,
                        mode="hybrid", fusion=zerovec.Fusion(rrf_k=10))
        m1 = next(h for h in hits[:2] if h.id == "m1")  # may tie with m3
        self.assertEqual(m1.lexical_rank, 1)
        self.assertGreater(m1.dense_rank, 0)
        self.assertAlmostEqual(m1.score, 1 / (10 + m1.dense_rank) + 1 / 11, places=5)
        hits = c.search("memory", text="order", k=3, mode="hybrid",
                        filter={"namespace": "agent-b"})
        self.assertEqual([h.id for h in hits], ["m3"])
        batch = c.search_batch("memory", texts=["tea", "warehouse"], k=1, mode="lexical")
        self.assertEqual([[h.id for h in r] for r in batch], [["m2"], ["m1"]])
        with self.assertRaises(zerovec.InvalidArgumentError) as e:
            c.search("memory", vector=np.ones(256), mode="lexical")
        self.assertIn("query.text", str(e.exception))
        c.create_collection("no_lexical")
        with self.assertRaises(zerovec.FailedPreconditionError):
            c.search("no_lexical", text="tea", mode="hybrid")
        with self.assertRaises(ValueError):
            c.search("memory", text="tea", mode="fuzzy")

    def test_vectors_numpy_in_and_out(self):
        c = self.client
        c.create_collection("vec_l2", dim=8, metric="l2")
        rng = np.random.default_rng(7)
        data = rng.standard_normal((50, 8)).astype(np.float64)  # any float dtype
        self.assertEqual(c.upsert("vec_l2", [f"v{i}" for i in range(50)],
                                  vectors=data, batch_size=16), 50)
        hits = c.search("vec_l2", vector=data[17], k=3)
        self.assertEqual(hits[0].id, "v17")
        self.assertAlmostEqual(hits[0].score, 0.0, places=4)  # squared L2
        batch = c.search_batch("vec_l2", vectors=data[[3, 9]], k=1)
        self.assertEqual([r[0].id for r in batch], ["v3", "v9"])
        got = c.get("vec_l2", ["v5"], include_vectors=True)[0].vector
        np.testing.assert_allclose(got, data[5].astype(np.float32))
        self.assertEqual(c.describe("vec_l2").metric, "l2")
        # The same rows again through one UpsertStream call: replaced, not added.
        self.assertEqual(c.upsert_stream("vec_l2", [f"v{i}" for i in range(50)],
                                         vectors=data * 2, batch_size=16), 50)
        self.assertEqual(c.describe("vec_l2").live_rows, 50)
        got = c.get("vec_l2", ["v5"], include_vectors=True)[0].vector
        np.testing.assert_allclose(got, (data[5] * 2).astype(np.float32))
        with self.assertRaises(zerovec.InvalidArgumentError):
            c.upsert_stream("vec_l2", ["bad"], vectors=np.zeros((1, 3)))

    def test_agent_memory_ttl_touch_and_recency(self):
        import time
        c = self.client
        info = c.create_collection("agent_memory", dim=4, default_ttl_ms=60_000)
        self.assertEqual(info.default_ttl_ms, 60_000)
        now = int(time.time() * 1000)
        v = np.array([[1, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0]], np.float32)
        self.assertEqual(c.upsert("agent_memory", ["old", "new", "gone"], vectors=v,
                                  timestamps=[now - 10 * 86_400_000, now, now],
                                  expires_at=[0, 0, now - 1]), 3)
        items = c.get("agent_memory", ["old", "new", "gone"])
        self.assertEqual([i.id for i in items], ["old", "new"])  # gone expired
        self.assertGreaterEqual(items[0].expires_at_ms, now + 60_000)
        hits = c.search("agent_memory", vector=[1, 0, 0, 0], k=2)
        self.assertEqual(hits[0].score, hits[1].score)
        hits = c.search("agent_memory", vector=[1, 0, 0, 0], k=2,
                        recency=zerovec.Recency(half_life_ms=86_400_000))
        self.assertEqual([h.id for h in hits], ["new", "old"])
        self.assertAlmostEqual(hits[1].score, 2.0 ** -10, places=5)
        batch = c.search_batch("agent_memory", vectors=v[:1], k=1,
                               recency=86_400_000)  # a half-life in ms
        self.assertEqual(batch[0][0].id, "new")
        self.assertEqual(c.touch("agent_memory", ["old", "gone", "nope"],
                                 ttl_ms=3_600_000), 1)
        self.assertGreaterEqual(c.get("agent_memory", ["old"])[0].expires_at_ms,
                                now + 3_600_000)
        self.assertEqual(c.stats()["touched"], "1")  # uint64 as JSON text
        with self.assertRaises(zerovec.InvalidArgumentError) as e:
            c.touch("agent_memory", ["old"], ttl_ms=5, expires_at_ms=now + 5)
        self.assertIn("ttl_ms", str(e.exception))
        with self.assertRaises(zerovec.InvalidArgumentError):
            c.search("agent_memory", vector=[1, 0, 0, 0],
                     recency={"half_life_ms": 0, "weight": 1.0})

    def test_bad_input_keeps_the_server_message(self):
        c = self.client
        c.create_collection("small", dim=4)
        with self.assertRaises(zerovec.InvalidArgumentError) as e:
            c.upsert("small", ["a"], vectors=np.ones((1, 3)))
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        self.assertIn("items[0].vector: expected 4 values, got 3", str(e.exception))
        with self.assertRaises(zerovec.InvalidArgumentError) as e:
            c.search("small", vector=[1, 2], k=1)
        self.assertIn("expected 4 values, got 2", e.exception.message)
        with self.assertRaises(zerovec.InvalidArgumentError):
            c.upsert("small", ["a", "a"], vectors=np.ones((2, 4)))  # duplicate id
        with self.assertRaises(zerovec.NotFoundError) as e:
            c.search("no_such_collection", vector=[1, 2, 3, 4])
        self.assertIn("no_such_collection", str(e.exception))
        with self.assertRaises(zerovec.AlreadyExistsError):
            c.create_collection("small", dim=4)
        with self.assertRaises(zerovec.ResourceExhaustedError):
            c.search("small", vector=[1, 2, 3, 4], k=100000)
        with self.assertRaises(zerovec.InvalidArgumentError):
            c.create_collection("bad name!", dim=4)
        with self.assertRaises(ValueError):  # caught before the wire
            c.search("small", text="x", vector=[1, 2, 3, 4])
        # Every ZeroVec error is catchable as one base class.
        self.assertTrue(issubclass(zerovec.NotFoundError, zerovec.ZeroVecError))

    def test_auth(self):
        for token in (None, "wrong-token"):
            with zerovec.Client(self.server.address, token=token, timeout=30) as c:
                with self.assertRaises(zerovec.UnauthenticatedError) as e:
                    c.list_collections()
                self.assertIn("authorization: Bearer", str(e.exception))

    def test_unreachable_server(self):
        with zerovec.Client("127.0.0.1:1", timeout=5) as c:
            with self.assertRaises((zerovec.UnavailableError,
                                    zerovec.DeadlineExceededError)):
                c.list_collections()


if __name__ == "__main__":
    unittest.main(verbosity=2)
