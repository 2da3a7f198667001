#include "common/log.h"

#include <sys/uio.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

namespace ptyvisor {
namespace {

LogLevel g_max_level = LogLevel::Info;

// Fields quote what clients sent (a command name, a message): each is cut to this, so that
// no client decides how much the daemon writes to the journal.
constexpr std::size_t kMaxFieldBytes = 2048;

std::string_view bounded(std::string_view value) { return value.substr(0, kMaxFieldBytes); }

// journald sets JOURNAL_STREAM for services whose stderr it collects.
bool stderr_is_journal() {
    static const bool journal = std::getenv("JOURNAL_STREAM") != nullptr;
    return journal;
}

void write_log(LogLevel level, std::string_view message, std::span<const LogField> fields) {
    if (static_cast<int>(level) > static_cast<int>(g_max_level)) return;
    if (stderr_is_journal()) {
        std::vector<std::string> items;
        items.reserve(fields.size() + 3);
        items.push_back("MESSAGE=" + std::string(message));
        items.push_back("PRIORITY=" + std::to_string(static_cast<int>(level)));
        items.emplace_back("SYSLOG_IDENTIFIER=ptyvisord");
        for (const auto& [k, v] : fields) items.push_back(std::string(k) + "=" + std::string(bounded(v)));
        std::vector<iovec> iov;
        iov.reserve(items.size());
        for (auto& s : items) iov.push_back({s.data(), s.size()});
        if (sd_journal_sendv(iov.data(), static_cast<int>(iov.size())) >= 0) return;
    }
    std::string line = "ptyvisord: " + std::string(message);
    for (const auto& [k, v] : fields) line += " " + std::string(k) + "=" + std::string(bounded(v));
    // One line per message: a newline a client put in a field must not forge another.
    for (char& c : line)
        if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    line += '\n';
    [[maybe_unused]] const auto n = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace

void set_log_level(LogLevel max_level) { g_max_level = max_level; }

void log_message(LogLevel level, std::string_view message, std::initializer_list<LogField> fields) {
    write_log(level, message, std::span<const LogField>(fields.begin(), fields.size()));
}

int log_error_errno(int error, std::string_view message, std::initializer_list<LogField> fields) {
    std::vector<LogField> all;
    all.reserve(fields.size() + 1);
    all.emplace_back("ERROR", std::strerror(error < 0 ? -error : error));
    all.insert(all.end(), fields.begin(), fields.end());
    write_log(LogLevel::Error, message, all);
    return error;
}

}  // namespace ptyvisor
