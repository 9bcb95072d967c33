// bdn: parses the command line, opens the store, runs one command, maps its Status to an exit code.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string_view>

#include "bdn/base/fd.h"
#include "bdn/base/memory.h"
#include "bdn/base/text.h"
#include "bdn/cli/output.h"
#include "build_info.h"
#include "flags.h"
#include "parse_errors.h"

namespace {

bool g_json = false;

// Prints the one-line reason (and, with --json, the error as JSON on stdout, or on stderr where
// stdout is data: cat); returns the exit code.
int Fail(const bdn::Status& given) {
  const bdn::Status s = bdn::cli::AsReported(given);
  // Always one line of valid UTF-8: control bytes and bytes that are not UTF-8 (a name may hold
  // them) escaped. The JSON message is the same text.
  const std::string line = bdn::EscapeName(s.message(), bdn::Backslashes::kKeep);
  std::fprintf(stderr, "bdn: error: %s\n", line.c_str());
  if (g_json && !bdn::cli::ResultPrinted()) {
    std::string code(bdn::StatusCodeName(s.code()));
    for (char& c : code) {
      if (c == ' ') c = '_';
    }
    nlohmann::json j = {
        {"error", {{"code", code}, {"message", line}, {"exit_code", bdn::cli::ExitCode(s)}}}};
    if (!s.reason().empty()) j["error"]["reason"] = s.reason();
    // Where stdout is a file's bytes (cat), never after them.
    std::fprintf(bdn::cli::StdoutIsData() ? stderr : stdout, "%s\n", bdn::cli::JsonText(j).c_str());
  }
  return bdn::cli::ExitCode(s);
}

// `s`, with a hint where it is only that nothing listens at the origin's address ("origin URL:
// connection refused": from a new user, who had set BDN_REMOTE long before and forgot), wherever
// the words stand in the message (after a config line's "cfg.yaml:3: ", before a retry's "(gave
// up ...)": from an attacker, push, pull, cat and mounts apply gave none). Not through a proxy,
// whose refusal it would be (from an attacker: the hint blamed an origin that was up).
bdn::Status WithRemoteHint(const bdn::Status& s) {
  if (s.code() != bdn::StatusCode::kUnavailable) return s;
  for (const char* proxy :
       {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"}) {
    if (const char* v = std::getenv(proxy); v != nullptr && *v != '\0') return s;
  }
  const std::string& m = s.message();
  constexpr std::string_view kRefused = ": connection refused";
  const size_t at = m.find(kRefused);
  if (at == std::string::npos) return s;
  const size_t origin = m.rfind("origin ", at);
  if (origin == std::string::npos || (origin != 0 && m.compare(origin - 2, 2, ": ") != 0) ||
      m.compare(origin + 7, 4, "http") != 0 || m.find(' ', origin + 7) < at) {
    return s;
  }
  const size_t end = at + kRefused.size();
  return bdn::Status(s.code(), m.substr(0, end) +
                                   " (nothing listens there: is bdn serve running, and is "
                                   "--remote or BDN_REMOTE the right URL?)" +
                                   m.substr(end))
      .WithReason(s.reason());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bdn: sealed volumes for model data: push once, mount anywhere"};
  app.require_subcommand(1);
  app.fallthrough();
  // "bdn 0.1.0 (commit 1a2b3c4d5e6f)"; "unknown" for a build outside a git checkout.
  app.set_version_flag("--version", std::string("bdn " BDN_VERSION " (commit " BDN_GIT_COMMIT ")"),
                       "print the version and the git commit it was built from");
  bool json = false;
  app.add_flag("--json", json, "print a machine-readable JSON result");
  std::string home;
  app.add_option("--home", home,
                 "embedded store directory (default $BDN_HOME or ~/.local/share/bdn)");

  bdn::app::Invocation inv;
  bdn::app::AddVolumeFlags(app, inv);
  bdn::app::AddServerFlags(app, inv);
  bdn::app::AddMountsFlags(app, inv);
  bdn::app::AddStoreFlags(app, inv, home, json);
  bdn::app::AddSecretFlags(app, inv);
  std::string remote;
  app.add_option("--remote", remote, "origin URL (bdn serve); default $BDN_REMOTE")
      ->envname("BDN_REMOTE");
  bdn::app::OneValuePerUse(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    // With --json (from a new user: the text came out): {"version", "commit"}.
    if (bdn::app::JsonRequested(argc, argv)) {
      std::printf(
          "%s\n",
          bdn::cli::JsonText({{"version", BDN_VERSION}, {"commit", BDN_GIT_COMMIT}}).c_str());
      return 0;
    }
    return app.exit(e);  // prints the version on stdout, exit code 0
  } catch (const CLI::ParseError& e) {
    // --json may come after what failed to parse: the last "--json" or "--json=VALUE" before a
    // "--" counts, so that a script reading stdout gets {"error": ...} for a syntax error too.
    std::string message = e.what();
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr ||
        dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr ||
        bdn::app::WordsAfterDashDash(argc, argv)) {
      if (std::string problem = bdn::app::ParseProblem(app, argc, argv); !problem.empty()) {
        message = problem;
      }
    }
    message = bdn::app::CutLongWords(bdn::app::WithoutSecrets(message, argc, argv), 1024);
    if (bdn::app::JsonRequested(argc, argv)) {
      g_json = true;
      // `volume cat`'s stdout is the file: its errors go to stderr, a syntax error's too.
      if (CLI::App* volume = app.get_subcommand("volume");
          volume->parsed() && volume->get_subcommand("cat")->parsed()) {
        bdn::cli::MarkStdoutAsData();
      }
      return Fail(bdn::InvalidArgumentError(message));
    }
    // One "bdn: error: ..." line, as every other error, then CLI11's hint.
    const int rc = Fail(bdn::InvalidArgumentError(message));
    std::fprintf(stderr, "Run with --help for more information.\n");
    return rc;
  }
  g_json = json;
  // CLI11 parsed the words after a "--" that the command had no room for as the options of the
  // command above (from an attacker: `volume versions REF -- --home X` used the store X).
  if (bdn::app::WordsAfterDashDash(argc, argv)) {
    if (std::string problem = bdn::app::ParseProblem(app, argc, argv); !problem.empty()) {
      // A "--json" after the "--" is a refused argument, not the flag (from an attacking helper:
      // it switched the error to JSON).
      g_json = bdn::app::JsonRequested(argc, argv);
      const int rc = Fail(bdn::InvalidArgumentError(
          bdn::app::CutLongWords(bdn::app::WithoutSecrets(problem, argc, argv), 1024)));
      if (!g_json) std::fprintf(stderr, "Run with --help for more information.\n");
      return rc;
    }
  }
  // Does not return where it re-executes; the new process parses the same argv again.
  if (inv.huge_page_heap) bdn::ReexecWithHugePageHeap(argv);
  try {
    if (inv.check) {
      if (bdn::Status s = inv.check(); !s.ok()) return Fail(s);
    }
    if (inv.keep_freed_bytes > 0) bdn::KeepFreedMemory(inv.keep_freed_bytes);
    if (!inv.local_only.empty() && !remote.empty()) {
      // From a new user: gc, fsck and store stats ran on the empty local store and exited 0.
      return Fail(bdn::InvalidArgumentError(
          inv.local_only +
          ": acts on a local data directory (--data, default the embedded store), "
          "not on a server, and --remote or BDN_REMOTE names " +
          remote +
          (inv.local_only == "bdn gc"
               ? " (a server collects its own garbage: bdn serve --gc-interval)"
               : "") +
          "; unset BDN_REMOTE or name the directory with --data to run it here"));
    }
    if (inv.run_standalone) {
      bdn::Status s = inv.run_standalone();
      return s.ok() ? 0 : Fail(s);
    }
    const std::string token = bdn::cli::TokenFromEnvironment();
    const std::filesystem::path home_dir =
        home.empty() ? bdn::cli::DefaultHome() : std::filesystem::path(home);
    bdn::Result<bdn::cli::Context> ctx;
    bdn::cli::NotServedHold not_served;  // HoldNotServed's hold, for the whole command
    if (inv.needs == bdn::app::Needs::kNothing) {
      ctx = bdn::cli::Context{.home = home_dir, .json = json};
    } else if (!remote.empty()) {
      // BDN_SESSION set (even empty) replaces the random Bdn-Session of this process.
      const char* session = std::getenv("BDN_SESSION");
      ctx = bdn::cli::OpenRemote(
          remote, token, json, home_dir,
          session ? std::optional<std::string>(session) : std::nullopt,
          bdn::app::OptionGiven(argc, argv, "--remote") ? "--remote" : "BDN_REMOTE");
    } else if (inv.needs == bdn::app::Needs::kOrigin) {
      ctx = bdn::cli::Context{.home = home_dir, .json = json};
    } else {
      if (inv.needs == bdn::app::Needs::kStoreCreated && !token.empty()) {
        // From a new user: with BDN_TOKEN set and BDN_REMOTE forgotten, a push went to a new
        // local store without a word, looking just like a push to the origin.
        std::cerr << "bdn: BDN_TOKEN is set but neither --remote nor BDN_REMOTE is: this writes "
                     "to the embedded store "
                  << home_dir.string() << "\n";
      }
      // From an attacking helper: `volume rm --home <a served --data>` deleted with the
      // embedded 7-day retention, not the server's --retention, and without its keys. Refused
      // before anything is opened; once the home is known to be this user's own, held until the
      // command ends, so that a server does not start under it either.
      const bool writes = inv.writes || inv.needs == bdn::app::Needs::kStoreCreated;
      // The home named as the user gave it (from an attacking helper: "--home X" of BDN_HOME).
      const char* home_env = std::getenv("BDN_HOME");
      const char* home_flag = bdn::app::OptionGiven(argc, argv, "--home") ? "--home"
                              : home_env && *home_env                     ? "BDN_HOME"
                                                                          : "the embedded store";
      auto hold = [&](bool create) -> bdn::Status {
        auto held = bdn::cli::HoldNotServed(
            home_dir,
            "change what it serves through it (--remote URL), where its retention, keys and gc "
            "apply",
            home_flag, create);
        if (!held) return held.error();
        not_served = std::move(*held);
        return bdn::Status::Ok();
      };
      if (writes) {
        if (bdn::Status s = hold(false); !s.ok()) return Fail(s);
      }
      ctx = bdn::cli::OpenEmbedded(home_dir, json,
                                   inv.needs == bdn::app::Needs::kStoreCreated
                                       ? bdn::cli::EmbeddedOpen::kCreateIfMissing
                                       : bdn::cli::EmbeddedOpen::kExisting);
      if (ctx && writes) {
        if (bdn::Status s = hold(true); !s.ok()) return Fail(s);
      }
      if (!ctx && inv.refs) {
        // A malformed ref is what the command would have said first, before any I/O.
        if (bdn::Status s = bdn::cli::CheckRefSyntax(inv.refs()); !s.ok()) return Fail(s);
      }
    }
    if (!ctx) return Fail(ctx.error());
    bdn::Status s = inv.run(*ctx);
    if (!remote.empty()) s = WithRemoteHint(s);
    const int rc = s.ok() ? 0 : Fail(s);
    bdn::cli::DeliverHeldStopSignals();
    return rc;
  } catch (const std::exception& e) {
    return Fail(bdn::InternalError(e.what()));
  }
  return 0;
}
