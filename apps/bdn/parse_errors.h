// What a failed parse of the command line says went wrong (main reports it as the error), and
// the parser settings those messages rely on.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

namespace bdn::app {

// For a parse that failed because a command or option was required or a word was not expected:
// what the words of argv say went wrong, walking them as the parser does. The first word where a
// command is required that names none ("volme" in `bdn volme push`, "bogus" in `bdn volume
// bogus`): "unknown command \"volme\" (bdn has: cache, fsck, ...); did you mean \"bdn volume\"?"
// (DidYouMean); where the words stop before a command: "bdn volume: a command is required (bdn
// volume has: cat, ...)"; an option that none of the commands so far has: "unknown option
// \"--tags\" (bdn volume push --help lists them); did you mean \"--tag\"?"; a word after the
// command's own arguments: "bdn volume tag set takes no argument \"bdn:a/b\" (bdn volume tag set
// --help lists its options); did you mean \"--volume-ref bdn:a/b\"?" (the hint where the command
// takes a ref by option). After a "--" every word counts as an argument of the command. "" when
// the words show none of these (the parser's message stands).
std::string ParseProblem(CLI::App& app, int argc, char** argv);

// Whether a word follows a "--" in argv (main then checks the parse with ParseProblem: CLI11 gives
// the words after a "--" that a command has no room for to the command above, as options).
bool WordsAfterDashDash(int argc, char** argv);

// Whether argv gives the option `name` ("--remote" or "--remote=URL") before a "--" (else a
// value it has came from its environment variable).
bool OptionGiven(int argc, char** argv, std::string_view name);

// Each repeatable option (--tag, --include, ...) takes one value per use, so that a stray word
// after it is an error, not a value (from an attacker: `push DIR REF --tag x extra` applied the
// tag "extra"). CLI11's vector options take every word after them.
void OneValuePerUse(CLI::App& app);

// Whether argv asks for --json, read without the parser (which failed): "--json" and
// "--json=VALUE" before a "--", the last one winning, with the values CLI11 takes for a flag
// (true/1/yes/on/enable, false/0/no/off/disable; another value counts as not given).
bool JsonRequested(int argc, char** argv);

// `message`, an error about the command line in argv, with each secret argv gives as "***": the
// value of an option whose name holds "secret", "password", "token", "credential" or
// "access-key" (the word after it, or what follows its "="), and the credentials of a URL
// ("scheme://user:pass@host"); values under 3 bytes are left. From an attacker: a refused
// "--s3-secret-access-key S", "-- --s3-secret-access-key S" and "--s3-region
// --s3-secret-access-key S" each repeated S.
std::string WithoutSecrets(std::string message, int argc, char** argv);

// `message` with each word (a run of bytes other than a space) longer than `max` bytes cut to
// its first `max` and "..." (from an attacker: a 100 KB value of --threads or --tag was printed
// whole in its error).
std::string CutLongWords(const std::string& message, size_t max);

}  // namespace bdn::app
