// A log-linear latency histogram (HdrHistogram style): constant relative precision from 1 ns to
// the largest 64-bit value. Values below 128 get a bucket each; above, every power-of-two range is
// split into 128 equal sub-buckets, so a bucket is at most 1/128 (0.78%) of its lower bound wide
// and a percentile reported at the bucket's midpoint is within 0.4% of a recorded value.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace reservoir::bench {

class LogLinearHistogram {
 public:
  static constexpr unsigned kSubBits = 7;
  static constexpr std::uint64_t kSub = std::uint64_t{1} << kSubBits;  // 128
  static constexpr std::size_t kBuckets = kSub + (64 - kSubBits) * kSub;

  // The decade table of the seed articles: <=1us, <=10us, <=100us, <=1ms, <=10ms, <=100ms, >100ms.
  static constexpr std::array<std::uint64_t, 6> kDecadeLimitsNs = {
      1'000, 10'000, 100'000, 1'000'000, 10'000'000, 100'000'000};
  static constexpr std::size_t kDecades = kDecadeLimitsNs.size() + 1;

  LogLinearHistogram() : counts_(kBuckets, 0) {}

  static std::size_t bucket_of(std::uint64_t v) noexcept {
    if (v < kSub) return static_cast<std::size_t>(v);
    const unsigned msb = static_cast<unsigned>(std::bit_width(v)) - 1;  // >= kSubBits
    const unsigned shift = msb - kSubBits;
    const std::uint64_t mantissa = v >> shift;  // in [kSub, 2*kSub)
    return static_cast<std::size_t>(kSub + shift * kSub + (mantissa - kSub));
  }
  // The smallest and largest value that fall into bucket b.
  static std::uint64_t bucket_low(std::size_t b) noexcept {
    if (b < kSub) return b;
    const std::uint64_t shift = (b - kSub) / kSub;
    const std::uint64_t mantissa = kSub + (b - kSub) % kSub;
    return mantissa << shift;
  }
  static std::uint64_t bucket_high(std::size_t b) noexcept {
    if (b < kSub) return b;
    const std::uint64_t shift = (b - kSub) / kSub;
    return bucket_low(b) + ((std::uint64_t{1} << shift) - 1);
  }

  void record(std::uint64_t v) noexcept {
    ++counts_[bucket_of(v)];
    ++count_;
    min_ = std::min(min_, v);
    max_ = std::max(max_, v);
    std::size_t d = 0;
    while (d < kDecadeLimitsNs.size() && v > kDecadeLimitsNs[d])
      ++d;
    ++decades_[d];
  }

  std::uint64_t count() const noexcept { return count_; }
  std::uint64_t min() const noexcept { return count_ ? min_ : 0; }
  std::uint64_t max() const noexcept { return max_; }
  const std::array<std::uint64_t, kDecades>& decades() const noexcept { return decades_; }

  // The value at percentile p (0..100): the midpoint of the bucket holding the ceil(p% * count)-th
  // smallest value, clamped to [min, max]. 0 for an empty histogram.
  std::uint64_t percentile(double p) const noexcept {
    if (count_ == 0) return 0;
    if (p <= 0) return min();
    if (p >= 100) return max_;
    auto rank = static_cast<std::uint64_t>(p / 100.0 * static_cast<double>(count_) + 0.999999999);
    rank = std::clamp<std::uint64_t>(rank, 1, count_);
    std::uint64_t seen = 0;
    for (std::size_t b = 0; b < kBuckets; ++b) {
      seen += counts_[b];
      if (seen >= rank) {
        const std::uint64_t mid = bucket_low(b) + (bucket_high(b) - bucket_low(b)) / 2;
        return std::clamp(mid, min(), max_);
      }
    }
    return max_;
  }

  void merge(const LogLinearHistogram& o) noexcept {
    for (std::size_t b = 0; b < kBuckets; ++b)
      counts_[b] += o.counts_[b];
    for (std::size_t d = 0; d < kDecades; ++d)
      decades_[d] += o.decades_[d];
    count_ += o.count_;
    min_ = std::min(min_, o.min_);
    max_ = std::max(max_, o.max_);
  }

 private:
  std::vector<std::uint64_t> counts_;
  std::array<std::uint64_t, kDecades> decades_{};
  std::uint64_t count_ = 0;
  std::uint64_t min_ = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t max_ = 0;
};

}  // namespace reservoir::bench
