// Appends words to a DynArray<char> while keeping string_views into it, then shows that every view
// is still valid and how much memory the text committed. Usage: stable_addresses [N]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <reservoir/reservoir.hpp>

#include "arguments.hpp"

int main(int argc, char** argv) {
  const char* usage = "stable_addresses [N]   (words: 1..1000000000, default 1000000)";
  example::check_argument_count(argc, 1, usage);
  const std::size_t words =
      example::number_argument(argc, argv, 1, 1'000'000, 1, 1'000'000'000, usage);

  reservoir::DynArray<char> text;       // reserves address space; commits as it grows
  std::vector<std::string_view> views;  // views into `text`, taken while it grows
  for (std::size_t i = 0; i < words; ++i) {
    const std::string word = "word" + std::to_string(i) + " ";
    const std::size_t start = text.size();
    text.append_range(word);
    views.emplace_back(text.data() + start, word.size());
  }
  std::size_t bad = 0;
  for (std::size_t i = 0; i < words; ++i) {
    if (views[i] != "word" + std::to_string(i) + " ") ++bad;
  }
  std::printf("%zu words, %zu bytes of text at %p (never moved)\n", words, text.size(),
              static_cast<const void*>(text.data()));
  std::printf("committed %s, reserved %s\n",
              reservoir::format_bytes(text.arena().committed()).c_str(),
              reservoir::format_bytes(text.arena().reserved()).c_str());
  std::printf("%zu of %zu string_views still valid\n", words - bad, words);
  return bad == 0 ? 0 : 1;
}
