// Saved reference log-probabilities for KL statistics (fish perplexity --reference-model /
// --reference-logits; docs/perplexity.md): a reference model's log-softmax at every scored
// position of a chunked text, computed once and reused by later runs against other models or
// configurations of the same vocabulary.
//
// File layout (little-endian), written front to back while the reference runs:
//   payload   n_chunks x n_scored x n_vocab f16 log-probabilities (n_scored = n_ctx - 1 - first:
//             the positions of a chunk that predict a scored token), chunk-major
//   header    UTF-8 JSON: {"format": 1, "n_vocab", "n_ctx", "first", "n_chunks",
//             "tokens_sha256" (the int32 token ids of all chunks, as scored), "payload_sha256",
//             "model" {path, bytes}, "text" {path, sha256}, "config" (the reference's Config),
//             "created"}
//   trailer   u64 header bytes, then the 8 bytes "FISHLGP1"
// f16 keeps a log-probability to 2^-11 relative (near 0, where the tokens that carry the KL are,
// far better than that in absolute terms); read() renormalises. The file is 2 bytes per
// vocabulary entry and position (SmolLM2: 96 KiB a position, Gemma 3: 512 KiB).
//
// open() checks the trailer, the header and the payload's sha256 before anything is read; a
// file that belongs to another text, chunking or vocabulary is refused by check_matches().
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "base/result.h"
#include "base/sha256.h"

namespace fish {

struct LogitsLayout {
  int64_t n_vocab = 0;
  int64_t n_ctx = 0;  // tokens per chunk
  int64_t first = 0;  // positions [first, n_ctx - 1) of a chunk are scored
  int64_t n_chunks = 0;
  std::string tokens_sha256;  // of the chunks' int32 token ids, in order

  int64_t n_scored() const { return n_ctx - 1 - first; }
};

// Streams a reference file: append() each scored position's log-probabilities in order, then
// finish() writes header and trailer and renames PATH.tmp to PATH. Destroying an unfinished
// writer removes PATH.tmp (a failed run leaves no file that looks complete).
class ReferenceLogitsWriter {
 public:
  static Result<std::unique_ptr<ReferenceLogitsWriter>> create(const std::string& path,
                                                               const LogitsLayout& layout,
                                                               nlohmann::json provenance);
  ~ReferenceLogitsWriter();
  // Precondition: logprobs.size() == n_vocab. Errors: the write's.
  Status append(std::span<const float> logprobs);
  // Errors: fewer positions appended than the layout holds; the write / rename's.
  Status finish();

 private:
  ReferenceLogitsWriter() = default;
  std::string path_, tmp_;
  LogitsLayout layout_;
  nlohmann::json provenance_;
  std::FILE* f_ = nullptr;
  Sha256 sha_;
  int64_t written_ = 0;
  std::vector<uint16_t> buf_;
};

class ReferenceLogits {
 public:
  // Errors name the path: not a FISH reference file, truncated, a bad header, checksum mismatch.
  static Result<ReferenceLogits> open(const std::string& path);
  const LogitsLayout& layout() const { return layout_; }
  const nlohmann::json& header() const { return header_; }
  // Errors (naming the file and both values) when the file was made for another text,
  // chunking or vocabulary than `want`.
  Status check_matches(const LogitsLayout& want) const;
  // Position k (0..n_scored) of chunk c as f32 log-probabilities into out (n_vocab floats),
  // renormalised after the f16 rounding.
  void read(int64_t chunk, int64_t k, float* out) const;

 private:
  std::string path_;
  std::shared_ptr<MappedFile> map_;
  LogitsLayout layout_;
  nlohmann::json header_;
};

// sha256 of the token ids (int32 little-endian), as LogitsLayout::tokens_sha256 holds it.
std::string tokens_sha256(std::span<const int32_t> tokens);

}  // namespace fish
