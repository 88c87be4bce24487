// The Config field table: every field round-trips through JSON, values are checked against the
// table's type, allowed values and range, and Config maps onto SessionOptions.
#include "engine/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "base/env_knobs.h"
#include "kernels/cpu_features.h"

namespace fish {
namespace {

using ::testing::HasSubstr;

TEST(ConfigTable, NamesAreUniqueAndDocumented) {
  std::set<std::string_view> names;
  for (const auto& f : config_fields()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_FALSE(f.doc.empty()) << f.name;
    EXPECT_EQ(find_config_field(f.name), &f);
  }
  EXPECT_EQ(find_config_field("no_such_field"), nullptr);
}

TEST(ConfigTable, JsonHoldsEveryFieldAndRoundTrips) {
  Config c;
  c.n_ctx = 777;
  c.act = "f32";
  c.isa = "scalar";
  const nlohmann::json j = fields_to_json(c, config_fields());
  EXPECT_EQ(j.size(), config_fields().size());
  EXPECT_EQ(j["n_ctx"], 777);
  EXPECT_EQ(j["act"], "f32");
  Config back;
  std::vector<std::string> errors;
  fields_from_json(j, config_fields(), "c", back, errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(fields_to_json(back, config_fields()), j);
}

TEST(ConfigTable, RejectsWrongTypeDisallowedValueAndOutOfRange) {
  Config c;
  std::vector<std::string> errors;
  fields_from_json(nlohmann::json{{"n_ctx", "x"}, {"act", "q8"}, {"n_batch", 0}, {"zzz", 1}},
                   config_fields(), "f.json: defaults", c, errors);
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_THAT(errors, ::testing::Contains(HasSubstr(
                          "f.json: defaults.act: \"q8\" is not allowed (allowed: int8, f32)")));
  EXPECT_THAT(errors, ::testing::Contains(
                          HasSubstr("defaults.n_batch: 0 is out of range (expected 1 to 65536)")));
  EXPECT_THAT(errors, ::testing::Contains(HasSubstr(
                          "defaults.n_ctx: wrong type: expected integer, found string \"x\"")));
  EXPECT_THAT(errors, ::testing::Contains(HasSubstr("defaults.zzz: unknown key")));
  EXPECT_EQ(c.n_ctx, Config{}.n_ctx);  // a rejected value leaves the default
}

TEST(ConfigSession, MapsFieldsOntoSessionOptions) {
  Config c;
  c.n_ctx = 123;
  c.n_threads = 1;
  c.n_batch = 7;
  c.act = "f32";
  c.isa = "scalar";
  c.swa_kv = "full";
  auto o = session_options(c);
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->n_ctx, 123);
  EXPECT_EQ(o->n_threads, 1);
  EXPECT_EQ(o->n_batch, 7);
  EXPECT_EQ(o->act, ActMode::f32);
  EXPECT_EQ(o->isa, Isa::scalar);
  EXPECT_EQ(o->swa_kv, SwaKv::full);
  c.isa = "auto";
  EXPECT_EQ(session_options(c)->isa, best_isa());
  EXPECT_EQ(session_options(Config{})->swa_kv, SwaKv::ring);
}

TEST(ConfigSession, AnIsaTheCpuCannotRunIsAnError) {
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    if (isa_supported(isa)) continue;
    Config c;
    c.isa = std::string(isa_name(isa));
    auto o = session_options(c);
    ASSERT_FALSE(o.ok());
    EXPECT_THAT(o.error().message, HasSubstr("this CPU/build cannot run it"));
  }
  Config bad;
  bad.act = "int4";
  EXPECT_FALSE(session_options(bad).ok());
  Config bad_swa;
  bad_swa.swa_kv = "half";
  auto o = session_options(bad_swa);
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.error().message, HasSubstr("swa_kv \"half\""));
}

// The knob table's words are what the readers parse: FISH_ISA's are the ISA names, and the
// thread rows of the table and the environment agree.
TEST(ConfigKnobs, EnvRowsMatchTheirParsersAndTheConfigTable) {
  const EnvKnob* isa = find_env_knob("FISH_ISA");
  ASSERT_NE(isa, nullptr);
  for (std::string_view w : isa->words) EXPECT_TRUE(parse_isa_name(w).has_value()) << w;
  const FieldSpec<Config>* threads = find_config_field("n_threads");
  const EnvKnob* env_threads = find_env_knob("FISH_THREADS");
  ASSERT_NE(env_threads, nullptr);
  EXPECT_EQ(double(env_threads->max), threads->max);
  const EnvKnob* requant = find_env_knob("FISH_GPU_REQUANT");
  EXPECT_EQ(double(requant->max), find_config_field("gpu_requant")->max);
}

}  // namespace
}  // namespace fish
