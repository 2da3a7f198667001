#include "cli/status_command.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iterator>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <vector>

#include "cli/options.h"
#include "cli/table.h"
#include "client/client.h"

namespace ptyvisor::cli {
namespace {

constexpr int kFailure = 255;
// The daemon answers STATUS at once; this only bounds a daemon that has hung.
constexpr std::chrono::seconds kStatusTimeout{10};

// started_at is Unix time in seconds (docs/protocol.md 5.7); shown in UTC, ISO 8601.
std::string start_time_of(std::int64_t started_at) {
    const auto seconds = static_cast<std::time_t>(started_at);
    std::tm utc{};
    char text[32];
    if (::gmtime_r(&seconds, &utc) == nullptr || std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc) == 0)
        return std::to_string(started_at);
    return text;
}

void print_sessions(std::ostream& out, const std::vector<protocol::StatusReply::Session>& sessions) {
    out << "sessions: " << sessions.size() << '\n';
    if (sessions.empty()) return;
    std::vector<std::vector<std::string>> rows{{"UNIT", "PID", "PEER", "STARTED", "IN", "OUT", "COMMAND"}};
    for (const auto& s : sessions)
        rows.push_back({s.unit, std::to_string(s.pid), std::to_string(s.peer_pid), start_time_of(s.started_at),
                        std::to_string(s.bytes_in), std::to_string(s.bytes_out), s.argv0});
    out << format_table(rows);
}

// In the order of their names, as the JSON object has them.
void print_counters(std::ostream& out, const protocol::StatusReply::Counters& c) {
    std::vector<std::vector<std::string>> rows{{"  accepted", std::to_string(c.accepted)},
                                               {"  evicted", std::to_string(c.evicted)},
                                               {"  handshake_timeouts", std::to_string(c.handshake_timeouts)},
                                               {"  rate_limited", std::to_string(c.rate_limited)}};
    if (c.hung_up) rows.insert(rows.begin() + 3, {"  hung_up", std::to_string(*c.hung_up)});  // absent from older daemons
    if (c.quarantined) rows.insert(rows.end() - 1, {"  quarantined", std::to_string(*c.quarantined)});  // likewise
    for (const auto& [code, count] : c.rejected) rows.push_back({"  rejected." + code, std::to_string(count)});
    out << "counters:\n";
    out << format_table(rows);
}

int failure(const std::string& why) {
    std::cerr << "ptyvisor: " << why << '\n';
    return kFailure;
}

}  // namespace

std::string format_status(const protocol::StatusReply& report) {
    std::ostringstream out;
    out << "backend: " << report.backend << '\n';
    if (report.truncated) out << "truncated: true\n";
    out << "version: " << report.version << '\n';
    // Live sessions, as before STATUS also listed the ended ones kept (for metrics).
    std::vector<protocol::StatusReply::Session> live;
    std::copy_if(report.sessions.begin(), report.sessions.end(), std::back_inserter(live),
                 [](const auto& s) { return s.state != "ended"; });
    print_sessions(out, live);
    print_counters(out, report.counters);
    return out.str();
}

int status_command(const StatusOptions& options) {
    std::string why;
    client::Connection connection;
    if (!connection.connect(resolve_socket_path(options.socket, std::getenv(client::kSocketEnvironmentVariable)), why))
        return failure(why);
    connection.queue_status_request();
    client::Transcript t;
    if (!client::run_to_completion(connection, kStatusTimeout, t, why)) return failure(why);
    if (t.error) return failure(t.error->message + " (" + std::string(protocol::to_string(t.error->code)) + ")");
    if (t.violation) return failure("protocol error from the daemon: " + *t.violation);
    if (!t.status) return failure("connection to the daemon lost");
    // --json: as the daemon sent it, with whatever members a newer daemon added.
    if (options.json)
        std::cout << t.status->json << '\n';
    else
        std::cout << format_status(t.status->reply);
    std::cout.flush();
    return std::cout ? 0 : kFailure;
}

}  // namespace ptyvisor::cli
