// What a failed parse of the command line says went wrong, read from argv by walking it as the
// parser does (CLI11's own messages name neither the word nor the command), and the parser
// settings those messages rely on.
#include "parse_errors.h"

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <string_view>
#include <vector>

#include "bdn/base/text.h"

namespace bdn::app {
namespace {

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

}  // namespace

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
  // After a "--" every word is an argument of the command, never an option or a command (from an
  // attacker: CLI11 hands the words after a "--" that its command has no room for to the command
  // above, which took `volume versions REF -- --home X` as --home X).
  bool arguments_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--" && !arguments_only) {
      arguments_only = true;
      continue;
    }
    if (!arguments_only && arg.starts_with("-") && arg != "-") {
      // An option: a value of its own follows unless it is a flag or written as --name=value; a
      // cluster of short ones ("-ry") is flags but for the first that takes a value, which takes
      // the rest of the word ("-fx.yaml") or else the next word.
      const bool cluster = !arg.starts_with("--") && arg.size() > 2;
      // Never what follows a "=" (from an attacker: "-s3-secret-access-key=S" was repeated whole).
      std::string name = arg.substr(0, arg.find('='));
      const CLI::Option* opt = nullptr;
      bool value_in_word = !cluster && arg.find('=') != std::string::npos;
      if (cluster) {
        for (size_t k = 1; k < arg.size(); ++k) {
          opt = find(std::string("-") + arg[k]);
          if (opt == nullptr) {  // the letter that is no option (from an attacker: "-rq")
            // The word quoted only up to that letter: the flags before it are bdn's, what follows
            // may be a value pasted on (from attacking helper 124: "-SECRET" was quoted whole).
            // A long option written with one dash ("-s3-region", "-name=value") is named up to
            // its "=".
            const bool long_with_one_dash = k == 1 && (arg.find('=') != std::string::npos ||
                                                       arg.find('-', 1) != std::string::npos);
            if (!long_with_one_dash) name = "-" + std::string(1, arg[k]);
            if (k > 1) {
              name += "\" in \"" + arg.substr(0, k + 1) + (k + 1 < arg.size() ? "..." : "");
            }
            break;
          }
          if (opt->get_expected_min() > 0) {
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
    if (CLI::App* sub = arguments_only ? nullptr : SubcommandOf(*at, arg); sub != nullptr) {
      at = sub;
      path += " " + arg;
      words = 0;
      continue;
    }
    if (at->get_require_subcommand_min() > 0 && arguments_only) {
      return path + ": a command is required before \"--\" (a word after it is an argument: \"" +
             Shown(arg) + "\")";
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
    // A word too many for `bdn secret set` is most likely the secret itself, pasted (from an
    // attacking helper: it was repeated in the error): never shown.
    const bool secret = path.starts_with("bdn secret");
    return path +
           (takes == 0 ? " takes no argument \""
                       : " takes " + std::to_string(takes) +
                             (takes == 1 ? " argument" : " arguments") + "; one too many: \"") +
           (secret ? std::string("***") : Shown(arg)) + "\" (" + path +
           " --help lists what it takes" + (secret ? "; a secret is read from stdin" : "") + ")" +
           hint;
  }
  if (at->get_require_subcommand_min() == 0) return "";
  return path + ": a command is required (" + path + " has: " + CommandList(*at) + ")";
}

bool OptionGiven(int argc, char** argv, std::string_view name) {
  for (int i = 1; i < argc && std::string_view(argv[i]) != "--"; ++i) {
    const std::string_view arg(argv[i]);
    if (arg == name ||
        (arg.starts_with(name) && arg.size() > name.size() && arg[name.size()] == '=')) {
      return true;
    }
  }
  return false;
}

bool WordsAfterDashDash(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string_view(argv[i]) == "--") return true;
  }
  return false;
}

void OneValuePerUse(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    if (o->nonpositional() && o->get_expected_max() > 1) o->allow_extra_args(false);
  }
  for (CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; })) OneValuePerUse(*c);
}

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

std::string WithoutSecrets(std::string message, int argc, char** argv) {
  std::vector<std::string> secrets;
  auto secret_name = [](std::string_view word) {
    std::string w(word);
    for (char& c : w) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (std::string_view mark : {"secret", "password", "token", "credential", "access-key"}) {
      if (w.find(mark) != std::string::npos) return true;
    }
    return false;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view word(argv[i]);
    if (word.starts_with("-")) {
      const size_t eq = word.find('=');
      if (secret_name(word.substr(0, eq))) {
        if (eq != std::string_view::npos) {
          secrets.emplace_back(word.substr(eq + 1));
        } else if (i + 1 < argc) {
          secrets.emplace_back(argv[i + 1]);
        }
      }
    }
    // A URL's credentials: "scheme://user:pass@host/...".
    if (const size_t scheme = word.find("://"); scheme != std::string_view::npos) {
      const size_t slash = word.find('/', scheme + 3);
      const size_t at = word.substr(0, slash).rfind('@');
      if (at != std::string_view::npos && at > scheme + 3) {
        secrets.emplace_back(word.substr(scheme + 3, at - scheme - 3));
      }
    }
  }
  // Longest first, so that a secret holding another is redacted whole.
  std::ranges::sort(secrets,
                    [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const std::string& secret : secrets) {
    if (secret.size() < 3) continue;  // a letter or two would blank out the message's own words
    for (size_t at = message.find(secret); at != std::string::npos;
         at = message.find(secret, at + 3)) {
      message.replace(at, secret.size(), "***");
    }
  }
  return message;
}

std::string CutLongWords(const std::string& message, size_t max) {
  std::string out;
  size_t run = 0;  // bytes of the current word so far
  for (char c : message) {
    if (c == ' ') {
      run = 0;
    } else if (++run == max + 1) {
      out += "...";
    }
    if (run <= max) out += c;
  }
  return out;
}

}  // namespace bdn::app
