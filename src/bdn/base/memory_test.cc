#include "bdn/base/memory.h"

#include <gtest/gtest.h>

namespace bdn {
namespace {

TEST(TunablesForHugePageHeap, AddsTheTunableUnderMadviseMode) {
  EXPECT_EQ(TunablesForHugePageHeap("always [madvise] never\n", nullptr), "glibc.malloc.hugetlb=1");
  EXPECT_EQ(TunablesForHugePageHeap("always [madvise] never\n", ""), "glibc.malloc.hugetlb=1");
  EXPECT_EQ(TunablesForHugePageHeap("always [madvise] never\n", "glibc.malloc.arena_max=2"),
            "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1");
}

TEST(TunablesForHugePageHeap, LeavesOtherModesAndAnExplicitChoiceAlone) {
  EXPECT_EQ(TunablesForHugePageHeap("[always] madvise never\n", nullptr), std::nullopt);
  EXPECT_EQ(TunablesForHugePageHeap("always madvise [never]\n", nullptr), std::nullopt);
  EXPECT_EQ(TunablesForHugePageHeap("", nullptr), std::nullopt);
  EXPECT_EQ(TunablesForHugePageHeap("always [madvise] never\n", "glibc.malloc.hugetlb=0"),
            std::nullopt);
  EXPECT_EQ(TunablesForHugePageHeap("always [madvise] never\n",
                                    "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"),
            std::nullopt);
}

}  // namespace
}  // namespace bdn
