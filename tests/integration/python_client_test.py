#!/usr/bin/python3
"""A second language: a Python client (Debian python3-grpcio, stubs generated at
test time with grpc_tools.protoc from proto/zerovec/v1/zerovec.proto) upserts and
searches against a real `zerovec serve` on 127.0.0.1. Then SIGTERM stops it."""
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

ZEROVEC = os.path.abspath(sys.argv.pop(1))
PROTO = os.path.abspath(sys.argv.pop(1))
TMP = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))

# proto/zerovec/v1/zerovec.proto -> include root "proto".
proto_root = os.path.dirname(os.path.dirname(os.path.dirname(PROTO)))
subprocess.check_call([
    sys.executable, "-m", "grpc_tools.protoc", "-I" + proto_root,
    "--python_out=" + TMP, "--grpc_python_out=" + TMP, PROTO])
sys.path.insert(0, TMP)

import grpc  # noqa: E402
from zerovec.v1 import zerovec_pb2 as pb  # noqa: E402
from zerovec.v1 import zerovec_pb2_grpc as pb_grpc  # noqa: E402

DIM = 4


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        port_file = os.path.join(TMP, "port")
        cls.server = subprocess.Popen([
            ZEROVEC, "serve", "--data", os.path.join(TMP, "data"), "--model", "none",
            "--listen", "127.0.0.1:0", "--port-file", port_file])
        for _ in range(500):
            if os.path.exists(port_file):
                break
            time.sleep(0.02)
        with open(port_file) as f:
            port = int(f.read())
        cls.channel = grpc.insecure_channel("127.0.0.1:%d" % port)
        cls.stub = pb_grpc.ZeroVecStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.send_signal(signal.SIGTERM)
        assert cls.server.wait(timeout=30) == 0, "serve did not exit 0 on SIGTERM"

    def test_upsert_and_search(self):
        self.stub.CreateCollection(pb.CreateCollectionRequest(
            name="py", dim=DIM, metric=pb.METRIC_L2))
        items = [pb.Item(id="p%d" % i, vector=[float(i), 0.0, 1.0, -1.0],
                         text="python doc %d" % i, namespace="ns%d" % (i % 2),
                         metadata={"lang": "python"}) for i in range(10)]
        resp = self.stub.Upsert(pb.UpsertRequest(collection="py", items=items))
        self.assertEqual(resp.upserted, 10)

        found = self.stub.Search(pb.SearchRequest(
            collection="py", query=pb.Query(vector=pb.Vector(values=[3.2, 0, 1, -1])),
            k=3, include_documents=True))
        self.assertEqual([h.id for h in found.hits], ["p3", "p4", "p2"])
        self.assertEqual(found.hits[0].text, "python doc 3")
        self.assertEqual(found.hits[0].metadata["lang"], "python")
        self.assertAlmostEqual(found.hits[0].score, 0.04, places=4)

        filtered = self.stub.Search(pb.SearchRequest(
            collection="py", query=pb.Query(vector=pb.Vector(values=[3.2, 0, 1, -1])),
            k=3, filter=pb.Filter(namespace="ns0")))
        self.assertEqual([h.id for h in filtered.hits], ["p4", "p2", "p6"])

        got = self.stub.Get(pb.GetRequest(collection="py", ids=["p7"], include_vectors=True))
        self.assertEqual(list(got.items[0].vector), [7.0, 0.0, 1.0, -1.0])
        self.assertEqual(self.stub.Delete(pb.DeleteRequest(collection="py", ids=["p3"])).deleted, 1)
        info = self.stub.DescribeCollection(pb.DescribeCollectionRequest(name="py"))
        self.assertEqual(info.live_rows, 9)
        self.assertEqual(info.tombstones, 1)

        compacted = self.stub.Compact(pb.CompactRequest(collection="py"))
        self.assertEqual((compacted.rows_before, compacted.rows_after,
                          compacted.tombstones_removed, compacted.generation),
                         (10, 9, 1, 2))
        again = self.stub.Search(pb.SearchRequest(
            collection="py", query=pb.Query(vector=pb.Vector(values=[3.2, 0, 1, -1])), k=2))
        self.assertEqual([h.id for h in again.hits], ["p4", "p2"])

    def test_errors_carry_codes_and_fields(self):
        with self.assertRaises(grpc.RpcError) as e:
            self.stub.Search(pb.SearchRequest(
                collection="missing", query=pb.Query(vector=pb.Vector(values=[1, 2, 3, 4]))))
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.stub.CreateCollection(pb.CreateCollectionRequest(name="py2", dim=DIM))
        with self.assertRaises(grpc.RpcError) as e:
            self.stub.Upsert(pb.UpsertRequest(collection="py2", items=[
                pb.Item(id="a", vector=[1, 2, 3, 4]), pb.Item(id="b", vector=[1, 2])]))
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(e.exception.details(), "items[1].vector: expected 4 values, got 2")


if __name__ == "__main__":
    unittest.main(verbosity=2)
