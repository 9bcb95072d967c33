#include "bdn/base/backoff.h"

#include <algorithm>
#include <random>

namespace bdn::backoff {

std::chrono::milliseconds Jitter(std::chrono::milliseconds b) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  int64_t hi = std::max<int64_t>(b.count(), 0);
  std::uniform_int_distribution<int64_t> d(hi / 2, hi);
  return std::chrono::milliseconds(d(rng));
}

}  // namespace bdn::backoff
