// Why a request that protobuf refused to parse was refused. proto3 rejects a
// string field holding invalid UTF-8 while parsing, before the service's
// validation runs, and gRPC would answer INTERNAL with an empty message; this
// names the field the way validation does ("items[3].text").
#ifndef ZEROVEC_SERVICE_WIRE_CHECK_H_
#define ZEROVEC_SERVICE_WIRE_CHECK_H_

#include <google/protobuf/descriptor.h>

#include <optional>
#include <string_view>

#include "base/status.h"

namespace zv::service {

// `wire` did not parse as `type`: INVALID_ARGUMENT "<field>: not valid UTF-8
// (byte N)" for the first string field breaking index::CheckUtf8, else
// INTERNAL "cannot parse the request as <type>".
Status DiagnoseUnparsedRequest(std::string_view wire,
                               const google::protobuf::Descriptor& type);

// This thread's request parses, noted by request_traits.h: a streaming
// handler's Read just returns false on a refused message, as at the stream's
// end, and the reason is only here.
struct ParseLog {
  int parsed = 0;                 // requests read successfully
  std::optional<Status> refused;  // the last refused one's reason
};
ParseLog& ThisThreadParseLog();

}  // namespace zv::service

#endif  // ZEROVEC_SERVICE_WIRE_CHECK_H_
