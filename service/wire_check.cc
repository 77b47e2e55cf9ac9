#include "service/wire_check.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <map>
#include <optional>
#include <string>

#include "index/text_rules.h"

namespace zv::service {
namespace {

namespace pb = google::protobuf;
using pb::internal::WireFormatLite;

constexpr int kMaxDepth = 32;

// What the walk found: nothing, a bad string (the status), or bytes that are
// not a message at all.
struct Walk {
  bool malformed = false;
  std::optional<Status> bad;
};

Status BadString(const std::string& field, const Status& rule) {
  return InvalidArgumentError(field + ": " + rule.message());
}

// A map entry: key 1, value 2. Names the key as validation does
// ("metadata key", "metadata[<key>]").
Walk WalkMapEntry(std::string_view entry, const pb::FieldDescriptor& field,
                  const std::string& name) {
  pb::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(entry.data()),
                              static_cast<int>(entry.size()));
  std::string key, value;
  bool has_value = false;
  const bool string_value = field.message_type()->map_value()->type() ==
                            pb::FieldDescriptor::TYPE_STRING;
  while (uint32_t tag = in.ReadTag()) {
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    if (WireFormatLite::GetTagWireType(tag) ==
            WireFormatLite::WIRETYPE_LENGTH_DELIMITED &&
        (number == 1 || (number == 2 && string_value))) {
      std::string* out = number == 1 ? &key : &value;
      if (!WireFormatLite::ReadString(&in, out)) return {true, {}};
      has_value |= number == 2;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return {true, {}};
    }
  }
  if (Status s = index::CheckUtf8(key); !s.ok())
    return {false, BadString(name + " key", s)};
  if (has_value) {
    if (Status s = index::CheckUtf8(value); !s.ok())
      return {false, BadString(name + "[" + key + "]", s)};
  }
  return {};
}

Walk WalkMessage(pb::io::CodedInputStream* in, const pb::Descriptor& type,
                 const std::string& path, int depth) {
  std::map<int, int> seen;  // occurrences of each repeated field so far
  while (uint32_t tag = in->ReadTag()) {
    const pb::FieldDescriptor* f =
        type.FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
    const bool nested =
        f != nullptr && (f->type() == pb::FieldDescriptor::TYPE_STRING ||
                         f->type() == pb::FieldDescriptor::TYPE_MESSAGE);
    if (!nested || WireFormatLite::GetTagWireType(tag) !=
                       WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(in, tag)) return {true, {}};
      continue;
    }
    std::string name = path.empty() ? f->name() : path + "." + f->name();
    if (f->is_repeated() && !f->is_map())
      name += "[" + std::to_string(seen[f->number()]++) + "]";
    if (f->type() == pb::FieldDescriptor::TYPE_STRING) {
      std::string s;
      if (!WireFormatLite::ReadString(in, &s)) return {true, {}};
      if (Status rule = index::CheckUtf8(s); !rule.ok())
        return {false, BadString(name, rule)};
      continue;
    }
    if (f->is_map()) {
      std::string entry;
      if (!WireFormatLite::ReadString(in, &entry)) return {true, {}};
      Walk w = WalkMapEntry(entry, *f, name);
      if (w.malformed || w.bad) return w;
      continue;
    }
    uint32_t length = 0;
    if (depth >= kMaxDepth || !in->ReadVarint32(&length)) return {true, {}};
    const auto limit = in->PushLimit(static_cast<int>(length));
    Walk w = WalkMessage(in, *f->message_type(), name, depth + 1);
    if (w.malformed || w.bad) return w;
    if (!in->ConsumedEntireMessage()) return {true, {}};
    in->PopLimit(limit);
  }
  return {!in->ConsumedEntireMessage(), {}};
}

}  // namespace

ParseLog& ThisThreadParseLog() {
  thread_local ParseLog log;
  return log;
}

Status DiagnoseUnparsedRequest(std::string_view wire,
                               const google::protobuf::Descriptor& type) {
  pb::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(wire.data()),
                              static_cast<int>(wire.size()));
  in.SetRecursionLimit(kMaxDepth);
  Walk w = WalkMessage(&in, type, "", 0);
  if (w.bad) return *w.bad;
  return InternalError("cannot parse the request as " + type.full_name());
}

}  // namespace zv::service
