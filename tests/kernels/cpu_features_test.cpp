// CPU feature probe and ISA selection (kernels/cpu_features.h).
#include <gtest/gtest.h>

#include "kernels/cpu_features.h"

namespace fish {
namespace {

TEST(CpuFeatures, HigherLevelsImplyLowerOnes) {
  const CpuFeatures& f = cpu_features();
  if (f.avx512bw || f.avx512vl || f.avx512dq || f.avx512vnni) {
    EXPECT_TRUE(f.avx512f);
  }
  if (isa_supported(Isa::avx512)) {
    EXPECT_TRUE(isa_supported(Isa::avx2));
  }
  EXPECT_TRUE(isa_supported(Isa::scalar));
  RecordProperty("cpu", cpu_features_summary());
}

TEST(CpuFeatures, BestIsaIsSupported) {
  EXPECT_TRUE(isa_supported(best_isa()));
#ifdef FISH_SCALAR_ONLY
  EXPECT_EQ(best_isa(), Isa::scalar);
  EXPECT_FALSE(isa_supported(Isa::avx2));
#endif
}

TEST(CpuFeatures, IsaNamesRoundTrip) {
  for (int i = 0; i < kIsaCount; ++i) {
    EXPECT_EQ(parse_isa_name(isa_name(Isa(i))), Isa(i));
  }
  EXPECT_FALSE(parse_isa_name("sse9").has_value());
}

TEST(CpuFeatures, FishIsaCanOnlyLowerTheLevel) {
  EXPECT_EQ(resolve_isa(Isa::avx512, nullptr), Isa::avx512);
  EXPECT_EQ(resolve_isa(Isa::avx512, ""), Isa::avx512);
  EXPECT_EQ(resolve_isa(Isa::avx512, "avx2"), Isa::avx2);
  EXPECT_EQ(resolve_isa(Isa::avx512, "scalar"), Isa::scalar);
  EXPECT_EQ(resolve_isa(Isa::avx2, "avx512"), Isa::avx2);  // cannot raise above the CPU
  EXPECT_EQ(resolve_isa(Isa::avx2, "bogus"), Isa::avx2);   // unknown: ignored
}

}  // namespace
}  // namespace fish
