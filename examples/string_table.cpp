// The motivating case: read a text file line by line into one growing DynArray<char> and keep a
// std::string_view to every word while it grows. With std::vector<char> every view would dangle
// at the first reallocation; here none ever does.
//   string_table FILE
#include <cctype>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <reservoir/reservoir.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: string_table FILE\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "string_table: cannot open %s\n", argv[1]);
    return 2;
  }

  reservoir::DynArray<char> text;                    // all the words, back to back
  std::vector<std::string_view> words;               // views into `text`
  std::unordered_map<std::string_view, int> counts;  // keyed by the same views

  std::string line;
  while (std::getline(in, line)) {
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && !std::isalnum(static_cast<unsigned char>(line[i])))
        ++i;
      std::size_t j = i;
      while (j < line.size() && std::isalnum(static_cast<unsigned char>(line[j])))
        ++j;
      if (j > i) {
        const std::size_t at = text.size();
        text.append_range(std::string_view(line).substr(i, j - i));  // may commit more pages...
        const std::string_view word(text.data() + at, j - i);        // ...but never moves
        words.push_back(word);
        ++counts[word];
      }
      i = j;
    }
  }

  // Every view taken while the array grew still reads the word it was given.
  std::size_t offset = 0;
  for (std::string_view w : words) {
    if (w.data() != text.data() + offset) {
      std::fprintf(stderr, "a view moved!\n");
      return 1;
    }
    offset += w.size();
  }
  std::string_view top;
  int top_count = 0;
  for (const auto& [w, c] : counts) {
    if (c > top_count || (c == top_count && w < top)) top = w, top_count = c;
  }
  std::printf("%zu words (%zu distinct) in %zu bytes; all views valid\n", words.size(),
              counts.size(), text.size());
  std::printf("most frequent: \"%.*s\" x%d\n", static_cast<int>(top.size()), top.data(), top_count);
  return words.empty() ? 1 : 0;
}
