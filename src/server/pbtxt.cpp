// Protobuf text-format reader: a tokenizer and a recursive-descent parser over it.
#include "server/pbtxt.h"

#include <cctype>

namespace gpuopt::server {
namespace {

enum class Tok { kEnd, kIdent, kNumber, kString, kPunct };

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;
  int line = 1;
};

class Lexer {
 public:
  Lexer(std::string_view s, const std::string& src) : s_(s), src_(src) {}

  Status next(Token* t) {
    skip_space();
    t->line = line_;
    t->text.clear();
    if (i_ >= s_.size()) {
      t->kind = Tok::kEnd;
      return Status::Ok();
    }
    char c = s_[i_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i_;
      while (j < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '_' || s_[j] == '.')) ++j;
      t->kind = Tok::kIdent;
      t->text = std::string(s_.substr(i_, j - i_));
      i_ = j;
      return Status::Ok();
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.') {
      size_t j = i_ + 1;
      while (j < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '.' ||
                               ((s_[j] == '-' || s_[j] == '+') && (s_[j - 1] == 'e' || s_[j - 1] == 'E'))))
        ++j;
      t->kind = Tok::kNumber;
      t->text = std::string(s_.substr(i_, j - i_));
      i_ = j;
      return Status::Ok();
    }
    if (c == '"' || c == '\'') {
      size_t j = i_ + 1;
      std::string out;
      while (j < s_.size() && s_[j] != c) {
        if (s_[j] == '\n') return error("unterminated string");
        if (s_[j] == '\\' && j + 1 < s_.size()) {
          char e = s_[j + 1];
          switch (e) {
            case 'n':
              out.push_back('\n');
              break;
            case 't':
              out.push_back('\t');
              break;
            case 'r':
              out.push_back('\r');
              break;
            default:
              out.push_back(e);
              break;
          }
          j += 2;
          continue;
        }
        out.push_back(s_[j++]);
      }
      if (j >= s_.size()) return error("unterminated string");
      i_ = j + 1;
      t->kind = Tok::kString;
      t->text = std::move(out);
      return Status::Ok();
    }
    if (std::string_view("{}[]<>:,;").find(c) != std::string_view::npos) {
      t->kind = Tok::kPunct;
      t->text = std::string(1, c);
      ++i_;
      return Status::Ok();
    }
    return error(fmt::format("unexpected character '{}'", c));
  }

  Status error(const std::string& what) const { return Status::InvalidArgument("{}:{}: {}", src_, line_, what); }

 private:
  void skip_space() {
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == '\n') {
        ++line_;
        ++i_;
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        ++i_;
      } else if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  std::string_view s_;
  const std::string& src_;
  size_t i_ = 0;
  int line_ = 1;
};

class Parser {
 public:
  Parser(std::string_view s, const std::string& src) : lex_(s, src), src_(src) {}

  Result<PbMessage> parse() {
    GPUOPT_RETURN_IF_ERROR(advance());
    PbMessage m;
    GPUOPT_RETURN_IF_ERROR(parse_fields(&m, ""));
    return m;
  }

 private:
  Status advance() { return lex_.next(&tok_); }
  bool is_punct(const char* p) const { return tok_.kind == Tok::kPunct && tok_.text == p; }
  Status error(int line, const std::string& what) const {
    return Status::InvalidArgument("{}:{}: {}", src_, line, what);
  }

  // Fields until `close` ("" = end of input).
  Status parse_fields(PbMessage* m, const char* close) {
    if (++depth_ > 64) return error(tok_.line, "messages nested too deeply");
    for (;;) {
      if (*close == 0 && tok_.kind == Tok::kEnd) break;
      if (*close != 0 && is_punct(close)) break;
      if (tok_.kind == Tok::kEnd) return error(tok_.line, fmt::format("missing '{}' at end of file", close));
      if (tok_.kind != Tok::kIdent)
        return error(tok_.line, fmt::format("expected a field name, found '{}'", tok_.text));
      std::string name = tok_.text;
      int line = tok_.line;
      GPUOPT_RETURN_IF_ERROR(advance());
      bool colon = is_punct(":");
      if (colon) GPUOPT_RETURN_IF_ERROR(advance());
      if (is_punct("[")) {
        // `input [ {...} ]` without ':' is what Triton's own examples write.
        GPUOPT_RETURN_IF_ERROR(advance());
        while (!is_punct("]")) {
          GPUOPT_RETURN_IF_ERROR(parse_value(m, name, tok_.line, true));
          if (is_punct(",")) {
            GPUOPT_RETURN_IF_ERROR(advance());
          } else if (!is_punct("]")) {
            return error(tok_.line, fmt::format("expected ',' or ']' in the list '{}'", name));
          }
        }
        GPUOPT_RETURN_IF_ERROR(advance());
      } else {
        if (!colon && !is_punct("{") && !is_punct("<"))
          return error(line, fmt::format("expected ':' or '{{' after '{}'", name));
        GPUOPT_RETURN_IF_ERROR(parse_value(m, name, line, colon));
      }
      if (is_punct(",") || is_punct(";")) GPUOPT_RETURN_IF_ERROR(advance());
    }
    --depth_;
    return Status::Ok();
  }

  Status parse_value(PbMessage* m, const std::string& name, int line, bool allow_scalar) {
    PbField f;
    f.name = name;
    f.line = line;
    if (is_punct("{") || is_punct("<")) {
      const char* close = is_punct("{") ? "}" : ">";
      GPUOPT_RETURN_IF_ERROR(advance());
      f.is_message = true;
      f.message = std::make_shared<PbMessage>();
      GPUOPT_RETURN_IF_ERROR(parse_fields(f.message.get(), close));
      GPUOPT_RETURN_IF_ERROR(advance());
    } else if (allow_scalar && (tok_.kind == Tok::kIdent || tok_.kind == Tok::kNumber || tok_.kind == Tok::kString)) {
      f.is_string = tok_.kind == Tok::kString;
      f.scalar = tok_.text;
      GPUOPT_RETURN_IF_ERROR(advance());
      // Adjacent string literals concatenate, as in protobuf.
      while (f.is_string && tok_.kind == Tok::kString) {
        f.scalar += tok_.text;
        GPUOPT_RETURN_IF_ERROR(advance());
      }
    } else {
      return error(tok_.line, fmt::format("expected a value for '{}', found '{}'", name,
                                          tok_.kind == Tok::kEnd ? "end of file" : tok_.text));
    }
    m->fields.push_back(std::move(f));
    return Status::Ok();
  }

  Lexer lex_;
  const std::string& src_;
  Token tok_;
  int depth_ = 0;
};

}  // namespace

Result<PbMessage> parse_pbtxt(std::string_view text, const std::string& source_name) {
  Parser p(text, source_name);
  return p.parse();
}

}  // namespace gpuopt::server
