#include "cli/metrics_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/options.h"
#include "client/client.h"
#include "common/unique_fd.h"

namespace ptyvisor::cli {
namespace {

using protocol::StatusReply;

constexpr int kFailure = 255;
// As `ptyvisor status`: the daemon answers STATUS at once; this bounds one that has hung.
constexpr std::chrono::seconds kStatusTimeout{10};

// The states a session is in, as STATUS names them (Session::State).
constexpr std::array<std::string_view, 4> kStates{"starting", "running", "ending", "ended"};

enum class Type { Counter, Gauge, Summary };

struct Family {
    std::string_view name;  // the OpenMetrics family name: no _total, ends with its unit
    Type type;
    std::string_view unit;  // "" when it has none
    std::string_view help;  // no backslash, newline or double quote: written as it is
};

using Labels = std::vector<std::pair<std::string_view, std::string>>;

struct Sample {
    std::string_view suffix;  // after the family name: "_total", "_count", ... or ""
    Labels labels;
    std::string value;
};

// A label value as both formats write it: backslash, double quote and newline escaped.
std::string escaped(std::string_view value) {
    std::string out;
    out.reserve(value.size());
    for (const char c : value) {
        if (c == '\\') out += "\\\\";
        else if (c == '"') out += "\\\"";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

// `micros` millionths as a decimal number, exactly ("1.5", "0.000001", "3"): seconds from the
// daemon's microseconds, with no rounding through a double.
std::string from_micros(std::uint64_t micros) {
    std::string out = std::to_string(micros / 1'000'000);
    if (const std::uint64_t fraction = micros % 1'000'000; fraction != 0) {
        std::string digits = std::to_string(fraction);
        digits.insert(0, 6 - digits.size(), '0');
        digits.erase(digits.find_last_not_of('0') + 1);
        out += "." + digits;
    }
    return out;
}

class Writer {
public:
    explicit Writer(MetricsFormat format) : format_(format) {}

    // Writes `family` with `samples`; a family with none is left out, as promtool would drop it.
    void family(const Family& f, const std::vector<Sample>& samples) {
        if (samples.empty()) return;
        const std::string name = described_name(f);
        out_ += "# HELP " + name + " " + std::string(f.help) + "\n";
        out_ += "# TYPE " + name + " " + std::string(type_name(f.type)) + "\n";
        if (!f.unit.empty() && format_ == MetricsFormat::OpenMetrics)
            out_ += "# UNIT " + name + " " + std::string(f.unit) + "\n";
        for (const Sample& s : samples) {
            out_ += std::string(f.name) + std::string(s.suffix);
            if (!s.labels.empty()) {
                out_ += '{';
                for (std::size_t i = 0; i < s.labels.size(); ++i) {
                    if (i > 0) out_ += ',';
                    out_ += std::string(s.labels[i].first) + "=\"" + escaped(s.labels[i].second) + '"';
                }
                out_ += '}';
            }
            out_ += ' ' + s.value + '\n';
        }
    }

    std::string finish() {
        if (format_ == MetricsFormat::OpenMetrics) out_ += "# EOF\n";
        return std::move(out_);
    }

private:
    // The name # TYPE and # HELP give: the family's in OpenMetrics, the sample's in 0.0.4
    // for the types whose one sample has a suffix (see metrics_command.h).
    [[nodiscard]] std::string described_name(const Family& f) const {
        if (format_ == MetricsFormat::OpenMetrics) return std::string(f.name);
        if (f.type == Type::Counter) return std::string(f.name) + "_total";
        return std::string(f.name);
    }
    [[nodiscard]] std::string_view type_name(Type t) const {
        switch (t) {
            case Type::Counter: return "counter";
            case Type::Gauge: return "gauge";
            case Type::Summary: return "summary";
        }
        return "unknown";
    }

    MetricsFormat format_;
    std::string out_;
};

// One counter sample (its suffix is _total in both formats).
Sample count(Labels labels, std::uint64_t value) { return {"_total", std::move(labels), std::to_string(value)}; }
Sample level(Labels labels, std::string value) { return {"", std::move(labels), std::move(value)}; }

void counter(Writer& w, const Family& f, const std::optional<std::uint64_t>& value) {
    if (value) w.family(f, {count({}, *value)});
}

// A counter by one label, from a map of counts by name.
void counter_by(Writer& w, const Family& f, std::string_view label,
                const std::optional<std::map<std::string, std::uint64_t>>& counts) {
    if (!counts) return;
    std::vector<Sample> samples;
    for (const auto& [name, n] : *counts) samples.push_back(count({{label, name}}, n));
    w.family(f, samples);
}

// The sessions with per-session series: those with an id, each id once.
std::vector<const StatusReply::Session*> identified(const StatusReply& report) {
    std::vector<const StatusReply::Session*> out;
    std::set<std::string_view> seen;
    for (const auto& s : report.sessions)
        if (!s.id.empty() && seen.insert(s.id).second) out.push_back(&s);
    return out;
}

Labels session_labels(const StatusReply::Session& s) {
    Labels labels{{"id", s.id}};
    if (s.profile) labels.emplace_back("profile", *s.profile);
    if (s.state) labels.emplace_back("state", *s.state);
    return labels;
}

// Sessions by state and profile: every state for every profile seen and for none (""), so
// that a state with no session reads 0 rather than nothing. Only from a daemon that says
// sessions' states (an older one listed live sessions only, without).
void sessions_by_state(Writer& w, const StatusReply& report) {
    std::map<std::pair<std::string, std::string>, std::uint64_t> counts;  // (profile, state)
    std::set<std::string> profiles{""};
    bool states_known = false;
    for (const auto& s : report.sessions) {
        if (!s.state) continue;
        states_known = true;
        const std::string profile = s.profile.value_or("");
        profiles.insert(profile);
        ++counts[{profile, *s.state}];
    }
    // No session at all: a daemon that counts starts also says sessions' states.
    if (!states_known && !(report.sessions.empty() && report.counters.starts)) return;
    std::vector<Sample> samples;
    for (const std::string& profile : profiles) {
        std::set<std::string> states(kStates.begin(), kStates.end());
        for (const auto& [key, n] : counts)
            if (key.first == profile) states.insert(key.second);  // a state a newer daemon added
        for (const std::string& state : states) {
            const auto it = counts.find({profile, state});
            samples.push_back(level({{"profile", profile}, {"state", state}}, std::to_string(it == counts.end() ? 0 : it->second)));
        }
    }
    w.family({"ptyvisor_sessions", Type::Gauge, "", "Sessions the daemon holds, by state and sandbox profile."}, samples);
}

using UsageMember = std::optional<std::uint64_t> StatusReply::Session::Usage::*;
struct UsageFamily {
    Family family;
    UsageMember member;
    bool micros = false;  // the daemon's figure is in microseconds; the metric in seconds
};
const std::array<UsageFamily, 9> kUsageFamilies{{
    {{"ptyvisor_session_cpu_seconds", Type::Counter, "seconds", "CPU time the session's processes used (user and system)."},
     &StatusReply::Session::Usage::cpu_usec, true},
    {{"ptyvisor_session_memory_bytes", Type::Gauge, "bytes", "Memory the session's cgroup uses now."},
     &StatusReply::Session::Usage::memory_current},
    {{"ptyvisor_session_memory_peak_bytes", Type::Gauge, "bytes", "Most memory the session's cgroup has used."},
     &StatusReply::Session::Usage::memory_peak},
    {{"ptyvisor_session_tasks", Type::Gauge, "", "Tasks (processes and threads) in the session now."},
     &StatusReply::Session::Usage::tasks_current},
    {{"ptyvisor_session_tasks_peak", Type::Gauge, "", "Most tasks the session has had at once."},
     &StatusReply::Session::Usage::tasks_peak},
    {{"ptyvisor_session_oom_kills", Type::Counter, "", "Processes of the session the OOM killer ended."},
     &StatusReply::Session::Usage::oom_kills},
    {{"ptyvisor_session_tasks_limit_hits", Type::Counter, "", "Forks refused because the session was at its task limit."},
     &StatusReply::Session::Usage::tasks_limit_hits},
    {{"ptyvisor_session_io_read_bytes", Type::Counter, "bytes", "Bytes the session's processes read from block devices."},
     &StatusReply::Session::Usage::io_read_bytes},
    {{"ptyvisor_session_io_write_bytes", Type::Counter, "bytes", "Bytes the session's processes wrote to block devices."},
     &StatusReply::Session::Usage::io_write_bytes},
}};

void per_session(Writer& w, const StatusReply& report) {
    const auto sessions = identified(report);
    std::vector<Sample> started, input, output, clients;
    for (const auto* s : sessions) {
        started.push_back(level(session_labels(*s), std::to_string(s->started_at)));
        input.push_back(count(session_labels(*s), s->bytes_in));
        output.push_back(count(session_labels(*s), s->bytes_out));
        clients.push_back(level(session_labels(*s), std::to_string(s->clients)));
    }
    w.family({"ptyvisor_session_start_time_seconds", Type::Gauge, "seconds", "When the session started, in Unix time."},
             started);
    w.family({"ptyvisor_session_input_bytes", Type::Counter, "bytes", "Bytes of input the session's clients sent it."},
             input);
    w.family({"ptyvisor_session_output_bytes", Type::Counter, "bytes", "Bytes of output the session's terminal wrote."},
             output);
    w.family({"ptyvisor_session_clients", Type::Gauge, "", "Connections attached to the session."}, clients);
    for (const auto& u : kUsageFamilies) {
        std::vector<Sample> samples;
        for (const auto* s : sessions) {
            if (!s->usage) continue;
            const auto& v = (*s->usage).*u.member;
            if (!v) continue;
            if (u.family.type == Type::Counter)
                samples.push_back({"_total", session_labels(*s), u.micros ? from_micros(*v) : std::to_string(*v)});
            else
                samples.push_back(level(session_labels(*s), std::to_string(*v)));
        }
        w.family(u.family, samples);
    }
}

void daemon_counters(Writer& w, const StatusReply::Counters& c) {
    counter(w, {"ptyvisor_connections_accepted", Type::Counter, "", "Connections the daemon accepted."}, c.accepted);
    counter(w, {"ptyvisor_connections_hung_up", Type::Counter, "", "Connections dropped at accept: the peer had already closed."},
            c.hung_up);
    counter(w, {"ptyvisor_handshake_timeouts", Type::Counter, "", "Connections closed because their handshake took too long."},
            c.handshake_timeouts);
    counter(w, {"ptyvisor_handshakes_evicted", Type::Counter, "", "Handshakes evicted to make room for another peer's."},
            c.evicted);
    counter(w, {"ptyvisor_admissions_rate_limited", Type::Counter, "", "STARTs refused by the admission rate limit."},
            c.rate_limited);
    counter_by(w, {"ptyvisor_refusals", Type::Counter, "", "Requests refused with an ERROR, by its code."}, "code",
               c.rejected);
    counter_by(w, {"ptyvisor_starts", Type::Counter, "", "STARTs by result: started, or the code that refused it."}, "result",
               c.starts);
    counter_by(w, {"ptyvisor_sessions_ended", Type::Counter, "", "Sessions that ended, by the reason they ended."}, "reason",
               c.ended);
    counter(w, {"ptyvisor_sessions_quarantined", Type::Counter, "", "Sessions whose processes outlived their cleanup."},
            c.quarantined);
    counter(w, {"ptyvisor_relayed_input_bytes", Type::Counter, "bytes", "Input bytes relayed to sessions over the daemon's life."},
            c.relayed_in);
    counter(w, {"ptyvisor_relayed_output_bytes", Type::Counter, "bytes", "Output bytes relayed from sessions over the daemon's life."},
            c.relayed_out);
    counter(w, {"ptyvisor_screen_worker_restarts", Type::Counter, "", "Times the screen worker was started again after it went."},
            c.screen_worker_restarts);
    if (c.admission_waits && c.admission_wait_usec)
        w.family({"ptyvisor_admission_wait_seconds", Type::Summary, "seconds",
                  "STARTs that waited for the backend to check their peer again, and how long."},
                 {{"_count", {}, std::to_string(*c.admission_waits)}, {"_sum", {}, from_micros(*c.admission_wait_usec)}});
}

int failure(const std::string& why) {
    std::cerr << "ptyvisor: " << why << '\n';
    return kFailure;
}

}  // namespace

std::string render_metrics(const StatusReply& report, MetricsFormat format) {
    Writer w(format);
    // A gauge, not OpenMetrics' info type: promtool, and node_exporter, cannot parse that.
    w.family({"ptyvisor_build_info", Type::Gauge, "", "The daemon's version and backend; always 1."},
             {level({{"version", report.version}, {"backend", report.backend}}, "1")});
    w.family({"ptyvisor_status_truncated", Type::Gauge, "",
              "1 when the session list did not fit the daemon's report: per-session series are left out."},
             {level({}, report.truncated ? "1" : "0")});
    if (!report.truncated) {
        sessions_by_state(w, report);
        per_session(w, report);
    }
    daemon_counters(w, report.counters);
    return w.finish();
}

bool write_file_atomically(const std::string& path, const std::string& text, std::string& why) {
    const auto slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
    const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    if (base.empty()) {
        why = path + ": not a file name";
        return false;
    }
    // Hidden and without the .prom ending: node_exporter's textfile collector skips it.
    std::string temp = dir + "/." + base + ".XXXXXX";
    UniqueFd fd(::mkostemp(temp.data(), O_CLOEXEC));
    if (!fd) {
        why = "cannot create a temporary file beside " + path + ": " + std::strerror(errno);
        return false;
    }
    const auto fail = [&](const std::string& what) {
        why = what + ": " + std::strerror(errno);
        ::unlink(temp.c_str());
        return false;
    };
    for (std::size_t done = 0; done < text.size();) {
        const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return fail("cannot write " + temp);
        done += static_cast<std::size_t>(n);
    }
    // mkostemp made it 0600; the collector may run as another user.
    if (::fchmod(fd.get(), 0644) < 0) return fail("cannot chmod " + temp);
    if (::fsync(fd.get()) < 0) return fail("cannot fsync " + temp);
    if (::rename(temp.c_str(), path.c_str()) < 0) return fail("cannot rename " + temp + " to " + path);
    // The rename is durable once the directory is; a failure here loses nothing already read.
    if (UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); d) (void)::fsync(d.get());
    return true;
}

int metrics_command(const MetricsOptions& options) {
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
    if (options.textfile) {
        if (!write_file_atomically(*options.textfile, render_metrics(t.status->reply, MetricsFormat::PrometheusText), why))
            return failure(why);
        return 0;
    }
    std::cout << render_metrics(t.status->reply, MetricsFormat::OpenMetrics);
    std::cout.flush();
    return std::cout ? 0 : kFailure;
}

}  // namespace ptyvisor::cli
