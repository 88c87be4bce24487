// libFuzzer target: GgufFile::parse on arbitrary bytes, then touches everything the parser
// produced (every metadata value, array element, tensor info, the first and last byte of each
// tensor's data) so ASan sees any out-of-bounds pointer the parser let through.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/gguf.h"

namespace {

volatile uint64_t g_sink;  // keeps the reads from being optimised away

void touch(const fish::GgufValue& v) {
  uint64_t h = uint64_t(v.type());
  if (auto i = v.as_int()) h += uint64_t(*i);
  if (auto u = v.as_uint()) h += *u;
  if (auto d = v.as_double()) h += uint64_t(*d == *d);
  if (const std::string* s = v.as_string()) {
    h += s->size();
    if (!s->empty()) h += uint8_t(s->front()) + uint8_t(s->back());
  }
  if (const fish::GgufArray* a = v.as_array()) {
    h += uint64_t(a->elem_type);
    for (const fish::GgufValue& item : a->items) {
      // The parser promises homogeneous arrays.
      if (item.type() != a->elem_type) __builtin_trap();
      touch(item);
    }
  }
  g_sink = g_sink + h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = fish::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!r.ok()) {
    g_sink = g_sink + r.error().message.size();
    return 0;
  }
  const fish::GgufFile& f = r.value();
  uint64_t h = f.version() + f.alignment() + f.data_offset();
  for (const fish::GgufKv& kv : f.metadata()) {
    touch(kv.value);
    if (f.find(kv.key) != &kv.value) __builtin_trap();  // keys are unique and all findable
    h += kv.key.size() + kv.file_offset;
    // The typed getters must return values or errors, never crash.
    h += f.get_int(kv.key).ok() + f.get_float(kv.key).ok() + f.get_string(kv.key).ok() +
         f.get_bool(kv.key).ok() + f.get_string_array(kv.key).ok() + f.get_f32_array(kv.key).ok() +
         f.get_int_array(kv.key).ok();
  }
  for (const fish::GgufTensorInfo& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) __builtin_trap();
    h += t.n_elems + t.offset + uint64_t(t.n_rows()) + t.row_bytes();
    for (int64_t d : t.dims) h += uint64_t(d);
    if (t.data < data || t.data + t.n_bytes > data + size) __builtin_trap();
    if (t.n_bytes > 0) h += t.data[0] + t.data[t.n_bytes - 1];
  }
  g_sink = g_sink + h;
  return 0;
}
