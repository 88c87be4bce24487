// The FISH_* knob table and its parser: values outside a row are errors naming the variable and
// its allowed values, words match in any case, an empty value is unset, check_env_knobs reports
// every bad knob of the scopes asked for, and FISH_FAULT's grammar.
#include "base/env_knobs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/fault_injection.h"
#include "test_env.h"

namespace fish {
namespace {

using ::testing::HasSubstr;

// Sets a variable for one test and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
      had_ = true;
    }
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

std::string error_of(Status st) {
  return st.ok() ? "(ok)" : st.error().message;
}

TEST(EnvKnobs, TableIsSortedAndEveryRowHasADoc) {
  const auto t = env_knobs();
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_FALSE(t[i].doc.empty()) << t[i].name;
    EXPECT_EQ(t[i].name.substr(0, 5), "FISH_") << t[i].name;
    if (i > 0) {
      EXPECT_LT(t[i - 1].name, t[i].name);
    }
  }
  EXPECT_NE(find_env_knob("FISH_GPU_SPAN"), nullptr);
  EXPECT_EQ(find_env_knob("FISH_NO_SUCH_KNOB"), nullptr);
}

TEST(EnvKnobs, RejectsValuesOutsideTheRowNamingTheAllowedOnes) {
  // The values the review found accepted, and one of each other kind: an error with the allowed
  // values each.
  const std::vector<std::array<const char*, 3>> cases = {
      {"FISH_GPU_SPAN", "maybe",
       "FISH_GPU_SPAN='maybe': expected one of 0, off, false, no, 1, on, true, yes"},
      {"FISH_GPU", "maybe",
       "FISH_GPU='maybe': expected one of 0, off, false, no, 1, on, true, yes, cpu"},
      {"FISH_THREADS", "abc", "FISH_THREADS='abc': expected an integer 1 to 512"},
      {"FISH_THREADS", "4x", "FISH_THREADS='4x': expected an integer 1 to 512"},
      {"FISH_GPU_REQUANT", "7", "FISH_GPU_REQUANT='7': expected an integer 0 to 3"},
      {"FISH_VK_ATTN_SPLIT", "65", "FISH_VK_ATTN_SPLIT='65': expected auto or an integer 0 to 64"},
      {"FISH_ISA", "sse2", "FISH_ISA='sse2': expected one of scalar, avx2, avx512"},
  };
  for (const auto& [name, value, message] : cases)
    EXPECT_EQ(error_of(check_env_value(*find_env_knob(name), value)), message) << name;
  EXPECT_FALSE(check_env_value(*find_env_knob("FISH_VRAM_BUDGET_MB"), "0").ok());
  EXPECT_TRUE(check_env_value(*find_env_knob("FISH_MODELS_DIR"), "any/path").ok());
}

TEST(EnvKnobs, ParsesWordsInAnyCaseIntegersAndSwitches) {
  {
    ScopedEnv e("FISH_GPU_SPAN", "OFF");
    auto on = env_switch("FISH_GPU_SPAN", true);
    ASSERT_TRUE(on.ok());
    EXPECT_FALSE(on.value());
  }
  {
    ScopedEnv e("FISH_VK_ATTN_SPLIT", "Auto");
    auto n = env_int("FISH_VK_ATTN_SPLIT");
    ASSERT_TRUE(n.ok());
    EXPECT_FALSE(n.value().has_value());  // the word, not a number
  }
  {
    ScopedEnv e("FISH_VK_ATTN_SPLIT", "12");
    EXPECT_EQ(env_int("FISH_VK_ATTN_SPLIT").value(), 12);
  }
  {
    ScopedEnv e("FISH_THREADS", "");  // empty: unset
    EXPECT_FALSE(env_int("FISH_THREADS").value().has_value());
    EXPECT_TRUE(env_switch("FISH_GPU_VERBOSE", true).value());
  }
  {
    ScopedEnv e("FISH_THREADS", "abc");
    auto n = env_int("FISH_THREADS");
    ASSERT_FALSE(n.ok());
    EXPECT_THAT(n.error().message, HasSubstr("FISH_THREADS='abc'"));
  }
}

TEST(EnvKnobs, CheckReportsEveryBadKnobOfTheScopesAsked) {
  ScopedEnv a("FISH_THREADS", "abc");
  ScopedEnv b("FISH_GPU_REQUANT", "7");
  ScopedEnv c("FISH_MODELS_DIR", "whatever");  // harness text: never checked
  EXPECT_EQ(error_of(check_env_knobs(/*with_gpu=*/false)),
            "FISH_THREADS='abc': expected an integer 1 to 512");
  EXPECT_EQ(error_of(check_env_knobs(/*with_gpu=*/true)),
            "FISH_GPU_REQUANT='7': expected an integer 0 to 3\n"
            "FISH_THREADS='abc': expected an integer 1 to 512");
}

TEST(EnvKnobs, HelpListsEveryKnob) {
  const std::string h = env_knobs_help();
  for (const EnvKnob& k : env_knobs())
    EXPECT_THAT(h, HasSubstr("| `" + std::string(k.name) + "` |"));
}

TEST(EnvKnobs, DocsSectionIsTheGeneratedTable) {
  std::ifstream in(test::source_dir() + "/docs/reliability.md");
  ASSERT_TRUE(in) << "docs/reliability.md not found under " << test::source_dir();
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- fish env -->\n", end = "<!-- end fish env -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), env_knobs_help())
      << "regenerate the section with: fish env";
}

TEST(FaultInjection, ChecksItsGrammar) {
  EXPECT_TRUE(check_fault_spec("bad_alloc@session_create").ok());
  EXPECT_TRUE(check_fault_spec("runtime_error@model_load:3").ok());
  for (const char* bad : {"bad_alloc", "oom@session_create", "bad_alloc@nowhere",
                          "bad_alloc@model_load:0", "bad_alloc@model_load:x"})
    EXPECT_THAT(error_of(check_fault_spec(bad)),
                HasSubstr("expected KIND@SITE[:N] with KIND bad_alloc or runtime_error"))
        << bad;
  EXPECT_FALSE(check_env_value(*find_env_knob("FISH_FAULT"), "x").ok());
}

TEST(FaultInjection, ThrowsAtTheNthVisitOfItsSiteOnly) {
  ScopedEnv e("FISH_FAULT", "runtime_error@model_load:2");
  EXPECT_NO_THROW(inject_fault("session_create"));
  EXPECT_NO_THROW(inject_fault("model_load"));
  EXPECT_THROW(inject_fault("model_load"), std::runtime_error);
  EXPECT_NO_THROW(inject_fault("model_load"));
}

}  // namespace
}  // namespace fish
