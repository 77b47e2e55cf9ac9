"""A typed client over ZeroVec's gRPC API (proto/zerovec/v1/zerovec.proto).

numpy in and out: vectors go in as any (n, dim) / (dim,) array-like and come
back as float32 arrays. Every gRPC error becomes a zerovec.errors exception
carrying the server's message (e.g. InvalidArgumentError("items[0].vector:
expected 384 values, got 3")).
"""

import functools
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import grpc
import numpy as np

from zerovec.errors import ZeroVecError, error_for
from zerovec.types import CollectionInfo, Filter, Fusion, Hit, Item, Recency
from zerovec.v1 import zerovec_pb2 as pb
from zerovec.v1 import zerovec_pb2_grpc as pb_grpc

ArrayLike = Any  # anything np.asarray takes: ndarray, list of floats, ...
FilterLike = Union[Filter, Mapping[str, Any], None]

_METRICS = {"ip": pb.METRIC_INNER_PRODUCT, "l2": pb.METRIC_L2}
_MODES = {"dense": pb.SEARCH_MODE_DENSE, "lexical": pb.SEARCH_MODE_LEXICAL,
          "hybrid": pb.SEARCH_MODE_HYBRID}
_METRIC_NAMES = {pb.METRIC_INNER_PRODUCT: "ip", pb.METRIC_L2: "l2",
                 pb.METRIC_UNSPECIFIED: "ip"}


def _rpc(method):
    """Turns grpc.RpcError into the zerovec.errors class of its status code."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except grpc.RpcError as e:
            raise error_for(e.code().name, e.details() or "") from None

    return wrapper


def _matrix(vectors, what):
    """A C-contiguous float32 (n, dim) array from an array-like."""
    a = np.ascontiguousarray(vectors, dtype=np.float32)
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if a.ndim != 2:
        raise ValueError(f"{what}: expected a (n, dim) array, got shape {a.shape}")
    return a


def _filter_pb(value):
    f = Filter.of(value)
    return pb.Filter(namespace=f.namespace or "", metadata_equals=f.metadata,
                     min_timestamp_ms=f.min_timestamp_ms or 0,
                     max_timestamp_ms=f.max_timestamp_ms or 0)


def _hit(h):
    return Hit(id=h.id, score=h.score, namespace=h.namespace,
               timestamp_ms=h.timestamp_ms, text=h.text, metadata=dict(h.metadata),
               dense_rank=h.dense_rank, lexical_rank=h.lexical_rank)


def _mode_pb(mode):
    if mode not in _MODES:
        raise ValueError(f"mode: expected 'dense', 'lexical' or 'hybrid', got {mode!r}")
    return _MODES[mode]


def _fusion_pb(value):
    f = Fusion.of(value)
    return pb.Fusion(rrf_k=f.rrf_k, dense_weight=f.dense_weight,
                     lexical_weight=f.lexical_weight, depth=f.depth)


def _info(c):
    return CollectionInfo(name=c.name, dim=c.dim, metric=_METRIC_NAMES[c.metric],
                          index=c.index, rows=c.rows, live_rows=c.live_rows,
                          tombstones=c.tombstones, generation=c.generation,
                          model_max_length=c.model_max_length,
                          default_ttl_ms=c.default_ttl_ms,
                          expired_swept=c.expired_swept,
                          lexical=c.lexical, lexical_documents=c.lexical_documents)


def _recency_pb(value):
    r = Recency.of(value)
    if r is None:
        return None
    return pb.Recency(half_life_ms=r.half_life_ms, weight=r.weight,
                      now_ms=r.now_ms, candidates=r.candidates)


def _column(values, n, name):
    if values is None:
        return [None] * n
    values = list(values)
    if len(values) != n:
        raise ValueError(f"{name}: {len(values)} values for {n} ids")
    return values


class Client:
    """ZeroVec over gRPC: ``Client("127.0.0.1:50051", token=...)``.

    token: the server's --auth-token-file secret, sent as
    "authorization: Bearer <token>". timeout: seconds for each call (None: none).
    """

    def __init__(self, target: str = "127.0.0.1:50051", token: Optional[str] = None,
                 timeout: Optional[float] = None, max_message_bytes: int = 64 << 20):
        options = [("grpc.max_receive_message_length", max_message_bytes),
                   ("grpc.max_send_message_length", max_message_bytes)]
        self._channel = grpc.insecure_channel(target, options=options)
        self._stub = pb_grpc.ZeroVecStub(self._channel)
        self._metadata = [("authorization", f"Bearer {token}")] if token else None
        self._timeout = timeout

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, name, request):
        return getattr(self._stub, name)(request, metadata=self._metadata,
                                         timeout=self._timeout)

    @_rpc
    def create_collection(self, name: str, dim: int = 0, metric: str = "ip",
                          index: str = "Flat", lexical: bool = False,
                          default_ttl_ms: int = 0) -> CollectionInfo:
        """dim 0: the server model's dimension. metric "ip" or "l2". lexical:
        also keep a BM25 index of the texts, for mode="lexical" / "hybrid"
        searches (off by default: it slows ingest). default_ttl_ms: items
        upserted without expires_at expire this long after their upsert (0:
        never)."""
        if metric not in _METRICS:
            raise ValueError(f"metric: expected 'ip' or 'l2', got {metric!r}")
        r = self._call("CreateCollection", pb.CreateCollectionRequest(
            name=name, dim=dim, metric=_METRICS[metric], index=index,
            lexical=lexical, default_ttl_ms=default_ttl_ms))
        return _info(r.collection)

    @_rpc
    def drop_collection(self, name: str) -> None:
        self._call("DropCollection", pb.DropCollectionRequest(name=name))

    @_rpc
    def list_collections(self) -> List[CollectionInfo]:
        r = self._call("ListCollections", pb.ListCollectionsRequest())
        return [_info(c) for c in r.collections]

    @_rpc
    def describe(self, name: str) -> CollectionInfo:
        return _info(self._call("DescribeCollection",
                                pb.DescribeCollectionRequest(name=name)))

    @_rpc
    def upsert(self, collection: str, ids: Sequence[str],
               texts: Optional[Sequence[str]] = None,
               vectors: Optional[ArrayLike] = None,
               namespaces: Optional[Sequence[str]] = None,
               metadata: Optional[Sequence[Mapping[str, str]]] = None,
               timestamps: Optional[Sequence[int]] = None,
               batch_size: int = 1024,
               expires_at: Optional[Sequence[int]] = None) -> int:
        """Inserts or replaces items; returns how many were stored.

        Give texts (embedded by the server's model), vectors ((n, dim)), or both
        (then the text is stored as given). Sent in batches of batch_size, each
        all-or-nothing on the server. expires_at: Unix ms per item (0 or None:
        the collection's default TTL, or never).
        """
        stored = 0
        for request in self._upsert_requests(collection, ids, texts, vectors,
                                             namespaces, metadata, timestamps,
                                             batch_size, expires_at):
            stored += self._call("Upsert", request).upserted
        return stored

    @_rpc
    def upsert_stream(self, collection: str, ids: Sequence[str],
                      texts: Optional[Sequence[str]] = None,
                      vectors: Optional[ArrayLike] = None,
                      namespaces: Optional[Sequence[str]] = None,
                      metadata: Optional[Sequence[Mapping[str, str]]] = None,
                      timestamps: Optional[Sequence[int]] = None,
                      batch_size: int = 1024,
                      expires_at: Optional[Sequence[int]] = None) -> int:
        """upsert() over one UpsertStream call: the batches go as one stream
        and the server answers once with the total stored."""
        requests = self._upsert_requests(collection, ids, texts, vectors,
                                         namespaces, metadata, timestamps,
                                         batch_size, expires_at)
        return self._call("UpsertStream", iter(list(requests))).upserted

    @staticmethod
    def _upsert_requests(collection, ids, texts, vectors, namespaces, metadata,
                         timestamps, batch_size, expires_at=None):
        ids = list(ids)
        n = len(ids)
        texts = _column(texts, n, "texts")
        namespaces = _column(namespaces, n, "namespaces")
        metadata = _column(metadata, n, "metadata")
        timestamps = _column(timestamps, n, "timestamps")
        expires_at = _column(expires_at, n, "expires_at")
        rows = None
        if vectors is not None:
            rows = _matrix(vectors, "vectors")
            if rows.shape[0] != n:
                raise ValueError(f"vectors: {rows.shape[0]} rows for {n} ids")
        for start in range(0, n, batch_size):
            items = []
            for i in range(start, min(n, start + batch_size)):
                item = pb.Item(id=ids[i], text=texts[i] or "",
                               namespace=namespaces[i] or "",
                               metadata=metadata[i] or {},
                               timestamp_ms=timestamps[i] or 0,
                               expires_at_ms=expires_at[i] or 0)
                if rows is not None:
                    item.vector.extend(rows[i].tolist())
                items.append(item)
            yield pb.UpsertRequest(collection=collection, items=items)

    @staticmethod
    def _query(text, vector):
        if (text is None) == (vector is None):
            raise ValueError("give exactly one of text= or vector=")
        if text is not None:
            return pb.Query(text=text)
        v = np.asarray(vector, dtype=np.float32).ravel()
        return pb.Query(vector=pb.Vector(values=v.tolist()))

    @_rpc
    def search(self, collection: str, text: Optional[str] = None,
               vector: Optional[ArrayLike] = None, k: int = 10,
               filter: FilterLike = None, ef_search: int = 0,
               include_documents: bool = True, mode: str = "dense",
               fusion: Any = None, recency: Any = None) -> List[Hit]:
        """The k nearest items to one query (a text or a vector), best first.
        mode "lexical" (BM25) and "hybrid" (dense + lexical by reciprocal rank,
        weighted by fusion: a Fusion or dict) need text= and a collection
        created with lexical=True. recency: a Recency (or its dict, or a
        half-life in ms) for time-aware ranking (dense mode)."""
        r = self._call("Search", pb.SearchRequest(
            collection=collection, query=self._query(text, vector), k=k,
            filter=_filter_pb(filter), include_documents=include_documents,
            ef_search=ef_search, mode=_mode_pb(mode), fusion=_fusion_pb(fusion),
            recency=_recency_pb(recency)))
        return [_hit(h) for h in r.hits]

    @_rpc
    def search_batch(self, collection: str, texts: Optional[Sequence[str]] = None,
                     vectors: Optional[ArrayLike] = None, k: int = 10,
                     filter: FilterLike = None, ef_search: int = 0,
                     include_documents: bool = True, mode: str = "dense",
                     fusion: Any = None,
                     recency: Any = None) -> List[List[Hit]]:
        """Several queries in one call: texts, or vectors as (n, dim)."""
        if (texts is None) == (vectors is None):
            raise ValueError("give exactly one of texts= or vectors=")
        if texts is not None:
            queries = [pb.Query(text=t) for t in texts]
        else:
            queries = [pb.Query(vector=pb.Vector(values=v.tolist()))
                       for v in _matrix(vectors, "vectors")]
        r = self._call("SearchBatch", pb.SearchBatchRequest(
            collection=collection, queries=queries, k=k,
            filter=_filter_pb(filter), include_documents=include_documents,
            ef_search=ef_search, mode=_mode_pb(mode), fusion=_fusion_pb(fusion),
            recency=_recency_pb(recency)))
        return [[_hit(h) for h in res.hits] for res in r.results]

    @_rpc
    def get(self, collection: str, ids: Sequence[str],
            include_vectors: bool = False) -> List[Item]:
        """Stored items by id, in request order; unknown ids are skipped."""
        r = self._call("Get", pb.GetRequest(collection=collection, ids=list(ids),
                                            include_vectors=include_vectors))
        return [Item(id=i.id, text=i.text, namespace=i.namespace,
                     metadata=dict(i.metadata), timestamp_ms=i.timestamp_ms,
                     vector=np.array(i.vector, dtype=np.float32)
                     if include_vectors else None,
                     expires_at_ms=i.expires_at_ms)
                for i in r.items]

    @_rpc
    def touch(self, collection: str, ids: Sequence[str],
              ttl_ms: Optional[int] = None,
              expires_at_ms: Optional[int] = None) -> int:
        """Renews live items' expiry: ttl_ms from now, or expires_at_ms (Unix
        ms), or neither (the collection's default TTL from now, or never).
        Returns how many were renewed."""
        return self._call("Touch", pb.TouchRequest(
            collection=collection, ids=list(ids), ttl_ms=ttl_ms or 0,
            expires_at_ms=expires_at_ms or 0)).touched

    @_rpc
    def delete(self, collection: str, ids: Sequence[str]) -> int:
        """Deletes ids; returns how many existed."""
        return self._call("Delete", pb.DeleteRequest(collection=collection,
                                                     ids=list(ids))).deleted

    @_rpc
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The server model's vectors for texts, as a float32 (n, dim) array."""
        r = self._call("Embed", pb.EmbedRequest(texts=list(texts)))
        out = np.empty((len(r.vectors), r.dim), dtype=np.float32)
        for i, v in enumerate(r.vectors):
            out[i] = v.values
        return out

    @_rpc
    def stats(self, collection: str = "") -> Dict[str, Any]:
        """Server and collection statistics as a dict (StatsResponse's fields)."""
        from google.protobuf.json_format import MessageToDict

        r = self._call("Stats", pb.StatsRequest(collection=collection))
        out = MessageToDict(r, preserving_proto_field_name=True,
                            including_default_value_fields=True)
        out["collections"] = [_info(c) for c in r.collections]
        return out

    @_rpc
    def compact(self, collection: str) -> Dict[str, int]:
        """Rewrites the collection without tombstoned rows; returns the counts."""
        r = self._call("Compact", pb.CompactRequest(collection=collection))
        return {"rows_before": r.rows_before, "rows_after": r.rows_after,
                "tombstones_removed": r.tombstones_removed,
                "generation": r.generation}


__all__ = ["Client", "ZeroVecError"]
