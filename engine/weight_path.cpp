// Weight paths: the auto rule and the per-model packing for w4a8 / w4a16 (see weight_path.h).
#include "engine/weight_path.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/quantize_w4.h"
#include "kernels/amx.h"

namespace fish {
namespace {

constexpr std::string_view kNames[] = {"auto", "gguf", "w4a8", "w4a16", "ref"};

// n_out rows of fish_i4_type(fmt) from m: m's own rows when it is that type already, an exact
// repack where int4_repack_is_exact (*exact set true when every row was), else fitted.
Result<std::vector<uint8_t>> fish_i4_rows(const MatrixView& m, Int4Format fmt, ThreadPool& pool,
                                          bool* exact) {
  const GgmlType t = fish_i4_type(fmt);
  const size_t out_row = row_bytes(t, m.n_in);
  const auto* src = static_cast<const uint8_t*>(m.data);
  *exact = m.type == t;
  if (m.type == t) return std::vector<uint8_t>(src, src + out_row * size_t(m.n_out));
  const TypeInfo& ti = type_info(m.type);
  if (ti.dequantize_row == nullptr) {
    return make_error("weight path: {}: type {} cannot be decoded for int4 packing", m.name,
                      ti.name);
  }
  const size_t in_row = row_bytes(m.type, m.n_in);
  std::vector<uint8_t> out(out_row * size_t(m.n_out));
  std::vector<uint8_t> row_exact(size_t(m.n_out), 0);
  pool.parallel_for(m.n_out, [&](int64_t b, int64_t e, int) {
    std::vector<float> f(static_cast<size_t>(m.n_in));
    for (int64_t r = b; r < e; ++r) {
      row_exact[size_t(r)] = pack_row_fish_i4(m.type, src + size_t(r) * in_row, m.n_in, fmt,
                                              out.data() + size_t(r) * out_row, f.data());
    }
  });
  *exact = std::all_of(row_exact.begin(), row_exact.end(), [](uint8_t v) { return v != 0; });
  return out;
}

// The format a matrix packs with: a fish_i4 tensor's own group size and zero point (fp from the
// fish_i4fp types, else the file's fish.int4.zero_point); otherwise the options'.
Result<Int4Format> format_for(const MatrixView& m, const Model& model, Int4Format want) {
  if (!is_fish_i4_type(m.type)) {
    if (m.n_in % want.group_size != 0) {
      return make_error(
          "weight path: {}: row length {} is not a multiple of group_size {} (try group_size {})",
          m.name, m.n_in, want.group_size, m.n_in % 64 == 0 ? 64 : 32);
    }
    return want;
  }
  Int4Format f;
  f.group_size = int(type_info(m.type).block_elems);
  if (is_fish_i4fp_type(m.type)) {
    f.zero_point = Int4ZeroPoint::fp;
    return f;
  }
  const GgufValue* zp = model.gguf().find("fish.int4.zero_point");
  const std::string* s = zp != nullptr ? zp->as_string() : nullptr;
  f.zero_point = s != nullptr && *s == "sym" ? Int4ZeroPoint::sym : Int4ZeroPoint::asym;
  return f;
}

}  // namespace

std::string_view weight_path_name(WeightPath p) {
  return kNames[int(p)];
}

std::optional<WeightPath> parse_weight_path(std::string_view s) {
  for (int i = 0; i < 5; ++i) {
    if (kNames[i] == s) return WeightPath(i);
  }
  return std::nullopt;
}

WeightPath resolve_weight_path(WeightPath requested, const Model& model) {
  if (requested != WeightPath::automatic) return requested;
  bool all_int4 = !model.layers().empty();
  for (const LayerWeights& L : model.layers()) {
    for (const MatrixView* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}) {
      all_int4 = all_int4 && is_fish_i4_type(m->type);
    }
  }
  if (!all_int4) return WeightPath::gguf;
  return w4a8_best_isa() == W4A8Isa::amx ? WeightPath::w4a8 : WeightPath::w4a16;
}

Result<std::unique_ptr<Int4Weights>> Int4Weights::build(const Model& model, WeightPath path,
                                                        const WeightPathOptions& opt) {
  if (path != WeightPath::w4a8 && path != WeightPath::w4a16) {
    return make_error("weight path: {} has no packed int4 weights", weight_path_name(path));
  }
  if (!is_valid_int4_group_size(opt.fmt.group_size)) {
    return make_error("weight path: group_size {} is not one of 32, 64, 128", opt.fmt.group_size);
  }
  auto w = std::unique_ptr<Int4Weights>(new Int4Weights());
  w->path_ = path;
  w->opt_ = opt;
  w->head_ = &model.output();
  ThreadPool pool;
  const W4A16Options w16{opt.prefill_dequant, opt.direct_dequant, opt.dequant_threshold};
  auto pack = [&](const MatrixView& m) -> Status {
    if (w->by_data_.count(m.data) != 0) return Status::success();
    FISH_ASSIGN_OR_RETURN(const Int4Format fmt, format_for(m, model, opt.fmt));
    bool exact = false;
    FISH_ASSIGN_OR_RETURN(std::vector<uint8_t> rows, fish_i4_rows(m, fmt, pool, &exact));
    ++w->matrices_;
    if (exact) ++w->exact_matrices_;
    Int4Vnni16 v;
    Int4Blocks64 b;
    const bool a8 = path == WeightPath::w4a8;
    if (!int4_from_fish_i4(rows.data(), m.n_out, m.n_in, fmt, a8 ? &v : nullptr,
                           a8 ? nullptr : &b)) {
      return make_error("weight path: {}: fish.int4.zero_point is sym but a group's zero is not 8",
                        m.name);
    }
    size_t bytes = 0;
    if (a8) {
      bytes = v.bytes();
      w->by_data_.emplace(m.data, std::move(v));
    } else {
      W4A16Weights packed = make_w4a16_weights(std::move(b), w16);
      bytes = packed.bytes();
      if (packed.duplicate) w->duplicate_bytes_ += packed.duplicate->bytes();
      w->bytes_per_token_ += packed.packed.bytes();
      w->by_data_.emplace(m.data, std::move(packed));
    }
    if (a8) w->bytes_per_token_ += bytes;
    w->packed_bytes_ += bytes;
    return Status::success();
  };
  for (const LayerWeights& L : model.layers()) {
    for (const MatrixView* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}) {
      FISH_TRY(pack(*m));
    }
  }
  if (opt.quantize_head) {
    FISH_TRY(pack(model.output()));
    w->head_packed_ = true;
  } else {
    w->bytes_per_token_ += model.output().n_bytes;
  }
  const MatrixView& e = model.token_embd();
  if (opt.quantize_embedding && !is_fish_i4_type(e.type)) {
    FISH_ASSIGN_OR_RETURN(const Int4Format fmt, format_for(e, model, opt.fmt));
    bool exact = false;
    FISH_ASSIGN_OR_RETURN(w->embedding_, fish_i4_rows(e, fmt, pool, &exact));
    w->embedding_type_ = fish_i4_type(fmt);
    w->n_embd_ = e.n_in;
    w->embd_scale_ = model.params().embd_scale;
    w->packed_bytes_ += w->embedding_.size();
  }
  return w;
}

bool Int4Weights::matmul(const MatrixView& w, const float* x, int64_t n, float* y,
                         ThreadPool& pool) const {
  const auto it = by_data_.find(w.data);
  if (it == by_data_.end()) return false;
  if (const auto* v = std::get_if<Int4Vnni16>(&it->second)) {
    matmul_w4a8(*v, x, n, y, pool);
  } else {
    const W4A16Options w16{opt_.prefill_dequant, opt_.direct_dequant, opt_.dequant_threshold};
    matmul_w4a16(std::get<W4A16Weights>(it->second), x, n, y, pool, w16);
  }
  return true;
}

bool Int4Weights::matvec_group(std::span<const MatrixView* const> ws, std::span<float* const> ys,
                               const float* x, ThreadPool& pool) const {
  constexpr size_t kMax = 4;
  if (ws.empty() || ws.size() > kMax) return false;
  const Packed* packed[kMax];
  int64_t first[kMax + 1] = {0};  // prefix sums of work units (tiles or blocks)
  for (size_t i = 0; i < ws.size(); ++i) {
    const auto it = by_data_.find(ws[i]->data);
    if (it == by_data_.end() || ws[i]->n_in != ws[0]->n_in) return false;
    packed[i] = &it->second;
    int64_t units = 0;
    int gs = 0;
    if (const auto* v = std::get_if<Int4Vnni16>(packed[i])) {
      units = v->tiles();
      gs = v->fmt.group_size;
    } else {
      const Int4Blocks64& b = std::get<W4A16Weights>(*packed[i]).packed;
      units = w4a16_block_count(b);
      gs = b.fmt.group_size;
    }
    const Packed* p0 = packed[0];
    const int gs0 = std::holds_alternative<Int4Vnni16>(*p0)
                        ? std::get<Int4Vnni16>(*p0).fmt.group_size
                        : std::get<W4A16Weights>(*p0).packed.fmt.group_size;
    if (gs != gs0 || packed[i]->index() != p0->index()) return false;
    first[i + 1] = first[i] + units;
  }
  const int64_t n = ws.size();
  const int64_t total = first[n];
  const int64_t n_in = ws[0]->n_in;
  // Runs units [b, e) of the concatenation, matrix by matrix.
  auto for_units = [&](int64_t b, int64_t e, auto&& run) {
    for (int64_t i = 0; i < n && b < e; ++i) {
      const int64_t lo = std::max(b, first[i]), hi = std::min(e, first[i + 1]);
      if (lo < hi) run(i, lo - first[i], hi - first[i]);
    }
  };
  if (std::holds_alternative<Int4Vnni16>(*packed[0])) {
    thread_local W4A8Acts acts_buf;  // the caller's; workers see it through acts
    W4A8Acts& acts = acts_buf;
    quantize_w4a8_acts(x, 1, n_in, std::get<Int4Vnni16>(*packed[0]).fmt.group_size, acts);
    const W4A8Isa isa = w4a8_best_isa();
    pool.parallel_for(total, [&](int64_t b, int64_t e, int) {
      for_units(b, e, [&](int64_t i, int64_t t0, int64_t t1) {
        w4a8_tiles(std::get<Int4Vnni16>(*packed[i]), acts, t0, t1, ys[size_t(i)], isa);
      });
    });
  } else {
    thread_local W4A16Acts acts_buf;
    W4A16Acts& acts = acts_buf;
    prepare_w4a16_acts(x, 1, n_in, std::get<W4A16Weights>(*packed[0]).packed.fmt.group_size, acts);
    const W4A16Isa isa = w4a16_best_isa();
    pool.parallel_for(total, [&](int64_t b, int64_t e, int) {
      for_units(b, e, [&](int64_t i, int64_t b0, int64_t b1) {
        w4a16_blocks(std::get<W4A16Weights>(*packed[i]).packed, acts, b0, b1, ys[size_t(i)], isa);
      });
    });
  }
  return true;
}

bool Int4Weights::embed(int32_t token, float* out) const {
  if (embedding_.empty()) return false;
  const size_t row = row_bytes(embedding_type_, n_embd_);
  type_info(embedding_type_).dequantize_row(embedding_.data() + size_t(token) * row, out, n_embd_);
  for (int64_t i = 0; i < n_embd_; ++i) out[i] *= embd_scale_;
  return true;
}

std::string Int4Weights::describe() const {
  const std::string isa = path_ == WeightPath::w4a8 ? std::string(w4a8_isa_name(w4a8_best_isa()))
                                                    : std::string(w4a16_isa_name(w4a16_best_isa()));
  return fmt::format(
      "{} ({}) g{} {}, head {}, embedding {}, {:.1f} MB packed ({:.1f} MB row-major duplicates), "
      "{}/{} matrices repacked exactly",
      weight_path_name(path_), isa, opt_.fmt.group_size, int4_zero_point_name(opt_.fmt.zero_point),
      head_packed_ ? "int4" : "gguf", embedding_.empty() ? "gguf" : "int4",
      double(packed_bytes_) / 1e6, double(duplicate_bytes_) / 1e6, exact_matrices_, matrices_);
}

}  // namespace fish
