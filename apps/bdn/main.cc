// bdn: parses the command line, opens the store, runs one command, maps its Status to an exit code.
#include <strings.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "bdn/base/memory.h"
#include "bdn/base/text.h"
#include "bdn/cli/output.h"
#include "build_info.h"
#include "flags.h"

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

// The names of `app`'s commands, sorted, joined by ", ".
std::string CommandList(CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(c->get_name());
  }
  std::sort(names.begin(), names.end());
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  return list;
}

// Edit distance between `a` and `b` with adjacent transpositions counted as one edit (optimal
// string alignment, Damerau 1964): "verison" is two edits from "versions". Short names only.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The command of `at` named `name`, or null.
CLI::App* SubcommandOf(CLI::App& at, const std::string& name) {
  try {
    return at.get_subcommand(name);
  } catch (const CLI::OptionNotFound&) {
    return nullptr;
  }
}

// A word of argv as an error shows it: escaped (EscapeName), its first 200 bytes.
std::string Shown(const std::string& word) {
  return word.size() <= 200 ? bdn::EscapeName(word) : bdn::EscapeName(word.substr(0, 200)) + "...";
}

// "; did you mean \"A\", \"B\" or \"C\"?" for `found`, sorted; "" for none.
std::string DidYouMeanList(std::vector<std::string> found) {
  if (found.empty()) return "";
  std::sort(found.begin(), found.end());
  std::string out = "; did you mean ";
  for (size_t i = 0; i < found.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == found.size() ? " or " : ", ") + ("\"" + found[i] + "\"");
  }
  return out + "?";
}

// For an unknown command `word` under `at` (reached by `path`): "; did you mean \"bdn volume
// push\"?" naming the commands of that name one level down (`bdn push`; several joined "A, B or
// C"), else those of `at`'s commands within two edits of it (`bdn volme`); "" for neither.
std::string DidYouMean(CLI::App& at, const std::string& path, const std::string& word) {
  const auto all = [](const CLI::App*) { return true; };
  std::vector<std::string> found;
  for (CLI::App* c : at.get_subcommands(all)) {
    for (const CLI::App* g : c->get_subcommands(all)) {
      if (g->get_name() == word) found.push_back(path + " " + c->get_name() + " " + word);
    }
  }
  if (found.empty() && word.size() >= 3) {
    std::string lower = word;  // `VOLUME` is `volume` mistyped too
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    for (const CLI::App* c : at.get_subcommands(all)) {
      if (EditDistance(lower, c->get_name()) <= 2) found.push_back(path + " " + c->get_name());
    }
  }
  return DidYouMeanList(std::move(found));
}

// " did you mean \"--tag\"?"-style hint for an unknown long option `arg` ("--tags"): the long
// options of `at` and its parents within two edits of it; "" for none or a name under 3 letters.
std::string DidYouMeanOption(const CLI::App* at, const std::string& arg) {
  if (!arg.starts_with("--") || arg.size() < 5) return "";
  const std::string name = arg.substr(2);
  std::vector<std::string> found;
  for (const CLI::App* a = at; a != nullptr; a = a->get_parent()) {
    for (const CLI::Option* o : a->get_options()) {
      for (const std::string& l : o->get_lnames()) {
        if (EditDistance(name, l) <= 2 &&
            std::find(found.begin(), found.end(), "--" + l) == found.end()) {
          found.push_back("--" + l);
        }
      }
    }
  }
  return DidYouMeanList(std::move(found));
}

// For a parse that failed because a command or option was required or a word was not expected:
// what the words of argv say went wrong, walking them as the parser does. The first word where a
// command is required that names none ("volme" in `bdn volme push`, "bogus" in `bdn volume
// bogus`): "unknown command \"volme\" (bdn has: cache, fsck, ...); did you mean \"bdn volume\"?"
// (DidYouMean); where the words stop before a command: "bdn volume: a command is required (bdn
// volume has: cat, ...)"; an option that none of the commands so far has: "unknown option
// \"--tags\" (bdn volume push --help lists them); did you mean \"--tag\"?"; a word after the
// command's own arguments: "bdn volume tag set takes no argument \"bdn:a/b\" (bdn volume tag set
// --help lists its options); did you mean \"--volume-ref bdn:a/b\"?" (the hint where the command
// takes a ref by option). "" when the words show none of these (the parser's message stands).
std::string ParseProblem(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  std::string path = "bdn";
  size_t words = 0;  // positional words given to `at`
  std::vector<const CLI::Option*> given;
  int value_at = -1;  // the index of the last word taken as an option's value, and that option
  std::string value_of;
  // The option `name` ("--tag", "-r") of `at` or a command above it, or null.
  auto find = [&](const std::string& name) -> const CLI::Option* {
    for (CLI::App* a = at; a != nullptr; a = a->get_parent()) {
      if (const CLI::Option* o = a->get_option_no_throw(name)) return o;
    }
    return nullptr;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return "";
    if (arg.starts_with("-") && arg != "-") {
      // An option: a value of its own follows unless it is a flag or written as --name=value; a
      // cluster of short ones ("-ry") is flags but for the first that takes a value, which takes
      // the rest of the word ("-fx.yaml") or else the next word.
      const bool cluster = !arg.starts_with("--") && arg.size() > 2;
      const std::string name = cluster ? arg : arg.substr(0, arg.find('='));
      const CLI::Option* opt = nullptr;
      bool value_in_word = !cluster && arg.find('=') != std::string::npos;
      if (cluster) {
        for (size_t k = 1; k < arg.size(); ++k) {
          opt = find(std::string("-") + arg[k]);
          if (opt == nullptr || opt->get_expected_min() > 0) {
            value_in_word = k + 1 < arg.size();
            break;
          }
        }
      } else {
        opt = find(name);
      }
      if (opt == nullptr) {  // from an attacking helper: CLI11 said "A subcommand is required"
        return "unknown option \"" + Shown(name) + "\" (" + path + " --help lists them)" +
               DidYouMeanOption(at, name);
      }
      given.push_back(opt);
      if (opt->get_allow_extra_args()) return "";  // takes the words after it: not followed here
      if (!value_in_word && opt->get_expected_min() > 0) {
        value_at = ++i;
        value_of = opt->get_name();
      }
      continue;
    }
    if (CLI::App* sub = SubcommandOf(*at, arg); sub != nullptr) {
      at = sub;
      path += " " + arg;
      words = 0;
      continue;
    }
    if (at->get_require_subcommand_min() > 0) {
      // From an attacker: `bdn --home volume push` was sent to "bdn volume push".
      std::string taken;
      if (value_at == i - 1 && value_at < argc && SubcommandOf(*at, argv[value_at]) != nullptr) {
        taken = "; \"" + Shown(argv[value_at]) + "\" was taken as the value of " + value_of +
                " (give " + value_of + " a value)";
      }
      return "unknown command \"" + Shown(arg) + "\" (" + path + " has: " + CommandList(*at) + ")" +
             (taken.empty() ? DidYouMean(*at, path, arg) : taken);
    }
    const auto positionals =
        at->get_options([](const CLI::Option* o) { return o->get_positional(); });
    size_t takes = 0;
    for (const CLI::Option* o : positionals) {
      if (o->get_expected_max() > 1) return "";  // takes any number of words
      takes += static_cast<size_t>(o->get_expected_max());
    }
    if (++words <= takes) continue;
    std::string hint;
    const CLI::Option* volume_ref = at->get_option_no_throw("--volume-ref");
    if (volume_ref != nullptr && std::ranges::find(given, volume_ref) == given.end() &&
        arg.size() > 4 && ::strncasecmp(arg.c_str(), "bdn:", 4) == 0) {
      hint = "; did you mean \"--volume-ref " + Shown(arg) + "\"?";
    }
    return path +
           (takes == 0 ? " takes no argument \""
                       : " takes " + std::to_string(takes) +
                             (takes == 1 ? " argument" : " arguments") + "; one too many: \"") +
           Shown(arg) + "\" (" + path + " --help lists what it takes)" + hint;
  }
  if (at->get_require_subcommand_min() == 0) return "";
  return path + ": a command is required (" + path + " has: " + CommandList(*at) + ")";
}

// Each repeatable option (--tag, --include, ...) takes one value per use, so that a stray word
// after it is an error, not a value (from an attacker: `push DIR REF --tag x extra` applied the
// tag "extra"). CLI11's vector options take every word after them.
void OneValuePerUse(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    if (o->nonpositional() && o->get_expected_max() > 1) o->allow_extra_args(false);
  }
  for (CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; })) OneValuePerUse(*c);
}

// `s`, with a hint where it is only that nothing listens at the origin's address ("origin URL:
// connection refused": from a new user, who had set BDN_REMOTE long before and forgot).
bdn::Status WithRemoteHint(const bdn::Status& s) {
  const std::string& m = s.message();
  constexpr std::string_view kRefused = ": connection refused";
  if (s.code() != bdn::StatusCode::kUnavailable || !m.starts_with("origin ") ||
      !m.ends_with(kRefused) || m.find(": ") != m.size() - kRefused.size()) {
    return s;
  }
  return bdn::Status(s.code(), m + " (nothing listens there: is bdn serve running, and is "
                                   "--remote or BDN_REMOTE the right URL?)")
      .WithReason(s.reason());
}

// Whether argv asks for --json, read without the parser (which failed): "--json" and
// "--json=VALUE" before a "--", the last one winning, with the values CLI11 takes for a flag
// (true/1/yes/on/enable, false/0/no/off/disable; another value counts as not given).
bool JsonRequested(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc && std::string_view(argv[i]) != "--"; ++i) {
    const std::string_view arg(argv[i]);
    if (arg == "--json") {
      json = true;
    } else if (arg.starts_with("--json=")) {
      std::string value(arg.substr(7));
      for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (value == "true" || value == "1" || value == "yes" || value == "on" || value == "enable") {
        json = true;
      } else if (value == "false" || value == "0" || value == "no" || value == "off" ||
                 value == "disable") {
        json = false;
      }
    }
  }
  return json;
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
  OneValuePerUse(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    // With --json (from a new user: the text came out): {"version", "commit"}.
    if (JsonRequested(argc, argv)) {
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
        dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      if (std::string problem = ParseProblem(app, argc, argv); !problem.empty()) {
        message = problem;
      }
    }
    if (JsonRequested(argc, argv)) {
      g_json = true;
      return Fail(bdn::InvalidArgumentError(message));
    }
    // One "bdn: error: ..." line, as every other error, then CLI11's hint.
    const int rc = Fail(bdn::InvalidArgumentError(message));
    std::fprintf(stderr, "Run with --help for more information.\n");
    return rc;
  }
  g_json = json;
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
    if (inv.needs == bdn::app::Needs::kNothing) {
      ctx = bdn::cli::Context{.home = home_dir, .json = json};
    } else if (!remote.empty()) {
      // BDN_SESSION set (even empty) replaces the random Bdn-Session of this process.
      const char* session = std::getenv("BDN_SESSION");
      ctx = bdn::cli::OpenRemote(remote, token, json, home_dir,
                                 session ? std::optional<std::string>(session) : std::nullopt);
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
      ctx = bdn::cli::OpenEmbedded(home_dir, json,
                                   inv.needs == bdn::app::Needs::kStoreCreated
                                       ? bdn::cli::EmbeddedOpen::kCreateIfMissing
                                       : bdn::cli::EmbeddedOpen::kExisting);
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
