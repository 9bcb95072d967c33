// Bounded parsing of a source's JSON answers (see json_answer.h).
#include "bdn/sync/json_answer.h"

#include <string>

#include "bdn/sync/source.h"  // WithCode, kInvalidAnswer, kListingTooLarge

namespace bdn::sync {
namespace {

using nlohmann::json;

// nlohmann's DOM builder behind the limits, checked at each event; returning false from an event
// stops the parser at once.
class BoundedSax : public nlohmann::json_sax<json> {
 public:
  BoundedSax(json& out, const JsonAnswerLimits& limits)
      : dom_(out, /*allow_exceptions=*/false), limits_(limits) {}

  bool null() override { return Skipping() || (Count() && dom_.null()); }
  bool boolean(bool v) override { return Skipping() || (Count() && dom_.boolean(v)); }
  bool number_integer(number_integer_t v) override {
    return Skipping() || (Count() && dom_.number_integer(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    return Skipping() || (Count() && dom_.number_unsigned(v));
  }
  bool number_float(number_float_t v, const string_t& s) override {
    return Skipping() || (Count() && dom_.number_float(v, s));
  }
  bool string(string_t& v) override { return Skipping() || (Count() && dom_.string(v)); }
  bool binary(binary_t& v) override { return Skipping() || (Count() && dom_.binary(v)); }
  bool key(string_t& k) override { return Skipping() || dom_.key(k); }
  bool start_object(std::size_t n) override {
    if (!Enter()) return false;
    if (Skipping()) return depth_ != skip_from_ || (Count() && dom_.null());
    return Count() && dom_.start_object(n);
  }
  bool start_array(std::size_t n) override {
    if (!Enter()) return false;
    if (Skipping()) return depth_ != skip_from_ || (Count() && dom_.null());
    return Count() && dom_.start_array(n);
  }
  bool end_object() override { return Leave() || dom_.end_object(); }
  bool end_array() override { return Leave() || dom_.end_array(); }
  bool parse_error(std::size_t pos, const std::string& token,
                   const nlohmann::detail::exception& e) override {
    invalid_ = true;
    return dom_.parse_error(pos, token, e);
  }

  bool too_deep() const { return too_deep_; }
  bool too_many() const { return too_many_; }
  bool invalid() const { return invalid_; }

 private:
  bool Skipping() const { return skip_from_ != 0; }
  bool Count() {
    if (++values_ > limits_.max_values) {
      too_many_ = true;
      return false;
    }
    return true;
  }
  // A container opens: deeper than max_depth stops; below keep_depth it is skipped whole.
  bool Enter() {
    if (++depth_ > limits_.max_depth) {
      too_deep_ = true;
      return false;
    }
    if (!Skipping() && depth_ > limits_.keep_depth) skip_from_ = depth_;
    return true;
  }
  // A container closes; true when it was skipped (nothing to tell the DOM).
  bool Leave() {
    const bool skipped = Skipping();
    if (depth_ == skip_from_) skip_from_ = 0;
    --depth_;
    return skipped;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  const JsonAnswerLimits limits_;
  size_t depth_ = 0;
  size_t skip_from_ = 0;  // the depth of the container being skipped, 0 when none
  size_t values_ = 0;
  bool too_deep_ = false;
  bool too_many_ = false;
  bool invalid_ = false;
};

}  // namespace

Result<json> ParseJsonAnswer(std::string_view text, const JsonAnswerLimits& limits) {
  json j;
  BoundedSax sax(j, limits);
  const bool ok = json::sax_parse(text, &sax, nlohmann::detail::input_format_t::json,
                                  /*strict=*/true);
  if (sax.too_deep()) {
    return Err(WithCode(InvalidArgumentError("the answer nests deeper than " +
                                             std::to_string(limits.max_depth) + " levels"),
                        kInvalidAnswer));
  }
  if (sax.too_many()) {
    return Err(WithCode(
        FailedPreconditionError("the answer holds more than " + std::to_string(limits.max_values) +
                                " JSON values (the most one answer may hold)"),
        kListingTooLarge));
  }
  if (!ok || sax.invalid() || j.is_discarded()) return json(json::value_t::discarded);
  return j;
}

}  // namespace bdn::sync
