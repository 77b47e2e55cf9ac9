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
