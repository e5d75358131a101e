// Tokens that point at each other: every identifier token keeps a plain pointer to the previous
// occurrence of the same identifier. The pointers stay valid while the token array grows, because
// a DynArray never moves its elements.
//   token_stream [N]     (tokenizes N generated statements; default 200000)
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_map>

#include <reservoir/reservoir.hpp>

#include "arguments.hpp"

struct Token {
  enum Kind { identifier, number, symbol } kind;
  std::string_view text;      // into the source DynArray<char>
  const Token* previous_use;  // the same identifier's previous token, or nullptr
};

int main(int argc, char** argv) {
  const char* usage = "token_stream [N]   (statements: 1..100000000, default 200000)";
  example::check_argument_count(argc, 1, usage);
  const auto statements =
      static_cast<long>(example::number_argument(argc, argv, 1, 200'000, 1, 100'000'000, usage));

  // 1. A source text, generated: "x3 = x1 + 42 ;" ...
  reservoir::DynArray<char> source;
  for (long i = 0; i < statements; ++i) {
    std::string s = "x";  // appended piece by piece (GCC 12's -Wrestrict dislikes "x" + str)
    s += std::to_string(i % 97);
    s += " = x";
    s += std::to_string((i * 7) % 97);
    s += " + ";
    s += std::to_string(i);
    s += " ;\n";
    source.append_range(s);
  }

  // 2. Tokenize; link each identifier to its previous use through a pointer.
  reservoir::DynArray<Token> tokens;
  std::unordered_map<std::string_view, const Token*> last_use;
  const std::string_view src(source.data(), source.size());
  for (std::size_t i = 0; i < src.size();) {
    const char c = src[i];
    if (c == ' ' || c == '\n') {
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    Token::Kind kind = Token::symbol;
    if (std::isalpha(static_cast<unsigned char>(c))) {
      kind = Token::identifier;
      while (j < src.size() && std::isalnum(static_cast<unsigned char>(src[j])))
        ++j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      kind = Token::number;
      while (j < src.size() && std::isdigit(static_cast<unsigned char>(src[j])))
        ++j;
    }
    const std::string_view text = src.substr(i, j - i);
    const Token* prev = nullptr;
    if (kind == Token::identifier) prev = last_use.count(text) ? last_use[text] : nullptr;
    Token& t = tokens.emplace_back(Token{kind, text, prev});
    if (kind == Token::identifier) last_use[text] = &t;  // a pointer into a growing array
    i = j;
  }

  // 3. Walk every chain: each link must lead to an earlier token with the same text.
  std::size_t links = 0;
  for (const Token& t : tokens) {
    for (const Token* p = t.previous_use; p; p = p->previous_use) {
      if (p >= &t || p->text != t.text) {
        std::fprintf(stderr, "broken link\n");
        return 1;
      }
      ++links;
      break;
    }
  }
  std::printf("%zu tokens from %zu bytes, %zu identifier links, all valid\n", tokens.size(),
              source.size(), links);
  return tokens.empty() ? 1 : 0;
}
