// `fish env`: the FISH_* environment knobs (base/env_knobs.h) as a Markdown table, then the
// current environment checked against it; exit 1 when a knob that is set has a value outside
// its row.
#include <cstdio>
#include <string>

#include "base/env_knobs.h"
#include "harness/commands.h"
#include "harness/exit_codes.h"

namespace fish {

void add_env_command(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "env",
      "List the FISH_* environment knobs (allowed values, what a bad value breaks) and check the "
      "ones set now: exit 1 naming each bad value and its allowed ones.");
  cmd->callback([exit_code] {
    const std::string help = env_knobs_markdown();
    std::fwrite(help.data(), 1, help.size(), stdout);
    std::string set;
    for (const EnvKnob& k : env_knobs())
      if (auto v = env_value(k.name)) set += fmt::format(" {}={}", k.name, *v);
    if (Status st = check_env_knobs(/*with_gpu=*/true); !st.ok()) {
      std::fprintf(stderr, "fish env: %s\n", st.error().message.c_str());
      *exit_code = kExitUsage;
      return;
    }
    std::fprintf(stderr, "fish env: ok:%s\n", set.empty() ? " no FISH_* knob set" : set.c_str());
    *exit_code = kExitOk;
  });
}

}  // namespace fish
