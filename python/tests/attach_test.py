"""zerovec.attach against a segment a real `zerovec serve` writes: several
reader processes while a writer upserts, zero-copy read-only views that share
memory, tombstones after refresh, views outliving their collection, text
queries embedded in process, and clean errors for corrupt or foreign files."""

import gc
import mmap
import multiprocessing as mp
import os
import shutil
import threading
import time
import unittest

import numpy as np

import zerovec
from server import Server

DIM = 128
BATCH = 1000
BATCHES = 8  # 8000 rows x 128 floats: 4000 KiB of rows in 4 extents


def vector_of(n):
    """Row n's vector, recomputable by any process: whole-row checks."""
    return np.random.default_rng(n).standard_normal(DIM).astype(np.float32)


def rss_anon_kib():
    """Resident anonymous memory: a copy of the rows would show here, pages of
    the shared segment mapping do not. From smaps_rollup, which walks the page
    tables (status' RssAnon is a per-CPU estimate, off by megabytes)."""
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Anonymous:"):
                return int(line.split()[1])
    raise RuntimeError("no Anonymous in /proc/self/smaps_rollup")


def mapping_ranges(segment_dir):
    """(start, end) of this process's mappings of the segment's extent files."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith(segment_dir + "/vectors."):
                start, end = (int(x, 16) for x in parts[0].split("-"))
                out.append((start, end))
    return out


def check_whole_rows(col, expected):
    """Every visible row is a whole committed row: its vector is its id's
    (expected[n] = vector_of(n))."""
    ids = col.ids()
    for first, view in zip(col.row_starts(), col.rows()):
        block_ids = ids[first:first + view.shape[0]]
        if not all(block_ids):
            return f"a row in [{first}, {first + view.shape[0]}) has no id"
        numbers = np.array([int(i[1:]) for i in block_ids])
        whole = (view == expected[numbers]).all(axis=1)
        if not whole.all():
            bad = first + int(np.argmin(whole))
            return f"row {bad} ({ids[bad]}) is not whole"
    return None


def reader(data_dir, inbox, outbox):
    """One reader process: attaches, follows the writer, reports."""
    try:
        col = zerovec.attach(data_dir, "shared")
        expected = np.stack([vector_of(n) for n in range(BATCH * BATCHES)])
        while True:
            msg = inbox.get()
            if msg is None:
                break
            col.refresh()
            problem = check_whole_rows(col, expected)
            if problem:
                outbox.put(("error", problem))
                continue
            hit = col.search(vector_of(int(msg[1:])), k=1)
            outbox.put(("seen", msg, hit[0].id if hit else None, col.describe()["rows"]))
        # Memory: read every value through the views, then make a real copy.
        before = rss_anon_kib()
        views = col.rows()
        total = float(sum(v.sum(dtype=np.float64) for v in views))
        after_views = rss_anon_kib()
        # The control: the same rows copied into fresh anonymous pages (an
        # mmap, so malloc cannot hand back memory already resident).
        buffer = mmap.mmap(-1, sum(v.shape[0] for v in views) * DIM * 4,
                           flags=mmap.MAP_PRIVATE)
        copy = np.frombuffer(buffer, dtype=np.float32).reshape(-1, DIM)
        np.concatenate(views, out=copy)
        after_copy = rss_anon_kib()
        segment = col.describe()["segment_dir"]
        inside = all(any(s <= v.__array_interface__["data"][0] and
                         v.__array_interface__["data"][0] + v.shape[0] * v.strides[0] <= e
                         for s, e in mapping_ranges(segment)) for v in views)
        outbox.put(("memory", after_views - before, after_copy - after_views,
                    copy.nbytes // 1024, inside, total))
    except Exception as e:  # reported, so the parent fails with the reason
        outbox.put(("error", repr(e)))


class AttachTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()
        cls.client = zerovec.Client(cls.server.address, timeout=120)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop()

    def test_readers_in_other_processes_follow_a_writer(self):
        self.client.create_collection("shared", dim=DIM)
        ctx = mp.get_context("spawn")  # no fork of a process with gRPC threads
        outbox = ctx.Queue()
        inboxes = [ctx.Queue() for _ in range(4)]
        procs = [ctx.Process(target=reader, args=(self.server.data_dir, q, outbox))
                 for q in inboxes]
        for p in procs:
            p.start()
        try:
            for b in range(BATCHES):
                ids = [f"v{n}" for n in range(b * BATCH, (b + 1) * BATCH)]
                vectors = np.stack([vector_of(n) for n in range(b * BATCH, (b + 1) * BATCH)])
                self.client.upsert("shared", ids, vectors=vectors)
                for q in inboxes:  # committed: readers must find it after refresh
                    q.put(ids[-1])
            for q in inboxes:
                q.put(None)
            seen = memory = 0
            while memory < len(procs):
                msg = outbox.get(timeout=120)
                self.assertNotEqual(msg[0], "error", msg)
                if msg[0] == "seen":
                    seen += 1
                    self.assertEqual(msg[2], msg[1], "just-committed id not found")
                    self.assertGreaterEqual(msg[3], int(msg[1][1:]) + 1)
                else:
                    memory += 1
                    _, views_kib, copy_growth_kib, rows_kib, inside, total = msg
                    self.assertTrue(inside, "a view's data lies outside the mapping")
                    # Reading all rows through the views costs next to nothing
                    # private (0 KiB; about 400 KiB of allocator noise under
                    # ASan); the copy costs their size (the measure can tell).
                    self.assertLess(views_kib, rows_kib * 0.2, msg)
                    self.assertGreater(copy_growth_kib, rows_kib * 0.8, msg)
                    print(f"reader anonymous memory: +{views_kib} KiB reading {rows_kib} KiB "
                          f"of rows through views, +{copy_growth_kib} KiB for a copy")
            self.assertEqual(seen, 4 * BATCHES)
        finally:
            for p in procs:
                p.join(60)
                if p.is_alive():
                    p.kill()
        self.assertEqual([p.exitcode for p in procs], [0] * 4)

    def test_views_are_read_only_zero_copy_and_outlive_the_collection(self):
        self.client.create_collection("views", dim=DIM)
        self.client.upsert("views", ["v0", "v1", "v2"],
                           vectors=np.stack([vector_of(n) for n in range(3)]))
        col = zerovec.attach(self.server.data_dir, "views")
        views = col.rows()
        self.assertEqual([v.shape for v in views], [(3, DIM)])
        view = views[0]
        self.assertFalse(view.flags.writeable)
        with self.assertRaises(ValueError):
            view[0, 0] = 1.0
        with self.assertRaises(ValueError):
            view.setflags(write=True)
        self.assertFalse(view.flags.owndata)
        segment = col.describe()["segment_dir"]
        address = view.__array_interface__["data"][0]
        self.assertTrue(any(s <= address < e for s, e in mapping_ranges(segment)))
        self.assertIs(col.rows_array().base is not None, True)  # one extent: a view
        np.testing.assert_array_equal(view[1], vector_of(1))
        self.assertEqual(col.ids(), ["v0", "v1", "v2"])
        # The view keeps the mapping: the collection object can go.
        del col, views
        gc.collect()
        np.testing.assert_array_equal(view[2], vector_of(2))
        # And a compaction (new generation, old files removed) does not
        # invalidate an old view either.
        col = zerovec.attach(self.server.data_dir, "views")
        old = col.rows()[0]
        self.client.delete("views", ["v0"])
        self.client.compact("views")
        col.refresh()
        self.assertEqual(col.describe()["generation"], 2)
        self.assertEqual(col.ids(), ["v1", "v2"])
        np.testing.assert_array_equal(old[0], vector_of(0))

    def test_tombstones_after_refresh(self):
        self.client.create_collection("tomb", dim=DIM)
        self.client.upsert("tomb", [f"v{n}" for n in range(5)],
                           vectors=np.stack([vector_of(n) for n in range(5)]))
        col = zerovec.attach(self.server.data_dir, "tomb")
        self.assertEqual(col.tombstones().tolist(), [False] * 5)
        self.assertEqual(col.search(vector_of(3), k=1)[0].id, "v3")
        self.client.delete("tomb", ["v3"])
        self.client.upsert("tomb", ["v1"], vectors=vector_of(1)[None])  # replaces row 1
        col.refresh()
        self.assertEqual(col.tombstones().tolist(), [False, True, False, True, False, False])
        self.assertEqual(col.ids()[5], "v1")
        self.assertNotEqual(col.search(vector_of(3), k=1)[0].id, "v3")
        self.assertEqual(col.describe()["tombstones"], 2)
        # The bitmap as live, read-only views over the mapping: no copy, and a
        # delete shows before any refresh.
        bits = col.tombstone_bits()
        self.assertEqual(len(bits), len(col.rows()))
        self.assertFalse(bits[0].flags.writeable)
        with self.assertRaises(ValueError):
            bits[0][0] = 1
        segment = col.describe()["segment_dir"]
        address = bits[0].__array_interface__["data"][0]
        self.assertTrue(any(s <= address < e for s, e in mapping_ranges(segment)))
        flags = np.unpackbits(bits[0], bitorder="little")[:6].astype(bool)
        self.assertEqual(flags.tolist(), [False, True, False, True, False, False])
        self.client.delete("tomb", ["v0"])
        self.assertTrue(np.unpackbits(bits[0], bitorder="little")[0])

    def test_expiry_and_recency_agree_with_the_server(self):
        import time
        now = int(time.time() * 1000)
        self.client.create_collection("mem", dim=DIM)
        v = np.stack([vector_of(1), vector_of(1), vector_of(2)])
        self.client.upsert("mem", ["old", "new", "gone"], vectors=v,
                           timestamps=[now - 10 * 86_400_000, now, now],
                           expires_at=[0, 0, now - 1])
        col = zerovec.attach(self.server.data_dir, "mem")
        self.assertNotIn("gone", [h.id for h in col.search(vector_of(2), k=3)])
        day = zerovec.Recency(half_life_ms=86_400_000)
        mine = col.search(vector_of(1), k=2, recency=day)
        theirs = self.client.search("mem", vector=vector_of(1), k=2, recency=day)
        self.assertEqual([h.id for h in mine], ["new", "old"])
        self.assertEqual([h.id for h in mine], [h.id for h in theirs])
        for a, b in zip(mine, theirs):
            self.assertAlmostEqual(a.score, b.score, places=5)

    def test_text_query_embedded_in_process_matches_the_server(self):
        docs = {"tea": "Green tea is steeped at 80 degrees for two minutes.",
                "bike": "Check the tyre pressure of a bicycle before every ride.",
                "bread": "Bread dough rises in a warm place for an hour."}
        self.client.create_collection("text")
        self.client.upsert("text", list(docs), texts=list(docs.values()),
                           namespaces=["a", "b", "a"])
        col = zerovec.attach(self.server.data_dir, "text")
        for q in ("steeping green tea", "bicycle tyres", "baking bread"):
            local = col.search(q, k=3)
            remote = self.client.search("text", text=q, k=3)
            self.assertEqual([h.id for h in local], [h.id for h in remote])
            self.assertAlmostEqual(local[0].score, remote[0].score, places=4)
            self.assertEqual(local[0].text, docs[local[0].id])
        self.assertEqual([h.id for h in col.search("tea", k=3, filter={"namespace": "b"})],
                         ["bike"])
        np.testing.assert_allclose(col.embed(["bicycle"]), self.client.embed(["bicycle"]),
                                   atol=1e-5)
        with self.assertRaises(zerovec.InvalidArgumentError) as e:
            col.search(np.ones(3), k=1)
        self.assertIn("dim 256", str(e.exception))

    def test_lexical_and_hybrid_in_process_match_the_server(self):
        docs = {"t1": "Ticket KX-7731: login fails after the password reset",
                "t2": "Ticket KX-7732: login page is slow on mobile",
                "n1": "Notes from the design review of the new logo"}
        self.client.create_collection("memos", lexical=True)
        self.client.upsert("memos", list(docs), texts=list(docs.values()),
                           namespaces=["a", "b", "a"])
        col = zerovec.attach(self.server.data_dir, "memos")
        self.assertTrue(col.describe()["lexical"])
        for mode in ("lexical", "hybrid"):
            local = col.search("KX-7731", k=3, mode=mode)
            remote = self.client.search("memos", text="KX-7731", k=3, mode=mode)
            self.assertEqual([h.id for h in local], [h.id for h in remote])
            self.assertEqual(local[0].id, "t1")
            self.assertEqual(local[0].lexical_rank, 1)
            self.assertAlmostEqual(local[0].score, remote[0].score, places=4)
        self.assertEqual([h.id for h in col.search("login", k=3, mode="lexical",
                                                   filter={"namespace": "b"})],
                         ["t2"])
        with self.assertRaises(ValueError):
            col.search(np.ones(256), k=1, mode="hybrid")

    def test_gil_released_while_embedding(self):
        self.client.create_collection("gil", dim=DIM)
        col = zerovec.attach(self.server.data_dir, "gil", model=os.environ["ZEROVEC_MODEL"])
        col.embedder()  # load the model first
        texts = [f"a sentence about topic number {i} and its details" for i in range(400)]
        state = {"in_call": False, "done": False}

        def work():
            state["in_call"] = True
            col.embed(texts)
            state["done"] = True

        t = threading.Thread(target=work)
        t.start()
        while not state["in_call"]:
            time.sleep(0)
        ticks = 0
        while not state["done"]:
            ticks += 1
        t.join()
        # With the GIL held through the call this thread would not run at all.
        self.assertGreater(ticks, 1000)

    def test_errors_never_crash(self):
        with self.assertRaises(zerovec.NotFoundError):
            zerovec.attach(self.server.data_dir, "no_such_collection")
        with self.assertRaises(zerovec.InvalidArgumentError):
            zerovec.attach(self.server.data_dir, "bad name!")
        with self.assertRaises(zerovec.ZeroVecError):
            zerovec.attach(os.path.join(self.server.tmp, "nowhere"), "x")
        # A corrupt and a foreign segment: a stopped server's data, damaged.
        with Server(model=False) as other:
            with zerovec.Client(other.address) as c:
                c.create_collection("c", dim=DIM)
                c.upsert("c", ["v0"], vectors=vector_of(0)[None])
            segment = zerovec.attach(other.data_dir, "c").describe()["segment_dir"]
        extent = os.path.join(segment, "vectors.00000")
        with open(extent, "rb") as f:
            original = f.read()
        for name, damage in (("corrupt", original[:64] + b"\xff" * 32 + original[96:]),
                             ("foreign", os.urandom(len(original))),
                             ("truncated", original[:100])):
            with open(extent, "wb") as f:
                f.write(damage)
            with self.assertRaises(zerovec.ZeroVecError, msg=name) as e:
                zerovec.attach(other.data_dir, "c")
            self.assertIn("vectors.00000", str(e.exception), name)
        shutil.rmtree(other.tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
