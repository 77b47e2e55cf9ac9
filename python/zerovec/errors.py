"""Exceptions raised by the client and by attach: one class per gRPC status code.

Every error keeps the server's (or the C++ library's) message unchanged, e.g.
``InvalidArgumentError("items[0].vector: expected 384 values, got 3")``, and its
``code`` ("INVALID_ARGUMENT"), so callers can catch broadly (``ZeroVecError``)
or precisely.
"""


class ZeroVecError(Exception):
    """Base of every ZeroVec error. ``code`` is the gRPC status code's name."""

    code = "UNKNOWN"

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self):
        return f"{self.code}: {self.message}"


class InvalidArgumentError(ZeroVecError, ValueError):
    code = "INVALID_ARGUMENT"


class NotFoundError(ZeroVecError, LookupError):
    code = "NOT_FOUND"


class AlreadyExistsError(ZeroVecError):
    code = "ALREADY_EXISTS"


class FailedPreconditionError(ZeroVecError):
    code = "FAILED_PRECONDITION"


class ResourceExhaustedError(ZeroVecError):
    code = "RESOURCE_EXHAUSTED"


class UnauthenticatedError(ZeroVecError, PermissionError):
    code = "UNAUTHENTICATED"


class PermissionDeniedError(ZeroVecError, PermissionError):
    code = "PERMISSION_DENIED"


class UnavailableError(ZeroVecError, ConnectionError):
    code = "UNAVAILABLE"


class DeadlineExceededError(ZeroVecError, TimeoutError):
    code = "DEADLINE_EXCEEDED"


class DataLossError(ZeroVecError):
    code = "DATA_LOSS"


class InternalError(ZeroVecError):
    code = "INTERNAL"


_BY_CODE = {
    cls.code: cls
    for cls in (
        InvalidArgumentError,
        NotFoundError,
        AlreadyExistsError,
        FailedPreconditionError,
        ResourceExhaustedError,
        UnauthenticatedError,
        PermissionDeniedError,
        UnavailableError,
        DeadlineExceededError,
        DataLossError,
        InternalError,
    )
}


def error_for(code, message):
    """The exception for a status code name ("NOT_FOUND") and its message."""
    cls = _BY_CODE.get(code, ZeroVecError)
    return cls(message, code=code)
