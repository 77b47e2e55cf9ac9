"""Plain result and filter types shared by the client and attach."""

from dataclasses import dataclass, field
from typing import Dict, Optional

import numpy as np


@dataclass
class Filter:
    """Restricts a search; every condition that is set must hold."""

    namespace: Optional[str] = None
    metadata: Dict[str, str] = field(default_factory=dict)
    min_timestamp_ms: Optional[int] = None  # inclusive
    max_timestamp_ms: Optional[int] = None  # inclusive

    @staticmethod
    def of(value):
        """A Filter from None, a Filter, or a dict of its fields."""
        if value is None:
            return Filter()
        if isinstance(value, Filter):
            return value
        if isinstance(value, dict):
            return Filter(**value)
        raise TypeError(f"filter: expected a Filter or dict, got {type(value).__name__}")


@dataclass
class Recency:
    """Time-aware ranking: the most similar candidates re-scored by
    r = 0.5 ** (age / half_life_ms), age = now - timestamp_ms. weight 0:
    similarity * r (L2: distance / r); weight > 0: similarity + weight * r
    (L2: distance - weight * r). now_ms 0: the clock; candidates 0:
    max(10 k, 100)."""

    half_life_ms: int
    weight: float = 0.0
    now_ms: int = 0
    candidates: int = 0

    @staticmethod
    def of(value):
        """A Recency from None, a Recency, a dict of its fields, or a
        half-life in milliseconds."""
        if value is None or isinstance(value, Recency):
            return value
        if isinstance(value, dict):
            return Recency(**value)
        if isinstance(value, (int, float)):
            return Recency(half_life_ms=int(value))
        raise TypeError(f"recency: expected a Recency, dict or half-life in ms, "
                        f"got {type(value).__name__}")


@dataclass
class Hit:
    """One search result. score: inner product (higher is closer) or squared L2."""

    id: str
    score: float
    namespace: str = ""
    timestamp_ms: int = 0
    text: str = ""
    metadata: Dict[str, str] = field(default_factory=dict)
    # Rank (from 1) in the dense and the lexical ranking; 0: not in it.
    # mode="lexical": score is the BM25 weight; "hybrid": the fused RRF score.
    dense_rank: int = 0
    lexical_rank: int = 0


@dataclass
class Fusion:
    """Reciprocal-rank fusion for mode="hybrid": an item scores
    dense_weight / (rrf_k + dense_rank) + lexical_weight / (rrf_k + lexical_rank),
    each term only where it is in that ranking's top `depth` (0: max(k, 100))."""

    rrf_k: float = 60.0
    dense_weight: float = 1.0
    lexical_weight: float = 1.0
    depth: int = 0

    @staticmethod
    def of(value):
        """A Fusion from None, a Fusion, or a dict of its fields."""
        if value is None:
            return Fusion()
        if isinstance(value, Fusion):
            return value
        if isinstance(value, dict):
            return Fusion(**value)
        raise TypeError(f"fusion: expected a Fusion or dict, got {type(value).__name__}")


@dataclass
class Item:
    """A stored item, as Client.get returns it (vector only when asked for)."""

    id: str
    text: str = ""
    namespace: str = ""
    metadata: Dict[str, str] = field(default_factory=dict)
    timestamp_ms: int = 0
    vector: Optional[np.ndarray] = None
    expires_at_ms: int = 0  # 0: never


@dataclass
class CollectionInfo:
    name: str
    dim: int
    metric: str  # "ip" or "l2"
    index: str
    rows: int  # committed rows, including tombstoned ones
    live_rows: int
    tombstones: int
    generation: int
    model_max_length: int = 0
    default_ttl_ms: int = 0  # items without expires_at expire this long after
    expired_swept: int = 0  # expired items the server's sweep deleted
    lexical: bool = False  # has a lexical index (create_collection(lexical=True))
    lexical_documents: int = 0
