// Metrics: Prometheus counters, gauges and histograms in the text exposition format, as the
// server exports them at GET /metrics (docs/http-api.md, "Health and metrics").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bdn/base/mutex.h"

namespace bdn::http {

// Labels of one metric sample, in order: {{"method", "GET"}, {"route", "/v1/chunks/{id}"}}.
using Labels = std::vector<std::pair<std::string, std::string>>;

// Prometheus metrics in the text exposition format (version 0.0.4): counters, gauges, and
// histograms with fixed buckets. Samples are created at first use. Thread-safe.
class Metrics {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  // Declares the family `name` with its HELP text (and bucket upper bounds, in ascending order,
  // for a histogram). Re-declaring is a no-op. Families used before they are declared are
  // counters without HELP.
  void Declare(const std::string& name, Type type, std::string help,
               std::vector<double> buckets = {});
  // Adds `delta` to a counter or gauge sample.
  void Add(const std::string& name, const Labels& labels, double delta);
  // Sets a gauge sample.
  void Set(const std::string& name, const Labels& labels, double value);
  // Records one observation in a histogram sample (the family must be declared as a histogram).
  void Observe(const std::string& name, const Labels& labels, double value);
  // The value of a counter or gauge sample (0 if it does not exist); for tests.
  double Value(const std::string& name, const Labels& labels) const;
  // Registers `sample`, run at the start of every Render (each scrape), in registration order,
  // to Set samples whose values live elsewhere (a cache's counters, a queue's length). It runs
  // on the scraping thread without this object's lock held, so it may call Declare/Add/Set, but
  // not Render.
  void OnScrape(std::function<void(Metrics&)> sample);
  // Runs the OnScrape functions, then renders all families, in name order, in the text format.
  std::string Render();

 private:
  struct Sample {
    double value = 0;               // counter/gauge value; histogram sum
    uint64_t count = 0;             // histogram observations
    std::vector<uint64_t> buckets;  // histogram: observations <= each bound (not cumulative)
  };
  struct Family {
    Type type = Type::kCounter;
    std::string help;
    std::vector<double> bounds;
    std::map<std::string, Sample> samples;  // by rendered label text
  };
  Family& FamilyLocked(const std::string& name) REQUIRES(mu_);

  mutable Mutex mu_;
  std::map<std::string, Family> families_ GUARDED_BY(mu_);
  Mutex scrape_mu_;  // guards on_scrape_ (not held with mu_)
  std::vector<std::function<void(Metrics&)>> on_scrape_ GUARDED_BY(scrape_mu_);
};

}  // namespace bdn::http
