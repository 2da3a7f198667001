#include "cli/audit_command.h"

#include <sys/stat.h>
#include <systemd/sd-journal.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli/relay.h"
#include "cli/table.h"
#include "common/utf8.h"
#include "server/audit_log.h"

namespace ptyvisor::cli {
namespace {

constexpr std::int64_t kSecond = 1000000;

bool digits(std::string_view text, std::size_t pos, std::size_t n, int& out) {
    if (pos + n > text.size()) return false;
    out = 0;
    for (std::size_t i = pos; i < pos + n; ++i) {
        if (text[i] < '0' || text[i] > '9') return false;
        out = out * 10 + (text[i] - '0');
    }
    return true;
}

std::optional<std::int64_t> unit_usec(std::string_view unit) {
    struct Unit {
        const char* name;
        std::int64_t usec;
    };
    static constexpr Unit kUnits[] = {
        {"us", 1},           {"usec", 1},           {"ms", 1000},          {"msec", 1000},
        {"s", kSecond},      {"sec", kSecond},      {"secs", kSecond},     {"second", kSecond},
        {"seconds", kSecond}, {"m", 60 * kSecond},  {"min", 60 * kSecond}, {"mins", 60 * kSecond},
        {"minute", 60 * kSecond}, {"minutes", 60 * kSecond}, {"h", 3600 * kSecond}, {"hour", 3600 * kSecond},
        {"hours", 3600 * kSecond}, {"d", 86400 * kSecond}, {"day", 86400 * kSecond}, {"days", 86400 * kSecond},
        {"w", 7 * 86400 * kSecond}, {"week", 7 * 86400 * kSecond}, {"weeks", 7 * 86400 * kSecond},
    };
    for (const auto& u : kUnits)
        if (unit == u.name) return u.usec;
    return std::nullopt;
}

bool parse_relative(std::string_view text, std::int64_t now_usec, std::int64_t& out) {
    std::string_view rest = text.substr(1);
    std::int64_t amount = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), amount);
    if (ec != std::errc() || end == rest.data() || amount < 0) return false;
    std::string_view unit(end, static_cast<std::size_t>(rest.data() + rest.size() - end));
    while (unit.starts_with(' ')) unit.remove_prefix(1);
    const auto usec = unit_usec(unit);
    // Ten years at most: nothing in an audit log is older, and the product cannot overflow.
    if (!usec || amount > 10 * 366 * 86400 * kSecond / *usec) return false;
    out = now_usec - amount * *usec;
    return true;
}

bool parse_absolute(std::string_view text, std::int64_t& out) {
    std::tm tm{};
    int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
    if (!digits(text, 0, 4, year) || text.size() < 10 || text[4] != '-' || !digits(text, 5, 2, month) ||
        text[7] != '-' || !digits(text, 8, 2, day))
        return false;
    std::size_t pos = 10;
    std::int64_t fraction = 0;
    if (pos < text.size()) {
        if ((text[pos] != 'T' && text[pos] != ' ') || !digits(text, pos + 1, 2, hour) || pos + 3 >= text.size() ||
            text[pos + 3] != ':' || !digits(text, pos + 4, 2, minute))
            return false;
        pos += 6;
        if (pos < text.size() && text[pos] == ':') {
            if (!digits(text, pos + 1, 2, second)) return false;
            pos += 3;
            if (pos < text.size() && text[pos] == '.') {
                ++pos;
                std::int64_t scale = 100000;
                const auto start = pos;
                for (; pos < text.size() && text[pos] >= '0' && text[pos] <= '9'; ++pos, scale /= 10)
                    fraction += (text[pos] - '0') * scale;
                if (pos == start) return false;
            }
        }
    }
    if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return false;
    tm.tm_year = year - 1900;
    tm.tm_mon = month - 1;
    tm.tm_mday = day;
    tm.tm_hour = hour;
    tm.tm_min = minute;
    tm.tm_sec = second;
    std::int64_t seconds = 0;
    const std::string_view zone = text.substr(pos);
    if (zone.empty()) {
        tm.tm_isdst = -1;  // no zone: local time, as journalctl reads it
        seconds = ::mktime(&tm);
    } else if (zone == "Z") {
        seconds = ::timegm(&tm);
    } else {
        int zh = 0, zm = 0;
        if (zone.size() != 6 || (zone[0] != '+' && zone[0] != '-') || !digits(zone, 1, 2, zh) || zone[3] != ':' ||
            !digits(zone, 4, 2, zm))
            return false;
        const int offset = (zh * 60 + zm) * 60;
        seconds = ::timegm(&tm) - (zone[0] == '+' ? offset : -offset);
    }
    out = seconds * kSecond + fraction;
    return true;
}

std::int64_t now_usec() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return std::int64_t{ts.tv_sec} * kSecond + ts.tv_nsec / 1000;
}

std::string hex_byte(unsigned char c) {
    static constexpr char kHex[] = "0123456789abcdef";
    return std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
}

std::string show(const nlohmann::ordered_json& value) {
    if (value.is_string()) return value.get<std::string>();
    if (value.is_array()) {
        std::string words;
        for (const auto& w : value) {
            if (!words.empty()) words += ' ';
            const std::string s = w.is_string() ? w.get<std::string>() : w.dump();
            // A word with a space or nothing in it is quoted, so that the words can be told apart.
            words += s.empty() || s.find_first_of(" \"'") != std::string::npos ? nlohmann::json(s).dump() : s;
        }
        return words;
    }
    return value.dump();
}

// The journal as a source: sd-journal, as journalctl reads it.
int read_journal(const AuditFilter& filter, const AuditSink& sink, std::string& why) {
    sd_journal* raw = nullptr;
    if (const int r = sd_journal_open(&raw, SD_JOURNAL_LOCAL_ONLY | SD_JOURNAL_SYSTEM); r < 0) {
        why = std::string("cannot open the journal: ") + std::strerror(-r);
        return r;
    }
    const std::unique_ptr<sd_journal, decltype(&sd_journal_close)> journal(raw, &sd_journal_close);
    if (sd_journal_has_runtime_files(raw) <= 0 && sd_journal_has_persistent_files(raw) <= 0) {
        why = "no journal files this account can read (the system journal is for root and the groups "
              "systemd-journal and adm); an audit file is read with --file";
        return -EACCES;
    }
    // Matches on one field are alternatives; on different fields, all must hold.
    for (const auto kind : server::kAuditKinds) {
        const std::string match = std::string("MESSAGE_ID=") + server::audit_message_id(kind);
        sd_journal_add_match(raw, match.data(), match.size());
    }
    const std::string identifier = "SYSLOG_IDENTIFIER=ptyvisord";
    sd_journal_add_match(raw, identifier.data(), identifier.size());
    if (filter.session) {
        const std::string match = "PTYVISOR_SESSION=" + *filter.session;
        sd_journal_add_match(raw, match.data(), match.size());
    }
    sd_journal_set_data_threshold(raw, 0);  // whole fields: the daemon bounded them already
    if (filter.since_usec) sd_journal_seek_realtime_usec(raw, static_cast<std::uint64_t>(*filter.since_usec));
    else sd_journal_seek_head(raw);
    int r;
    while ((r = sd_journal_next(raw)) > 0) {
        std::map<std::string, std::string> fields;
        const void* data = nullptr;
        std::size_t length = 0;
        SD_JOURNAL_FOREACH_DATA(raw, data, length) {
            const std::string_view field(static_cast<const char*>(data), length);
            const auto eq = field.find('=');
            if (eq == std::string_view::npos || !field.starts_with("PTYVISOR_")) continue;
            fields.emplace(field.substr(0, eq), field.substr(eq + 1));
        }
        if (!fields.contains("PTYVISOR_TIME_USEC")) {
            std::uint64_t t = 0;
            if (sd_journal_get_realtime_usec(raw, &t) >= 0) fields["PTYVISOR_TIME_USEC"] = std::to_string(t);
        }
        const auto record = audit_record_from_journal(fields);
        if (audit_matches(record, filter)) sink(record);
    }
    if (r < 0) {
        why = std::string("reading the journal: ") + std::strerror(-r);
        return r;
    }
    return 0;
}

bool read_lines(std::istream& in, const AuditFilter& filter, const AuditSink& sink, std::uint64_t& malformed) {
    for (std::string line; std::getline(in, line);) {
        if (line.empty()) continue;
        auto record = nlohmann::ordered_json::parse(line, nullptr, false);
        if (record.is_discarded() || !record.is_object() || !record.contains("kind")) {
            ++malformed;
            continue;
        }
        if (audit_matches(record, filter)) sink(record);
    }
    return !in.bad();
}

}  // namespace

bool parse_since(std::string_view text, std::int64_t now, std::int64_t& since_usec, std::string& why) {
    bool ok = false;
    if (text.starts_with('-')) ok = parse_relative(text, now, since_usec);
    else if (text.starts_with('@')) {
        std::int64_t seconds = 0;
        const auto [end, ec] = std::from_chars(text.data() + 1, text.data() + text.size(), seconds);
        ok = ec == std::errc() && end == text.data() + text.size() && seconds >= 0 && seconds < (std::int64_t{1} << 40);
        since_usec = seconds * kSecond;
    } else if (text == "now") {
        since_usec = now;
        ok = true;
    } else ok = parse_absolute(text, since_usec);
    if (!ok)
        why = "--since '" + std::string(text) +
              "': expected an ISO 8601 time (2026-12-02T14:00:00Z, 2026-12-02 14:00), @SECONDS, or -N followed by "
              "s, min, h, d or w (-10min)";
    return ok;
}

bool audit_matches(const nlohmann::ordered_json& record, const AuditFilter& filter) {
    if (filter.session) {
        const auto it = record.find("session");
        if (it == record.end() || !it->is_string() || it->get<std::string>() != *filter.session) return false;
    }
    if (filter.since_usec) {
        const auto it = record.find("time_usec");
        if (it == record.end() || !it->is_number_integer() || it->get<std::int64_t>() < *filter.since_usec)
            return false;
    }
    return true;
}

bool read_audit_file(const std::string& path, const AuditFilter& filter, const AuditSink& sink,
                     std::uint64_t& malformed, std::string& why) {
    // The older half first, so that records come out in the order they were written.
    std::ifstream older(path + ".1");
    if (older && !read_lines(older, filter, sink, malformed)) {
        why = path + ".1: " + std::strerror(errno);
        return false;
    }
    std::ifstream current(path);
    if (!current) {
        why = path + ": " + std::strerror(errno) + (errno == EACCES ? " (the audit file is root's alone)" : "");
        return false;
    }
    if (!read_lines(current, filter, sink, malformed)) {
        why = path + ": " + std::strerror(errno);
        return false;
    }
    return true;
}

nlohmann::ordered_json audit_record_from_journal(const std::map<std::string, std::string>& fields) {
    const auto get = [&](const std::string& key) -> const std::string* {
        const auto it = fields.find(key);
        return it == fields.end() ? nullptr : &it->second;
    };
    nlohmann::ordered_json j;
    j["kind"] = get("PTYVISOR_KIND") ? *get("PTYVISOR_KIND") : "";
    std::int64_t time = 0;
    if (const auto* t = get("PTYVISOR_TIME_USEC")) std::from_chars(t->data(), t->data() + t->size(), time);
    j["time"] = server::format_audit_time(time);
    j["time_usec"] = time;
    if (const auto* s = get("PTYVISOR_SESSION")) j["session"] = *s;
    else j["session"] = nullptr;
    for (const auto& field : server::audit_field_table()) {
        std::string key = "PTYVISOR_";
        for (const char* c = field.name; *c; ++c) key += static_cast<char>(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
        const auto* value = get(key);
        if (!value) continue;
        switch (field.type) {
        case server::AuditFieldType::String: j[field.name] = *value; break;
        case server::AuditFieldType::Integer: {
            std::int64_t n = 0;
            const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), n);
            if (ec == std::errc() && end == value->data() + value->size()) j[field.name] = n;
            else j[field.name] = *value;  // not the daemon's: shown as it is
            break;
        }
        case server::AuditFieldType::Strings: {
            auto list = nlohmann::ordered_json::parse(*value, nullptr, false);
            if (list.is_discarded() || !list.is_array()) j[field.name] = *value;
            else j[field.name] = std::move(list);
            break;
        }
        }
    }
    return j;
}

std::string printable(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    while (!text.empty()) {
        const auto seq = utf8::next(text);
        const auto c = static_cast<unsigned char>(text[0]);
        if (seq.kind != utf8::Sequence::Kind::Character) {
            for (std::size_t i = 0; i < seq.length; ++i) out += hex_byte(static_cast<unsigned char>(text[i]));
        } else if (seq.code_point == '\r') out += "\\r";
        else if (seq.code_point == '\n') out += "\\n";
        else if (seq.code_point == '\t') out += "\\t";
        else if (seq.code_point == 0x1b) out += "\\e";
        else if (seq.code_point < 0x20 || seq.code_point == 0x7f) out += hex_byte(c);
        else if (seq.code_point >= 0x80 && seq.code_point < 0xa0) {
            // C1 controls: some terminals take U+009B as CSI.
            out += "\\u00" + hex_byte(static_cast<unsigned char>(seq.code_point)).substr(2);
        } else out.append(text.substr(0, seq.length));
        text.remove_prefix(seq.length);
    }
    return out;
}

std::string format_audit_table(const std::vector<nlohmann::ordered_json>& records) {
    std::vector<std::vector<std::string>> rows{{"TIME", "KIND", "SESSION", "DETAILS"}};
    for (const auto& r : records) {
        std::string time = r.value("time", "");
        if (time.size() >= 19) time = time.substr(0, 10) + " " + time.substr(11, 8);  // to the second, UTC
        std::string details;
        for (const auto& [key, value] : r.items()) {
            if (key == "kind" || key == "time" || key == "time_usec" || key == "session") continue;
            if (!details.empty()) details += "  ";
            details += key == "argv" ? show(value) : key + "=" + show(value);
        }
        const auto& session = r.contains("session") && r["session"].is_string() ? r["session"].get<std::string>()
                                                                               : std::string("-");
        rows.push_back({printable(time), printable(r.value("kind", "")), printable(session), printable(details)});
    }
    return format_table(rows);
}

int audit_command(const AuditOptions& options) {
    AuditFilter filter;
    filter.session = options.session;
    if (options.since) {
        std::int64_t since = 0;
        std::string why;
        if (!parse_since(*options.since, now_usec(), since, why)) {
            std::cerr << "ptyvisor: " << why << '\n';
            return kFailure;
        }
        filter.since_usec = since;
    }
    std::vector<nlohmann::ordered_json> table;
    const AuditSink sink = [&](const nlohmann::ordered_json& record) {
        if (options.json) std::cout << record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
        else table.push_back(record);
    };
    std::string why;
    struct stat st {};
    const bool from_file = options.file || ::stat(kDefaultAuditFile, &st) == 0 || errno == EACCES;
    if (from_file) {
        const std::string path = options.file.value_or(kDefaultAuditFile);
        std::uint64_t malformed = 0;
        if (!read_audit_file(path, filter, sink, malformed, why)) {
            std::cerr << "ptyvisor: " << why << '\n';
            return kFailure;
        }
        if (malformed > 0) std::cerr << "ptyvisor: " << path << ": skipped " << malformed << " lines that are not records\n";
    } else if (read_journal(filter, sink, why) < 0) {
        std::cerr << "ptyvisor: " << why << '\n';
        return kFailure;
    }
    if (!options.json) std::cout << format_audit_table(table);
    std::cout.flush();
    return std::cout ? 0 : kFailure;
}

}  // namespace ptyvisor::cli
