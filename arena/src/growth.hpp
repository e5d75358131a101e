// The growth policy: every decision of how an Arena's committed prefix grows, made in one place
// and once per growth. plan_growth() gives the step (its size, target, what to populate and
// charge), the smaller step to retry with if the OS refuses it, and whether huge pages are
// advised, asking the machine's huge-page setting itself where the answer can change the step;
// the constants beside it say what a parked reservation keeps committed and which ranges are worth
// a populate call. The rules in prose: docs/big-arrays.md#commit-steps. It calls nothing: the
// Arena (arena_commit.cpp) takes the steps, the provider parks by parked_keep(), populate.cpp
// asks populate_by_call().
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>

#include <reservoir/growth_policy.hpp>

namespace reservoir::detail {

// The smallest range backed by a populate call (MADV_POPULATE_WRITE) rather than by its stores
// alone: smaller ranges cost a few page faults, less than the call. Equal to kDoublingStepLimit so
// that every step past the doubling ones is one call and the doubling ones take none.
inline constexpr std::size_t kLeastPopulateCall = kDoublingStepLimit;

constexpr bool populate_by_call(std::size_t bytes) noexcept {
  return bytes >= kLeastPopulateCall;
}

// What a parked reservation keeps committed (whole granules, at least one): the doubling steps up
// to kDoublingStepLimit, which the next arena then takes with no commit call and no page fault;
// no more than one max_commit_step, so fixed small steps stay small.
constexpr std::size_t parked_keep(std::size_t granule, std::size_t max_step) noexcept {
  const std::size_t most = (std::min)(kDoublingStepLimit, max_step);
  return (std::max)(granule, most - most % granule);
}

// What the growth policy knows of an arena when it commits.
struct GrowthState {
  std::size_t committed = 0;
  std::size_t reserved = 0;
  std::size_t granule = 0;   // the first step (0: an empty arena, which has no step)
  std::size_t max_step = 0;  // the largest step, whole granules
  bool prefault = true;
  bool limit_in_force = false;  // respect_memory_limit, and a memory limit in force
  // ArenaOptions::huge_pages, and what says whether they are in effect (huge_pages_in_effect(),
  // which reads the machine's settings): asked at most once a plan, only where the answer can
  // change the step.
  bool huge_pages = false;
  bool (*huge_pages_in_effect)() noexcept = nullptr;
};

// One commit step as the policy plans it.
struct PlannedStep {
  std::size_t step = 0;       // the step size (Arena::commit_step())
  std::size_t target = 0;     // the committed length after it (<= committed: nothing to commit)
  std::size_t populated = 0;  // bytes of it populated now
  std::size_t charge = 0;     // bytes of it charged against the memory limit and the machine
  std::size_t must_back = 0;  // bytes of it the machine must back: populated now or written next
  bool geometric = false;     // the geometric policy (a refused step may be retried smaller)
  bool advise_huge = false;   // it reaches past kHugePageThreshold first: advise huge pages
};

// One growth: the step, and the step to take if the OS or the limit refuses it.
struct GrowthPlan {
  PlannedStep step;
  // The smallest step that holds the request (whole granules), for a refused geometric step;
  // its target is 0 (no retry) where that saves less than kPopulatedStepLimit.
  PlannedStep retry;
  bool huge_pages = false;  // huge pages were found in effect (false where not asked)
};

namespace growth {

// The target: whole `unit`s past `bytes`, capped at the end of the reservation.
constexpr std::size_t target_in(const GrowthState& s, std::size_t bytes,
                                std::size_t unit) noexcept {
  const std::size_t rem = bytes % unit;
  if (rem == 0) return bytes < s.reserved ? bytes : s.reserved;
  if (bytes > static_cast<std::size_t>(-1) - (unit - rem)) return s.reserved;
  return (std::min)(bytes + (unit - rem), s.reserved);
}

// What a step to p->target populates, charges and must back, and whether it advises huge pages.
constexpr void finish(const GrowthState& s, std::size_t bytes, Populate populate, bool huge,
                      PlannedStep* p) noexcept {
  if (p->target <= s.committed) return;
  // What to populate now: all of the step, its first kPopulatedStepLimit, or nothing. Under huge
  // pages nothing past kHugePageThreshold (first touches map 2 MiB pages there, one fault each),
  // and below it a doubling step backs at most half of itself beyond what was asked for, so RSS
  // stays within 1.5x of the bytes in use. (Below kDoublingStepLimit an arena does not ask
  // whether huge pages are in effect, so its steps are populated whole, as without them.)
  const std::size_t len = p->target - s.committed;
  const std::size_t asked = (std::min)(len, bytes > s.committed ? bytes - s.committed : 0);
  const std::size_t first = (std::min)(len, kPopulatedStepLimit);
  p->populated = populate == Populate::all ? len : populate == Populate::none ? 0 : first;
  const bool huge_here = huge && s.reserved > kHugePageThreshold;
  if (huge_here && p->geometric) {
    const std::size_t below = s.committed < kHugePageThreshold
                                  ? (std::min)(p->target, kHugePageThreshold) - s.committed
                                  : 0;
    p->populated = (std::min)({p->populated, below, (std::max)(asked, len / 2)});
  }
  // Without prefault nothing is populated ahead, except under a memory limit: there every step
  // is populated as it is charged, so that the next reading of the usage sees it.
  if (!s.prefault && !s.limit_in_force) p->populated = 0;
  // What to charge: what is populated now or (all) written next; untouched pages cost nothing.
  // A geometric step is taken only where no limit is in force, and there the charge is the
  // machine check alone, of the bytes asked for.
  p->charge = p->geometric ? (std::max)(p->populated, populate == Populate::all ? asked : 0)
              : s.prefault ? p->populated
              : populate == Populate::none ? 0
              : populate == Populate::all  ? len
                                           : first;
  // What the machine must back for it: all of a step being filled (appends, Populate::all), what
  // a reserve populates (Populate::first_step), nothing for Populate::none.
  p->must_back = (std::max)(p->charge, populate == Populate::all    ? len
                                       : populate == Populate::none ? std::size_t{0}
                                                                    : first);
  p->advise_huge = huge_here && s.committed <= kHugePageThreshold && p->target > kHugePageThreshold;
}

}  // namespace growth

// The growth policy: the step that commits past `bytes` (a request of `populate`), and its retry.
// ArenaOptions::max_commit_step describes the two policies:
//   - geometric where committing is a permission change only (prefault off, or huge pages in
//     effect) and no memory limit is in force: each step doubles the committed prefix;
//   - bounded otherwise: doubling up to kDoublingStepLimit, then at least that and at least
//     committed/8, never more than kBoundedStepLimit.
// Whether huge pages are in effect is asked only where the answer can change the step: with
// prefault, from kDoublingStepLimit on (below it both policies take the same doubling steps);
// without it, once there is a step to take that reaches past kHugePageThreshold (below it nothing
// is advised and nothing populated either way, so an array of up to 4 MiB reads nothing of the
// machine's huge-page setting).
constexpr GrowthPlan plan_growth(const GrowthState& s, std::size_t bytes,
                                 Populate populate) noexcept {
  GrowthPlan plan;
  PlannedStep& p = plan.step;
  const std::size_t g = s.granule;
  if (g == 0) return plan;
  const auto ask_huge = [&] {
    return s.huge_pages && s.huge_pages_in_effect != nullptr && s.huge_pages_in_effect();
  };
  if (s.prefault)
    plan.huge_pages = (std::max)(bytes, s.committed) >= kDoublingStepLimit && ask_huge();
  p.geometric = !s.limit_in_force && (!s.prefault || plan.huge_pages);
  // 1. The step: a power-of-two number of granules, at most max_step.
  const std::size_t held = s.committed / g;
  if (p.geometric) {
    p.step = (std::min)(g * std::bit_floor((std::max<std::size_t>)(held, 1)), s.max_step);
  } else {
    std::size_t step = g;  // at least one granule; small arenas double; large ones take 1/8
    if (held > 1)
      step = (std::max)(step, g * std::bit_floor((std::min)(
                                      held, (std::max)(kDoublingStepLimit / g, std::size_t{1}))));
    if (const std::size_t eighth = s.committed / 8 / g; eighth > 1)
      step = (std::max)(step, g * std::bit_floor(eighth));
    const std::size_t cap = (std::max)(g, kBoundedStepLimit - kBoundedStepLimit % g);
    p.step = (std::min)({step, cap, s.max_step});
  }
  // 2. The target: whole steps past `bytes`, capped at the end; the retry's, whole granules.
  p.target = growth::target_in(s, bytes, p.step);
  if (p.target <= s.committed) return plan;
  if (!s.prefault) plan.huge_pages = p.target > kHugePageThreshold && ask_huge();
  growth::finish(s, bytes, populate, plan.huge_pages, &p);
  if (p.geometric) {
    PlannedStep& r = plan.retry;
    r.step = p.step;
    r.geometric = true;
    const std::size_t least = growth::target_in(s, bytes, g);
    r.target = least < p.target && p.target - least >= kPopulatedStepLimit ? least : 0;
    growth::finish(s, bytes, populate, plan.huge_pages, &r);
  }
  return plan;
}

}  // namespace reservoir::detail
