// A small reader for the protobuf text format (what Triton's config.pbtxt is written in):
// `name: value`, `name { ... }` / `name: { ... }` / `name < ... >`, lists `name: [a, b]` and
// `name: [{...}, {...}]`, strings in '' or "", `#` comments, optional `,`/`;` separators.
// It builds a schema-free tree; model_config.cpp gives the fields meaning.
//
//   GPUOPT_ASSIGN_OR_RETURN(PbMessage m, parse_pbtxt(text, "simple/config.pbtxt"));
//   for (const PbField& f : m.fields) if (f.name == "max_batch_size") ...
#pragma once

#include "core/status.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpuopt::server {

struct PbField;

struct PbMessage {
  std::vector<PbField> fields;  // in file order; repeated fields appear once per value
};

struct PbField {
  std::string name;
  int line = 0;
  bool is_message = false;
  bool is_string = false;  // scalar came from a quoted string
  std::string scalar;      // number, identifier (enum, true/false) or unquoted string contents
  std::shared_ptr<PbMessage> message;
};

// Errors name the file and line: "simple/config.pbtxt:7: expected ':' or '{' after 'dims'".
Result<PbMessage> parse_pbtxt(std::string_view text, const std::string& source_name);

}  // namespace gpuopt::server
