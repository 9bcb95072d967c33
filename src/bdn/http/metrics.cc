// Metrics: families of samples by label text, rendered in the Prometheus text format 0.0.4.
#include "bdn/http/metrics.h"

#include <cmath>
#include <cstdio>
#include <string_view>

namespace bdn::http {
namespace {

std::string EscapeLabel(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string LabelText(const Labels& labels) {
  std::string out;
  for (const auto& [k, v] : labels) {
    if (!out.empty()) out += ',';
    out += k + "=\"" + EscapeLabel(v) + "\"";
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string_view TypeName(Metrics::Type t) {
  switch (t) {
    case Metrics::Type::kCounter:
      return "counter";
    case Metrics::Type::kGauge:
      return "gauge";
    case Metrics::Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

Metrics::Family& Metrics::FamilyLocked(const std::string& name) {
  return families_[name];  // default: a counter without HELP
}

void Metrics::Declare(const std::string& name, Type type, std::string help,
                      std::vector<double> buckets) {
  MutexLock lock(mu_);
  auto [it, inserted] = families_.try_emplace(name);
  if (!inserted && !it->second.help.empty()) return;
  it->second.type = type;
  it->second.help = std::move(help);
  it->second.bounds = std::move(buckets);
}

void Metrics::Add(const std::string& name, const Labels& labels, double delta) {
  std::string key = LabelText(labels);
  MutexLock lock(mu_);
  FamilyLocked(name).samples[key].value += delta;
}

void Metrics::Set(const std::string& name, const Labels& labels, double value) {
  std::string key = LabelText(labels);
  MutexLock lock(mu_);
  FamilyLocked(name).samples[key].value = value;
}

void Metrics::Observe(const std::string& name, const Labels& labels, double value) {
  std::string key = LabelText(labels);
  MutexLock lock(mu_);
  Family& f = FamilyLocked(name);
  Sample& s = f.samples[key];
  if (s.buckets.size() != f.bounds.size()) s.buckets.assign(f.bounds.size(), 0);
  for (size_t i = 0; i < f.bounds.size(); ++i) {
    if (value <= f.bounds[i]) {
      ++s.buckets[i];
      break;
    }
  }
  s.value += value;
  ++s.count;
}

double Metrics::Value(const std::string& name, const Labels& labels) const {
  MutexLock lock(mu_);
  auto f = families_.find(name);
  if (f == families_.end()) return 0;
  auto s = f->second.samples.find(LabelText(labels));
  return s == f->second.samples.end() ? 0 : s->second.value;
}

void Metrics::OnScrape(std::function<void(Metrics&)> sample) {
  MutexLock lock(scrape_mu_);
  on_scrape_.push_back(std::move(sample));
}

std::string Metrics::Render() {
  {
    MutexLock scrape_lock(scrape_mu_);
    for (const auto& sample : on_scrape_) sample(*this);
  }
  MutexLock lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    if (!f.help.empty()) out += "# HELP " + name + " " + f.help + "\n";
    out += "# TYPE " + name + " " + std::string(TypeName(f.type)) + "\n";
    for (const auto& [labels, s] : f.samples) {
      if (f.type != Type::kHistogram) {
        out +=
            name + (labels.empty() ? "" : "{" + labels + "}") + " " + FormatValue(s.value) + "\n";
        continue;
      }
      std::string sep = labels.empty() ? "" : ",";
      uint64_t cumulative = 0;
      for (size_t i = 0; i < f.bounds.size(); ++i) {
        cumulative += i < s.buckets.size() ? s.buckets[i] : 0;
        out += name + "_bucket{" + labels + sep + "le=\"" + FormatValue(f.bounds[i]) + "\"} " +
               std::to_string(cumulative) + "\n";
      }
      out += name + "_bucket{" + labels + sep + "le=\"+Inf\"} " + std::to_string(s.count) + "\n";
      std::string braces = labels.empty() ? "" : "{" + labels + "}";
      out += name + "_sum" + braces + " " + FormatValue(s.value) + "\n";
      out += name + "_count" + braces + " " + std::to_string(s.count) + "\n";
    }
  }
  return out;
}

}  // namespace bdn::http
