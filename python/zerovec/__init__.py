"""ZeroVec for Python.

- ``zerovec.Client(target, token=...)``: the gRPC API, typed, numpy in and out.
- ``zerovec.attach(data_dir, collection)``: in-process, read-only search of the
  segment a server writes, with zero-copy numpy views of its rows (needs the
  compiled extension zerovec._attach; see python/README.md).
"""

from zerovec.errors import *  # noqa: F401,F403
from zerovec.errors import ZeroVecError, error_for  # noqa: F401
from zerovec.types import CollectionInfo, Filter, Hit, Item  # noqa: F401


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
