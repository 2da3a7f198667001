#include "server/policy.h"

#include <re2/re2.h>

#include <initializer_list>
#include <sstream>

namespace ptyvisor::server {
namespace {

std::string where(const toml::source_region& r) {
    std::ostringstream s;
    s << "line " << r.begin.line << ", column " << r.begin.column;
    return s.str();
}

// The first failure, with the file and the line of the node it is about.
class Errors {
public:
    explicit Errors(const std::string& file) : file_(file) {}
    bool fail(const toml::node& node, const std::string& what) {
        if (why.empty()) why = file_ + ": " + where(node.source()) + ": " + what;
        return false;
    }
    std::string why;

private:
    const std::string& file_;
};

bool parse_verdict(std::string_view text, Verdict& out) {
    if (text == "allow") out = Verdict::Allow;
    else if (text == "deny") out = Verdict::Deny;
    else if (text == "ask") out = Verdict::Ask;
    else return false;
    return true;
}

// Unknown keys are refused: a misspelt "cwd" must not widen a rule to every directory.
bool only(Errors& e, const toml::table& t, std::initializer_list<std::string_view> keys, const char* what) {
    for (const auto& [k, v] : t) {
        bool known = false;
        for (auto key : keys) known = known || k.str() == key;
        if (!known) return e.fail(v, std::string("unknown key '") + std::string(k.str()) + "' in " + what);
    }
    return true;
}

const std::string* string_at(Errors& e, const toml::table& t, const char* key, bool& ok) {
    const auto* node = t.get(key);
    if (!node) return nullptr;
    if (const auto* s = node->as_string()) return &s->get();
    ok = e.fail(*node, std::string("'") + key + "' must be a string");
    return nullptr;
}

// "/a/b": absolute, no empty, "." or ".." component, no trailing '/' (but "/" itself).
bool is_normal_path(std::string_view p) {
    if (p.empty() || p.front() != '/') return false;
    if (p == "/") return true;
    if (p.back() == '/') return false;
    std::size_t i = 1;
    while (i <= p.size()) {
        const auto end = std::min(p.find('/', i), p.size());
        const auto part = p.substr(i, end - i);
        if (part.empty() || part == "." || part == "..") return false;
        i = end + 1;
    }
    return true;
}

bool parse_rule(Errors& e, const toml::table& t, const std::string& file, PolicyRule& rule) {
    if (!only(e, t, {"argv", "pattern", "argv0", "cwd", "profile", "decision", "reason"}, "[[policy.rules]]"))
        return false;
    rule.where = file + ":" + std::to_string(t.source().begin.line);
    bool ok = true;
    const auto* argv = t.get("argv");
    const auto* pattern = t.get("pattern");
    if (argv && pattern) return e.fail(t, "a rule has either 'argv' or 'pattern', not both");
    if (!argv && !pattern) return e.fail(t, "a rule needs 'argv' (a prefix of words) or 'pattern' (RE2)");
    if (argv) {
        const auto* arr = argv->as_array();
        if (!arr || arr->empty()) return e.fail(*argv, "'argv' must be a non-empty array of strings");
        for (const auto& word : *arr) {
            const auto* s = word.as_string();
            if (!s) return e.fail(word, "'argv' must be a non-empty array of strings");
            rule.argv.push_back(s->get());
        }
        if (rule.argv.front().empty()) return e.fail(*argv, "'argv' must not start with an empty word");
    } else {
        const auto* text = string_at(e, t, "pattern", ok);
        if (!ok) return false;
        re2::RE2::Options options;
        options.set_log_errors(false);
        options.set_max_mem(kMaxPatternMemory);  // a pattern that needs more fails to compile
        auto re = std::make_shared<re2::RE2>(*text, options);
        if (!re->ok()) return e.fail(*pattern, "'pattern' is not a valid RE2 pattern: " + re->error());
        if (const int size = re->ProgramSize(); size > kMaxProgramSize)
            return e.fail(*pattern, "'pattern' is too complex (its program has " + std::to_string(size) +
                                        " instructions; at most " + std::to_string(kMaxProgramSize) + ")");
        rule.pattern = std::move(re);
        rule.pattern_text = *text;
    }
    if (const auto* a0 = string_at(e, t, "argv0", ok)) {
        if (!argv) return e.fail(*t.get("argv0"), "'argv0' applies to 'argv' rules only");
        if (*a0 == "basename") rule.argv0_basename = true;
        else if (*a0 != "exact") return e.fail(*t.get("argv0"), "'argv0' must be \"exact\" or \"basename\"");
        if (rule.argv0_basename && rule.argv.front().find('/') != std::string::npos)
            return e.fail(*t.get("argv0"), "argv0 = \"basename\" needs a first word without '/'");
    }
    if (const auto* cwd = string_at(e, t, "cwd", ok)) {
        if (!is_normal_path(*cwd))
            return e.fail(*t.get("cwd"),
                          "'cwd' must be an absolute path without '.', '..', '//' or a trailing '/'");
        rule.cwd = *cwd;
    }
    if (const auto* profile = string_at(e, t, "profile", ok)) {
        if (profile->empty()) return e.fail(*t.get("profile"), "'profile' must not be empty");
        rule.profile = *profile;
    }
    if (const auto* decision = string_at(e, t, "decision", ok)) {
        if (!parse_verdict(*decision, rule.decision))
            return e.fail(*t.get("decision"), "'decision' must be \"allow\", \"deny\" or \"ask\"");
    }
    if (const auto* reason = string_at(e, t, "reason", ok)) {
        if (reason->size() > kMaxReason)
            return e.fail(*t.get("reason"), "'reason' is longer than " + std::to_string(kMaxReason) + " bytes");
        rule.reason = *reason;
    }
    if (!ok) return false;
    // The agent is told why: a deny without a reason still says which rule refused it.
    if (rule.reason.empty() && rule.decision == Verdict::Deny) rule.reason = "denied by the policy rule at " + rule.where;
    return true;
}

std::string_view basename_of(std::string_view path) {
    const auto slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool argv_matches(const PolicyRule& rule, const std::vector<std::string>& argv) {
    if (argv.size() < rule.argv.size()) return false;
    const bool first = argv[0] == rule.argv[0] || (rule.argv0_basename && basename_of(argv[0]) == rule.argv[0]);
    if (!first) return false;
    for (std::size_t i = 1; i < rule.argv.size(); ++i)
        if (argv[i] != rule.argv[i]) return false;
    return true;
}

// `cwd` is `prefix` or below it, by whole components: "/srv/a" holds "/srv/a/b", not "/srv/ab".
bool under(std::string_view cwd, std::string_view prefix) {
    if (prefix == "/") return true;
    if (!cwd.starts_with(prefix)) return false;
    return cwd.size() == prefix.size() || cwd[prefix.size()] == '/';
}

Decision refused(std::size_t index, const PolicyRule& rule, std::string reason) {
    return Decision{Verdict::Deny, index, std::move(reason), rule.where};
}

}  // namespace

const char* to_string(Verdict verdict) {
    switch (verdict) {
    case Verdict::Allow: return "allow";
    case Verdict::Deny: return "deny";
    case Verdict::Ask: return "ask";
    }
    return "deny";
}

std::string command_line(const std::vector<std::string>& argv) {
    std::string line;
    for (std::size_t i = 0; i < argv.size(); ++i) {
        if (i > 0) line += ' ';
        line += argv[i];
    }
    return line;
}

bool parse_policy(const toml::table& policy_table, const std::string& file, Policy& policy, std::string& why) {
    Errors e(file);
    Policy parsed;
    bool ok = only(e, policy_table, {"default", "ask_timeout", "rules"}, "[policy]");
    if (ok) {
        if (const auto* d = string_at(e, policy_table, "default", ok)) {
            if (!parse_verdict(*d, parsed.default_decision))
                ok = e.fail(*policy_table.get("default"), "'default' must be \"allow\", \"deny\" or \"ask\"");
        }
    }
    if (ok) {
        if (const auto* node = policy_table.get("ask_timeout")) {
            const auto seconds = node->value<std::int64_t>();
            if (!node->is_integer() || !seconds || *seconds < 1 || *seconds > 86400)
                ok = e.fail(*node, "'ask_timeout' must be an integer number of seconds from 1 to 86400");
            else parsed.ask_timeout = std::chrono::seconds(*seconds);
        }
    }
    if (ok) {
        if (const auto* node = policy_table.get("rules")) {
            const auto* rules = node->as_array();
            if (!rules || (!rules->empty() && !rules->is_array_of_tables()))
                ok = e.fail(*node, "'rules' must be an array of tables ([[policy.rules]])");
            else if (rules->size() > kMaxRules)
                ok = e.fail(*node, "more than " + std::to_string(kMaxRules) + " rules");
            else
                for (const auto& r : *rules) {
                    PolicyRule rule;
                    if (!r.is_table()) {
                        ok = e.fail(r, "'rules' must be an array of tables ([[policy.rules]])");
                        break;
                    }
                    if (!(ok = parse_rule(e, *r.as_table(), file, rule))) break;
                    parsed.rules.push_back(std::move(rule));
                }
        }
    }
    if (!ok) {
        why = e.why;
        return false;
    }
    policy = std::move(parsed);
    return true;
}

Decision evaluate(const Policy& policy, const std::vector<std::string>& argv, std::string_view cwd,
                  const std::optional<std::string>& profile) {
    std::optional<std::string> line;  // joined once, at the first pattern rule
    for (std::size_t i = 0; i < policy.rules.size(); ++i) {
        const auto& rule = policy.rules[i];
        if (rule.profile && (!profile || *profile != *rule.profile)) continue;
        if (rule.cwd) {
            if (!is_normal_path(cwd))
                return refused(i, rule, "the working directory is not a canonical absolute path");
            if (!under(cwd, *rule.cwd)) continue;
        }
        if (rule.pattern) {
            if (argv.empty()) continue;
            if (!line) line = command_line(argv);
            if (line->size() > kMaxCommandLine)
                return refused(i, rule, "the command line is longer than the policy reads (" +
                                            std::to_string(line->size()) + " bytes; at most " +
                                            std::to_string(kMaxCommandLine) + ")");
            if (!re2::RE2::PartialMatch(*line, *rule.pattern)) continue;
        } else if (argv.empty() || !argv_matches(rule, argv)) {
            continue;
        }
        return Decision{rule.decision, i, rule.reason, rule.where};
    }
    std::string reason;
    if (policy.default_decision == Verdict::Deny) reason = "denied by the policy's default: no rule allows it";
    else if (policy.default_decision == Verdict::Ask) reason = "no rule decides it: the policy's default asks";
    return Decision{policy.default_decision, std::nullopt, std::move(reason), "default"};
}

}  // namespace ptyvisor::server
