// What ConcurrentDynArray reports beyond its results: a Writer's unreported loss (the one place
// the library prints) and the claim counters (detail/concurrent_reports.hpp).
#include <reservoir/detail/concurrent_reports.hpp>

#include <cstdio>
#include <cstdlib>

namespace reservoir::detail {

void writer_lost_abort(const void* array, std::size_t count, std::size_t max_size,
                       const char* why) noexcept {
  // The one place the library prints: a loss of the user's data that no exception reported stops
  // the program (unless its writer was made with WriterLoss::count), as a failed check does.
  std::fprintf(stderr,
               "reservoir::ConcurrentDynArray::~Writer: %zu buffered element%s could not be "
               "appended to the array at %p: ",
               count, count == 1 ? "" : "s", array);
  if (why == nullptr) {
    std::fprintf(stderr, "full at max_size() %zu", max_size);
  } else {
    std::fprintf(stderr, "%s", why);
  }
  std::fprintf(stderr,
               ". No flush() had reported it: call flush() before the writer's end and handle "
               "what it throws (take_buffered() hands back what did not fit), or make the writer "
               "with writer(reservoir::WriterLoss::count) to have such elements destroyed and "
               "counted in dropped()\n");
  std::fflush(stderr);
  std::abort();
}

ClaimCounts& claim_counts() noexcept {
  static thread_local ClaimCounts counts;
  return counts;
}

}  // namespace reservoir::detail
