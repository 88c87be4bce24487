// Checks on the paths a command is given, made before anything is read or written.
//
// Inputs are opened only when they are regular files: a FIFO would block the open (it is opened
// O_NONBLOCK, so the check itself never blocks), /dev/zero never ends, a directory is not a
// file. Whole-file reads (JSON, JSONL, text) are capped: the size is checked before a byte is
// read. Outputs must not resolve to an input (same device and inode: the path itself, a hard link
// or a symlink to it), so `fish requant IN IN` cannot replace its input with the lossy result.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"

namespace fish {

// Caps on whole-file reads, in bytes (real files are far smaller: an experiment is a few KB, a
// results file ~2 KB per row).
inline constexpr uint64_t kMaxJsonFileBytes = uint64_t(16) << 20;    // experiment files
inline constexpr uint64_t kMaxResultsFileBytes = uint64_t(1) << 30;  // results JSONL
inline constexpr uint64_t kMaxTextFileBytes = uint64_t(256) << 20;   // prompts, corpora

// "a directory", "a FIFO", "a character device", "a block device", "a socket", "a regular file".
std::string_view file_kind_name(mode_t mode);

struct RegularFile {
  int fd = -1;        // read-only, O_CLOEXEC, blocking again; the caller closes it
  uint64_t size = 0;  // bytes at open
};

// Opens `path` read-only if it is a regular file. Errors name the path and what it is instead:
//   "/tmp/fifo: is a FIFO, expected a regular file"; "x.gguf: cannot open: No such file ...".
Result<RegularFile> open_regular_file(const std::string& path);

// Success when `path` is a regular file of at most max_bytes (for readers that stream the file
// themselves); the errors of open_regular_file and read_regular_file.
Status check_input_file(const std::string& path, uint64_t max_bytes, std::string_view what);

// The whole of a regular file of at most max_bytes; `what` names the file's role in the size
// error: "big.json: 20971520 bytes, over the 16 MiB limit of an experiment file".
Result<std::string> read_regular_file(const std::string& path, uint64_t max_bytes,
                                      std::string_view what);

// Refuses an output path that resolves to one of `inputs` (same device and inode, following
// symlinks) or is a directory; a path that does not exist yet passes. A writer that goes through
// OUT + temp_suffix (GgufWriter: ".tmp") has that path checked too, since it is truncated first.
// Errors: "model.gguf: is the input model.gguf (the same file); write the output to another path".
Status check_output_path(const std::string& out, std::span<const std::string> inputs,
                         std::string_view temp_suffix = "");

// FISH's cache outside any checkout: $FISH_CACHE, else $HOME/.cache/fish, else /tmp/.cache/fish
// (peer builds, bench results, saved reference logits, synthetic models' default home).
std::string fish_cache_dir();

}  // namespace fish
