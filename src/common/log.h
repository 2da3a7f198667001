// Logging: structured journald entries when running under systemd (JOURNAL_STREAM set),
// readable lines on stderr otherwise. Fields are KEY=value pairs (journald conventions:
// upper case keys), e.g. log_info("session started", {{"UNIT", unit}, {"PEER_PID", "42"}}).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace ptyvisor {

using LogField = std::pair<std::string_view, std::string>;

enum class LogLevel { Error = 3, Warning = 4, Notice = 5, Info = 6, Debug = 7 };

void log_message(LogLevel level, std::string_view message, std::initializer_list<LogField> fields = {});
void set_log_level(LogLevel max_level);

inline void log_error(std::string_view m, std::initializer_list<LogField> f = {}) { log_message(LogLevel::Error, m, f); }
inline void log_warning(std::string_view m, std::initializer_list<LogField> f = {}) { log_message(LogLevel::Warning, m, f); }
inline void log_notice(std::string_view m, std::initializer_list<LogField> f = {}) { log_message(LogLevel::Notice, m, f); }
inline void log_info(std::string_view m, std::initializer_list<LogField> f = {}) { log_message(LogLevel::Info, m, f); }
inline void log_debug(std::string_view m, std::initializer_list<LogField> f = {}) { log_message(LogLevel::Debug, m, f); }

// Logs `message` at error level with ERROR=strerror(-error), then `fields`, and returns
// `error`, a negative errno: a failure is logged and passed up in one statement, as with
// systemd's log_error_errno().
int log_error_errno(int error, std::string_view message, std::initializer_list<LogField> fields = {});

}  // namespace ptyvisor
