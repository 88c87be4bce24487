// Saved reference log-probabilities; see reference_logits.h.
#include "harness/reference_logits.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "quant/f16.h"

namespace fish {
namespace {

constexpr char kMagic[8] = {'F', 'I', 'S', 'H', 'L', 'G', 'P', '1'};
constexpr int kFormat = 1;
constexpr size_t kTrailerBytes = 8 + sizeof(kMagic);

Result<int64_t> header_int(const nlohmann::json& h, const char* key, const std::string& path) {
  auto it = h.find(key);
  if (it == h.end() || !it->is_number_integer() || it->get<int64_t>() < 0)
    return make_error("{}: reference logits header: '{}' missing or not a non-negative integer",
                      path, key);
  return it->get<int64_t>();
}

}  // namespace

std::string tokens_sha256(std::span<const int32_t> tokens) {
  Sha256 h;
  for (int32_t t : tokens) {
    const uint8_t b[4] = {uint8_t(t), uint8_t(t >> 8), uint8_t(t >> 16), uint8_t(t >> 24)};
    h.update(b, 4);
  }
  return h.finish_hex();
}

Result<std::unique_ptr<ReferenceLogitsWriter>> ReferenceLogitsWriter::create(
    const std::string& path, const LogitsLayout& layout, nlohmann::json provenance) {
  if (layout.n_vocab <= 0 || layout.n_scored() <= 0 || layout.n_chunks <= 0)
    return make_error("{}: nothing to save ({} chunks of {} scored positions)", path,
                      layout.n_chunks, layout.n_scored());
  std::unique_ptr<ReferenceLogitsWriter> w(new ReferenceLogitsWriter());
  w->path_ = path;
  w->tmp_ = path + ".tmp";
  w->layout_ = layout;
  w->provenance_ = std::move(provenance);
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  w->f_ = std::fopen(w->tmp_.c_str(), "wb");
  if (w->f_ == nullptr) return make_error("{}: cannot write: {}", w->tmp_, std::strerror(errno));
  w->buf_.resize(size_t(layout.n_vocab));
  return w;
}

ReferenceLogitsWriter::~ReferenceLogitsWriter() {
  if (f_ != nullptr) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

Status ReferenceLogitsWriter::append(std::span<const float> logprobs) {
  if (int64_t(logprobs.size()) != layout_.n_vocab)
    return make_error("{}: a position of {} log-probabilities, the vocabulary has {}", path_,
                      logprobs.size(), layout_.n_vocab);
  for (size_t i = 0; i < logprobs.size(); ++i) buf_[i] = f32_to_f16(logprobs[i]);
  const size_t n = buf_.size() * sizeof(uint16_t);
  sha_.update(buf_.data(), n);
  if (std::fwrite(buf_.data(), 1, n, f_) != n)
    return make_error("{}: write failed: {}", tmp_, std::strerror(errno));
  ++written_;
  return Status();
}

Status ReferenceLogitsWriter::finish() {
  const int64_t want = layout_.n_chunks * layout_.n_scored();
  if (written_ != want)
    return make_error("{}: {} positions written, the layout holds {}", path_, written_, want);
  nlohmann::json h = provenance_;
  h["format"] = kFormat;
  h["n_vocab"] = layout_.n_vocab;
  h["n_ctx"] = layout_.n_ctx;
  h["first"] = layout_.first;
  h["n_chunks"] = layout_.n_chunks;
  h["tokens_sha256"] = layout_.tokens_sha256;
  h["payload_sha256"] = sha_.finish_hex();
  const std::string text = h.dump();
  uint8_t trailer[kTrailerBytes];
  const uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) trailer[i] = uint8_t(len >> (8 * i));
  std::memcpy(trailer + 8, kMagic, sizeof(kMagic));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f_) == text.size() &&
                  std::fwrite(trailer, 1, sizeof(trailer), f_) == sizeof(trailer) &&
                  std::fflush(f_) == 0 && fsync(fileno(f_)) == 0;
  const int err = errno;
  std::fclose(f_);
  f_ = nullptr;
  if (!ok) {
    std::remove(tmp_.c_str());
    return make_error("{}: write failed: {}", tmp_, std::strerror(err));
  }
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) {
    std::remove(tmp_.c_str());
    return make_error("{}: cannot rename from {}: {}", path_, tmp_, ec.message());
  }
  return Status();
}

Result<ReferenceLogits> ReferenceLogits::open(const std::string& path) {
  FISH_ASSIGN_OR_RETURN(MappedFile m, MappedFile::open(path));
  const uint8_t* d = m.data();
  const size_t size = m.size();
  if (size < kTrailerBytes || std::memcmp(d + size - sizeof(kMagic), kMagic, sizeof(kMagic)) != 0)
    return make_error("{}: not a FISH reference-logits file (no FISHLGP1 trailer; truncated?)",
                      path);
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= uint64_t(d[size - kTrailerBytes + size_t(i)]) << (8 * i);
  if (len > size - kTrailerBytes)
    return make_error("{}: header length {} exceeds the file ({} bytes)", path, len, size);
  const size_t header_at = size - kTrailerBytes - size_t(len);
  nlohmann::json h = nlohmann::json::parse(d + header_at, d + header_at + len, nullptr,
                                           /*allow_exceptions=*/false);
  if (!h.is_object()) return make_error("{}: reference logits header is not a JSON object", path);
  FISH_ASSIGN_OR_RETURN(int64_t format, header_int(h, "format", path));
  if (format != kFormat)
    return make_error("{}: reference logits format {} (this FISH reads {})", path, format, kFormat);
  ReferenceLogits r;
  r.path_ = path;
  FISH_ASSIGN_OR_RETURN(r.layout_.n_vocab, header_int(h, "n_vocab", path));
  FISH_ASSIGN_OR_RETURN(r.layout_.n_ctx, header_int(h, "n_ctx", path));
  FISH_ASSIGN_OR_RETURN(r.layout_.first, header_int(h, "first", path));
  FISH_ASSIGN_OR_RETURN(r.layout_.n_chunks, header_int(h, "n_chunks", path));
  if (!h.contains("tokens_sha256") || !h["tokens_sha256"].is_string() ||
      !h.contains("payload_sha256") || !h["payload_sha256"].is_string())
    return make_error("{}: reference logits header lacks tokens_sha256 / payload_sha256", path);
  r.layout_.tokens_sha256 = h["tokens_sha256"].get<std::string>();
  if (r.layout_.n_scored() <= 0)
    return make_error("{}: header has no scored positions (n_ctx {}, first {})", path,
                      r.layout_.n_ctx, r.layout_.first);
  const uint64_t payload = uint64_t(r.layout_.n_chunks) * uint64_t(r.layout_.n_scored()) *
                           uint64_t(r.layout_.n_vocab) * sizeof(uint16_t);
  if (payload != header_at)
    return make_error("{}: payload of {} bytes, the header describes {} ({} chunks x {} x {})",
                      path, header_at, payload, r.layout_.n_chunks, r.layout_.n_scored(),
                      r.layout_.n_vocab);
  const std::string got = sha256_hex(d, header_at);
  if (got != h["payload_sha256"].get<std::string>())
    return make_error("{}: payload sha256 {} does not match the header's {} (corrupt file)", path,
                      got, h["payload_sha256"].get<std::string>());
  r.header_ = std::move(h);
  r.map_ = std::make_shared<MappedFile>(std::move(m));
  return r;
}

Status ReferenceLogits::check_matches(const LogitsLayout& want) const {
  auto differs = [&](const char* what, const auto& file, const auto& run) -> Status {
    return make_error(
        "{}: made for {} {}, this run has {} (a reference file belongs to one text, chunking "
        "and vocabulary: remake it with --reference-model)",
        path_, what, file, run);
  };
  if (layout_.n_vocab != want.n_vocab)
    return differs("a vocabulary of", layout_.n_vocab, want.n_vocab);
  if (layout_.n_ctx != want.n_ctx) return differs("chunks of", layout_.n_ctx, want.n_ctx);
  if (layout_.first != want.first)
    return differs("first scored position", layout_.first, want.first);
  if (layout_.n_chunks != want.n_chunks)
    return differs("a chunk count of", layout_.n_chunks, want.n_chunks);
  if (layout_.tokens_sha256 != want.tokens_sha256)
    return differs("tokens with sha256", layout_.tokens_sha256, want.tokens_sha256);
  return Status();
}

void ReferenceLogits::read(int64_t chunk, int64_t k, float* out) const {
  const size_t n = size_t(layout_.n_vocab);
  const auto* p = reinterpret_cast<const uint16_t*>(map_->data()) +
                  (size_t(chunk) * size_t(layout_.n_scored()) + size_t(k)) * n;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    uint16_t v;
    std::memcpy(&v, p + i, 2);
    out[i] = f16_to_f32(v);
    sum += std::exp(double(out[i]));
  }
  // Renormalised: f16 rounding moves the probabilities' sum off 1 by up to ~1e-4, which would
  // enter every KL term; after this, what remains is second order (rounding x log-ratio).
  const float lse = float(std::log(sum));
  for (size_t i = 0; i < n; ++i) out[i] -= lse;
}

}  // namespace fish
