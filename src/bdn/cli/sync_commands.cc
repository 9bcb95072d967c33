// bdn volume sync start|describe|list|cancel and bdn secret set|ls|rm (docs/spec.md §6;
// docs/sync.md): over a bdn serve origin (the jobs run there) or the embedded store (the job runs
// here).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <iterator>
#include <thread>
#include <utility>
#include <vector>

#include "bdn/api/sync_json.h"
#include "bdn/base/mutex.h"
#include "bdn/base/signals.h"
#include "bdn/base/text.h"
#include "bdn/base/units.h"
#include "bdn/cli/commands.h"
#include "bdn/cli/output.h"
#include "bdn/cli/progress.h"
#include "bdn/registry/secret_store.h"
#include "bdn/registry/sync_job_store.h"
#include "bdn/remote/remote_sync.h"
#include "bdn/sync/job_runner.h"
#include "bdn/sync/secrets.h"
#include "bdn/sync/service.h"
#include "bdn/sync/source_uri.h"  // ShownSource

namespace bdn::cli {
namespace {

using nlohmann::json;

// Set by a stop signal (StopSignals: SIGINT, SIGTERM, SIGHUP, ...) while a sync command waits or
// runs a job.
std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted = true; }

// Catches the stop signals this process does not ignore (StopSignalsNotIgnored, base/signals.h:
// nohup's SIGHUP stays ignored) for its lifetime, and ignores SIGPIPE (a reader of its output
// that went away, `| head`, must not end the job), restoring the old handlers after: Ctrl-C,
// kill, a closed terminal (SIGHUP) end a wait or an embedded job cleanly.
class InterruptCatcher {
 public:
  InterruptCatcher() {
    g_interrupted = false;
    struct sigaction sa = {};
    sa.sa_handler = OnInterrupt;
    sigemptyset(&sa.sa_mask);
    for (int sig : StopSignalsNotIgnored()) {
      struct sigaction old = {};
      if (sigaction(sig, &sa, &old) == 0) old_.emplace_back(sig, old);
    }
    struct sigaction ignore = {}, old_pipe = {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    if (sigaction(SIGPIPE, &ignore, &old_pipe) == 0) old_.emplace_back(SIGPIPE, old_pipe);
  }
  ~InterruptCatcher() {
    for (const auto& [sig, old] : old_) sigaction(sig, &old, nullptr);
  }
  InterruptCatcher(const InterruptCatcher&) = delete;
  InterruptCatcher& operator=(const InterruptCatcher&) = delete;

 private:
  std::vector<std::pair<int, struct sigaction>> old_;
};

// The Status of a command the user interrupted (exit 130, reason kInterruptedReason).
Status Interrupted(const std::string& message) {
  return Status(StatusCode::kInternal, message).WithReason(std::string(kInterruptedReason));
}

// The embedded service: the job table and the secrets in the registry's database under
// ctx.home, the secrets' key in ctx.home/secrets.key.
Result<std::shared_ptr<sync::LocalSyncService>> OpenLocal(const Context& ctx) {
  sync::RunnerDeps deps;
  deps.store = ctx.store;
  deps.registry = ctx.registry;
  BDN_ASSIGN_OR_RETURN(auto jobs, SqliteSyncJobStore::Open(ctx.home / "registry.db"));
  deps.jobs = std::move(jobs);
  BDN_ASSIGN_OR_RETURN(auto secrets, SqliteSecretStore::Open(ctx.home / "registry.db"));
  BDN_ASSIGN_OR_RETURN(deps.secrets,
                       sync::SecretVault::Open(std::move(secrets), ctx.home / "secrets.key"));
  return std::make_shared<sync::LocalSyncService>(std::move(deps));
}

// The jobs and secrets of the context's origin when it has one (Context::origin), else the
// embedded ones.
Result<std::shared_ptr<sync::SyncService>> OpenService(const Context& ctx) {
  if (ctx.origin) {
    return std::shared_ptr<sync::SyncService>(
        std::make_shared<remote::RemoteSyncService>(ctx.origin));
  }
  BDN_ASSIGN_OR_RETURN(auto local, OpenLocal(ctx));
  return std::shared_ptr<sync::SyncService>(std::move(local));
}

std::string FormatTime(int64_t unix_ms) { return unix_ms == 0 ? "-" : FormatUnixMs(unix_ms); }

std::string Dest(const SyncJobRecord& job) {
  return "bdn:" + job.spec.ns + "/" + job.spec.volume +
         (job.spec.tag.empty() ? "" : ":" + job.spec.tag);
}

std::string VersionRef(const SyncJobRecord& job) {
  return job.version ? "bdn:" + job.spec.ns + "/" + job.spec.volume + "@" + job.version->ToString()
                     : std::string();
}

std::string ProgressText(const SyncJobRecord& job) {
  const SyncProgress& p = job.progress;
  return std::to_string(p.objects_done) + "/" + std::to_string(p.objects_total) + " objects, " +
         FormatBytes(p.bytes_done) + "/" + FormatBytes(p.bytes_total);
}

// ", 2 symlinks or special files left out (…)" when the job left entries out, else "".
std::string LeftOutText(const SyncJobRecord& job) {
  const uint64_t n = job.progress.objects_left_out;
  if (n == 0) return "";
  return "; " + std::to_string(n) +
         (n == 1 ? " symlink or special file" : " symlinks or special files") +
         " left out (a sync holds regular files only)";
}

// What a terminal job prints: the pinned ref on READY (stdout), the job's error otherwise.
Status Report(const Context& ctx, const SyncJobRecord& job) {
  if (ctx.json) PrintJson(api::SyncJobToJson(sync::AsShown(job)));
  if (job.state == SyncState::kReady) {
    if (!ctx.json) {
      std::cerr << "sync " << job.id << ": READY"
                << (job.unchanged ? " (unchanged: already mirrored, nothing fetched)" : "") << ": "
                << Counted(job.progress.objects_total, "object") << ", "
                << FormatBytes(job.progress.bytes_total) << ", "
                << FormatBytes(job.progress.bytes_fetched) << " fetched" << LeftOutText(job)
                << "\n";
      std::cout << VersionRef(job) << std::endl;
    }
    return Status::Ok();
  }
  Status s = sync::JobStatus(job);
  return Status(s.code(), "sync job " + job.id + ": " + std::string(SyncStateName(job.state)) +
                              " (" + job.error_code + "): " + job.error_message)
      .WithReason(job.error_code);
}

// Polls a job on the origin until it is terminal, drawing its progress; Ctrl-C stops waiting
// (the job goes on) and says how to follow or cancel it.
Status WaitRemote(const Context& ctx, sync::SyncService& service, SyncJobRecord job) {
  InterruptCatcher catcher;
  TransferCounters counters;
  // The line says why nothing moves while the origin's run retries the source, as a run here
  // does (RunHere).
  Mutex note_mu;
  std::string note;
  std::optional<ProgressReporter> progress;
  if (!ctx.json) {
    progress.emplace("sync " + job.id, counters, std::chrono::seconds(5), [&note_mu, &note] {
      MutexLock lock(note_mu);
      return note;
    });
  }
  auto poll_interval = std::chrono::milliseconds(250);
  while (!IsTerminal(job.state)) {
    {
      MutexLock lock(note_mu);
      note = sync::RetryNote(job.progress, std::chrono::milliseconds(job.spec.retry_deadline_ms));
    }
    counters.files_total = job.progress.objects_total;
    counters.files_done = job.progress.objects_done;
    counters.bytes_total = job.progress.bytes_total;
    counters.bytes_done = job.progress.bytes_done;
    for (auto waited = std::chrono::milliseconds(0); waited < poll_interval && !g_interrupted;
         waited += std::chrono::milliseconds(50)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (g_interrupted) {
      progress.reset();
      return Interrupted("sync job " + job.id + ": stopped waiting; the job goes on (" +
                         std::string(SyncStateName(job.state)) +
                         "): follow it with `bdn volume sync describe " + job.id +
                         "`, stop it with `bdn volume sync cancel " + job.id + "`");
    }
    poll_interval = std::min(poll_interval * 2, std::chrono::milliseconds(1000));
    BDN_ASSIGN_OR_RETURN(job, service.Get(job.id));
  }
  counters.files_done = job.progress.objects_done;
  counters.bytes_done = job.progress.bytes_done;
  progress.reset();
  return Report(ctx, job);
}

// Runs a job in this process (embedded); Ctrl-C stops it, leaving it resumable.
Status RunHere(const Context& ctx, sync::LocalSyncService& service, const SyncJobRecord& started) {
  InterruptCatcher catcher;
  TransferCounters counters;
  sync::RunOptions options;
  options.counters = &counters;
  options.shutdown = &g_interrupted;
  // The line says why nothing moves while the source is retried (from an attacking helper: an
  // unreachable Hub showed "0 B/0 B  files 0/0" for five minutes).
  options.retry_watch = std::make_shared<sync::RetryWatch>();
  const std::chrono::milliseconds deadline(started.spec.retry_deadline_ms);
  Result<SyncJobRecord> job;
  {
    std::optional<ProgressReporter> progress;
    if (!ctx.json) {
      progress.emplace("sync " + started.id, counters, std::chrono::seconds(5),
                       [watch = options.retry_watch, deadline] { return watch->Note(deadline); });
    }
    job = sync::RunJob(started.id, service.deps(), options);
  }
  if (!job) return job.error();
  if (!IsTerminal(job->state)) {
    return Interrupted("sync job " + job->id + ": interrupted (" + ProgressText(*job) +
                       "); run the same command again to resume it, or `bdn volume sync cancel " +
                       job->id + "`");
  }
  return Report(ctx, *job);
}

// The namespaces that may use a secret, as `secret set` and `secret ls` show them: "a,b", "*",
// or "-" for none.
std::string NamespacesText(const std::vector<std::string>& namespaces) {
  if (namespaces.empty()) return "-";
  std::string out;
  for (const auto& n : namespaces) out += (out.empty() ? "" : ",") + n;
  return EscapeName(out);
}

// The job `args` describe, checked without I/O (sync::ValidateSpec).
Result<SyncJobSpec> SpecOf(const SyncStartArgs& args) {
  BDN_ASSIGN_OR_RETURN(Ref ref, ParseWriteRef(args.dest, "--dest \"" + args.dest + "\":"));
  SyncJobSpec spec;
  spec.source_uri = args.source;
  spec.ns = ref.ns;
  spec.volume = ref.volume;
  if (ref.tag && *ref.tag != kHeadTag) spec.tag = *ref.tag;
  spec.includes = args.includes;
  spec.excludes = args.excludes;
  spec.auth_secret_name = args.auth_secret_name;
  spec.retry_deadline_ms = args.retry_deadline.count();
  spec.endpoint = args.endpoint;
  spec.region = args.region;
  BDN_RETURN_IF_ERROR(sync::ValidateSpec(spec));
  return spec;
}

}  // namespace

Status CheckSyncStartArgs(const SyncStartArgs& args) {
  if (auto spec = SpecOf(args); !spec) return spec.error();
  return Status::Ok();
}

Status SyncStart(Context& ctx, const SyncStartArgs& args) {
  BDN_ASSIGN_OR_RETURN(SyncJobSpec spec, SpecOf(args));
  if (!ctx.origin) {
    // Embedded: the job runs here, to its end (re-running the command resumes it).
    BDN_ASSIGN_OR_RETURN(auto service, OpenLocal(ctx));
    // One user, no keys: every secret here is theirs.
    BDN_ASSIGN_OR_RETURN(sync::StartedJob started, service->Start(spec, sync::SecretUse::kAny));
    if (!ctx.json) {
      std::cerr << "sync " << started.job.id << ": " << (started.created ? "started" : "resuming")
                << " (" << sync::ShownSource(spec.source_uri) << " -> " << Dest(started.job)
                << ")\n";
    }
    return RunHere(ctx, *service, started.job);
  }
  BDN_ASSIGN_OR_RETURN(auto service, OpenService(ctx));
  // The server decides by this client's key.
  BDN_ASSIGN_OR_RETURN(sync::StartedJob started, service->Start(spec, sync::SecretUse::kAny));
  if (!args.wait) {
    if (ctx.json) {
      json j = api::SyncJobToJson(sync::AsShown(started.job));
      j["created"] = started.created;
      PrintJson(j);
    } else {
      std::cerr << "sync " << started.job.id << ": "
                << (started.created ? "started" : "already running")
                << " on the server; follow it with `bdn volume sync describe " << started.job.id
                << "`\n";
      std::cout << started.job.id << std::endl;
    }
    return Status::Ok();
  }
  if (!ctx.json) {
    std::cerr << "sync " << started.job.id << ": "
              << (started.created ? "started" : "already running") << " on the server ("
              << sync::ShownSource(spec.source_uri) << " -> " << Dest(started.job) << ")\n";
  }
  return WaitRemote(ctx, *service, started.job);
}

Status SyncDescribe(Context& ctx, const std::string& id) {
  BDN_ASSIGN_OR_RETURN(auto service, OpenService(ctx));
  BDN_ASSIGN_OR_RETURN(SyncJobRecord job, service->Get(id));
  if (ctx.json) {
    PrintJson(api::SyncJobToJson(sync::AsShown(job)));
    return Status::Ok();
  }
  // Each value on one line, whatever the server sent (names in messages come escaped already).
  auto line = [](const char* k, const std::string& v) {
    std::cout << k << ": " << EscapeName(v, Backslashes::kKeep) << "\n";
  };
  line("id", job.id);
  line("state", std::string(SyncStateName(job.state)) +
                    (job.cancel_requested && !IsTerminal(job.state) ? " (cancel requested)" : ""));
  line("source", sync::ShownSource(job.spec.source_uri));
  line("dest", Dest(job));
  for (const auto& p : job.spec.includes) line("include", p);
  for (const auto& p : job.spec.excludes) line("exclude", p);
  if (!job.spec.auth_secret_name.empty()) line("auth secret", job.spec.auth_secret_name);
  if (!job.spec.endpoint.empty()) line("endpoint", job.spec.endpoint);
  if (!job.spec.region.empty()) line("region", job.spec.region);
  if (!job.source_revision.empty()) line("revision", job.source_revision);
  line("progress", ProgressText(job) + " (" + FormatBytes(job.progress.bytes_fetched) +
                       " fetched)" + LeftOutText(job));
  if (!IsTerminal(job.state) && job.progress.retrying_ms > 0) {
    line("retrying",
         sync::RetryNote(job.progress, std::chrono::milliseconds(job.spec.retry_deadline_ms))
             .substr(std::string_view("retrying ").size()));
  }
  if (job.version) line("version", VersionRef(job) + (job.unchanged ? " (unchanged)" : ""));
  if (!job.error_code.empty()) line("error", job.error_code + ": " + job.error_message);
  line("created", FormatTime(job.created_unix_ms));
  line("finished", FormatTime(job.finished_unix_ms));
  line("runs", std::to_string(job.runs));
  std::cout.flush();
  return Status::Ok();
}

Status SyncList(Context& ctx, const std::string& dest) {
  std::string ns, volume;
  if (!dest.empty()) {
    BDN_ASSIGN_OR_RETURN(Ref ref, ParseRef(dest, RefForm::kNamespace));
    ns = ref.ns;
    volume = ref.volume;
  }
  BDN_ASSIGN_OR_RETURN(auto service, OpenService(ctx));
  BDN_ASSIGN_OR_RETURN(sync::SyncJobList listed, service->List(ns, volume));
  const auto& jobs = listed.jobs;
  if (ctx.json) {
    json list = json::array();
    for (const auto& j : jobs) list.push_back(api::SyncJobToJson(sync::AsShown(j)));
    PrintJson({{"jobs", list}, {"truncated", listed.truncated}});
    return Status::Ok();
  }
  std::printf("%-22s %-9s %-21s %-28s %s\n", "ID", "STATE", "CREATED", "DEST", "SOURCE");
  for (const auto& j : jobs) {
    std::printf("%-22s %-9s %-21s %-28s %s\n", j.id.c_str(),
                std::string(SyncStateName(j.state)).c_str(), FormatTime(j.created_unix_ms).c_str(),
                EscapeName(Dest(j), Backslashes::kKeep).c_str(),
                EscapeName(sync::ShownSource(j.spec.source_uri), Backslashes::kKeep).c_str());
  }
  std::fflush(stdout);
  if (listed.truncated) {
    std::fprintf(stderr,
                 "bdn: the newest %zu jobs are listed; older ones are left out (list one "
                 "namespace or volume with --dest bdn:NS[/VOL])\n",
                 jobs.size());
  }
  return Status::Ok();
}

Status SyncCancel(Context& ctx, const std::string& id, bool wait) {
  BDN_ASSIGN_OR_RETURN(auto service, OpenService(ctx));
  BDN_ASSIGN_OR_RETURN(SyncJobRecord job, service->Cancel(id));
  if (wait) {
    InterruptCatcher catcher;
    while (!IsTerminal(job.state) && !g_interrupted) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      BDN_ASSIGN_OR_RETURN(job, service->Get(id));
    }
  }
  if (ctx.json) {
    PrintJson(api::SyncJobToJson(sync::AsShown(job)));
  } else {
    std::cout << job.id << ": "
              << (IsTerminal(job.state) ? std::string(SyncStateName(job.state))
                                        : "cancel requested")
              << std::endl;
  }
  return Status::Ok();
}

Status SecretSet(Context& ctx, const std::string& name, std::vector<std::string> namespaces) {
  BDN_RETURN_IF_ERROR(ValidateSecretName(name));
  BDN_RETURN_IF_ERROR(NormalizeSecretNamespaces(namespaces).WithPrefix("--namespace"));
  if (::isatty(STDIN_FILENO) == 1) {
    std::cerr << "secret " << name << ": type the value, then Ctrl-D\n";
  }
  std::string value((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  // A value typed or echoed ends with one newline that is not part of it.
  if (value.ends_with("\r\n")) {
    value.resize(value.size() - 2);
  } else if (value.ends_with('\n')) {
    value.pop_back();
  }
  if (value.empty()) return InvalidArgumentError("secret \"" + name + "\": empty value on stdin");
  BDN_ASSIGN_OR_RETURN(auto service, OpenService(ctx));
  Status s = service->SetSecret(name, value, namespaces);
  std::fill(value.begin(), value.end(), '\0');
  BDN_RETURN_IF_ERROR(s);
  if (ctx.json) {
    PrintJson({{"name", name}, {"stored", true}, {"namespaces", namespaces}});
  } else {
    std::cerr << "secret " << name << ": stored"
              << (namespaces.empty() ? "" : " for namespaces " + NamespacesText(namespaces))
              << "\n";
  }
  return Status::Ok();
}

Status SecretList(Context& ctx) {
  BDN_ASSIGN_OR_RETURN(auto service, OpenService(ctx));
  BDN_ASSIGN_OR_RETURN(auto secrets, service->ListSecrets());
  if (ctx.json) {
    json list = json::array();
    for (const auto& s : secrets) list.push_back(api::SecretInfoToJson(s));
    PrintJson({{"secrets", list}});
    return Status::Ok();
  }
  std::printf("%-32s %-21s %-21s %s\n", "NAME", "CREATED", "UPDATED", "NAMESPACES");
  for (const auto& s : secrets) {
    std::printf("%-32s %-21s %-21s %s\n", s.name.c_str(), FormatTime(s.created_unix_ms).c_str(),
                FormatTime(s.updated_unix_ms).c_str(), NamespacesText(s.namespaces).c_str());
  }
  std::fflush(stdout);
  return Status::Ok();
}

Status SecretRemove(Context& ctx, const std::string& name) {
  BDN_ASSIGN_OR_RETURN(auto service, OpenService(ctx));
  BDN_RETURN_IF_ERROR(service->RemoveSecret(name));
  if (ctx.json) {
    PrintJson({{"name", name}, {"removed", true}});
  } else {
    std::cerr << "secret " << name << ": removed\n";
  }
  return Status::Ok();
}

}  // namespace bdn::cli
