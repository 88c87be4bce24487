// quantize-w4: see quantize_w4.h.
#include "engine/quantize_w4.h"

#include <array>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/gguf.h"
#include "kernels/thread_pool.h"
#include "quant/dequantize.h"

namespace fish {
namespace {

bool is_linear_weight(std::string_view name) {
  if (!name.starts_with("blk.")) return false;
  constexpr std::array<std::string_view, 7> kSuffixes = {
      ".attn_q.weight",   ".attn_k.weight", ".attn_v.weight",  ".attn_output.weight",
      ".ffn_gate.weight", ".ffn_up.weight", ".ffn_down.weight"};
  for (std::string_view s : kSuffixes) {
    if (name.ends_with(s)) return true;
  }
  return false;
}

// Packs rows of `src` (any decodable type) into fish_i4 rows (pack_row_fish_i4: exact where the
// source allows, else dequantised and fitted), rows split across the pool; adds the repack error
// (the packed rows decoded against the source's f32) to *err.
Status pack_rows(const GgufTensorInfo& src, const QuantizeW4Options& opt, ThreadPool& pool,
                 std::span<uint8_t> out, QuantizeW4TypeError* err) {
  const GgmlType out_type = fish_i4_type(opt.fmt);
  const int64_t n_in = src.dims[0];
  const int64_t n_rows = src.n_rows();
  const size_t in_row = src.row_bytes();
  const size_t out_row = row_bytes(out_type, n_in);
  std::vector<std::vector<float>> scratch(size_t(pool.size()));
  std::vector<std::vector<float>> back(size_t(pool.size()));
  std::vector<Status> status(size_t(pool.size()), Status::success());
  std::vector<double> err_sq(size_t(pool.size()), 0.0), ref_sq(size_t(pool.size()), 0.0);
  pool.parallel_for(n_rows, [&](int64_t b, int64_t e, int slice) {
    std::vector<float>& f = scratch[size_t(slice)];
    std::vector<float>& fb = back[size_t(slice)];
    f.resize(size_t(n_in));
    fb.resize(size_t(n_in));
    for (int64_t r = b; r < e; ++r) {
      const uint8_t* row = src.data + size_t(r) * in_row;
      // Decodes once with the checked dequantiser (non-finite values are an error naming the
      // tensor); the fit below decodes again into the same scratch.
      Status st = dequantize_row_checked(src.type, row, f.data(), n_in, src.name);
      if (!st.ok()) {
        status[size_t(slice)] = std::move(st);
        return;
      }
      uint8_t* dst = out.data() + size_t(r) * out_row;
      pack_row_fish_i4(src.type, row, n_in, opt.fmt, dst, f.data());
      // f holds the source row's f32 either way (the fit decodes the same values into it).
      type_info(out_type).dequantize_row(dst, fb.data(), n_in);
      for (int64_t i = 0; i < n_in; ++i) {
        const double d = double(fb[size_t(i)]) - double(f[size_t(i)]);
        err_sq[size_t(slice)] += d * d;
        ref_sq[size_t(slice)] += double(f[size_t(i)]) * f[size_t(i)];
      }
    }
  });
  ++err->tensors;
  for (size_t i = 0; i < err_sq.size(); ++i) {
    err->err_sq += err_sq[i];
    err->ref_sq += ref_sq[i];
  }
  for (Status& st : status) {
    if (!st.ok()) return std::move(st);
  }
  return Status::success();
}

}  // namespace

Result<QuantizeW4Summary> quantize_w4_gguf(const std::string& in_path, const std::string& out_path,
                                           const QuantizeW4Options& opt) {
  if (!is_valid_int4_group_size(opt.fmt.group_size)) {
    return make_error("quantize-w4: group size {} is not one of 32, 64, 128", opt.fmt.group_size);
  }
  FISH_ASSIGN_OR_RETURN(GgufFile in, GgufFile::open(in_path));
  auto file = std::make_shared<GgufFile>(std::move(in));
  auto pool = std::make_shared<ThreadPool>(opt.n_threads);
  const GgmlType out_type = fish_i4_type(opt.fmt);

  GgufWriter w(file->alignment());
  for (const GgufKv& kv : file->metadata()) w.set(kv.key, kv.value);
  w.set("fish.int4.group_size", gguf_u32(uint32_t(opt.fmt.group_size)));
  w.set("fish.int4.zero_point", gguf_str(std::string(int4_zero_point_name(opt.fmt.zero_point))));
  w.set("fish.int4.quantize_head", gguf_bool(opt.quantize_head));
  w.set("fish.int4.quantize_embedding", gguf_bool(opt.quantize_embedding));

  QuantizeW4Summary sum;
  auto add_packed = [&](const GgufTensorInfo& t, const std::string& name) -> Status {
    if (t.dims.size() != 2 && !(t.dims.size() == 3 && t.dims[2] == 1)) {
      return make_error("quantize-w4: {}: tensor {} has {} dims, expected a 2-D matrix", in_path,
                        t.name, t.dims.size());
    }
    if (t.dims[0] % opt.fmt.group_size != 0) {
      return make_error(
          "quantize-w4: {}: tensor {}: row length {} is not a multiple of the group size {} "
          "(try --group-size 32)",
          in_path, t.name, t.dims[0], opt.fmt.group_size);
    }
    if (type_info(t.type).dequantize_row == nullptr) {
      return make_error("quantize-w4: {}: tensor {} has type {}, which FISH cannot decode", in_path,
                        t.name, type_name(t.type));
    }
    if (int4_repack_is_exact(t.type, opt.fmt)) ++sum.tensors_exact;
    const GgufTensorInfo* src = &t;
    QuantizeW4TypeError* err = &sum.error_by_type[t.type];  // map nodes are stable
    w.add_tensor(name, out_type, t.dims, [src, file, pool, opt, err](std::span<uint8_t> out) {
      return pack_rows(*src, opt, *pool, out, err);
    });
    ++sum.tensors_packed;
    sum.bytes_packed_in += t.n_bytes;
    sum.bytes_packed_out += row_bytes(out_type, t.dims[0]) * uint64_t(t.n_rows());
    return Status::success();
  };

  const bool tied = file->find_tensor("output.weight") == nullptr;
  for (const GgufTensorInfo& t : file->tensors()) {
    const bool pack = is_linear_weight(t.name) ||
                      (t.name == "output.weight" && opt.quantize_head) ||
                      (t.name == "token_embd.weight" && opt.quantize_embedding);
    if (pack) {
      FISH_TRY(add_packed(t, t.name));
    } else {
      w.add_tensor(t.name, t.type, t.dims, std::span<const uint8_t>(t.data, size_t(t.n_bytes)));
      ++sum.tensors_copied;
    }
    if (t.name == "token_embd.weight" && tied && opt.quantize_head) {
      FISH_TRY(add_packed(t, "output.weight"));  // untie: the head gets its own int4 copy
      sum.untied_head = true;
    }
  }
  FISH_TRY(w.write(out_path));
  return sum;
}

}  // namespace fish
