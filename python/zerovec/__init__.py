"""ZeroVec for Python.

- ``zerovec.Client(target, token=...)``: the gRPC API, typed, numpy in and out.
- ``zerovec.attach(data_dir, collection)``: in-process, read-only search of the
  segment a server writes, with zero-copy numpy views of its rows (needs the
  compiled extension zerovec._attach; see python/README.md).
"""

from typing import TYPE_CHECKING

from zerovec.errors import *  # noqa: F401,F403
from zerovec.errors import ZeroVecError, error_for  # noqa: F401
from zerovec.types import CollectionInfo, Filter, Fusion, Hit, Item, Recency  # noqa: F401

if TYPE_CHECKING:  # for type checkers; at run time loaded on first use below
    from zerovec.attached import AttachedCollection, attach, resolve_model
    from zerovec.client import Client

__all__ = [  # noqa: F405 (the error classes come from zerovec.errors)
    "Client", "attach", "AttachedCollection", "resolve_model",
    "CollectionInfo", "Filter", "Fusion", "Hit", "Item", "Recency",
    "ZeroVecError", "error_for",
    "InvalidArgumentError", "NotFoundError", "AlreadyExistsError",
    "FailedPreconditionError", "ResourceExhaustedError", "UnauthenticatedError",
    "PermissionDeniedError", "UnavailableError", "DeadlineExceededError",
    "DataLossError", "InternalError",
]


def __getattr__(name):
    # Imported on first use, so the client works without the extension and
    # attach works without grpcio.
    if name in ("Client",):
        from zerovec.client import Client

        return Client
    if name in ("attach", "AttachedCollection", "resolve_model"):
        from zerovec import attached as _attach_module

        return getattr(_attach_module, name)
    raise AttributeError(f"module 'zerovec' has no attribute {name!r}")
