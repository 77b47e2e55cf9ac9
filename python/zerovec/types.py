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
