#include "cli/status_command.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "cli/options.h"
#include "client/client.h"

namespace ptyvisor::cli {
namespace {

using nlohmann::json;

constexpr int kFailure = 255;
// The daemon answers STATUS at once; this only bounds a daemon that has hung.
constexpr std::chrono::seconds kStatusTimeout{10};

std::string scalar_text(const json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_null()) return "-";
    return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The first of `keys` present in `o`, as text, or "-".
std::string field(const json& o, std::initializer_list<const char*> keys) {
    for (const char* k : keys)
        if (auto it = o.find(k); it != o.end() && !it->is_structured()) return scalar_text(*it);
    return "-";
}

// started_at is Unix time in seconds (docs/protocol.md 5.7); shown in UTC, ISO 8601.
std::string start_time_of(const json& s) {
    const auto it = s.find("started_at");
    if (it == s.end() || !it->is_number_integer()) return field(s, {"started_at"});
    const auto seconds = static_cast<std::time_t>(it->get<std::int64_t>());
    std::tm utc{};
    if (::gmtime_r(&seconds, &utc) == nullptr) return scalar_text(*it);
    char text[32];
    return std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc) > 0 ? text : scalar_text(*it);
}

std::string command_of(const json& s) {
    if (auto it = s.find("argv"); it != s.end() && it->is_array() && !it->empty())
        return scalar_text((*it)[0]);
    return field(s, {"argv0", "command"});
}

// Nested counters print as "outer.inner".
void flatten(const json& o, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
    for (auto it = o.begin(); it != o.end(); ++it) {
        const std::string name = prefix.empty() ? it.key() : prefix + "." + it.key();
        if (it->is_object()) flatten(*it, name, out);
        else out.emplace_back(name, it->is_array() ? it->dump() : scalar_text(*it));
    }
}

void print_table(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> widths;
    for (const auto& row : rows)
        for (std::size_t i = 0; i < row.size(); ++i) {
            if (widths.size() <= i) widths.push_back(0);
            widths[i] = std::max(widths[i], row[i].size());
        }
    for (const auto& row : rows) {
        std::string line;
        for (std::size_t i = 0; i < row.size(); ++i) {
            line += row[i];
            if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
        }
        out << line << '\n';
    }
}

}  // namespace

std::string format_status(const std::string& text) {
    const json report = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (report.is_discarded() || !report.is_object())
        throw std::invalid_argument("the daemon's status report is not a JSON object");
    std::ostringstream out;

    for (auto it = report.begin(); it != report.end(); ++it)
        if (!it->is_structured()) out << it.key() << ": " << scalar_text(*it) << '\n';

    const auto sessions = report.find("sessions");
    const std::size_t count = sessions != report.end() && sessions->is_array() ? sessions->size() : 0;
    out << "sessions: " << count << '\n';
    if (count > 0) {
        std::vector<std::vector<std::string>> rows{
            {"UNIT", "PID", "PEER", "STARTED", "IN", "OUT", "COMMAND"}};
        for (const auto& s : *sessions) {
            if (!s.is_object()) continue;
            rows.push_back({field(s, {"unit"}), field(s, {"pid"}), field(s, {"peer_pid"}),
                            start_time_of(s), field(s, {"bytes_in"}), field(s, {"bytes_out"}),
                            command_of(s)});
        }
        print_table(out, rows);
    }

    if (const auto adm = report.find("counters"); adm != report.end() && adm->is_object()) {
        std::vector<std::pair<std::string, std::string>> counters;
        flatten(*adm, "", counters);
        out << "counters:\n";
        std::vector<std::vector<std::string>> rows;
        for (auto& [k, v] : counters) rows.push_back({"  " + k, v});
        print_table(out, rows);
    }
    return out.str();
}

int status_command(const StatusOptions& options) {
    try {
        auto connection = client::Connection::connect(
            resolve_socket_path(options.socket, std::getenv(client::kSocketEnvironmentVariable)));
        connection.queue_status_request();
        const auto t = client::run_to_completion(connection, kStatusTimeout);
        if (t.error) {
            std::cerr << "ptyvisor: " << t.error->message << " (" << protocol::to_string(t.error->code) << ")\n";
            return kFailure;
        }
        if (t.violation) {
            std::cerr << "ptyvisor: protocol error from the daemon: " << *t.violation << '\n';
            return kFailure;
        }
        if (!t.status) {
            std::cerr << "ptyvisor: connection to the daemon lost\n";
            return kFailure;
        }
        if (options.json)
            std::cout << *t.status << '\n';
        else
            std::cout << format_status(*t.status);
        std::cout.flush();
        return std::cout ? 0 : kFailure;
    } catch (const std::exception& e) {
        std::cerr << "ptyvisor: " << e.what() << '\n';
        return kFailure;
    }
}

}  // namespace ptyvisor::cli
