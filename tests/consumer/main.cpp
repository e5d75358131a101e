// Uses every public header the way a consumer would.
#include <cstdio>
#include <memory_resource>
#include <string_view>
#include <vector>

#include <reservoir/reservoir.hpp>

// The standard the build asked for (test-consumers.sh passes it): the package's flags must keep it.
#ifdef RESERVOIR_CONSUMER_EXPECT_CXX
static_assert(__cplusplus >= RESERVOIR_CONSUMER_EXPECT_CXX,
              "the package's compile flags changed the consumer's language standard");
#endif

int main() {
  static_assert(RESERVOIR_VERSION_MAJOR == 0);
  reservoir::DynArray<char> text;
  std::vector<std::string_view> views;
  for (int i = 0; i < 100000; ++i) {
    const std::size_t at = text.size();
    text.append_range(std::string_view("stable "));
    views.emplace_back(text.data() + at, 7);
  }
  for (std::string_view v : views) {
    if (v != "stable ") return 1;
  }
  reservoir::ArenaResource resource(1u << 20);
  std::pmr::vector<int> numbers({1, 2, 3}, &resource);
  std::printf("consumer: %zu views valid, page size %zu, pmr sum %d\n", views.size(),
              reservoir::pal::page_size(), numbers[0] + numbers[1] + numbers[2]);
  return 0;
}
