// A minimal JSON reader (objects, arrays, strings, numbers, true/false/null): the bench's
// compare command reads its own files with it, and the tests check them with it. It recurses once
// per nesting level, so it refuses input nested deeper than kMaxDepth (a clear error, not a stack
// overflow); the bench's own files nest four levels deep.
#pragma once

#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace reservoir::bench::json {

struct Value {
  enum class Kind { null, boolean, number, string, array, object } kind = Kind::null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Value> arr;
  std::map<std::string, Value> obj;

  const Value& operator[](const std::string& key) const {
    auto it = obj.find(key);
    if (kind != Kind::object || it == obj.end()) throw std::out_of_range("no key " + key);
    return it->second;
  }
  bool has(const std::string& key) const { return kind == Kind::object && obj.count(key) > 0; }
};

// The deepest nesting of arrays and objects the reader accepts.
inline constexpr int kMaxDepth = 256;

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}
  Value parse() {
    Value v = value();
    skip();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    throw std::runtime_error("JSON: " + why + " at offset " + std::to_string(i_));
  }
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  std::string string() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\') {
        ++i_;
        if (i_ >= s_.size()) fail("bad escape");
        const char e = s_[i_];
        if (e == 'u') {
          out += static_cast<char>(std::strtol(s_.substr(i_ + 1, 4).c_str(), nullptr, 16));
          i_ += 4;
        } else {
          out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        }
        ++i_;
      } else {
        out += s_[i_++];
      }
    }
    expect('"');
    return out;
  }
  Value value() {
    skip();
    Value v;
    if (i_ >= s_.size()) fail("unexpected end");
    const char c = s_[i_];
    if ((c == '{' || c == '[') && ++depth_ > kMaxDepth) {
      fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    if (c == '{') {
      ++i_;
      v.kind = Value::Kind::object;
      if (!eat('}')) {
        do {
          skip();
          std::string k = string();
          expect(':');
          v.obj[k] = value();
        } while (eat(','));
        expect('}');
      }
      --depth_;
    } else if (c == '[') {
      ++i_;
      v.kind = Value::Kind::array;
      if (!eat(']')) {
        do {
          v.arr.push_back(value());
        } while (eat(','));
        expect(']');
      }
      --depth_;
    } else if (c == '"') {
      v.kind = Value::Kind::string;
      v.str = string();
    } else if (s_.compare(i_, 4, "true") == 0 || s_.compare(i_, 5, "false") == 0) {
      v.kind = Value::Kind::boolean;
      v.b = s_[i_] == 't';
      i_ += v.b ? 4 : 5;
    } else if (s_.compare(i_, 4, "null") == 0) {
      i_ += 4;
    } else {
      char* end = nullptr;
      v.kind = Value::Kind::number;
      v.num = std::strtod(s_.c_str() + i_, &end);
      if (end == s_.c_str() + i_) fail("bad value");
      i_ = static_cast<std::size_t>(end - s_.c_str());
    }
    return v;
  }

  const std::string& s_;
  std::size_t i_ = 0;
  int depth_ = 0;  // arrays and objects open at i_
};

inline Value parse(const std::string& text) {
  return Parser(text).parse();
}

}  // namespace reservoir::bench::json
