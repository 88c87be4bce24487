// The real models of FISH_MODELS_DIR (test_env.h's kSmolLm2, kGemma3) loaded for a test.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "engine/model.h"
#include "test_env.h"

namespace fish::test {

// The model file_name names, loaded; null after a non-fatal failure that says why (not in
// FISH_MODELS_DIR: scripts/setup.sh fetches the real models; or the load's error), so a test
// writes `auto m = test::load_real_model(test::kSmolLm2); ASSERT_TRUE(m);`.
inline std::shared_ptr<const Model> load_real_model(const char* file_name) {
  const std::string path = model_path(file_name);
  if (path.empty()) {
    ADD_FAILURE() << file_name << " not in FISH_MODELS_DIR"
                  << " (tests need the real models: scripts/setup.sh fetches them)";
    return nullptr;
  }
  auto m = Model::load(path);
  if (!m.ok()) {
    ADD_FAILURE() << path << ": " << m.error().message;
    return nullptr;
  }
  return m.value();
}

}  // namespace fish::test
