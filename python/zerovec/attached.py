"""zerovec.attach(): search a collection that a server writes, in this process.

No server round trip and no copy of the vectors: the segment's files are mapped
read-only (shared with the server and every other attached process) and the C++
AttachedCollection searches them in place. Text queries are embedded here with
the bundled model (or the one named). The GIL is released while searching,
refreshing and embedding.

Rows as numpy: the segment grows in extents (files) of geometric sizes
(shm/segment.h), and one numpy array can only view one contiguous mapping, so
``rows()`` is a list of read-only (n_i, dim) views, one per extent, in row
order; ``rows_array()`` is the same as one array when there is a single extent
and otherwise a copy (np.concatenate). Each view keeps the mapping alive:
deleting the collection object, or a refresh that moves to a newer generation
after compaction, never invalidates it.
"""

import os
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

try:
    from zerovec import _attach
except ImportError as e:  # the client works without it; attach does not
    raise ImportError(
        "zerovec.attach needs the compiled extension zerovec._attach: build it "
        "(bazel build //python:zerovec/_attach.so) before pip install ./python, "
        f"or use a bundle's python/ folder ({e})") from e
from zerovec.types import Filter, Fusion, Hit, Recency

MODEL_ENV = "ZEROVEC_MODEL"
_BUNDLED = os.path.join("models", "zerovec-mini")


def _model_candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    out = [
        os.path.join(here, _BUNDLED),  # pip install with the model copied in
        # the bundle: DIR/python/zerovec -> DIR/share/zerovec/models/...
        os.path.join(here, "..", "..", "share", "zerovec", _BUNDLED),
        # Bazel runfiles (zerovec/python/zerovec) and a source checkout
        os.path.join(here, "..", "..", _BUNDLED),
    ]
    for var in ("RUNFILES_DIR", "TEST_SRCDIR"):
        if os.environ.get(var):
            out.append(os.path.join(os.environ[var], "zerovec", _BUNDLED))
    return [os.path.normpath(p) for p in out]


def resolve_model(model: Optional[str] = None) -> str:
    """The model folder: model, else $ZEROVEC_MODEL, else the bundled one."""
    if model:
        return model
    env = os.environ.get(MODEL_ENV)
    if env:
        return env
    looked = _model_candidates()
    for path in looked:
        if os.path.exists(os.path.join(path, "config.json")):
            return path
    raise FileNotFoundError(
        f"no model found (looked in ${MODEL_ENV}, {', '.join(looked)}); "
        "pass model=DIR or set " + MODEL_ENV)


class AttachedCollection:
    """A read-only, in-process view of a collection; see the module docstring.

    Thread-safe: searches from several threads run in parallel; refresh() waits
    for them.
    """

    def __init__(self, data_dir: Union[str, os.PathLike], collection: str,
                 model: Optional[str] = None, device: str = "auto"):
        self._impl = _attach.Attached(os.fspath(data_dir), collection)
        self._model = model
        self._device = device
        self._embedder = None
        self.name = collection

    def refresh(self) -> None:
        """Picks up rows committed and metadata written since the last call."""
        self._impl.refresh()

    def describe(self) -> Dict[str, Any]:
        """dim, metric, index, rows, live_rows, tombstones, generation, ..."""
        return self._impl.describe()

    @property
    def dim(self) -> int:
        return self._impl.describe()["dim"]

    def embedder(self):
        """The in-process model (loaded at the first text query)."""
        if self._embedder is None:
            self._embedder = _attach.Embedder(resolve_model(self._model),
                                              self._device)
        return self._embedder

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of texts with the in-process model: float32 (n, dim)."""
        return self.embedder().embed(list(texts))

    def search(self, query: Union[str, Any], k: int = 10, filter: Any = None,
               ef_search: int = 0, include_documents: bool = True,
               mode: str = "dense", fusion: Any = None,
               recency: Any = None) -> Union[List[Hit], List[List[Hit]]]:
        """The k nearest items to query: a text, a (dim,) vector, or (n, dim)
        vectors (then one list of hits per row). Best first. mode "lexical"
        (BM25, no model needed) and "hybrid" (reciprocal-rank fusion, weighted
        by fusion: a Fusion or dict) need a text query and a lexical
        collection, as Client.search."""
        single = True
        texts = []
        if mode != "dense":
            if not isinstance(query, str):
                raise ValueError(f"mode={mode!r}: needs a text query (a vector has no words)")
            texts = [query]
        if mode == "lexical":
            queries = np.zeros((0, self.dim), dtype=np.float32)
        elif isinstance(query, str):
            queries = self.embed([query])
        else:
            queries = np.ascontiguousarray(query, dtype=np.float32)
            if queries.ndim == 2:
                single = False
            elif queries.ndim == 1:
                queries = queries.reshape(1, -1)
            else:
                raise ValueError(f"query: expected a text, (dim,) or (n, dim), "
                                 f"got shape {queries.shape}")
        f = Filter.of(filter)
        fu = Fusion.of(fusion)
        r = Recency.of(recency)
        results = self._impl.search(queries, k, f.namespace, dict(f.metadata),
                                    f.min_timestamp_ms, f.max_timestamp_ms,
                                    ef_search, include_documents, mode, texts,
                                    fu.rrf_k, fu.dense_weight, fu.lexical_weight,
                                    fu.depth, r.half_life_ms if r else 0,
                                    r.weight if r else 0.0)
        hits = [[Hit(*h) for h in row] for row in results]
        return hits[0] if single else hits

    def rows(self) -> List[np.ndarray]:
        """Committed rows of the last refresh as read-only float32 views into
        the shared mapping, one (n_i, dim) array per extent, in row order."""
        return self._impl.row_blocks()[0]

    def row_starts(self) -> List[int]:
        """The first row number of each array rows() returns."""
        return self._impl.row_blocks()[2]

    def rows_array(self) -> np.ndarray:
        """All committed rows as one (rows, dim) array: a view when the segment
        has one extent, else a copy."""
        views = self.rows()
        if len(views) == 1:
            return views[0]
        if not views:
            return np.empty((0, self.dim), dtype=np.float32)
        return np.concatenate(views)

    def tombstones(self) -> np.ndarray:
        """bool per row of the last refresh (True: deleted or replaced), read
        from the segment's tombstone bits when called; a small copy (the
        segment keeps them as bits)."""
        return self._impl.tombstones()

    def tombstone_bits(self) -> List[np.ndarray]:
        """The segment's tombstone bitmaps as read-only uint8 views, one per
        array rows() returns (no copy, live: a delete shows without a
        refresh). np.unpackbits(v, bitorder="little")[:len(rows)] gives a
        bool per row; trailing bits past the rows are zero."""
        return self._impl.row_blocks()[3]

    def ids(self) -> List[str]:
        """The external id of each row of the last refresh, in row order
        ("" for a row without metadata)."""
        return self._impl.ids()

    def id_hashes(self) -> List[np.ndarray]:
        """The segment's int64 id hash of each row, as read-only views aligned
        with rows()."""
        return self._impl.row_blocks()[1]


def attach(data_dir: Union[str, os.PathLike], collection: str,
           model: Optional[str] = None, device: str = "auto") -> AttachedCollection:
    """Attaches to `collection` of the data directory a server writes.

    model: folder for text queries (default: $ZEROVEC_MODEL, else the bundled
    zerovec-mini). device: "cpu", "auto", "cuda" or "cuda:N".
    """
    return AttachedCollection(data_dir, collection, model=model, device=device)
