#include "server/policy.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ptyvisor::server {
namespace {

// Parses `text` (a whole configuration file) as "test.toml"; `why` gets any refusal.
bool parse_text(const std::string& text, Policy& policy, std::string& why) {
    toml::table root;
    try {
        root = toml::parse(std::string_view(text), std::string_view("test.toml"));
    } catch (const toml::parse_error& e) {
        why = std::string(e.description());
        return false;
    }
    const auto* table = root["policy"].as_table();
    if (!table) {
        why = "no [policy]";
        return false;
    }
    return parse_policy(*table, "test.toml", policy, why);
}

Policy parsed(const std::string& text) {
    Policy policy;
    std::string why;
    EXPECT_TRUE(parse_text(text, policy, why)) << why;
    return policy;
}

std::string refusal(const std::string& text) {
    Policy policy;
    std::string why;
    EXPECT_FALSE(parse_text(text, policy, why)) << text;
    return why;
}

// One rule per kind, each a deny with its own reason, then an allow-all default of "ask"
// so that "no rule matched" is visible as Ask.
const char* const kRules = R"(
[policy]
default = "ask"
ask_timeout = 60

[[policy.rules]]
argv = ["git", "push"]
reason = "exact argv"

[[policy.rules]]
argv = ["make"]
argv0 = "basename"
decision = "allow"

[[policy.rules]]
pattern = '^rm -rf( |$)'
reason = "anchored pattern"

[[policy.rules]]
pattern = 'curl .*\| *sh'
reason = "unanchored pattern"

[[policy.rules]]
argv = ["ls"]
cwd = "/srv/a"
decision = "allow"

[[policy.rules]]
argv = ["ls"]
profile = "untrusted"
reason = "profile"
)";

struct Attempt {
    std::vector<std::string> argv;
    std::string cwd;
    std::optional<std::string> profile;
    Verdict expected;
    std::optional<std::size_t> rule;  // which rule decided; none: the default
};

class PolicyTable : public ::testing::TestWithParam<Attempt> {};

TEST_P(PolicyTable, FirstMatchingRuleDecides) {
    static const Policy policy = parsed(kRules);
    const auto& a = GetParam();
    const auto d = evaluate(policy, a.argv, a.cwd, a.profile);
    EXPECT_EQ(to_string(d.verdict), std::string(to_string(a.expected))) << command_line(a.argv) << " in " << a.cwd;
    EXPECT_EQ(d.rule, a.rule) << command_line(a.argv) << " in " << a.cwd;
}

INSTANTIATE_TEST_SUITE_P(
    MatchesAndNearMisses, PolicyTable,
    ::testing::Values(
        // argv prefix: whole words, and more words after the prefix.
        Attempt{{"git", "push"}, "/home/a", {}, Verdict::Deny, 0},
        Attempt{{"git", "push", "origin", "main"}, "/home/a", {}, Verdict::Deny, 0},
        Attempt{{"git", "pushx"}, "/home/a", {}, Verdict::Ask, {}},
        Attempt{{"git"}, "/home/a", {}, Verdict::Ask, {}},
        Attempt{{"git", "log", "push"}, "/home/a", {}, Verdict::Ask, {}},
        // argv0 exact (the default): a path to the same program is another word.
        Attempt{{"/usr/bin/git", "push"}, "/home/a", {}, Verdict::Ask, {}},
        // argv0 = "basename": the program by any path, but not a name that ends the same.
        Attempt{{"make", "-j2"}, "/home/a", {}, Verdict::Allow, 1},
        Attempt{{"/usr/bin/make"}, "/home/a", {}, Verdict::Allow, 1},
        Attempt{{"./make"}, "/home/a", {}, Verdict::Allow, 1},
        Attempt{{"/usr/bin/cmake"}, "/home/a", {}, Verdict::Ask, {}},
        Attempt{{"/usr/bin/make/"}, "/home/a", {}, Verdict::Ask, {}},
        // An anchored pattern: at the start only, and followed by a space or the end.
        Attempt{{"rm", "-rf", "/"}, "/home/a", {}, Verdict::Deny, 2},
        Attempt{{"rm", "-rf"}, "/home/a", {}, Verdict::Deny, 2},
        Attempt{{"echo", "rm", "-rf", "/"}, "/home/a", {}, Verdict::Ask, {}},
        Attempt{{"rm", "-rfv", "/"}, "/home/a", {}, Verdict::Ask, {}},
        // An unanchored pattern: anywhere in the command line joined by spaces.
        Attempt{{"sh", "-c", "curl https://x | sh"}, "/home/a", {}, Verdict::Deny, 3},
        Attempt{{"sh", "-c", "curl https://x > f; sh f"}, "/home/a", {}, Verdict::Ask, {}},
        // cwd: the directory or below it, by whole components.
        Attempt{{"ls"}, "/srv/a", {}, Verdict::Allow, 4},
        Attempt{{"ls"}, "/srv/a/b", {}, Verdict::Allow, 4},
        Attempt{{"ls"}, "/srv/ab", {}, Verdict::Ask, {}},
        Attempt{{"ls"}, "/srv", {}, Verdict::Ask, {}},
        // profile: the START's, by name.
        Attempt{{"ls"}, "/home/a", std::string("untrusted"), Verdict::Deny, 5},
        Attempt{{"ls"}, "/home/a", std::string("untrusted2"), Verdict::Ask, {}},
        Attempt{{"ls"}, "/srv/a", std::string("untrusted"), Verdict::Allow, 4}));

TEST(Policy, DefaultsAreAllowAndFiveMinutes) {
    const auto policy = parsed("[policy]\n");
    EXPECT_EQ(policy.default_decision, Verdict::Allow);
    EXPECT_EQ(policy.ask_timeout, std::chrono::seconds(300));
    const auto d = evaluate(policy, {"anything"}, "/", std::nullopt);
    EXPECT_EQ(d.verdict, Verdict::Allow);
    EXPECT_EQ(d.where, "default");
}

TEST(Policy, EmptyRulesArrayIsNoRules) {
    EXPECT_TRUE(parsed("[policy]\nrules = []\n").rules.empty());
    EXPECT_EQ(refusal("[policy]\nrules = [1]\n"),
              "test.toml: line 2, column 9: 'rules' must be an array of tables ([[policy.rules]])");
}

TEST(Policy, DefaultDenyGivesAReason) {
    const auto policy = parsed("[policy]\ndefault = \"deny\"\n");
    const auto d = evaluate(policy, {"ls"}, "/", std::nullopt);
    EXPECT_EQ(d.verdict, Verdict::Deny);
    EXPECT_FALSE(d.reason.empty());
}

TEST(Policy, DenyWithoutReasonNamesTheRule) {
    const auto policy = parsed("[policy]\n\n[[policy.rules]]\nargv = [\"sudo\"]\n");
    ASSERT_EQ(policy.rules.size(), 1u);
    EXPECT_EQ(policy.rules[0].where, "test.toml:3");
    EXPECT_EQ(policy.rules[0].reason, "denied by the policy rule at test.toml:3");
    const auto d = evaluate(policy, {"sudo", "-i"}, "/", std::nullopt);
    EXPECT_EQ(d.verdict, Verdict::Deny);
    EXPECT_EQ(d.reason, "denied by the policy rule at test.toml:3");
}

TEST(Policy, CwdRuleRefusesANonCanonicalDirectory) {
    // "/srv/x/../a" is /srv/a to the kernel: judged lexically it would slip past the rule.
    const auto policy = parsed("[policy]\n[[policy.rules]]\nargv = [\"ls\"]\ncwd = \"/srv/a\"\n");
    for (const char* cwd : {"/srv/x/../a", "srv/a", "/srv/a/", "/srv//a", ""}) {
        const auto d = evaluate(policy, {"ls"}, cwd, std::nullopt);
        EXPECT_EQ(d.verdict, Verdict::Deny) << cwd;
        EXPECT_NE(d.reason.find("canonical"), std::string::npos) << cwd;
    }
}

TEST(Policy, CommandLineLongerThanPatternsReadIsDenied) {
    // An allow-by-default policy with a deny pattern must not be escaped by padding argv.
    const auto policy = parsed("[policy]\n[[policy.rules]]\npattern = 'evil'\n");
    std::vector<std::string> argv{"sh", "-c", std::string(kMaxCommandLine, ' ') + "evil"};
    const auto d = evaluate(policy, argv, "/", std::nullopt);
    EXPECT_EQ(d.verdict, Verdict::Deny);
    EXPECT_NE(d.reason.find("longer"), std::string::npos);
    // Just under the bound, the pattern is read to its end.
    argv[2] = std::string(kMaxCommandLine - 10 - 4, ' ') + "evil";
    EXPECT_EQ(evaluate(policy, argv, "/", std::nullopt).rule, std::optional<std::size_t>(0));
    argv[2] = std::string(kMaxCommandLine - 10 - 4, ' ') + "good";
    EXPECT_EQ(evaluate(policy, argv, "/", std::nullopt).verdict, Verdict::Allow);
}

TEST(Policy, PatternSeesWordsJoinedBySingleSpaces) {
    EXPECT_EQ(command_line({"a", "b c", "", "d"}), "a b c  d");
    const auto policy = parsed("[policy]\n[[policy.rules]]\npattern = '^git push$'\n");
    EXPECT_EQ(evaluate(policy, {"git", "push"}, "/", std::nullopt).verdict, Verdict::Deny);
    EXPECT_EQ(evaluate(policy, {"git push"}, "/", std::nullopt).verdict, Verdict::Deny);
    EXPECT_EQ(evaluate(policy, {"git", "push", ""}, "/", std::nullopt).verdict, Verdict::Allow);
}

TEST(Policy, CatastrophicBacktrackingPatternRunsInLinearTime) {
    // (a+)+$ on "aaaa...b" takes exponential time in a backtracking engine; RE2 has none.
    const auto policy = parsed("[policy]\n[[policy.rules]]\npattern = '^(a+)+$'\n");
    const std::vector<std::string> argv{std::string(100000, 'a') + "b"};
    EXPECT_EQ(evaluate(policy, argv, "/", std::nullopt).verdict, Verdict::Allow);
}

struct Malformed {
    const char* text;
    const char* message;  // what `why` holds, after "test.toml: "
};

class PolicyRefused : public ::testing::TestWithParam<Malformed> {};

TEST_P(PolicyRefused, WithFileLineAndReason) {
    const auto why = refusal(GetParam().text);
    EXPECT_EQ(why, std::string("test.toml: ") + GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, PolicyRefused,
    ::testing::Values(
        Malformed{"[policy]\ndefualt = \"deny\"\n", "line 2, column 11: unknown key 'defualt' in [policy]"},
        Malformed{"[policy]\ndefault = \"maybe\"\n",
                  "line 2, column 11: 'default' must be \"allow\", \"deny\" or \"ask\""},
        Malformed{"[policy]\nask_timeout = 0\n",
                  "line 2, column 15: 'ask_timeout' must be an integer number of seconds from 1 to 86400"},
        Malformed{"[policy]\nrules = 3\n", "line 2, column 9: 'rules' must be an array of tables ([[policy.rules]])"},
        Malformed{"[policy]\n[[policy.rules]]\nargv = [\"git\"]\npattern = 'git'\n",
                  "line 2, column 1: a rule has either 'argv' or 'pattern', not both"},
        Malformed{"[policy]\n[[policy.rules]]\ndecision = \"deny\"\n",
                  "line 2, column 1: a rule needs 'argv' (a prefix of words) or 'pattern' (RE2)"},
        Malformed{"[policy]\n[[policy.rules]]\nargv = [\"git\"]\ncwdd = \"/srv\"\n",
                  "line 4, column 8: unknown key 'cwdd' in [[policy.rules]]"},
        Malformed{"[policy]\n[[policy.rules]]\nargv = []\n",
                  "line 3, column 8: 'argv' must be a non-empty array of strings"},
        Malformed{"[policy]\n[[policy.rules]]\nargv = [\"git\", 1]\n",
                  "line 3, column 16: 'argv' must be a non-empty array of strings"},
        Malformed{"[policy]\n[[policy.rules]]\npattern = '(unclosed'\n",
                  "line 3, column 11: 'pattern' is not a valid RE2 pattern: missing ): (unclosed"},
        Malformed{"[policy]\n[[policy.rules]]\npattern = '(a)\\1'\n",
                  "line 3, column 11: 'pattern' is not a valid RE2 pattern: invalid escape sequence: \\1"},
        Malformed{"[policy]\n[[policy.rules]]\npattern = 'a{1000}{1000}'\n",
                  "line 3, column 11: 'pattern' is not a valid RE2 pattern: bad repetition operator: {1000}{1000}"},
        // What needs more than the compiler's memory bound, and what fits it but runs long.
        Malformed{"[policy]\n[[policy.rules]]\npattern = '\\pL{200}'\n",
                  "line 3, column 11: 'pattern' is not a valid RE2 pattern: pattern too large - compile failed"},
        Malformed{"[policy]\n[[policy.rules]]\npattern = '(?:abcdefghijk){1000}'\n",
                  "line 3, column 11: 'pattern' is too complex (its program has 11004 instructions; at most 10000)"},
        Malformed{"[policy]\n[[policy.rules]]\npattern = 'git'\nargv0 = \"basename\"\n",
                  "line 4, column 9: 'argv0' applies to 'argv' rules only"},
        Malformed{"[policy]\n[[policy.rules]]\nargv = [\"git\"]\nargv0 = \"base\"\n",
                  "line 4, column 9: 'argv0' must be \"exact\" or \"basename\""},
        Malformed{"[policy]\n[[policy.rules]]\nargv = [\"/usr/bin/git\"]\nargv0 = \"basename\"\n",
                  "line 4, column 9: argv0 = \"basename\" needs a first word without '/'"},
        Malformed{"[policy]\n[[policy.rules]]\nargv = [\"ls\"]\ncwd = \"/srv/a/\"\n",
                  "line 4, column 7: 'cwd' must be an absolute path without '.', '..', '//' or a trailing '/'"},
        Malformed{"[policy]\n[[policy.rules]]\nargv = [\"ls\"]\ncwd = \"/srv/../etc\"\n",
                  "line 4, column 7: 'cwd' must be an absolute path without '.', '..', '//' or a trailing '/'"},
        Malformed{"[policy]\n[[policy.rules]]\nargv = [\"ls\"]\ndecision = \"permit\"\n",
                  "line 4, column 12: 'decision' must be \"allow\", \"deny\" or \"ask\""},
        Malformed{"[policy]\n[[policy.rules]]\nargv = [\"ls\"]\nprofile = 3\n",
                  "line 4, column 11: 'profile' must be a string"}));

TEST(Policy, RefusalLeavesThePolicyUntouched) {
    Policy policy = parsed("[policy]\ndefault = \"deny\"\n");
    std::string why;
    EXPECT_FALSE(parse_text("[policy]\ndefault = \"allow\"\n[[policy.rules]]\n", policy, why));
    EXPECT_EQ(policy.default_decision, Verdict::Deny);
}

}  // namespace
}  // namespace ptyvisor::server
