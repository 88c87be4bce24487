// Duplicate-key and depth checks over nlohmann's SAX events; see json_strict.h.
#include "harness/json_strict.h"

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fish {
namespace {

using nlohmann::json;

class StrictSax : public nlohmann::json_sax<json> {
 public:
  std::string error;  // the first problem, without the label

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Frame& f = stack_.back();
    f.key = k;
    if (!f.keys.emplace(k, 0).second) {
      error = path() +
              ": duplicate key (JSON objects take each key once; the parser would keep "
              "the last value silently)";
      return false;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;  // malformed text: json::parse reports it with its position
  }

 private:
  struct Frame {
    bool object = false;
    std::map<std::string, int> keys;  // object: keys seen
    std::string key;                  // object: the current key
    size_t index = 0;                 // array: the next element's index
  };

  // A value ends: an array moves to its next index.
  bool value() {
    if (!stack_.empty() && !stack_.back().object) ++stack_.back().index;
    return true;
  }
  bool open(bool object) {
    if (int(stack_.size()) >= kMaxJsonDepth) {
      error = path() + ": nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
      return false;
    }
    stack_.push_back(Frame{object, {}, {}, 0});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return value();
  }
  // "defaults.n_ctx", "sweep.act[1]"; "(top level)" outside any container.
  std::string path() const {
    std::string p;
    for (const Frame& f : stack_) {
      if (f.object) {
        if (f.key.empty()) continue;
        if (!p.empty()) p += '.';
        p += f.key;
      } else {
        p += '[';
        p += std::to_string(f.index);
        p += ']';
      }
    }
    return p.empty() ? "(top level)" : p;
  }

  std::vector<Frame> stack_;
};

}  // namespace

Status check_json_strict(std::string_view text, std::string_view label) {
  StrictSax sax;
  json::sax_parse(text.begin(), text.end(), &sax, nlohmann::detail::input_format_t::json,
                  /*strict=*/true, /*ignore_comments=*/false);
  if (sax.error.empty()) return Status::success();
  return make_error("{}: {}", label, sax.error);
}

}  // namespace fish
