// What ConcurrentDynArray reports beyond its results: a Writer's unreported loss (the one place
// the library prints), a full array's message, the claim counters (detail/concurrent_reports.hpp).
#include <reservoir/detail/concurrent_reports.hpp>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <reservoir/detail/concurrent_core.hpp>

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

void ConcurrentCore::throw_full(const char* call) const {
  std::string message = std::string("reservoir::ConcurrentDynArray::") + call +
                        ": full at max_size() " + std::to_string(max_size_);
  if (max_size_ == 0) {
    message +=
        ": a default-constructed or moved-from ConcurrentDynArray has no reservation; construct "
        "it with reservoir::max_elements(n) (or move-assign such an array into it)";
  }
  throw std::length_error(message);
}

}  // namespace reservoir::detail
