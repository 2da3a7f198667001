// The administrator's policy on STARTs (SPEC round 3, "Policy"; docs/policy.md): ordered
// rules that match a START's argv, working directory and profile, each with a decision.
//
//   [policy]
//   default = "allow"                    # allow | deny | ask (default: allow)
//   ask_timeout = 300                    # seconds an "ask" waits for a supervisor
//   [[policy.rules]]
//   argv = ["git", "push"]               # a prefix of whole words ...
//   argv0 = "basename"                   # ... whose first may match /usr/bin/git too
//   cwd = "/srv/prod"                    # optional: that directory or below it
//   profile = "untrusted"                # optional: START's profile
//   decision = "deny"                    # allow | deny | ask (default: deny)
//   reason = "pushes go through review"  # shown to the agent
//   [[policy.rules]]
//   pattern = '^curl .*\| *sh'           # or RE2 on the argv joined by single spaces
//
// Invariants:
//  - A Policy is immutable once parsed; evaluate() is pure and bounded: RE2 runs in time
//    linear in the command line, which it never sees longer than kMaxCommandLine, with a
//    program of at most kMaxProgramSize instructions.
//  - evaluate() fails closed: where a rule cannot be judged (a command line too long for a
//    pattern, a working directory that is not a canonical absolute path), the answer is
//    deny with a reason saying so, never a silent skip.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

namespace re2 {
class RE2;
}

namespace ptyvisor::server {

enum class Verdict { Allow, Deny, Ask };

// "allow", "deny", "ask".
const char* to_string(Verdict verdict);

// The longest command line (argv joined by spaces) a pattern rule is matched against.
inline constexpr std::size_t kMaxCommandLine = 128 * 1024;
// Bounds on what a configuration may ask of RE2.
inline constexpr int kMaxProgramSize = 10000;
inline constexpr std::int64_t kMaxPatternMemory = 1 << 20;
inline constexpr std::size_t kMaxRules = 4096;
inline constexpr std::size_t kMaxReason = 1024;

struct PolicyRule {
    // Exactly one of these two is set.
    std::vector<std::string> argv;             // a prefix of whole words
    std::shared_ptr<const re2::RE2> pattern;   // on the command line, unanchored
    std::string pattern_text;
    bool argv0_basename = false;               // argv0 = "basename"
    std::optional<std::string> cwd;           // absolute, normalised, no trailing '/'
    std::optional<std::string> profile;
    Verdict decision = Verdict::Deny;
    std::string reason;                        // never empty for deny
    std::string where;                         // "FILE:LINE" of the rule
};

struct Policy {
    Verdict default_decision = Verdict::Allow;
    std::vector<PolicyRule> rules;
    std::chrono::seconds ask_timeout{300};
};

struct Decision {
    Verdict verdict = Verdict::Allow;
    std::optional<std::size_t> rule;  // index in Policy::rules; none: the default decided
    std::string reason;               // the rule's, or why the default or a refusal applied
    std::string where;                // the rule's "FILE:LINE", or "default"
};

// Reads the `[policy]` table of `file` into `policy`. False with `why` naming the file,
// line and reason ("FILE: line L, column C: ..."); `policy` is then untouched.
bool parse_policy(const toml::table& policy_table, const std::string& file, Policy& policy, std::string& why);

// The first rule that matches decides, else the default. `cwd` must be the working
// directory's canonical absolute path (as the kernel names the opened directory), `profile`
// the START's profile after the configuration's default (none: no profile).
Decision evaluate(const Policy& policy, const std::vector<std::string>& argv, std::string_view cwd,
                  const std::optional<std::string>& profile);

// argv's words joined by single spaces: what a pattern sees.
std::string command_line(const std::vector<std::string>& argv);

}  // namespace ptyvisor::server
