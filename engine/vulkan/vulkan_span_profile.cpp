// VulkanSpan's profile (FISH_GPU_PROFILE, vulkan_options.h): the timestamps a forward wrote
// (level 1: its start and end; level 2: one after every stage, record_forward / stage_done) read
// back after its fence into per-stage, per-group and one-token-forward totals, and the line
// `fish generate` prints.
#include <algorithm>
#include <utility>
#include <vector>

#include "engine/vulkan/vulkan_span_impl.h"

namespace fish::vk {

void VulkanSpan::read_profile(int64_t n_tok, double wait_ms) {
  if (!queries_ || used_queries_ < 2) return;
  std::vector<uint64_t> ts(used_queries_);
  if (ctx_.vk().vkGetQueryPoolResults(
          ctx_.handle(), queries_, 0, used_queries_, ts.size() * 8, ts.data(), 8,
          VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS)
    return;
  ++n_profiled_;
  const double forward_ms =
      double(ts[used_queries_ - 1] - ts[0]) * ctx_.features().timestamp_ns * 1e-6;
  forward_gpu_ms_ += forward_ms;
  if (n_tok == 1) {  // a decode step: what the GPU ran against what the host waited
    ++one_tok_.n;
    one_tok_.gpu_ms += forward_ms;
    one_tok_.wait_ms += wait_ms;
  }
  if (!stage_queries_) return;
  for (uint32_t i = 1; i < used_queries_; ++i) {
    const TimedStep& st = step_of_[i - 1];
    const double ms = double(ts[i] - ts[i - 1]) * ctx_.features().timestamp_ns * 1e-6;
    stage_ms_[st.stage] += ms;
    ++stage_steps_[st.stage];
    if (st.group == nullptr) continue;
    GroupTime& g = group_ms_[st.group->label()];
    g.ms += ms;
    ++g.steps;
    if (st.vec) {
      g.vec_ms += ms;
      g.bytes += st.group->bytes();
    }
  }
}

void VulkanSpan::reset_profile() {
  std::lock_guard lock(ctx_.mutex());
  n_profiled_ = 0;
  ahead_hits_ = 0;
  forward_gpu_ms_ = host_record_ms_ = host_wait_ms_ = 0;
  one_tok_ = {};
  stage_ms_ = {};
  stage_steps_ = {};
  group_ms_.clear();
}

std::string VulkanSpan::profile() const {
  std::lock_guard lock(ctx_.mutex());
  if (!queries_)
    return ctx_.options().profile ? "span profile: no timestamp support on this queue" : "";
  double total = 0;
  for (double v : stage_ms_) total += v;
  std::string s = fmt::format(
      "span profile: {} forwards, {:.2f} ms GPU, host {:.2f} ms recording ({} forwards recorded "
      "ahead) + {:.2f} ms submit to done",
      n_profiled_, forward_gpu_ms_, host_record_ms_, ahead_hits_, host_wait_ms_);
  // Decode steps: the GPU's run (first to last timestamp) against the host's submit-to-done; the
  // difference is what a step costs outside the GPU's run (the submit, the fence's wake-up, the
  // x copy in and the id copy out; the next forward's recording where it outlasts the run), which
  // no kernel change recovers.
  if (one_tok_.n > 0) {
    const double gpu_us = 1e3 * one_tok_.gpu_ms / double(one_tok_.n);
    const double wait_us = 1e3 * one_tok_.wait_ms / double(one_tok_.n);
    s += fmt::format(
        "; {} one-token forwards: {:.1f} us GPU, {:.1f} us submit to done a forward ({:.1f} us, "
        "{:.1f}%, outside the GPU's run)",
        one_tok_.n, gpu_us, wait_us, wait_us - gpu_us,
        wait_us > 0 ? 100.0 * (wait_us - gpu_us) / wait_us : 0.0);
  }
  if (!stage_queries_) return s;
  for (int i = 0; i < kNumStages; ++i)
    s += fmt::format("{} {} {:.2f} ms {:.1f}% ({} steps)", i == 0 ? ":" : ",", kStageNames[i],
                     stage_ms_[i], total > 0 ? 100.0 * stage_ms_[i] / total : 0.0, stage_steps_[i]);
  // The matmul stage by group, most time first: the weights' GB/s over the decode steps.
  std::vector<std::pair<std::string, GroupTime>> groups(group_ms_.begin(), group_ms_.end());
  std::sort(groups.begin(), groups.end(),
            [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  if (groups.empty()) return s;
  s += "; matvec by group:";
  for (const auto& [label, g] : groups) {
    s += fmt::format(" [{}] {:.2f} ms ({} steps, {:.1f} us a step", label, g.ms, g.steps,
                     1e3 * g.ms / double(g.steps));
    if (g.vec_ms > 0) s += fmt::format(", {:.0f} GB/s decoding", double(g.bytes) / g.vec_ms * 1e-6);
    s += ");";
  }
  s.pop_back();
  return s;
}

}  // namespace fish::vk
