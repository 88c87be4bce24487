// The integer-dot decode kernels (matvec_idot_<type> over quant_q8_1's activations,
// FISH_VK_MATVEC=idot) against two CPU references:
//  - the f32 reference (quant/ dequantisation, double accumulation on x itself), within the
//    bound the q8_1 rounding of x implies: per element sum_k |w_k| d8(k) / 2, d8 = the block's
//    amax / 127 (|x - d8 q| <= d8 / 2), plus f32 accumulation slack;
//  - the same matvec on the q8_1-rounded x (the quantiser's rule emulated here), within f32
//    accumulation slack only, which a wrong code, scale or offset in the kernel cannot meet.
// Odd shapes as the f32 kernels' tests (rows not a multiple of FISH_MATVEC_ROWS; K of one block,
// a few, and more chunks than a workgroup has threads), n_tok 1..FISH_MATVEC_MAX_TOK, an all-zero
// block (d8 = 0), weights split into parts, other rows per workgroup (FISH_VK_IDOT_ROWS), the
// variants (FISH_VK_IDOT_AHEAD chunks loaded ahead, FISH_VK_IDOT_GROUPS row groups);
// FISH_VK_MATVEC's parsing and the rule that picks the kernel; a span decoding with idot against
// per-matmul idot and the CPU (top-1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <regex>

#include "engine/gpu_placement.h"
#include "engine/sampling.h"
#include "engine/session.h"
#include "engine/vulkan/device_weight.h"
#include "engine/vulkan/vulkan_backend.h"
#include "fish_vk_span.h"
#include "kernels/ops.h"
#include "shaders/fish_vk_layout.h"
#include "test_env.h"
#include "vulkan_test_util.h"

namespace fish {
namespace {

constexpr GgmlType kIdotTypes[] = {GgmlType::q4_0, GgmlType::q4_1, GgmlType::q8_0,
                                   GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k};
// f32 accumulation slack, relative to sum |w x| (the kernels add ~K / 32 f32 block terms per
// thread, then 128 partial sums: well below 2^-16 relative).
constexpr double kF32Slack = 1.0 / 65536;

std::unique_ptr<vk::VulkanBackend> open_mode(vk::MatvecMode mode) {
  auto opt = vk::VulkanOptions::from_env();
  EXPECT_TRUE(opt.ok()) << opt.error().message;
  if (opt.ok()) opt->matvec = mode;
  return std::make_unique<vk::VulkanBackend>(opt);
}

// quant_q8_1's rule on one token row: x rounded to d8 q per 32-value block, d8 per value, and
// whether x / d8 lies so close to a rounding tie that the device's division (Vulkan allows 2.5
// ulp) may round it the other way (tie: such a value's code may differ by one).
void q8_round(const float* x, int64_t n, std::vector<double>* xq, std::vector<double>* d8,
              std::vector<bool>* tie) {
  xq->resize(size_t(n));
  d8->resize(size_t(n));
  tie->resize(size_t(n));
  for (int64_t b = 0; b < n; b += FISH_Q8_BLOCK) {
    float amax = 0;
    for (int64_t k = b; k < b + FISH_Q8_BLOCK; ++k) amax = std::max(amax, std::fabs(x[k]));
    const float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
    for (int64_t k = b; k < b + FISH_Q8_BLOCK; ++k) {
      const float v = x[k] * id, q = std::clamp(std::nearbyint(v), -127.0f, 127.0f);
      (*xq)[size_t(k)] = double(d) * double(q);
      (*d8)[size_t(k)] = double(d);
      (*tie)[size_t(k)] = std::fabs(std::fabs(v - std::trunc(v)) - 0.5f) < 1e-4f;
    }
  }
}

// Runs y = W x on `backend` and checks it against both references (header comment).
void check_idot(vk::VulkanBackend& backend, const MatrixView& w, const std::vector<float>& x,
                int64_t n_tok, WeightHandle h) {
  std::vector<float> y(size_t(n_tok * w.n_out), -1.0f);
  const Status s = backend.matmul(h, x.data(), n_tok, y.data());
  ASSERT_TRUE(s.ok()) << s.error().message;
  std::vector<float> deq(size_t(w.n_in * w.n_out));
  const size_t rb = row_bytes(w.type, w.n_in);
  for (int64_t r = 0; r < w.n_out; ++r)
    type_info(w.type).dequantize_row(static_cast<const uint8_t*>(w.data) + size_t(r) * rb,
                                     deq.data() + size_t(r * w.n_in), w.n_in);
  int fail_f32 = 0, fail_q8 = 0;
  double worst_f32 = 0, worst_q8 = 0;
  std::vector<double> xq, d8;
  std::vector<bool> tie;
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* xt = x.data() + t * w.n_in;
    q8_round(xt, w.n_in, &xq, &d8, &tie);
    for (int64_t r = 0; r < w.n_out; ++r) {
      const float* wr = deq.data() + size_t(r * w.n_in);
      double exact = 0, rounded = 0, abs_wx = 0, q8_bound = 0, ties = 0;
      for (int64_t k = 0; k < w.n_in; ++k) {
        const double wk = wr[k];
        exact += wk * double(xt[k]);
        rounded += wk * xq[size_t(k)];
        abs_wx += std::fabs(wk) * (std::fabs(double(xt[k])) + d8[size_t(k)]);
        q8_bound += std::fabs(wk) * d8[size_t(k)] / 2;
        if (tie[size_t(k)]) ties += std::fabs(wk) * d8[size_t(k)];
      }
      const double got = y[size_t(t * w.n_out + r)], slack = kF32Slack * abs_wx;
      const double err_f32 = std::fabs(got - exact), bound_f32 = q8_bound + slack;
      const double err_q8 = std::fabs(got - rounded), bound_q8 = slack + ties;
      if (bound_f32 > 0) worst_f32 = std::max(worst_f32, err_f32 / bound_f32);
      if (bound_q8 > 0) worst_q8 = std::max(worst_q8, err_q8 / bound_q8);
      if (!(err_f32 <= bound_f32) && fail_f32++ < 3)
        ADD_FAILURE() << w.name << " n_tok " << n_tok << " token " << t << " row " << r << ": gpu "
                      << got << ", f32 reference " << exact << ", q8_1 bound " << q8_bound + slack;
      if (!(err_q8 <= bound_q8) && fail_q8++ < 3)
        ADD_FAILURE() << w.name << " n_tok " << n_tok << " token " << t << " row " << r << ": gpu "
                      << got << ", q8_1-rounded reference " << rounded << ", slack " << slack;
    }
  }
  EXPECT_EQ(fail_f32, 0) << w.name << ": worst error / q8_1 bound " << worst_f32;
  EXPECT_EQ(fail_q8, 0) << w.name << ": worst error / f32 slack vs the rounded x " << worst_q8;
}

class VulkanMatvecIdot : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    backend_ = open_mode(vk::MatvecMode::idot).release();
    const Status s = backend_->open();
    if (!s.ok()) skip_ = s.error().message;
  }
  static void TearDownTestSuite() {
    delete backend_;
    backend_ = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) {
      GTEST_SKIP() << "no integer-dot device: " << skip_;
    }
  }
  void TearDown() override {
    if (backend_) {
      EXPECT_EQ(backend_->bytes_resident(), 0u) << "a test leaked a weight";
    }
  }
  static vk::VulkanBackend* backend_;
  static std::string skip_;
};
vk::VulkanBackend* VulkanMatvecIdot::backend_ = nullptr;
std::string VulkanMatvecIdot::skip_;

// Every idot type on `b`: n_out rows of one block, a few, more chunks than a workgroup has
// threads and, when `long_rows`, 416 chunks (past a workgroup's chunks loaded ahead at every
// FISH_VK_IDOT_AHEAD, with a part-filled last pass), n_tok 1..FISH_MATVEC_MAX_TOK (the last
// token's first block all zero: d8 = 0).
void check_every_type(vk::VulkanBackend& b, int64_t n_out, bool long_rows, std::mt19937& rng) {
  for (GgmlType t : kIdotTypes) {
    ASSERT_TRUE(vk::has_idot_kernel(t)) << type_name(t);
    const int64_t blk = type_info(t).block_elems;
    const int64_t chunks_past_wg = (FISH_MATVEC_WG + 13) * 32;  // 141 chunks of 32 values
    std::vector<int64_t> lengths = {blk, 3 * blk, (chunks_past_wg + blk - 1) / blk * blk};
    if (long_rows) lengths.push_back(416 * 32);
    for (int64_t n_in : lengths) {
      const std::vector<uint8_t> wd = test::random_weights(t, n_out, n_in, rng);
      const MatrixView w{wd.data(), t,
                         n_in,      n_out,
                         wd.size(), fmt::format("idot {} {} x {}", type_name(t), n_out, n_in)};
      auto h = b.upload(w);
      ASSERT_TRUE(h.ok()) << h.error().message;
      for (int64_t n_tok = 1; n_tok <= FISH_MATVEC_MAX_TOK; ++n_tok) {
        std::vector<float> x = test::random_input(n_tok * n_in, rng);
        std::fill_n(x.begin() + (n_tok - 1) * n_in, FISH_Q8_BLOCK, 0.0f);  // d8 = 0 block
        check_idot(b, w, x, n_tok, h.value());
      }
      b.release(h.value());
    }
  }
}

// The default knobs, long rows included (idot_workgroup's rule: two warps from 8192 values).
TEST_F(VulkanMatvecIdot, EveryIdotTypeMatchesBothReferencesAtEveryTokenCount) {
  std::mt19937 rng(23);
  check_every_type(*backend_, 7 * FISH_MATVEC_ROWS + 3, true, rng);
}

// The variants the matvec bench compares (FISH_VK_IDOT_AHEAD, FISH_VK_IDOT_GROUPS, with
// FISH_VK_IDOT_ROWS): every type, shape and token count of check_every_type, n_out not a multiple
// of the workgroup's rows.
TEST_F(VulkanMatvecIdot, EveryVariantMatchesBothReferencesForEveryTypeAndTokenCount) {
  struct Variant {
    uint32_t rows, ahead, groups;
    bool fold = false;  // FISH_VK_IDOT_FOLD
  };
  std::mt19937 rng(47);
  for (const Variant v : {Variant{2, 1, 1}, Variant{2, 2, 1}, Variant{2, 4, 1}, Variant{2, 8, 1},
                          Variant{4, 4, 1}, Variant{2, 1, 4}, Variant{2, 4, 2}, Variant{1, 8, 4},
                          Variant{2, 1, 1, true}, Variant{2, 4, 2, true}}) {
    SCOPED_TRACE(
        fmt::format("rows {} ahead {} groups {} fold {}", v.rows, v.ahead, v.groups, v.fold));
    auto opt = vk::VulkanOptions::from_env();
    ASSERT_TRUE(opt.ok());
    opt->matvec = vk::MatvecMode::idot;
    opt->idot_rows = v.rows;
    opt->idot_ahead = v.ahead;
    opt->idot_groups = v.groups;
    opt->idot_fold = v.fold;
    vk::VulkanBackend b(opt);
    ASSERT_TRUE(b.open().ok());
    check_every_type(b, 5 * v.rows * v.groups + 3, true, rng);
  }
}

// A matmul_group over weights of different idot types and an f32-kernel type (fq3: no idot
// kernel) shares one quant_q8_1 dispatch; each still matches its references.
TEST_F(VulkanMatvecIdot, GroupMixingIdotAndFastTypes) {
  std::mt19937 rng(29);
  const int64_t n_in = 512;
  struct W {
    GgmlType t;
    int64_t n_out;
    std::vector<uint8_t> data;
    WeightHandle h = 0;
  };
  std::vector<W> ws = {{GgmlType::q4_k, 37, {}}, {GgmlType::fq3, 9, {}}, {GgmlType::q6_k, 21, {}}};
  for (W& w : ws) {
    w.data = test::random_weights(w.t, w.n_out, n_in, rng);
    auto h = backend_->upload({w.data.data(), w.t, n_in, w.n_out, w.data.size(), "group"});
    ASSERT_TRUE(h.ok()) << h.error().message;
    w.h = h.value();
  }
  const int64_t n_tok = 3;
  const std::vector<float> x = test::random_input(n_tok * n_in, rng);
  std::vector<std::vector<float>> ys;
  std::vector<ComputeBackend::MatmulOp> ops;
  for (const W& w : ws) ys.emplace_back(size_t(n_tok * w.n_out));
  for (size_t i = 0; i < ws.size(); ++i) ops.push_back({ws[i].h, ys[i].data()});
  const Status s = backend_->matmul_group(ops, x.data(), n_tok);
  ASSERT_TRUE(s.ok()) << s.error().message;
  for (size_t i = 0; i < ws.size(); ++i) {
    const MatrixView v{ws[i].data.data(), ws[i].t, n_in, ws[i].n_out, ws[i].data.size(), "group"};
    if (vk::has_idot_kernel(ws[i].t)) {
      check_idot(*backend_, v, x, n_tok, ws[i].h);  // the single-matmul run
      // The group's result is the single run's: same kernel, same q8_1 input.
      std::vector<float> y1(ys[i].size());
      ASSERT_TRUE(backend_->matmul(ws[i].h, x.data(), n_tok, y1.data()).ok());
      EXPECT_EQ(y1, ys[i]) << type_name(ws[i].t);
    } else {
      test::expect_close(test::reference_matmul(v, x.data(), n_tok), ys[i], ws[i].n_out,
                         "fq3 in an idot group (f32 kernel)");
    }
  }
  for (const W& w : ws) backend_->release(w.h);
}

// matmul_group_device_s (the matvec bench's timed call) computes what matmul_group does and
// returns the dispatches' device time (> 0 where the queue has timestamps, as lavapipe's has).
TEST_F(VulkanMatvecIdot, DeviceTimedGroupMatchesTheGroupAndTimesIt) {
  std::mt19937 rng(53);
  const int64_t n_in = 768, n_tok = 2;
  std::vector<std::vector<uint8_t>> data;
  std::vector<WeightHandle> hs;
  for (auto [t, n_out] : {std::pair<GgmlType, int64_t>{GgmlType::q4_k, 19}, {GgmlType::fq3, 7}}) {
    data.push_back(test::random_weights(t, n_out, n_in, rng));
    auto h = backend_->upload({data.back().data(), t, n_in, n_out, data.back().size(), "timed"});
    ASSERT_TRUE(h.ok()) << h.error().message;
    hs.push_back(h.value());
  }
  const std::vector<float> x = test::random_input(n_tok * n_in, rng);
  std::vector<float> y0(size_t(n_tok * 19)), y1(size_t(n_tok * 7)), t0(y0.size()), t1(y1.size());
  const ComputeBackend::MatmulOp plain[] = {{hs[0], y0.data()}, {hs[1], y1.data()}};
  const ComputeBackend::MatmulOp timed[] = {{hs[0], t0.data()}, {hs[1], t1.data()}};
  ASSERT_TRUE(backend_->matmul_group(plain, x.data(), n_tok).ok());
  const Result<double> dev_s = backend_->matmul_group_device_s(timed, x.data(), n_tok);
  ASSERT_TRUE(dev_s.ok()) << dev_s.error().message;
  EXPECT_EQ(t0, y0);
  EXPECT_EQ(t1, y1);
  EXPECT_GT(dev_s.value(), 0.0);
  for (WeightHandle h : hs) backend_->release(h);
}

// time_matmul's dependent chain (BM_VulkanMatvecChain) takes decode steps too: the integer-dot
// matvec after its untimed first step wrote the q8_1 copy, 1 and FISH_MATVEC_MAX_TOK tokens, over
// one weight and cycling over two copies, and leaves the weights usable; reps < 1, no weights,
// an unknown weight and copies of different shapes are errors.
TEST_F(VulkanMatvecIdot, TimedChainRunsDecodeSteps) {
  std::mt19937 rng(59);
  const int64_t n_in = 512, n_out = 37;
  const std::vector<uint8_t> wd = test::random_weights(GgmlType::q4_k, n_out, n_in, rng);
  const MatrixView w{wd.data(), GgmlType::q4_k, n_in, n_out, wd.size(), "chain"};
  auto h = backend_->upload(w), h2 = backend_->upload(w);
  ASSERT_TRUE(h.ok()) << h.error().message;
  ASSERT_TRUE(h2.ok()) << h2.error().message;
  const WeightHandle one[] = {h.value()}, two[] = {h.value(), h2.value()};
  for (int64_t n_tok : {int64_t(1), int64_t(FISH_MATVEC_MAX_TOK)}) {
    for (std::span<const WeightHandle> ws :
         {std::span<const WeightHandle>(one), std::span<const WeightHandle>(two)}) {
      const Result<double> s = backend_->time_matmul(ws, n_tok, 5, 0);
      ASSERT_TRUE(s.ok()) << s.error().message;
      EXPECT_GT(s.value(), 0.0);
    }
  }
  EXPECT_FALSE(backend_->time_matmul(one, 1, 0, 0).ok());
  EXPECT_FALSE(backend_->time_matmul({}, 1, 5, 0).ok());
  const WeightHandle unknown[] = {h.value() + 1000};
  EXPECT_FALSE(backend_->time_matmul(unknown, 1, 5, 0).ok());
  const std::vector<uint8_t> wd2 = test::random_weights(GgmlType::q4_k, n_out + 1, n_in, rng);
  auto h3 = backend_->upload({wd2.data(), GgmlType::q4_k, n_in, n_out + 1, wd2.size(), "other"});
  ASSERT_TRUE(h3.ok()) << h3.error().message;
  const WeightHandle mixed[] = {h.value(), h3.value()};
  const Result<double> bad = backend_->time_matmul(mixed, 1, 5, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("other is 38 x 512"), std::string::npos)
      << bad.error().message;
  const std::vector<float> x = test::random_input(n_in, rng);
  check_idot(*backend_, w, x, 1, h.value());
  check_idot(*backend_, w, x, 1, h2.value());
  for (auto hh : {h, h2, h3}) backend_->release(hh.value());
}

// A backend forced to the integer-dot kernels with `tune` applied to its options (rows, threads a
// workgroup), then, for each of `types`, a random n_out x n_in(t) matrix against check_idot at 1
// and FISH_MATVEC_MAX_TOK tokens.
void check_variant(const char* what, uint32_t value,
                   const std::function<void(vk::VulkanOptions&)>& tune,
                   std::initializer_list<GgmlType> types,
                   const std::function<int64_t(GgmlType)>& n_in_of, int64_t n_out,
                   std::mt19937& rng) {
  auto opt = vk::VulkanOptions::from_env();
  ASSERT_TRUE(opt.ok());
  opt->matvec = vk::MatvecMode::idot;
  tune(*opt);
  vk::VulkanBackend b(opt);
  ASSERT_TRUE(b.open().ok());
  for (GgmlType t : types) {
    const int64_t n_in = n_in_of(t);
    const std::vector<uint8_t> wd = test::random_weights(t, n_out, n_in, rng);
    const std::string name = fmt::format("idot {} {} {}", what, value, type_name(t));
    const MatrixView w{wd.data(), t, n_in, n_out, wd.size(), name};
    auto h = b.upload(w);
    ASSERT_TRUE(h.ok()) << h.error().message;
    for (int64_t n_tok : {int64_t(1), int64_t(FISH_MATVEC_MAX_TOK)})
      check_idot(b, w, test::random_input(n_tok * n_in, rng), n_tok, h.value());
    b.release(h.value());
  }
}

// FISH_VK_IDOT_ROWS (the kernel's rows a workgroup, a specialisation constant): other row counts,
// n_out not a multiple of any of them.
TEST_F(VulkanMatvecIdot, RowsPerWorkgroupVariantsMatch) {
  std::mt19937 rng(41);
  for (uint32_t rows : {1u, 2u, 8u, 16u})
    check_variant(
        "rows", rows, [&](vk::VulkanOptions& o) { o.idot_rows = rows; },
        {GgmlType::q4_k, GgmlType::q6_k, GgmlType::q8_0},
        [](GgmlType t) { return 3 * type_info(t).block_elems; }, 7 * 16 + 3, rng);
}

// FISH_VK_IDOT_WG (the kernel's workgroup size, a specialisation constant): every size the knob
// admits, rows of 72 chunks (not a multiple of any size: some threads get one chunk more), and
// n_out not a multiple of the rows a workgroup.
TEST_F(VulkanMatvecIdot, WorkgroupSizeVariantsMatch) {
  std::mt19937 rng(43);
  for (uint32_t wg : {32u, 64u, 128u, 256u})
    check_variant(
        "wg", wg, [&](vk::VulkanOptions& o) { o.idot_wg = wg; },
        {GgmlType::q4_k, GgmlType::q6_k, GgmlType::q8_0, GgmlType::q4_0},
        [](GgmlType) { return int64_t(72 * 32); }, 2 * 16 + 3, rng);
}

// FISH_VK_IDOT_EXACT: pipelines specialised to the dispatch's token count give bitwise the
// general pipeline's outputs (the same arithmetic in the same order) for every idot type at 1..4
// tokens, with rows of more chunks than a workgroup has threads and, at 2 rows a workgroup and 4
// chunks ahead, n_out not a multiple of the rows; a pipeline of the wrong count would drop or add
// a token's rows. The exact pipelines are in use (the fifth constant). FISH_VK_IDOT_ROWS_MULTI
// (backend m: 8 rows a workgroup from 2 tokens, grids to match) is bitwise the same too.
TEST_F(VulkanMatvecIdot, ExactTokenPipelinesAreBitwiseTheGeneralOnes) {
  std::mt19937 rng(53);
  auto opt = vk::VulkanOptions::from_env();
  ASSERT_TRUE(opt.ok());
  opt->matvec = vk::MatvecMode::idot;
  opt->idot_ahead = 4;
  opt->idot_exact = true;
  EXPECT_EQ(vk::matvec_exact_spec(GgmlType::q4_k, 3, vk::MatvecKernel::idot, *opt, 4096).constants,
            (std::vector<uint32_t>{2, 32, 4, 1, 3}));
  EXPECT_EQ(vk::matvec_exact_spec(GgmlType::q4_k, 5, vk::MatvecKernel::idot, *opt, 4096).module,
            "matvec8_q4_k");  // past the decode kernel's tokens: no constants to add
  vk::VulkanBackend b(opt);
  ASSERT_TRUE(b.open().ok());
  vk::VulkanOptions multi = *opt;
  multi.idot_rows_multi = 8;
  EXPECT_EQ(vk::matvec_exact_spec(GgmlType::q4_k, 1, vk::MatvecKernel::idot, multi, 4096).constants,
            (std::vector<uint32_t>{2, 32, 4, 1, 1}));
  EXPECT_EQ(vk::matvec_exact_spec(GgmlType::q4_k, 3, vk::MatvecKernel::idot, multi, 4096).constants,
            (std::vector<uint32_t>{8, 32, 4, 1, 3}));
  EXPECT_EQ(vk::matvec_rows(vk::MatvecKernel::idot, multi, 4096, 3), 8u);
  EXPECT_EQ(vk::matvec_rows(vk::MatvecKernel::idot, multi, 4096, 1), 2u);
  vk::VulkanBackend m(Result<vk::VulkanOptions>{multi});
  ASSERT_TRUE(m.open().ok());
  opt->idot_exact = false;
  vk::VulkanBackend g(opt);
  ASSERT_TRUE(g.open().ok());
  const int64_t n_out = 2 * 7 + 1;
  for (GgmlType t : kIdotTypes) {
    const int64_t blk = type_info(t).block_elems;  // >= 141 chunks of 32 values
    const int64_t n_in = ((FISH_MATVEC_WG + 13) * 32 + blk - 1) / blk * blk;
    const std::vector<uint8_t> wd = test::random_weights(t, n_out, n_in, rng);
    const MatrixView w{wd.data(), t, n_in, n_out, wd.size(), "exact"};
    auto hb = b.upload(w);
    auto hg = g.upload(w);
    auto hm = m.upload(w);
    ASSERT_TRUE(hb.ok() && hg.ok() && hm.ok());
    for (int64_t n_tok = 1; n_tok <= FISH_MATVEC_MAX_TOK; ++n_tok) {
      const std::vector<float> x = test::random_input(n_tok * n_in, rng);
      std::vector<float> yb(size_t(n_tok * n_out), -1.0f), yg(yb.size(), -2.0f),
          ym(yb.size(), -3.0f);
      ASSERT_TRUE(b.matmul(hb.value(), x.data(), n_tok, yb.data()).ok());
      ASSERT_TRUE(g.matmul(hg.value(), x.data(), n_tok, yg.data()).ok());
      ASSERT_TRUE(m.matmul(hm.value(), x.data(), n_tok, ym.data()).ok());
      EXPECT_EQ(std::memcmp(yb.data(), yg.data(), yb.size() * sizeof(float)), 0)
          << type_name(t) << " n_tok " << n_tok;
      EXPECT_EQ(std::memcmp(ym.data(), yg.data(), ym.size() * sizeof(float)), 0)
          << type_name(t) << " n_tok " << n_tok << ", FISH_VK_IDOT_ROWS_MULTI=8";
    }
    b.release(hb.value());
    g.release(hg.value());
    m.release(hm.value());
  }
}

// The pipeline's specialisation constants (rows, workgroup size, chunks ahead, row groups) and
// the grid's rows a workgroup follow the FISH_VK_IDOT_* options; other kernels take none.
TEST(VulkanMatvecKnob, IdotPipelineFollowsTheVariantOptions) {
  vk::VulkanOptions o;
  o.idot_rows = 4;
  o.idot_ahead = 8;
  o.idot_groups = 2;
  const vk::PipelineSpec s = vk::matmul_spec(GgmlType::q4_k, 1, vk::MatvecKernel::idot, o, 4096);
  EXPECT_EQ(s.module, "matvec_idot_q4_k");
  EXPECT_EQ(s.constants, (std::vector<uint32_t>{4, 2 * 32, 8, 2}));
  EXPECT_EQ(vk::matvec_rows(vk::MatvecKernel::idot, o, 4096), 8u);
  o.idot_wg = 128;
  EXPECT_EQ(vk::matmul_spec(GgmlType::q4_k, 1, vk::MatvecKernel::idot, o, 4096).constants[1], 256u);
  EXPECT_TRUE(
      vk::matmul_spec(GgmlType::q4_k, 1, vk::MatvecKernel::fast, o, 4096).constants.empty());
  EXPECT_EQ(vk::matvec_rows(vk::MatvecKernel::fast, o, 4096), uint32_t(FISH_MATVEC_ROWS));
  const vk::VulkanOptions defaults;
  // The measured defaults: 2 rows, one row group of one warp, two from 8192-value rows.
  EXPECT_EQ(vk::matmul_spec(GgmlType::q6_k, 1, vk::MatvecKernel::idot, defaults, 4096).constants,
            (std::vector<uint32_t>{2, 32, 1, 1}));
  EXPECT_EQ(vk::matmul_spec(GgmlType::q6_k, 1, vk::MatvecKernel::idot, defaults, 14336).constants,
            (std::vector<uint32_t>{2, 64, 1, 1}));
  EXPECT_EQ(vk::matvec_rows(vk::MatvecKernel::idot, defaults, 8191), 2u);
  EXPECT_EQ(vk::matvec_rows(vk::MatvecKernel::idot, defaults, 8192), 2u);
  o.idot_groups = 4;  // FISH_VK_IDOT_GROUPS=4 wins over the rule
  EXPECT_EQ(vk::matvec_rows(vk::MatvecKernel::idot, o, 14336), 16u);
  // FISH_VK_IDOT_FOLD: FOLD is the sixth constant, EXACT (0: any count) before it where unset.
  vk::VulkanOptions f;
  f.idot_fold = true;
  EXPECT_EQ(vk::matmul_spec(GgmlType::q4_k, 1, vk::MatvecKernel::idot, f, 4096).constants,
            (std::vector<uint32_t>{2, 32, 1, 1, 0, 1}));
  EXPECT_EQ(vk::matvec_exact_spec(GgmlType::q4_k, 3, vk::MatvecKernel::idot, f, 4096).constants,
            (std::vector<uint32_t>{2, 32, 1, 1, 3, 1}));
  EXPECT_EQ(vk::matmul_res_spec(GgmlType::q6_k, f, 4096, "matvec_idot_swiglu", 2).constants,
            (std::vector<uint32_t>{2, 32, 1, 1, 2, 1}));
  EXPECT_TRUE(
      vk::matmul_spec(GgmlType::q4_k, 1, vk::MatvecKernel::fast, f, 4096).constants.empty());
}

TEST(VulkanMatvecKnob, WorkgroupRuleIsOneWarpUpToSixteenChunksAThread) {
  EXPECT_EQ(vk::idot_workgroup(2048, 0), 32u);   // the 1B's attention: 2 chunks a thread
  EXPECT_EQ(vk::idot_workgroup(4096, 0), 32u);   // the 8B's attention, gate, up: 4
  EXPECT_EQ(vk::idot_workgroup(8191, 0), 32u);   // 8
  EXPECT_EQ(vk::idot_workgroup(8192, 0), 64u);   // the 1B's down: two warps, 4 a thread
  EXPECT_EQ(vk::idot_workgroup(14336, 0), 64u);  // the 8B's down: 7
  EXPECT_EQ(vk::idot_workgroup(32768, 0), 64u);  // 16
  EXPECT_EQ(vk::idot_workgroup(32769, 0), 128u);
  EXPECT_EQ(vk::idot_workgroup(1 << 20, 0), 128u);
  EXPECT_EQ(vk::idot_workgroup(4096, 256), 256u);  // FISH_VK_IDOT_WG wins
  EXPECT_EQ(vk::idot_groups(14336, 0), 1u);        // one row group whatever the row
  EXPECT_EQ(vk::idot_groups(4096, 4), 4u);         // FISH_VK_IDOT_GROUPS wins
}

TEST_F(VulkanMatvecIdot, WeightSplitIntoParts) {
  auto opt = vk::VulkanOptions::from_env();
  ASSERT_TRUE(opt.ok());
  opt->matvec = vk::MatvecMode::idot;
  opt->max_part_bytes = 64 * 1024;  // several parts of whole rows
  vk::VulkanBackend parts(opt);
  ASSERT_TRUE(parts.open().ok());
  std::mt19937 rng(31);
  const int64_t n_in = 2048, n_out = 301;
  const std::vector<uint8_t> wd = test::random_weights(GgmlType::q4_k, n_out, n_in, rng);
  const MatrixView w{wd.data(), GgmlType::q4_k, n_in, n_out, wd.size(), "idot parts"};
  auto h = parts.upload(w);
  ASSERT_TRUE(h.ok()) << h.error().message;
  const std::vector<float> x = test::random_input(2 * n_in, rng);
  check_idot(parts, w, x, 2, h.value());
  parts.release(h.value());
}

// span_rmsnorm_q8 / span_add_rmsnorm_q8 (the norm writes its row's q8_1 copy for the idot
// matvecs) against the CPU: C as rmsnorm_ref (kernels/ops.h) of (x [+ tmp]) and its q8_1 copy as
// q8_copy_errors checks it. Rows of a register-held length and of one longer than the register
// cache (the loop pass), 3 tokens.
TEST_F(VulkanMatvecIdot, NormsWriteTheirQ81Copy) {
  for (const bool fuse_add : {false, true})
    for (const uint32_t n : {2080u, uint32_t(FISH_SPAN_NORM_CACHE * FISH_SPAN_NORM_WG * 4 + 64)}) {
      std::mt19937 rng(n + fuse_add);
      const uint32_t rows = 3, b_off = rows * n, c_off = 2 * rows * n, q8_off = 3 * rows * n;
      std::vector<float> arena = test::random_input(q8_off + FISH_Q8_BYTES(n) / 4 + 4, rng);
      const std::vector<float> params = test::random_input(n, rng);
      std::vector<uint32_t> kv(4);
      std::vector<float> x(arena.begin(), arena.begin() + rows * n);
      if (fuse_add)
        for (uint32_t i = 0; i < rows * n; ++i) x[i] += arena[b_off + i];
      vk::SpanPush pc{};
      pc.n = n;
      pc.rows = rows;
      pc.rows_per_tok = 1;
      pc.split = 1;
      pc.a_stride = pc.b_stride = pc.c_stride = n;
      pc.b_off = b_off;
      pc.c_off = c_off;
      pc.eps = 1e-5f;
      pc.q8_off = q8_off;
      const char* op = fuse_add ? "span_add_rmsnorm_q8" : "span_rmsnorm_q8";
      ASSERT_TRUE(backend_->run_span_op(op, pc, rows, 1, arena, params, kv).ok()) << op;
      int bad = 0;
      for (uint32_t t = 0; t < rows; ++t) {
        std::vector<float> c(n);
        rmsnorm_ref(x.data() + t * n, params.data(), c.data(), n, 1e-5f);
        for (uint32_t k = 0; k < n; ++k)
          bad += !(std::fabs(arena[c_off + t * n + k] - c[k]) <= 1e-5f * (1 + std::fabs(c[k])));
        bad += test::q8_copy_errors(arena, q8_off, n, t, c.data());
      }
      EXPECT_EQ(bad, 0) << op << " n " << n;
    }
}

// span_swiglu_q8 / span_geglu_q8 (act*mul writes its product's q8_1 copy for an idot down
// matvec) against silu_mul_ref / gelu_tanh_mul_ref (kernels/ops.h) and q8_copy_errors: gate and
// up interleaved per token as the span's gate|up rows (stride 2n), 1 and FISH_Q8_MAX_TOK tokens,
// n not a multiple of the workgroup's 4 x FISH_SPAN_WG values.
TEST_F(VulkanMatvecIdot, ActMulWritesItsQ81Copy) {
  for (const bool gelu : {false, true})
    for (const uint32_t rows : {1u, uint32_t(FISH_Q8_MAX_TOK)}) {
      const uint32_t n = 4 * FISH_SPAN_WG * 3 + 96, a_off = 8, q8_off = a_off + rows * 2 * n + 4;
      std::mt19937 rng(n + rows + gelu);
      std::vector<float> arena = test::random_input(q8_off + FISH_Q8_BYTES(n) / 4 + 4, rng);
      for (float& v : arena) v *= 4.0f;  // gelu's and silu's tails too
      const std::vector<float> gu(arena.begin() + a_off, arena.begin() + a_off + rows * 2 * n);
      const std::vector<float> params(4);
      std::vector<uint32_t> kv(4);
      vk::SpanPush pc{};
      pc.n = n;
      pc.rows = rows;
      pc.a_off = a_off;
      pc.b_off = a_off + n;
      pc.a_stride = pc.b_stride = 2 * n;
      pc.q8_off = q8_off;
      const char* op = gelu ? "span_geglu_q8" : "span_swiglu_q8";
      const uint32_t groups = (n / 4 + FISH_SPAN_WG - 1) / FISH_SPAN_WG;
      ASSERT_TRUE(backend_->run_span_op(op, pc, groups, rows, arena, params, kv).ok()) << op;
      int bad = 0;
      for (uint32_t t = 0; t < rows; ++t) {
        std::vector<float> c(n);
        const float* g = gu.data() + t * 2 * n;
        (gelu ? gelu_tanh_mul_ref : silu_mul_ref)(g, g + n, c.data(), n);
        for (uint32_t k = 0; k < n; ++k)
          bad += !(std::fabs(arena[a_off + t * 2 * n + k] - c[k]) <= 1e-4f * (1 + std::fabs(c[k])));
        for (uint32_t k = 0; k < n; ++k)  // up stays
          bad += arena[a_off + t * 2 * n + n + k] != g[n + k];
        bad += test::q8_copy_errors(arena, q8_off, n, t, c.data());
      }
      EXPECT_EQ(bad, 0) << op << " rows " << rows;
    }
}

TEST(VulkanMatvecKnob, ParsesEveryModeAndRejectsOthers) {
  using vk::MatvecMode;
  for (auto [value, want] : {std::pair<const char*, MatvecMode>{"auto", MatvecMode::automatic},
                             {"0", MatvecMode::automatic},
                             {"idot", MatvecMode::idot},
                             {"fast", MatvecMode::fast},
                             {"generic", MatvecMode::generic},
                             {"1", MatvecMode::generic}}) {
    test::ScopedEnv e("FISH_VK_MATVEC", value);
    auto o = vk::VulkanOptions::from_env();
    ASSERT_TRUE(o.ok()) << value << ": " << o.error().message;
    EXPECT_EQ(o->matvec, want) << value;
  }
  {
    test::ScopedEnv e("FISH_VK_MATVEC", "int8");
    auto o = vk::VulkanOptions::from_env();
    ASSERT_FALSE(o.ok());
    EXPECT_NE(o.error().message.find("FISH_VK_MATVEC='int8'"), std::string::npos)
        << o.error().message;
  }
  {
    test::ScopedEnv e("FISH_VK_IDOT_ROWS", "8");
    auto o = vk::VulkanOptions::from_env();
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ(o->idot_rows, 8u);
  }
  {
    test::ScopedEnv e("FISH_VK_IDOT_WG", "64");
    auto o = vk::VulkanOptions::from_env();
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ(o->idot_wg, 64u);
  }
  {
    test::ScopedEnv e("FISH_VK_IDOT_WG", "auto");
    auto o = vk::VulkanOptions::from_env();
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ(o->idot_wg, 0u);
  }
  {
    test::ScopedEnv e("FISH_VK_IDOT_WG", "48");
    auto o = vk::VulkanOptions::from_env();
    ASSERT_FALSE(o.ok());
    EXPECT_NE(o.error().message.find("FISH_VK_IDOT_WG='48'"), std::string::npos)
        << o.error().message;
  }
  {
    test::ScopedEnv a("FISH_VK_IDOT_AHEAD", "4"), g("FISH_VK_IDOT_GROUPS", "2");
    auto o = vk::VulkanOptions::from_env();
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ(o->idot_ahead, 4u);
    EXPECT_EQ(o->idot_groups, 2u);
  }
  {
    test::ScopedEnv g("FISH_VK_IDOT_GROUPS", "auto");
    auto o = vk::VulkanOptions::from_env();
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ(o->idot_groups, 0u);  // idot_groups' rule
  }
  for (auto [name, value] : {std::pair<const char*, const char*>{"FISH_VK_IDOT_AHEAD", "3"},
                             {"FISH_VK_IDOT_GROUPS", "8"}}) {
    test::ScopedEnv e(name, value);
    auto o = vk::VulkanOptions::from_env();
    ASSERT_FALSE(o.ok()) << name;
    EXPECT_NE(o.error().message.find(fmt::format("{}='{}'", name, value)), std::string::npos)
        << o.error().message;
  }
  test::ScopedEnv e("FISH_VK_IDOT_ROWS", "3");
  auto o = vk::VulkanOptions::from_env();
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message.find("FISH_VK_IDOT_ROWS='3'"), std::string::npos)
      << o.error().message;
}

TEST(VulkanMatvecKnob, RulePicksIdotOnlyWhereItApplies) {
  using vk::MatvecKernel;
  using vk::MatvecMode;
  vk::DeviceFeatures none, dot, fast, narrow;
  none.subgroup_min = dot.subgroup_min = fast.subgroup_min = 32;
  dot.integer_dot = true;
  fast.integer_dot = fast.integer_dot_4x8_fast = true;
  narrow = fast;
  narrow.subgroup_min = 4;  // a block's 8 lanes would span subgroups
  const GgmlType q4k = GgmlType::q4_k, fq3 = GgmlType::fq3;
  EXPECT_EQ(vk::matvec_kernel(q4k, MatvecMode::automatic, fast), MatvecKernel::idot);
  EXPECT_EQ(vk::matvec_kernel(q4k, MatvecMode::automatic, dot), MatvecKernel::fast);
  EXPECT_EQ(vk::matvec_kernel(q4k, MatvecMode::automatic, none), MatvecKernel::fast);
  EXPECT_EQ(vk::matvec_kernel(fq3, MatvecMode::automatic, fast), MatvecKernel::fast);
  EXPECT_EQ(vk::matvec_kernel(q4k, MatvecMode::automatic, narrow), MatvecKernel::fast);
  EXPECT_EQ(vk::matvec_kernel(q4k, MatvecMode::idot, narrow), MatvecKernel::fast);
  EXPECT_EQ(vk::matvec_kernel(q4k, MatvecMode::idot, dot), MatvecKernel::idot);
  EXPECT_EQ(vk::matvec_kernel(fq3, MatvecMode::idot, dot), MatvecKernel::fast);
  EXPECT_EQ(vk::matvec_kernel(q4k, MatvecMode::fast, fast), MatvecKernel::fast);
  EXPECT_EQ(vk::matvec_kernel(q4k, MatvecMode::generic, fast), MatvecKernel::generic);
  EXPECT_EQ(vk::matmul_module(q4k, 1, MatvecKernel::idot), "matvec_idot_q4_k");
  EXPECT_EQ(vk::matmul_module(q4k, FISH_MATVEC_MAX_TOK + 1, MatvecKernel::idot), "matvec8_q4_k");
  EXPECT_EQ(vk::matmul_module(q4k, FISH_MATVEC_WIDE_TOK, MatvecKernel::generic), "matvec8_q4_k");
  EXPECT_EQ(vk::matmul_module(q4k, FISH_MATVEC_WIDE_TOK + 1, MatvecKernel::idot), "matmul_q4_k");
}

// The backend says which decode kernel runs (the gpu line of result rows).
TEST_F(VulkanMatvecIdot, DescribeNamesTheDecodeKernel) {
  std::mt19937 rng(37);
  const std::vector<uint8_t> wd = test::random_weights(GgmlType::q4_k, 4, 256, rng);
  auto h = backend_->upload({wd.data(), GgmlType::q4_k, 256, 4, wd.size(), "describe"});
  ASSERT_TRUE(h.ok());
  EXPECT_NE(backend_->describe().find("decode matvec idot (FISH_VK_MATVEC idot)"),
            std::string::npos)
      << backend_->describe();
  backend_->release(h.value());
}

// The idot span tests' 3-layer llama (8:2 heads of head_dim 64, n_embd 512, n_ff 1024: every
// q8_1 input of a layer fusable).
ModelShape idot_span_shape() {
  return ModelShape{"test-idot-span",
                    "llama",
                    "3-layer idot span llama",
                    3,
                    512,
                    1024,
                    8,
                    2,
                    64,
                    2048,
                    false,
                    512,
                    10000.0f,
                    1e-5f,
                    0};
}

// Every layer of `model` in one span of 64 tokens on backend b (the head too where the options
// ask), and an f32-activation session of n_ctx 64 over it: the idot span tests' setup. Fails the
// test (pl / s empty) where either does not come up on the span.
struct SpanSession {
  std::shared_ptr<GpuPlacement> pl;
  std::unique_ptr<Session> s;
};
SpanSession span_session(const std::shared_ptr<const Model>& model, vk::VulkanBackend& b) {
  SpanSession out;
  out.pl =
      GpuPlacement::place_layers(*model, b, test::placement_request(-1, SpanRequest{64, 64, 8}));
  EXPECT_TRUE(out.pl->span()) << out.pl->summary();
  if (!out.pl->span()) return {};
  SessionOptions so;
  so.n_ctx = 64;
  so.n_batch = 64;  // <= the span's max_tok
  so.act = ActMode::f32;
  so.gpu = out.pl;
  auto s = Session::create(model, so);
  EXPECT_TRUE(s.ok()) << s.error().message;
  if (!s.ok()) return {};
  out.s = std::move(s.value());
  EXPECT_TRUE(out.s->span_active());
  return out;
}

// An idot span decode (idot_span_shape: head_dim, n_embd and n_ff multiples of 32)
// runs no quant_q8_1 step: every matvec input's q8_1 copy comes from the op before it (the norms,
// the attention epilogue, act*mul; FISH_GPU_PROFILE=2 counts the steps per stage), and greedy
// steps run the output head's argmax once per forward, the ids equal to greedy_token of the same
// span's logits. With FISH_VK_NORM_FUSE and FISH_VK_ACT_FUSE on, wo and down run the norms after
// them (matvec_idot_res_) and gate / up the act*mul (matvec_idot_swiglu_): 2 norm dispatches a
// forward (the first layer's, the head's) instead of 2 n_layer + 1, no act*mul step instead of
// n_layer, the same greedy ids.
TEST_F(VulkanMatvecIdot, SpanDecodeFusesEveryQ81InputAndRunsTheHead) {
  auto model =
      test::synthetic_q4_k_m(idot_span_shape(), {19, 3}, "fish_idot_span_fused_3l_q4_k_m.gguf");
  ASSERT_TRUE(model);
  const int64_t n_layer = model->params().n_layer;
  constexpr int kSteps = 6;
  std::vector<int32_t> greedy_by_fuse[2];
  for (int fuse : {0, 1}) {
    SCOPED_TRACE(fmt::format("FISH_VK_NORM_FUSE=FISH_VK_ACT_FUSE={}", fuse));
    auto opt = vk::VulkanOptions::from_env();
    ASSERT_TRUE(opt.ok());
    opt->matvec = vk::MatvecMode::idot;
    opt->profile = 2;
    opt->head = true;
    opt->norm_fuse = opt->act_fuse = fuse;
    vk::VulkanBackend b(opt);
    ASSERT_TRUE(b.open().ok());
    const std::vector<int32_t> prompt = {7, 48};
    std::vector<int32_t>& greedy = greedy_by_fuse[fuse];
    std::vector<int32_t> from_logits;
    std::string profile;
    {
      auto pl = GpuPlacement::place_layers(*model, b,
                                           test::placement_request(-1, SpanRequest{64, 64, 8}));
      ASSERT_TRUE(pl->span()) << pl->summary();
      ASSERT_TRUE(pl->span()->has_head());
      SessionOptions so;
      so.n_ctx = 64;
      so.n_batch = 64;  // <= the span's max_tok
      so.act = ActMode::f32;
      so.gpu = pl;
      auto s = Session::create(model, so);
      ASSERT_TRUE(s.ok()) << s.error().message;
      ASSERT_TRUE(s.value()->span_active());
      auto id = s.value()->forward_greedy(prompt, 0);
      for (int i = 0; id.ok() && i < kSteps; ++i) {
        greedy.push_back(id.value());
        id = s.value()->append_greedy(std::span<const int32_t>(&greedy.back(), 1));
      }
      ASSERT_TRUE(id.ok()) << id.error().message;
      profile = pl->span()->profile();
      auto lg = s.value()->forward(prompt, 0);
      for (int i = 0; lg.ok() && i < kSteps; ++i) {
        from_logits.push_back(greedy_token(lg.value()));
        lg = s.value()->append(std::span<const int32_t>(&from_logits.back(), 1));
      }
      ASSERT_TRUE(lg.ok());
      EXPECT_EQ(s.value()->gpu_fallbacks(), 0);
    }
    EXPECT_EQ(greedy, from_logits);
    if (profile.find("no timestamp support") != std::string::npos) GTEST_SKIP() << profile;
    EXPECT_NE(profile.find("q8_1 0.00 ms 0.0% (0 steps)"), std::string::npos) << profile;
    EXPECT_NE(profile.find(fmt::format("{} forwards", kSteps + 1)), std::string::npos) << profile;
    EXPECT_NE(profile.find(fmt::format("% ({} steps)", kSteps + 1)), std::string::npos) << profile;
    const std::regex norm_re(R"(rmsnorm [0-9.]+ ms [0-9.]+% \((\d+) steps\))");
    std::smatch nm;
    ASSERT_TRUE(std::regex_search(profile, nm, norm_re)) << profile;
    EXPECT_EQ(std::stoll(nm[1]), (kSteps + 1) * (fuse ? 2 : 2 * n_layer + 1)) << profile;
    const std::regex act_re(R"(act\*mul [0-9.]+ ms [0-9.]+% \((\d+) steps\))");
    ASSERT_TRUE(std::regex_search(profile, nm, act_re)) << profile;
    EXPECT_EQ(std::stoll(nm[1]), fuse ? 0 : (kSteps + 1) * n_layer) << profile;
    const size_t a = profile.find("argmax");
    ASSERT_NE(a, std::string::npos) << profile;
    EXPECT_NE(profile.find(fmt::format("({} steps)", kSteps + 1), a), std::string::npos) << profile;
    // The matvec stage by group: the groups' steps add up to the stage's, each decode group with
    // its weights' GB/s.
    const size_t by = profile.find("; matvec by group: [");
    ASSERT_NE(by, std::string::npos) << profile;
    const std::regex stage_re(R"(: matvec [0-9.]+ ms [0-9.]+% \((\d+) steps\))");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(profile, m, stage_re)) << profile;
    const int64_t stage_steps = std::stoll(m[1]);
    const std::regex group_re(
        R"(\] [0-9.]+ ms \((\d+) steps, [0-9.]+ us a step, [0-9]+ GB/s decoding\))");
    int64_t group_steps = 0, n_groups = 0;
    const std::string tail = profile.substr(by);
    for (auto it = std::sregex_iterator(tail.begin(), tail.end(), group_re);
         it != std::sregex_iterator(); ++it, ++n_groups)
      group_steps += std::stoll((*it)[1]);
    EXPECT_GE(n_groups, 5) << profile;  // q/k/v, wo, gate/up, down, the head
    EXPECT_EQ(group_steps, stage_steps) << profile;
    EXPECT_NE(tail.find("q4_k"), std::string::npos) << profile;
  }
  EXPECT_EQ(greedy_by_fuse[0], greedy_by_fuse[1]);
}

// FISH_VK_NORM_FUSE=2: in a one-token decode forward wo and down add into the residual row
// (matvec_idot_acc_) and every workgroup of q/k/v and gate / up computes the rmsnorm in its
// prologue (matvec_idot_pn_, matvec_idot_swiglu_pn_) with the norm dispatch's mapping and order:
// the logits of every decode step are bitwise those of the separate norms (=0), and the decode
// forwards run one norm step (the head's). Two shapes of the kernels: the rule's (2 rows x 32
// threads a row group, 16 groups: gate / up with the act epilogue) and 4 rows x 64 threads (8
// groups of 4 rows: 32 rows a workgroup, still one act block; with FISH_VK_ACT_FUSE=0 the pn
// gate / up then the act*mul op). The pipelined greedy decode gives the same ids in both modes.
// FISH_VK_PN_GRID=1 too: one workgroup an SM, which on a device that does not report its SM count
// (lavapipe) is one workgroup running every row block after one prologue, bitwise the same; and
// with it FISH_VK_PN_FFN=0: q/k/v's prologue with the ffn norm's own dispatch on the residual row
// (1 + n_layer norm steps a decode forward), bitwise the same too.
TEST_F(VulkanMatvecIdot, SpanPrologueNormIsBitwiseTheSeparateNorm) {
  auto model =
      test::synthetic_q4_k_m(idot_span_shape(), {23, 5}, "fish_idot_span_pn_3l_q4_k_m.gguf");
  ASSERT_TRUE(model);
  const int64_t n_layer = model->params().n_layer;
  constexpr int kSteps = 5;
  struct Shape {
    uint32_t rows, wg;
    int act;
  };
  for (const Shape sh : {Shape{2, 0, -1}, Shape{4, 64, 0}}) {
    struct Mode {
      int fuse;
      uint32_t grid;
      int ffn;
    };
    constexpr Mode kModes[] = {{0, 0, -1}, {2, 0, -1}, {2, 1, -1}, {2, 1, 0}};
    constexpr int kNumModes = int(std::size(kModes));
    std::vector<float> logits[kNumModes];
    std::vector<int32_t> ids[kNumModes];
    for (int k = 0; k < kNumModes; ++k) {
      const int mode = kModes[k].fuse;
      SCOPED_TRACE(fmt::format(
          "rows {} wg {} act {} FISH_VK_NORM_FUSE={} FISH_VK_PN_GRID={} FISH_VK_PN_FFN={}", sh.rows,
          sh.wg, sh.act, mode, kModes[k].grid, kModes[k].ffn));
      auto opt = vk::VulkanOptions::from_env();
      ASSERT_TRUE(opt.ok());
      opt->matvec = vk::MatvecMode::idot;
      opt->profile = 2;
      opt->head = true;
      opt->idot_rows = sh.rows;
      opt->idot_wg = sh.wg;
      opt->act_fuse = sh.act;
      opt->norm_fuse = mode;
      opt->pn_grid = kModes[k].grid;
      opt->pn_ffn = kModes[k].ffn;
      vk::VulkanBackend b(opt);
      ASSERT_TRUE(b.open().ok());
      SpanSession ss = span_session(model, b);
      ASSERT_TRUE(ss.s);
      const std::vector<int32_t> prompt = {11, 3, 40};
      auto lg = ss.s->forward(prompt, 0);  // three tokens: the separate norms in both modes
      for (int i = 0; lg.ok() && i < kSteps; ++i) {
        ids[k].push_back(greedy_token(lg.value()));
        logits[k].insert(logits[k].end(), lg.value().begin(), lg.value().end());
        lg = ss.s->append(std::span<const int32_t>(&ids[k].back(), 1));
      }
      ASSERT_TRUE(lg.ok()) << lg.error().message;
      logits[k].insert(logits[k].end(), lg.value().begin(), lg.value().end());
      EXPECT_EQ(ss.s->gpu_fallbacks(), 0);
      {  // The pipelined greedy decode (what fish run / generate time; not under the profile).
        auto opt_p = *opt;
        opt_p.profile = 0;
        vk::VulkanBackend bp(opt_p);
        ASSERT_TRUE(bp.open().ok());
        SpanSession sp = span_session(model, bp);
        ASSERT_TRUE(sp.s);
        ASSERT_TRUE(sp.s->pipelined_decode()) << sp.pl->summary();
        auto first = sp.s->forward_greedy(prompt, 0);
        ASSERT_TRUE(first.ok()) << first.error().message;
        std::vector<int32_t> piped = {first.value()};
        auto n = sp.s->decode_greedy(first.value(), kSteps - 1, [&](int32_t id) {
          piped.push_back(id);
          return true;
        });
        ASSERT_TRUE(n.ok()) << n.error().message;
        EXPECT_EQ(piped, ids[k]) << "pipelined greedy decode against the logits' ids";
        EXPECT_EQ(sp.s->gpu_fallbacks(), 0);
      }
      const bool ffn = mode == 2 && kModes[k].ffn != 0;  // gate / up's prologue too
      EXPECT_EQ(ss.pl->span()->kernels().find("norms in the q/k/v and gate/up prologues") !=
                    std::string::npos,
                ffn)
          << ss.pl->span()->kernels();
      EXPECT_EQ(ss.pl->span()->kernels().find("norms in the q/k/v prologues") != std::string::npos,
                mode == 2 && !ffn)
          << ss.pl->span()->kernels();
      const std::string profile = ss.pl->span()->profile();
      if (profile.find("no timestamp support") != std::string::npos) continue;
      const std::regex norm_re(R"(rmsnorm [0-9.]+ ms [0-9.]+% \((\d+) steps\))");
      std::smatch nm;
      ASSERT_TRUE(std::regex_search(profile, nm, norm_re)) << profile;
      // The prompt's forward: 2 n_layer + 1 norms; each decode forward: 2 n_layer + 1, 1, or
      // 1 + n_layer with the ffn norms as dispatches.
      const int64_t per_decode = mode != 2 ? 2 * n_layer + 1 : ffn ? 1 : 1 + n_layer;
      EXPECT_EQ(std::stoll(nm[1]), (2 * n_layer + 1) + kSteps * per_decode) << profile;
      EXPECT_NE(profile.find("q8_1 0.00 ms 0.0% (0 steps)"), std::string::npos) << profile;
    }
    for (int k = 1; k < kNumModes; ++k) {
      SCOPED_TRACE(
          fmt::format("FISH_VK_PN_GRID={} FISH_VK_PN_FFN={}", kModes[k].grid, kModes[k].ffn));
      EXPECT_EQ(ids[0], ids[k]);
      ASSERT_EQ(logits[0].size(), logits[k].size());
      size_t differ = 0;
      for (size_t i = 0; i < logits[0].size(); ++i)
        differ += std::memcmp(&logits[0][i], &logits[k][i], sizeof(float)) != 0;
      EXPECT_EQ(differ, 0u) << "of " << logits[0].size() << " logits";
    }
  }
}

// The streamed decode attention with idot's q8_1 epilogues, through the span:
// FISH_VK_ATTN_STREAM=1 unsplit (span_attention_stream_q8 writes wo's q8_1 input), 1 with 3
// splits (the partials, then span_attention_combine_q8) and 2 with 3 splits
// (span_attention_stream_last_q8 merges them and writes it) give the greedy ids and, within the
// span tests' 2%, the logits of the span without it (=0), and no step quantises a matvec input
// itself (q8_1: 0 steps).
TEST_F(VulkanMatvecIdot, SpanStreamAttentionWritesTheWoQ81Input) {
  auto model =
      test::synthetic_q4_k_m(idot_span_shape(), {19, 3}, "fish_idot_span_fused_3l_q4_k_m.gguf");
  ASSERT_TRUE(model);
  constexpr int kSteps = 6;
  struct Mode {
    int stream, split;
  };
  constexpr Mode kModes[] = {{0, -1}, {1, -1}, {1, 3}, {2, 3}};
  std::vector<int32_t> ids[4];
  std::vector<float> logits[4];
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(fmt::format("FISH_VK_ATTN_STREAM={} FISH_VK_ATTN_SPLIT={}", kModes[i].stream,
                             kModes[i].split));
    auto opt = vk::VulkanOptions::from_env();
    ASSERT_TRUE(opt.ok());
    opt->matvec = vk::MatvecMode::idot;
    opt->profile = 2;
    opt->attn_stream = kModes[i].stream;
    opt->attn_split = kModes[i].split;
    vk::VulkanBackend b(opt);
    ASSERT_TRUE(b.open().ok());
    SpanSession ss = span_session(model, b);
    ASSERT_TRUE(ss.s);
    EXPECT_EQ(b.describe().find("stream (") != std::string::npos, kModes[i].stream != 0)
        << b.describe();
    const std::vector<int32_t> prompt = {7, 48};
    auto lg = ss.s->forward(prompt, 0);
    for (int k = 0; lg.ok() && k < kSteps; ++k) {
      ids[i].push_back(greedy_token(lg.value()));
      logits[i].insert(logits[i].end(), lg.value().begin(), lg.value().end());
      lg = ss.s->append(std::span<const int32_t>(&ids[i].back(), 1));
    }
    ASSERT_TRUE(lg.ok()) << lg.error().message;
    EXPECT_EQ(ss.s->gpu_fallbacks(), 0);
    const std::string profile = ss.pl->span()->profile();
    if (profile.find("no timestamp support") == std::string::npos) {
      EXPECT_NE(profile.find("q8_1 0.00 ms 0.0% (0 steps)"), std::string::npos) << profile;
    }
  }
  float max_abs = 0;
  for (float v : logits[0]) max_abs = std::max(max_abs, std::abs(v));
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(ids[i], ids[0]) << "mode " << i;
    ASSERT_EQ(logits[i].size(), logits[0].size());
    float diff = 0;
    for (size_t k = 0; k < logits[0].size(); ++k)
      diff = std::max(diff, std::abs(logits[i][k] - logits[0][k]));
    EXPECT_LE(diff, 0.02f * max_abs) << "mode " << i;
  }
}

// FISH_VK_PREFETCH_MB reads weights and writes only its sink: the span's greedy ids and logits
// are bitwise those without it, with 1 MiB a step (the 3-layer model's ~5 MB stream in pieces
// that cross parts and layers) and 256 (all of it at the first step), on the short attention and
// on split streamed attention (a prefetch between the split kernel and its combine, after which
// the ops' set must be bound again), the head and its two-pass argmax included.
TEST_F(VulkanMatvecIdot, SpanPrefetchLeavesIdsAndLogitsBitwiseEqual) {
  auto model =
      test::synthetic_q4_k_m(idot_span_shape(), {19, 3}, "fish_idot_span_fused_3l_q4_k_m.gguf");
  ASSERT_TRUE(model);
  constexpr int kSteps = 5;
  for (int stream : {-1, 1}) {
    std::vector<int32_t> ids[3];
    std::vector<float> logits[3];
    const uint32_t mbs[3] = {0, 1, 256};
    for (int i = 0; i < 3; ++i) {
      SCOPED_TRACE(fmt::format("FISH_VK_PREFETCH_MB={} FISH_VK_ATTN_STREAM={}", mbs[i], stream));
      auto opt = vk::VulkanOptions::from_env();
      ASSERT_TRUE(opt.ok());
      opt->matvec = vk::MatvecMode::idot;
      opt->head = true;
      opt->prefetch_mb = mbs[i];
      opt->attn_stream = stream;
      if (stream == 1) opt->attn_split = 3;
      vk::VulkanBackend b(opt);
      ASSERT_TRUE(b.open().ok());
      SpanSession ss = span_session(model, b);
      ASSERT_TRUE(ss.s);
      ASSERT_TRUE(ss.pl->span()->has_head());
      const std::vector<int32_t> prompt = {7, 48};
      auto id = ss.s->forward_greedy(prompt, 0);  // the head's argmax on the device
      for (int k = 0; id.ok() && k < kSteps; ++k) {
        ids[i].push_back(id.value());
        id = ss.s->append_greedy(std::span<const int32_t>(&ids[i].back(), 1));
      }
      ASSERT_TRUE(id.ok()) << id.error().message;
      auto lg = ss.s->forward(prompt, 0);
      for (int k = 0; lg.ok() && k < kSteps; ++k) {
        logits[i].insert(logits[i].end(), lg.value().begin(), lg.value().end());
        lg = ss.s->append(std::span<const int32_t>(&ids[i][size_t(k)], 1));
      }
      ASSERT_TRUE(lg.ok()) << lg.error().message;
      EXPECT_EQ(ss.s->gpu_fallbacks(), 0);
      // The prefetch ran: its dispatches in the last decode forward (none without it).
      const std::regex pf_re(R"(weight prefetch (\d+) MiB a step \((\d+) dispatches)");
      std::smatch m;
      const std::string desc = b.describe();
      ASSERT_EQ(std::regex_search(desc, m, pf_re), mbs[i] > 0) << desc;
      if (mbs[i] > 0) {
        EXPECT_EQ(std::stoul(m[1]), mbs[i]) << desc;
        EXPECT_GT(std::stoul(m[2]), 0u) << desc;
      }
    }
    for (int i = 1; i < 3; ++i) {
      EXPECT_EQ(ids[i], ids[0]) << "prefetch " << mbs[i] << " MiB, stream " << stream;
      EXPECT_EQ(logits[i], logits[0]) << "prefetch " << mbs[i] << " MiB, stream " << stream;
    }
  }
}

// FISH_VK_IDOT_EXACT in a span: a 3-token forward (a verify's shape: the decode matvecs at 3
// tokens), then one-token steps, give bitwise the logits of the general pipelines; with
// FISH_VK_IDOT_EXACT_FUSED (setting 2) the gate / up act*mul variant's too, and with
// FISH_VK_IDOT_ROWS_MULTI=8 on top (setting 3) the 3-token pipelines' 8 rows a workgroup.
// FISH_VK_IDOT_ROWS_ACT (settings 4 and 5: 8 rows with the exact act pipelines, 4 with the
// general one) changes only how the act*mul variant's rows share workgroups and how many
// arrivals each 32-row block counts: the same logits again.
TEST_F(VulkanMatvecIdot, SpanExactTokenPipelinesLeaveLogitsBitwiseEqual) {
  auto model =
      test::synthetic_q4_k_m(idot_span_shape(), {19, 3}, "fish_idot_span_fused_3l_q4_k_m.gguf");
  ASSERT_TRUE(model);
  struct Setting {
    bool exact, fused;
    uint32_t rows_multi, rows_act;
  };
  const Setting kSettings[] = {
      {false, false, 0, 0}, {true, false, 0, 0}, {true, true, 0, 0},
      {true, true, 8, 0},   {true, true, 0, 8},  {true, false, 0, 4},
  };
  constexpr size_t kN = std::size(kSettings);
  std::vector<float> logits[kN];
  for (size_t i = 0; i < kN; ++i) {
    const Setting& k = kSettings[i];
    SCOPED_TRACE(
        fmt::format("FISH_VK_IDOT_EXACT={} FISH_VK_IDOT_EXACT_FUSED={} ROWS_MULTI={} ROWS_ACT={}",
                    k.exact, k.fused, k.rows_multi, k.rows_act));
    auto opt = vk::VulkanOptions::from_env();
    ASSERT_TRUE(opt.ok());
    opt->matvec = vk::MatvecMode::idot;
    opt->act_fuse = 1;
    opt->idot_exact = k.exact;
    opt->idot_exact_fused = k.fused;
    opt->idot_rows_multi = k.rows_multi;
    opt->idot_rows_act = k.rows_act;
    vk::VulkanBackend b(opt);
    ASSERT_TRUE(b.open().ok());
    SpanSession ss = span_session(model, b);
    ASSERT_TRUE(ss.s);
    const std::vector<int32_t> prompt = {7, 48, 3};
    auto lg = ss.s->forward(prompt, 0);
    for (int32_t tok : {11, 5, 29}) {
      ASSERT_TRUE(lg.ok()) << lg.error().message;
      logits[i].insert(logits[i].end(), lg.value().begin(), lg.value().end());
      lg = ss.s->append(std::span<const int32_t>(&tok, 1));
    }
    ASSERT_TRUE(lg.ok()) << lg.error().message;
    EXPECT_EQ(ss.s->gpu_fallbacks(), 0);
  }
  ASSERT_FALSE(logits[0].empty());
  for (size_t i = 1; i < kN; ++i) EXPECT_EQ(logits[i], logits[0]) << "setting " << i;
}

// FISH_VK_IDOT_FOLD: the span's idot matvecs (q/k/v, the swiglu gate / up, wo, down, the head;
// a 3-token forward on the exact-count pipelines, then one-token steps), with the separate norms
// and with the norms in the consumers' prologue (FISH_VK_NORM_FUSE=2: the pn and acc variants),
// against the same span without it: the same sums in another rounding (which can flip a q8_1 code
// of a later matvec's input: 0.77% of the largest logit on lavapipe), so top-1 equal at every
// position and every logit within the span tests' 2% of the largest.
TEST_F(VulkanMatvecIdot, SpanFoldedScalesMatchTheUnfoldedSpan) {
  auto model =
      test::synthetic_q4_k_m(idot_span_shape(), {19, 3}, "fish_idot_span_fused_3l_q4_k_m.gguf");
  ASSERT_TRUE(model);
  for (const int norm_fuse : {0, 2}) {
    std::vector<float> logits[2];
    for (const bool fold : {false, true}) {
      SCOPED_TRACE(fmt::format("FISH_VK_NORM_FUSE={} FISH_VK_IDOT_FOLD={}", norm_fuse, fold));
      auto opt = vk::VulkanOptions::from_env();
      ASSERT_TRUE(opt.ok());
      opt->matvec = vk::MatvecMode::idot;
      opt->act_fuse = 1;
      opt->norm_fuse = norm_fuse;
      opt->idot_fold = fold;
      vk::VulkanBackend b(opt);
      ASSERT_TRUE(b.open().ok());
      SpanSession ss = span_session(model, b);
      ASSERT_TRUE(ss.s);
      const std::vector<int32_t> prompt = {7, 48, 3};
      auto lg = ss.s->forward(prompt, 0, LogitsMode::all);
      for (int32_t tok : {11, 5, 29}) {
        ASSERT_TRUE(lg.ok()) << lg.error().message;
        logits[fold].insert(logits[fold].end(), lg.value().begin(), lg.value().end());
        lg = ss.s->append(std::span<const int32_t>(&tok, 1));
      }
      ASSERT_TRUE(lg.ok()) << lg.error().message;
      logits[fold].insert(logits[fold].end(), lg.value().begin(), lg.value().end());
      EXPECT_EQ(ss.s->gpu_fallbacks(), 0);
    }
    const int64_t n_vocab = model->params().n_vocab;
    ASSERT_EQ(logits[0].size(), logits[1].size());
    ASSERT_EQ(logits[0].size(), size_t(3 + 3) * size_t(n_vocab));
    double max_abs = 0, max_diff = 0;
    for (size_t i = 0; i < logits[0].size(); ++i) {
      max_abs = std::max(max_abs, std::fabs(double(logits[0][i])));
      max_diff = std::max(max_diff, std::fabs(double(logits[1][i]) - double(logits[0][i])));
    }
    for (size_t p = 0; p < logits[0].size() / size_t(n_vocab); ++p) {
      auto top = [&](const std::vector<float>& v) {
        auto b = v.begin() + std::ptrdiff_t(p * size_t(n_vocab));
        return std::max_element(b, b + n_vocab) - b;
      };
      EXPECT_EQ(top(logits[1]), top(logits[0])) << "norm_fuse " << norm_fuse << " position " << p;
    }
    EXPECT_GT(max_diff, 0.0) << "FOLD changed no rounding: is the constant reaching the kernel?";
    EXPECT_LE(max_diff, 0.02 * max_abs) << "norm_fuse " << norm_fuse;
    std::printf("idot span fold (norm_fuse %d): max |dlogit| %.3g of %.3g\n", norm_fuse, max_diff,
                max_abs);
  }
}

// Span decode with idot: span vs per-matmul (both idot: top-1 equal, logits within the span tests'
// 2%) and top-1 against the CPU engine (f32 activations; a different pick only where the CPU's
// own logits of the two tokens are within that 2%, a near tie the q8_1 rounding may flip), on a
// 3-layer Q4_K_M llama (q4_k and q6_k matrices), 2 prefill tokens then 10 decode steps.
TEST_F(VulkanMatvecIdot, SpanDecodeMatchesPerMatmulAndCpu) {
  auto model = test::synthetic_q4_k_m(idot_span_shape(), {17, 3}, "fish_idot_span_3l_q4_k_m.gguf");
  ASSERT_TRUE(model);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 12; ++i) tokens.push_back(int32_t((i * 41 + 7) % 2048));
  auto run = [&](std::shared_ptr<const GpuPlacement> pl) {
    SessionOptions so;
    so.n_ctx = 64;
    so.n_batch = 64;
    so.act = ActMode::f32;
    so.gpu = std::move(pl);
    auto s = Session::create(model, so);
    EXPECT_TRUE(s.ok()) << s.error().message;
    std::vector<float> all;
    const std::span<const int32_t> t(tokens);
    auto lg = s.value()->forward(t.subspan(0, 2), 0, LogitsMode::all);
    EXPECT_TRUE(lg.ok()) << lg.error().message;
    if (!lg.ok()) return all;
    all.assign(lg.value().begin(), lg.value().end());
    for (size_t i = 2; i < tokens.size(); ++i) {  // decode: n_tok 1 through the matvec kernels
      lg = s.value()->append(t.subspan(i, 1));
      EXPECT_TRUE(lg.ok()) << lg.error().message;
      if (!lg.ok()) return all;
      all.insert(all.end(), lg.value().begin(), lg.value().end());
    }
    EXPECT_EQ(s.value()->gpu_fallbacks(), 0);
    return all;
  };
  // The span with the norms and act*mul fused into the matvecs (FISH_VK_NORM_FUSE and
  // FISH_VK_ACT_FUSE 1), and as dispatches of their own (0).
  auto span_run = [&](int fuse) {
    auto opt = vk::VulkanOptions::from_env();
    EXPECT_TRUE(opt.ok());
    opt->matvec = vk::MatvecMode::idot;
    opt->norm_fuse = opt->act_fuse = fuse;
    vk::VulkanBackend b(opt);
    EXPECT_TRUE(b.open().ok());
    auto pl =
        GpuPlacement::place_layers(*model, b, test::placement_request(-1, SpanRequest{64, 64, 8}));
    EXPECT_TRUE(pl->span()) << pl->summary();
    return run(pl);
  };
  std::vector<float> span_lg = span_run(1), unfused_lg = span_run(0), matmul_lg, cpu_lg;
  matmul_lg = run(GpuPlacement::place_layers(*model, *backend_));
  cpu_lg = run(nullptr);
  const int64_t n_vocab = model->params().n_vocab;
  ASSERT_EQ(span_lg.size(), matmul_lg.size());
  ASSERT_EQ(span_lg.size(), cpu_lg.size());
  int64_t top_matmul = 0, top_cpu = 0, far_misses = 0;
  double max_diff = 0, max_abs = 0, cpu_abs = 0;
  for (float v : cpu_lg) cpu_abs = std::max(cpu_abs, std::fabs(double(v)));
  const int64_t positions = int64_t(span_lg.size()) / n_vocab;
  auto top = [&](const std::vector<float>& v, int64_t p) {
    auto b = v.begin() + p * n_vocab;
    return std::max_element(b, b + n_vocab) - b;
  };
  for (int64_t p = 0; p < positions; ++p) {
    top_matmul += top(span_lg, p) == top(matmul_lg, p);
    top_cpu += top(span_lg, p) == top(cpu_lg, p);
    // A different pick is a near tie when the CPU ranks it within the span tests' logit
    // tolerance (2% of the largest |logit|) of its own top token.
    const auto c = cpu_lg.begin() + p * n_vocab;
    far_misses += double(c[top(cpu_lg, p)] - c[top(span_lg, p)]) > 0.02 * cpu_abs;
  }
  for (size_t i = 0; i < span_lg.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(double(matmul_lg[i])));
    max_diff = std::max(max_diff, std::fabs(double(span_lg[i]) - double(matmul_lg[i])));
  }
  EXPECT_EQ(top_matmul, positions);
  EXPECT_LE(max_diff, 0.02 * max_abs) << "span vs per-matmul (idot)";
  // The fused norms and act*mul compute the unfused ones' values (the norms in another summation
  // order): equal top-1 and logits within 0.5% (a q8_1 code the order flips moves a logit by far
  // less).
  ASSERT_EQ(unfused_lg.size(), span_lg.size());
  int64_t top_unfused = 0;
  double fuse_diff = 0;
  for (int64_t p = 0; p < positions; ++p) top_unfused += top(span_lg, p) == top(unfused_lg, p);
  for (size_t i = 0; i < span_lg.size(); ++i)
    fuse_diff = std::max(fuse_diff, std::fabs(double(span_lg[i]) - double(unfused_lg[i])));
  EXPECT_EQ(top_unfused, positions);
  EXPECT_LE(fuse_diff, 0.02 * max_abs) << "span: FISH_VK_NORM_FUSE / FISH_VK_ACT_FUSE 1 vs 0";
  EXPECT_EQ(far_misses, 0) << "span (idot) vs CPU f32: top-1 " << top_cpu << "/" << positions;
  std::printf(
      "idot span: vs per-matmul max |dlogit| %.4g of %.4g; fused vs unfused norms / act %.4g; "
      "top-1 vs "
      "CPU %lld/%lld (the rest near ties)\n",
      max_diff, max_abs, fuse_diff, (long long)top_cpu, (long long)positions);
}

}  // namespace
}  // namespace fish
