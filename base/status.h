// zv::Status and zv::StatusOr<T>: the one error type at every module boundary.
//
// Modelled on absl::Status (same canonical codes, so the service maps them to
// grpc::StatusCode one to one), but our own, in this header and status.cc (code
// names, errno mapping): embed/ and shm/ must also build on the GPU machine,
// which has CUDA, Boost and GoogleTest but no abseil.
#ifndef ZEROVEC_BASE_STATUS_H_
#define ZEROVEC_BASE_STATUS_H_

#include <cassert>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace zv {

// Values equal grpc::StatusCode / absl::StatusCode.
enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

  // Prefixes context ("vectors.00003: ") to the message; keeps the code.
  Status WithContext(std::string_view context) const {
    if (ok()) return *this;
    return Status(code_, std::string(context) + ": " + message_);
  }

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgumentError(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status NotFoundError(std::string m) {
  return Status(StatusCode::kNotFound, std::move(m));
}
inline Status AlreadyExistsError(std::string m) {
  return Status(StatusCode::kAlreadyExists, std::move(m));
}
inline Status PermissionDeniedError(std::string m) {
  return Status(StatusCode::kPermissionDenied, std::move(m));
}
inline Status ResourceExhaustedError(std::string m) {
  return Status(StatusCode::kResourceExhausted, std::move(m));
}
inline Status FailedPreconditionError(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
inline Status OutOfRangeError(std::string m) {
  return Status(StatusCode::kOutOfRange, std::move(m));
}
inline Status UnimplementedError(std::string m) {
  return Status(StatusCode::kUnimplemented, std::move(m));
}
inline Status InternalError(std::string m) {
  return Status(StatusCode::kInternal, std::move(m));
}
inline Status UnavailableError(std::string m) {
  return Status(StatusCode::kUnavailable, std::move(m));
}
inline Status DataLossError(std::string m) {
  return Status(StatusCode::kDataLoss, std::move(m));
}
inline Status CancelledError(std::string m) {
  return Status(StatusCode::kCancelled, std::move(m));
}
inline Status UnauthenticatedError(std::string m) {
  return Status(StatusCode::kUnauthenticated, std::move(m));
}

// Errno-based I/O failure: ENOSPC/EDQUOT/EFBIG become RESOURCE_EXHAUSTED,
// EACCES/EPERM PERMISSION_DENIED, ENOENT NOT_FOUND, everything else INTERNAL.
Status ErrnoError(int err, std::string_view what);

// A value or the error that prevented it.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status)
      : status_(status) {  // NOLINT: implicit by design
    assert(!status.ok() && "StatusOr needs a value or an error");
    if (status_.ok()) status_ = InternalError("StatusOr built from OK status");
  }
  StatusOr(Status&& status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "StatusOr needs a value or an error");
    if (status_.ok()) status_ = InternalError("StatusOr built from OK status");
  }
  StatusOr(const T& value) : value_(value) {}        // NOLINT
  StatusOr(T&& value) : value_(std::move(value)) {}  // NOLINT
  template <typename U, typename = std::enable_if_t<
                            std::is_convertible_v<U&&, T> &&
                            !std::is_same_v<std::decay_t<U>, Status> &&
                            !std::is_same_v<std::decay_t<U>, T>>>
  StatusOr(U&& value) : value_(std::forward<U>(value)) {}  // NOLINT

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

std::ostream& operator<<(std::ostream& os, const Status& status);

}  // namespace zv

#define ZV_CONCAT_INNER_(a, b) a##b
#define ZV_CONCAT_(a, b) ZV_CONCAT_INNER_(a, b)

// Returns the error from the enclosing function if `expr` is not OK.
#define ZV_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::zv::Status zv_status_ = (expr);        \
    if (!zv_status_.ok()) return zv_status_; \
  } while (0)

// `ZV_ASSIGN_OR_RETURN(auto x, MakeX());` unwraps a StatusOr or returns its
// error.
#define ZV_ASSIGN_OR_RETURN(lhs, expr) \
  ZV_ASSIGN_OR_RETURN_IMPL_(ZV_CONCAT_(zv_statusor_, __LINE__), lhs, expr)
#define ZV_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#endif  // ZEROVEC_BASE_STATUS_H_
