#include "server/audit_log.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/private_directory.h"
#include "common/utf8.h"

namespace ptyvisor::server {
namespace {

struct KindInfo {
    AuditKind kind;
    const char* name;
    const char* message_id;  // made once with uuid4; never change one (journalctl MESSAGE_ID=)
};

constexpr KindInfo kKinds[] = {
    {AuditKind::Start, "start", "35dae11fa1464e189759657cc5a8a849"},
    {AuditKind::Decision, "decision", "ca640dffa9484dd18a2a22546e2207a3"},
    {AuditKind::Attach, "attach", "ec9da18325094b7fb43bf1fd18cc3db9"},
    {AuditKind::Takeover, "takeover", "1c479bc4e796473d878302eaa2af45ca"},
    {AuditKind::Send, "send", "cb2cfe43217f47e5a34049d5a3b76bdc"},
    {AuditKind::Kill, "kill", "17edb275eadd44a484ca3a30848d9814"},
    {AuditKind::Exec, "exec", "9649e9da112840f8a14185c314977bfb"},
    {AuditKind::End, "end", "1c5c818e6b2245c384ab8220c5f78349"},
};

const KindInfo& info(AuditKind kind) {
    for (const auto& k : kKinds)
        if (k.kind == kind) return k;
    return kKinds[0];
}

constexpr AuditFieldInfo kFields[] = {
    {"argv", AuditFieldType::Strings},     {"cwd", AuditFieldType::String},
    {"env_names", AuditFieldType::Strings}, {"profile", AuditFieldType::String},
    {"peer_pid", AuditFieldType::Integer}, {"peer_uid", AuditFieldType::Integer},
    {"unit", AuditFieldType::String},      {"rule", AuditFieldType::String},
    {"decision", AuditFieldType::String},  {"reason", AuditFieldType::String},
    {"approver", AuditFieldType::String},  {"mode", AuditFieldType::String},
    {"text", AuditFieldType::String},      {"bytes", AuditFieldType::Integer},
    {"signal", AuditFieldType::Integer},   {"pid", AuditFieldType::Integer},
    {"ppid", AuditFieldType::Integer},     {"exit_status", AuditFieldType::Integer},
};

// Valid UTF-8 of at most `max` bytes; what is cut is said by a marker after it.
std::string bounded(std::string_view raw, std::size_t max) {
    std::string text = utf8::replace_invalid(raw);
    if (text.size() <= max) return text;
    std::size_t keep = max;
    while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;  // a character's start
    const auto cut = text.size() - keep;
    text.resize(keep);
    return text + "[+" + std::to_string(cut) + " bytes]";
}

std::vector<std::string> bounded_words(const std::vector<std::string>& words, std::size_t max_bytes,
                                       std::size_t max_words) {
    std::vector<std::string> out;
    std::size_t budget = max_bytes;
    for (std::size_t i = 0; i < words.size(); ++i) {
        if (i >= max_words || budget == 0) {
            out.push_back("[+" + std::to_string(words.size() - i) + " words]");
            break;
        }
        auto word = bounded(words[i], budget);
        budget -= std::min(budget, word.size());
        out.push_back(std::move(word));
    }
    return out;
}

void add(std::vector<AuditField>& out, const char* name, const std::string& value) {
    if (!value.empty()) out.push_back({name, bounded(value, kMaxFieldBytes)});
}
void add(std::vector<AuditField>& out, const char* name, const std::optional<std::int64_t>& value) {
    if (value) out.push_back({name, *value});
}

std::string upper(std::string_view name) {
    std::string s(name);
    for (char& c : s) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    return s;
}

std::string json_array(const std::vector<std::string>& words) {
    return nlohmann::json(words).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The journal's MESSAGE, for a person scrolling journalctl: the record's fields are the data.
std::string summary(const AuditRecord& r, const std::vector<AuditField>& fields) {
    std::string s = std::string("ptyvisor ") + to_string(r.kind);
    if (!r.session.empty()) s += " " + r.session;
    for (const auto& f : fields) {
        if (f.name == "argv") {
            std::string line;
            for (const auto& w : std::get<std::vector<std::string>>(f.value)) line += (line.empty() ? "" : " ") + w;
            s += ": " + bounded(line, 200);
        } else if (f.name == "decision" || f.name == "exit_status" || f.name == "signal" || f.name == "mode") {
            s += " " + f.name + "=" +
                 (std::holds_alternative<std::string>(f.value) ? std::get<std::string>(f.value)
                                                               : std::to_string(std::get<std::int64_t>(f.value)));
        }
    }
    // One line: a newline an agent put in argv must not look like another entry.
    for (char& c : s)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
    return s;
}

std::int64_t now_usec() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return std::int64_t{ts.tv_sec} * 1000000 + ts.tv_nsec / 1000;
}

}  // namespace

const char* to_string(AuditKind kind) { return info(kind).name; }

std::optional<AuditKind> parse_audit_kind(std::string_view name) {
    for (const auto& k : kKinds)
        if (name == k.name) return k.kind;
    return std::nullopt;
}

const char* audit_message_id(AuditKind kind) { return info(kind).message_id; }

std::span<const AuditFieldInfo> audit_field_table() { return kFields; }

std::string redact(std::string_view text, std::span<const std::string> secrets) {
    std::vector<std::string_view> ordered;
    for (const auto& s : secrets)
        if (!s.empty()) ordered.emplace_back(s);
    if (ordered.empty()) return std::string(text);
    std::sort(ordered.begin(), ordered.end(), [](auto a, auto b) { return a.size() > b.size(); });
    // One pass: a marker already written is never searched again, so a short secret cannot
    // match inside "[secret]".
    std::string out;
    out.reserve(text.size());
    std::size_t i = 0;
    while (i < text.size()) {
        const auto rest = text.substr(i);
        const auto hit = std::find_if(ordered.begin(), ordered.end(), [&](auto s) { return rest.starts_with(s); });
        if (hit != ordered.end()) {
            out += kSecretMarker;
            i += hit->size();
        } else {
            out += text[i++];
        }
    }
    return out;
}

std::string format_audit_time(std::int64_t time_usec) {
    const std::time_t seconds = static_cast<std::time_t>(time_usec / 1000000);
    std::tm tm{};
    gmtime_r(&seconds, &tm);
    char buf[64];
    const auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    char frac[16];
    std::snprintf(frac, sizeof frac, ".%06lldZ", static_cast<long long>(time_usec % 1000000));
    return std::string(buf, n) + frac;
}

std::vector<AuditField> audit_fields(const AuditRecord& r) {
    std::vector<AuditField> out;
    if (!r.argv.empty()) out.push_back({"argv", bounded_words(r.argv, kMaxArgvBytes, kMaxArgvWords)});
    add(out, "cwd", r.cwd);
    if (!r.env_names.empty()) out.push_back({"env_names", bounded_words(r.env_names, kMaxFieldBytes, kMaxEnvNames)});
    add(out, "profile", r.profile);
    add(out, "peer_pid", r.peer_pid);
    add(out, "peer_uid", r.peer_uid);
    add(out, "unit", r.unit);
    add(out, "rule", r.rule);
    add(out, "decision", r.decision);
    add(out, "reason", r.reason);
    add(out, "approver", r.approver);
    add(out, "mode", r.mode);
    add(out, "text", r.text);
    add(out, "bytes", r.bytes);
    add(out, "signal", r.signal);
    add(out, "pid", r.pid);
    add(out, "ppid", r.ppid);
    add(out, "exit_status", r.exit_status);
    return out;
}

std::string audit_json_line(const AuditRecord& r) {
    nlohmann::ordered_json j;
    j["kind"] = to_string(r.kind);
    j["time"] = format_audit_time(r.time_usec);
    j["time_usec"] = r.time_usec;
    if (r.session.empty()) j["session"] = nullptr;
    else j["session"] = bounded(r.session, 64);
    for (auto& f : audit_fields(r)) std::visit([&](auto& v) { j[f.name] = std::move(v); }, f.value);
    // Strings are valid UTF-8 already; `replace` is the guarantee that dump() never throws.
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::vector<std::string> audit_journal_fields(const AuditRecord& r) {
    const auto fields = audit_fields(r);
    std::vector<std::string> out;
    out.push_back(std::string("MESSAGE_ID=") + audit_message_id(r.kind));
    out.push_back("MESSAGE=" + summary(r, fields));
    out.push_back(std::string("PRIORITY=") + (r.decision == "deny" || r.decision == "denied" ? "5" : "6"));
    out.emplace_back("SYSLOG_IDENTIFIER=ptyvisord");
    out.push_back(std::string("PTYVISOR_KIND=") + to_string(r.kind));
    out.push_back("PTYVISOR_TIME_USEC=" + std::to_string(r.time_usec));
    if (!r.session.empty()) out.push_back("PTYVISOR_SESSION=" + bounded(r.session, 64));
    for (const auto& f : fields) {
        std::string value;
        if (const auto* s = std::get_if<std::string>(&f.value)) value = *s;
        else if (const auto* i = std::get_if<std::int64_t>(&f.value)) value = std::to_string(*i);
        else value = json_array(std::get<std::vector<std::string>>(f.value));
        out.push_back("PTYVISOR_" + upper(f.name) + "=" + value);
    }
    return out;
}

std::string journal_datagram(std::span<const std::string> fields) {
    std::string out;
    for (const auto& field : fields) {
        const auto eq = field.find('=');
        const std::string_view key(field.data(), eq == std::string::npos ? field.size() : eq);
        const std::string_view value =
            eq == std::string::npos ? std::string_view() : std::string_view(field).substr(eq + 1);
        if (value.find('\n') == std::string_view::npos) {
            out.append(field).push_back('\n');
            continue;
        }
        out.append(key).push_back('\n');
        auto size = static_cast<std::uint64_t>(value.size());
        for (int b = 0; b < 8; ++b, size >>= 8) out.push_back(static_cast<char>(size & 0xff));  // little-endian
        out.append(value).push_back('\n');
    }
    return out;
}

// --- JournalSink ---------------------------------------------------------------------------

int JournalSink::open(const std::string& socket_path) {
    path_ = socket_path;
    return connect();
}

int JournalSink::connect() {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (path_.size() >= sizeof address.sun_path) return -ENAMETOOLONG;
    std::memcpy(address.sun_path, path_.c_str(), path_.size() + 1);
    UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return -errno;
    // A datagram connect on a Unix socket only names the peer: it never waits.
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) < 0) return -errno;
    socket_ = std::move(fd);
    return 0;
}

int JournalSink::write(const AuditRecord& record) {
    const auto fields = audit_journal_fields(record);
    const auto datagram = journal_datagram(fields);
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (!socket_) {
            if (const int r = connect(); r < 0) return r;
        }
        if (::send(socket_.get(), datagram.data(), datagram.size(), MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) return 0;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            // journald is behind: waiting for it would stall every session, so the record goes.
            ++dropped_;
            return 1;
        }
        // The socket we named is gone (journald restarted and bound a new one): name it again.
        if (errno != ECONNREFUSED && errno != ENOTCONN && errno != ECONNRESET) return -errno;
        socket_.reset();
    }
    return -ECONNREFUSED;
}

// --- FileSink -------------------------------------------------------------------------------

int FileSink::open(const std::string& directory, const std::string& name, std::uint64_t max_bytes) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") return -EINVAL;
    UniqueFd dir;
    if (const int r = open_private_directory(directory, dir); r < 0) return r;
    directory_ = std::move(dir);
    name_ = name;
    max_bytes_ = max_bytes;
    return open_file();
}

int FileSink::open_file() {
    // O_NONBLOCK: a FIFO planted under the name must fail the open (ENXIO), not hang it.
    UniqueFd fd(::openat(directory_.get(), name_.c_str(),
                         O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0600));
    if (!fd) return -errno;
    struct stat st {};
    if (::fstat(fd.get(), &st) < 0) return -errno;
    if (!S_ISREG(st.st_mode)) return -EINVAL;
    // Another owner, a second link (a hard link to some file of root's) or a mode that lets
    // others read or write: not a file the daemon made for itself.
    if (st.st_uid != ::geteuid() || st.st_nlink != 1 || (st.st_mode & 077) != 0) return -EPERM;
    file_ = std::move(fd);
    size_ = static_cast<std::uint64_t>(st.st_size);
    return 0;
}

int FileSink::rotate() {
    const std::string old = name_ + ".1";
    if (::renameat(directory_.get(), name_.c_str(), directory_.get(), old.c_str()) < 0) return -errno;
    file_.reset();
    return open_file();
}

int FileSink::write(const AuditRecord& record) {
    if (!directory_) return -EBADF;
    // A rotation whose reopening failed (a full inode table, say) is retried with each record.
    if (!file_) {
        if (const int r = open_file(); r < 0) return r;
    }
    std::string line = audit_json_line(record);
    line.push_back('\n');
    if (size_ > 0 && size_ + line.size() > max_bytes_) {
        // Rotation failing must not let the file grow past its bound: the record is lost.
        if (const int r = rotate(); r < 0) return r;
    }
    ssize_t n;
    do n = ::write(file_.get(), line.data(), line.size());
    while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(line.size())) {
        size_ += line.size();
        return 0;
    }
    const int error = n < 0 ? errno : ENOSPC;
    // A partial line would glue itself to the next record: cut it off again.
    if (n > 0 && ::ftruncate(file_.get(), static_cast<off_t>(size_)) < 0) size_ += static_cast<std::uint64_t>(n);
    return -error;
}

// --- AuditLog -------------------------------------------------------------------------------

int AuditLog::open(const Options& options, std::string& why) {
    if (::access(options.journal_socket.c_str(), F_OK) == 0) {
        JournalSink journal;
        const int r = journal.open(options.journal_socket);
        if (r == 0) {
            journal_ = std::move(journal);
            return 0;
        }
        log_warning("audit: the journal's socket is there but cannot be used; writing the audit file instead",
                    {{"SOCKET", options.journal_socket}, {"ERROR", std::strerror(-r)}});
    }
    FileSink file;
    if (const int r = file.open(options.directory, options.file_name, options.max_bytes); r < 0) {
        why = options.directory + "/" + options.file_name + ": " +
              (r == -EPERM || r == -ENOTDIR ? private_directory_error(r) + " (or the file is not the daemon's alone)"
                                            : std::string(std::strerror(-r)));
        return r;
    }
    file_ = std::move(file);
    return 0;
}

void AuditLog::record(AuditRecord record, std::span<const std::string> secrets) {
    try {
        if (record.time_usec == 0) record.time_usec = now_usec();
        if (!record.text.empty() && !record.bytes) record.bytes = static_cast<std::int64_t>(record.text.size());
        if (!secrets.empty()) {
            for (auto& word : record.argv) word = redact(word, secrets);
            record.cwd = redact(record.cwd, secrets);
            record.text = redact(record.text, secrets);
        }
        const int r = journal_ ? journal_->write(record) : file_ ? file_->write(record) : -EBADF;
        if (r == 0) ++written_;
        else if (r < 0) {
            // Logged on the first failure and then every 1000th: a full disk must not flood the log.
            if (failed_++ % 1000 == 0)
                log_error("audit: a record could not be written",
                          {{"ERROR", std::strerror(-r)}, {"FAILED", std::to_string(failed_)}});
        }
    } catch (const std::exception&) {  // std::bad_alloc: no exception leaves the loop's callback
        ++failed_;
    }
}

}  // namespace ptyvisor::server
