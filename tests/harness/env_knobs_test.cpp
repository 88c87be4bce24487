// The FISH_* knob table is the one list: every "FISH_..." name a source file uses (getenv or a
// helper taking the name) is in it and every entry is still read somewhere, so a new knob cannot
// reach a measurement unrecorded; and the context records exactly the knobs that are set.
#include "harness/env_knobs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "test_env.h"

namespace fish {
namespace {

namespace fs = std::filesystem;

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
      if (rel.rfind("harness/env_knobs.", 0) == 0) continue;  // the table itself
      const std::string text = test::read_file(e.path().string());
      for (auto it = std::sregex_iterator(text.begin(), text.end(), literal);
           it != std::sregex_iterator(); ++it)
        names.emplace((*it)[1].str(), rel);
    }
  }
  return names;
}

TEST(EnvKnobs, EveryFishVariableTheSourcesReadIsInTheTable) {
  const std::map<std::string, std::string> used = knob_names_in_sources();
  ASSERT_FALSE(used.empty()) << "no sources under " << test::source_dir();
  for (const auto& [name, file] : used)
    EXPECT_NE(find_env_knob(name), nullptr)
        << file << " uses " << name << ", which harness/env_knobs.cpp's table lacks: add it "
        << "(name, effect, reader, doc) so results contexts record it";
  for (const EnvKnob& k : env_knobs())
    EXPECT_TRUE(used.count(std::string(k.name)))
        << k.name << " is in the knob table but no source reads it any more: remove it";
}

TEST(EnvKnobs, TheTableIsSortedAndEachEntryDocumented) {
  std::string last;
  for (const EnvKnob& k : env_knobs()) {
    EXPECT_LT(last, std::string(k.name));
    EXPECT_FALSE(k.doc.empty()) << k.name;
    EXPECT_TRUE(fs::exists(fs::path(test::source_dir()) / k.read_by))
        << k.name << ": " << k.read_by;
    last = k.name;
  }
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

TEST(EnvKnobs, TheDocsListTheTable) {
  const std::string doc =
      test::read_file((fs::path(test::source_dir()) / "docs" / "measurement.md").string());
  ASSERT_FALSE(doc.empty()) << "docs/measurement.md not found";
  const std::string begin = "<!-- env_knobs_markdown() -->\n", end = "<!-- end env_knobs -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), env_knobs_markdown())
      << "regenerate the section of docs/measurement.md from harness/env_knobs.cpp";
}

}  // namespace
}  // namespace fish
