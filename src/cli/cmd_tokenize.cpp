// `gpuopt tokenize TOKENIZER_JSON`: text -> token ids (or ids -> text with --decode) through a
// Hugging Face tokenizer.json (src/llm/tokenizer.h), like llama.cpp's llama-tokenize. Reads stdin:
// one text (or one line of space-separated ids) per line, or with --json one JSON list of them, so
// one process serves a whole batch (the Python tests compare it with the `tokenizers` library).
#include "cli/command.h"
#include "llm/tokenizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <iostream>
#include <iterator>
#include <sstream>

namespace gpuopt::cli {
namespace {

using json = nlohmann::json;

struct Options {
  std::string tokenizer;
  bool decode = false, no_special = false, json = false, stream = false;
};

Result<std::vector<int64_t>> parse_ids(std::string_view line, size_t line_no) {
  std::vector<int64_t> ids;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == ',' || line[i] == '\r')) ++i;
    if (i == line.size()) break;
    int64_t v = 0;
    auto [p, ec] = std::from_chars(line.data() + i, line.data() + line.size(), v);
    if (ec != std::errc() || v < 0) {
      return Status::InvalidArgument("stdin line {}: '{}' is not a token id", line_no, line.substr(i, 20));
    }
    ids.push_back(v);
    i = static_cast<size_t>(p - line.data());
  }
  return ids;
}

Result<std::vector<int64_t>> ids_of(const json& j, size_t k) {
  if (!j.is_array()) return Status::InvalidArgument("stdin: item {} is not a list of token ids", k);
  std::vector<int64_t> ids;
  for (const auto& v : j) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return Status::InvalidArgument("stdin: item {} holds {}, not a token id", k, v.dump());
    }
    ids.push_back(v.get<int64_t>());
  }
  return ids;
}

std::vector<std::string> stream_pieces(const llm::Tokenizer& tok, const std::vector<int64_t>& ids, bool skip) {
  llm::IncrementalDecoder dec(tok, skip);
  std::vector<std::string> pieces;
  for (int64_t id : ids) pieces.push_back(dec.push(id));
  pieces.push_back(dec.flush());
  return pieces;
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

int run(const Options& o) {
  auto tok = llm::Tokenizer::from_file(o.tokenizer);
  if (!tok.ok()) return report_error(tok.status());
  const llm::Tokenizer& t = **tok;
  const bool special = !o.no_special;
  if (o.json) {
    std::string in((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    json items;
    try {
      items = json::parse(in);
    } catch (const json::exception& e) {
      return report_error(Status::InvalidArgument("stdin: invalid JSON: {}", e.what()));
    }
    if (!items.is_array()) return report_error(Status::InvalidArgument("stdin: not a JSON list"));
    json out = json::array();
    for (size_t k = 0; k < items.size(); ++k) {
      if (o.decode) {
        auto ids = ids_of(items[k], k);
        if (!ids.ok()) return report_error(ids.status());
        if (o.stream)
          out.push_back(stream_pieces(t, *ids, !special));
        else
          out.push_back(t.decode(*ids, !special));
      } else {
        if (!items[k].is_string()) return report_error(Status::InvalidArgument("stdin: item {} is not a string", k));
        out.push_back(t.encode(items[k].get_ref<const std::string&>(), special));
      }
    }
    fmt::print("{}\n", dump(out));
    return kExitOk;
  }
  std::string line;
  for (size_t line_no = 1; std::getline(std::cin, line); ++line_no) {
    if (o.decode) {
      auto ids = parse_ids(line, line_no);
      if (!ids.ok()) return report_error(ids.status());
      if (o.stream)
        fmt::print("{}\n", dump(stream_pieces(t, *ids, !special)));
      else
        fmt::print("{}\n", t.decode(*ids, !special));
    } else {
      fmt::print("{}\n", fmt::join(t.encode(line, special), " "));
    }
    std::fflush(stdout);  // one answer per line, for a caller that talks to it line by line
  }
  return kExitOk;
}

void setup(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Text to token ids (or back) with a Hugging Face tokenizer.json");
  auto o = std::make_shared<Options>();
  cmd->add_option("tokenizer", o->tokenizer, "tokenizer.json (Hugging Face tokenizers format)")->required();
  auto* decode = cmd->add_flag("--decode", o->decode, "Read ids (space-separated per line, or JSON lists), print text");
  cmd->add_flag("--no-special", o->no_special,
                "Encode without the post-processor's BOS/EOS; decode without special tokens");
  cmd->add_flag("--json", o->json,
                "stdin is one JSON list (of strings, or of id lists with --decode); print one JSON list");
  cmd->add_flag("--stream", o->stream,
                "With --decode: print the pieces the streaming decoder emits per id (then its flush) as JSON")
      ->needs(decode);
  cmd->callback([o] { set_exit_code(run(*o)); });
}
GPUOPT_REGISTER_COMMAND(85, setup);

}  // namespace
}  // namespace gpuopt::cli
