// What the policy and the audit log cost the event loop (docs/policy.md): evaluating a
// START against a policy whose rules all miss (the worst case: every rule is tried), and
// formatting and writing one audit record to each sink.
//
//   cmake --build build/default --target policy_bench -j2 && build/default/bench/policy_bench
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "server/audit_log.h"
#include "server/policy.h"

namespace {

using namespace ptyvisor::server;

// `argv_rules` argv rules and `pattern_rules` pattern rules, none matching "make test".
Policy make_policy(int argv_rules, int pattern_rules) {
    std::string text = "[policy]\n";
    for (int i = 0; i < argv_rules; ++i)
        text += "[[policy.rules]]\nargv = [\"tool" + std::to_string(i) + "\", \"sub\"]\nargv0 = \"basename\"\n";
    for (int i = 0; i < pattern_rules; ++i)
        text += "[[policy.rules]]\npattern = '^(curl|wget) .*\\| *(ba)?sh" + std::to_string(i) + "( |$)'\n";
    Policy policy;
    std::string why;
    const auto root = toml::parse(std::string_view(text), std::string_view("bench.toml"));
    if (!parse_policy(*root["policy"].as_table(), "bench.toml", policy, why)) abort();
    return policy;
}

void BM_EvaluateAllRulesMiss(benchmark::State& state) {
    const auto policy = make_policy(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
    const std::vector<std::string> argv{"make", "-j2", "test"};
    for (auto _ : state) benchmark::DoNotOptimize(evaluate(policy, argv, "/home/agent/src", std::nullopt));
}
BENCHMARK(BM_EvaluateAllRulesMiss)->Args({100, 0})->Args({0, 100})->Args({100, 100});

// Unanchored patterns read the whole of the longest command line a pattern may see.
void BM_EvaluateLongestCommandLine(benchmark::State& state) {
    std::string text = "[policy]\n";
    for (int i = 0; i < 10; ++i) text += "[[policy.rules]]\npattern = 'curl .*\\| *(ba)?sh" + std::to_string(i) + "'\n";
    Policy policy;
    std::string why;
    if (!parse_policy(*toml::parse(std::string_view(text), std::string_view("b.toml"))["policy"].as_table(), "b.toml",
                      policy, why))
        abort();
    // range(0) 1: "curl " over and over, so that RE2's DFA, not a memchr for the literal, runs.
    std::string body;
    while (body.size() + 5 < kMaxCommandLine - 20) body += state.range(0) ? "curl " : "xxxxx";
    const std::vector<std::string> argv{"python3", "-c", body};
    for (auto _ : state) benchmark::DoNotOptimize(evaluate(policy, argv, "/", std::nullopt));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(kMaxCommandLine));
}
BENCHMARK(BM_EvaluateLongestCommandLine)->Arg(0)->Arg(1);

AuditRecord typical_start() {
    AuditRecord r;
    r.kind = AuditKind::Start;
    r.time_usec = 1764686144123456;
    r.session = "0123456789abcdef0123456789abcdef";
    r.argv = {"npm", "run", "dev", "--", "--port", "3000"};
    r.cwd = "/home/agent/src/app";
    r.env_names = {"LANG", "TERM", "NODE_ENV", "API_TOKEN"};
    r.peer_pid = 4242;
    r.peer_uid = 1000;
    r.unit = "agent.service";
    r.rule = "default";
    r.decision = "allow";
    return r;
}

void BM_AuditJsonLine(benchmark::State& state) {
    const auto r = typical_start();
    for (auto _ : state) benchmark::DoNotOptimize(audit_json_line(r));
}
BENCHMARK(BM_AuditJsonLine);

void BM_AuditJournalDatagram(benchmark::State& state) {
    const auto r = typical_start();
    for (auto _ : state) benchmark::DoNotOptimize(journal_datagram(audit_journal_fields(r)));
}
BENCHMARK(BM_AuditJournalDatagram);

void BM_AuditFileWrite(benchmark::State& state) {
    char tmpl[] = "/tmp/policy_bench.XXXXXX";
    const std::string dir = ::mkdtemp(tmpl);
    FileSink sink;
    if (sink.open(dir, "audit.jsonl", 16 << 20) < 0) abort();
    const auto r = typical_start();
    for (auto _ : state)
        if (sink.write(r) < 0) abort();
    std::filesystem::remove_all(dir);
}
BENCHMARK(BM_AuditFileWrite);

void BM_RedactSendText(benchmark::State& state) {
    const std::vector<std::string> secrets{"ghp_0123456789abcdefghijABCDEFGHIJ012345", "hunter2hunter2"};
    const std::string text(4096, 'a');
    for (auto _ : state) benchmark::DoNotOptimize(redact(text, secrets));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 4096);
}
BENCHMARK(BM_RedactSendText);

}  // namespace

BENCHMARK_MAIN();
