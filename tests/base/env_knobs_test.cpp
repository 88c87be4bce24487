// The FISH_* knob table and its parser: values outside a row are errors naming the variable and
// its allowed values, words match in any case, an empty value is unset, check_env_knobs reports
// every bad knob of the scopes asked for, and FISH_FAULT's grammar. The table is the one list:
// every "FISH_..." name a source file uses (getenv or a helper taking the name) is in it and every
// row is still read somewhere, so a new knob cannot reach a measurement unrecorded; the context
// records exactly the knobs that are set; docs/measurement.md shows the generated table.
#include "base/env_knobs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <new>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/fault_injection.h"
#include "test_env.h"

namespace fish {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using test::ScopedEnv;

std::string error_of(Status st) {
  return st.ok() ? "(ok)" : st.error().message;
}

// "FISH_NAME" string literals in the C++ sources of the binaries (tests excluded: they set the
// knobs, they do not read them), name -> first file using it.
std::map<std::string, std::string> knob_names_in_sources() {
  std::map<std::string, std::string> names;
  const std::regex literal("\"(FISH_[A-Z0-9_]+)\"");
  for (const char* dir : {"base", "quant", "kernels", "engine", "harness", "bench"}) {
    const fs::path root = fs::path(test::source_dir()) / dir;
    if (!fs::exists(root)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".cpp" && ext != ".h") continue;
      const std::string rel = fs::relative(e.path(), test::source_dir()).string();
      if (rel.rfind("base/env_knobs.", 0) == 0) continue;  // the table itself
      const std::string text = test::read_file(e.path().string());
      for (auto it = std::sregex_iterator(text.begin(), text.end(), literal);
           it != std::sregex_iterator(); ++it)
        names.emplace((*it)[1].str(), rel);
    }
  }
  return names;
}

TEST(EnvKnobs, TableIsSortedAndEveryRowHasADocAndAReader) {
  const auto t = env_knobs();
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_FALSE(t[i].doc.empty()) << t[i].name;
    EXPECT_EQ(t[i].name.substr(0, 5), "FISH_") << t[i].name;
    EXPECT_TRUE(fs::exists(fs::path(test::source_dir()) / t[i].read_by))
        << t[i].name << ": " << t[i].read_by;
    if (i > 0) {
      EXPECT_LT(t[i - 1].name, t[i].name);
    }
  }
  EXPECT_NE(find_env_knob("FISH_GPU_SPAN"), nullptr);
  EXPECT_EQ(find_env_knob("FISH_NO_SUCH_KNOB"), nullptr);
}

TEST(EnvKnobs, EveryFishVariableTheSourcesReadIsInTheTable) {
  const std::map<std::string, std::string> used = knob_names_in_sources();
  ASSERT_FALSE(used.empty()) << "no sources under " << test::source_dir();
  for (const auto& [name, file] : used)
    EXPECT_NE(find_env_knob(name), nullptr)
        << file << " uses " << name << ", which base/env_knobs.cpp's table lacks: add its row "
        << "(scope, effect, allowed values, reader, doc) so it is checked and recorded";
  for (const EnvKnob& k : env_knobs())
    EXPECT_TRUE(used.count(std::string(k.name)))
        << k.name << " is in the knob table but no source reads it any more: remove it";
}

TEST(EnvKnobs, TheContextRecordsTheKnobsThatAreSetAndOnlyThose) {
  const std::map<std::string, const char*> env = {
      {"FISH_VK_ATTN_SPLIT", "0"}, {"FISH_ISA", ""}, {"FISH_NOT_A_KNOB", "1"}, {"HOME", "/h"}};
  const nlohmann::json j = env_knobs_json([&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second;
  });
  EXPECT_EQ(j, nlohmann::json({{"FISH_ISA", ""}, {"FISH_VK_ATTN_SPLIT", "0"}}));
  EXPECT_EQ(env_knobs_json([](const char*) -> const char* { return nullptr; }),
            nlohmann::json::object());
}

TEST(EnvKnobs, LocationKnobsDoNotCountAsMeasurementDifferences) {
  EXPECT_TRUE(knob_affects_measurement("FISH_VK_ATTN_SPLIT"));
  EXPECT_TRUE(knob_affects_measurement("FISH_GPU_PROFILE"));  // instrumentation slows a run
  EXPECT_FALSE(knob_affects_measurement("FISH_MODELS_DIR"));
  EXPECT_TRUE(knob_affects_measurement("FISH_FROM_ANOTHER_VERSION"));  // unknown: compared
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
      {"FISH_GPU_PROFILE", "3", "FISH_GPU_PROFILE='3': expected one of 0, 1, 2"},
      {"FISH_VK_FAULT", "hang:2",
       "FISH_VK_FAULT='hang:2': expected lost:N or timeout:N (N >= 1, the compute submit that "
       "fails)"},
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

TEST(EnvKnobs, MarkdownListsEveryKnobWithItsEffectAndReader) {
  const std::string md = env_knobs_markdown();
  for (const EnvKnob& k : env_knobs())
    EXPECT_THAT(md, HasSubstr("| `" + std::string(k.name) + "` |"));
  EXPECT_THAT(md, HasSubstr("| `FISH_MODELS_DIR` | any | (not checked) | location | "
                            "`harness/run_command.cpp` |"));
}

TEST(EnvKnobs, DocsSectionIsTheGeneratedTable) {
  const std::string doc = test::read_file(test::source_dir() + "/docs/measurement.md");
  ASSERT_FALSE(doc.empty()) << "docs/measurement.md not found under " << test::source_dir();
  const std::string begin = "<!-- fish env -->\n", end = "<!-- end fish env -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), env_knobs_markdown())
      << "regenerate the section of docs/measurement.md with: fish env";
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
