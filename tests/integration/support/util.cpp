#include "support/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "common/linux.h"

#ifndef PTYVISORD_BIN_DEFAULT
#define PTYVISORD_BIN_DEFAULT ""
#endif
#ifndef PTYVISOR_BIN_DEFAULT
#define PTYVISOR_BIN_DEFAULT ""
#endif

namespace ptyvisor::itest {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return (v != nullptr && *v != '\0') ? std::string(v) : fallback;
}

std::optional<Account> from_passwd(const passwd* pw) {
    if (pw == nullptr) return std::nullopt;
    return Account{pw->pw_name, pw->pw_uid, pw->pw_gid, pw->pw_dir};
}

}  // namespace

std::string daemon_binary() { return env_or("PTYVISORD_BIN", PTYVISORD_BIN_DEFAULT); }
bool account_can_execute(const Account& account, const std::string& path) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (::setgroups(1, &account.gid) != 0 || ::setresgid(account.gid, account.gid, account.gid) != 0 ||
            ::setresuid(account.uid, account.uid, account.uid) != 0)
            ::_exit(2);
        ::_exit(::access(path.c_str(), X_OK) == 0 ? 0 : 1);
    }
    int status = 0;
    return pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

namespace {

// A directory of copies, removed at exit by the process that made it (not by forked children).
struct CopyDir {
    std::string path;
    pid_t owner = ::getpid();
    ~CopyDir() {
        std::error_code ec;
        if (!path.empty() && ::getpid() == owner) std::filesystem::remove_all(path, ec);
    }
};

}  // namespace

// Programs that run as the test account (the CLI, the reliability agent) must be within its
// reach. A build under a directory it cannot search made every client exit 127 with no word
// why; such a program is copied instead, under /run: not /tmp, which an agent unit with
// PrivateTmp= does not share.
std::string reachable_by_account(const std::string& built) {
    const auto account = lookup_account(account_name());
    if (built.empty() || ::geteuid() != 0 || !account || account_can_execute(*account, built))
        return built;
    static CopyDir copies;
    if (copies.path.empty()) {
        std::string tmpl = "/run/ptyvisor-itest-bin.XXXXXX";
        if (::mkdtemp(tmpl.data()) == nullptr || ::chmod(tmpl.c_str(), 0755) != 0) return built;
        copies.path = tmpl;
    }
    const std::string copy = copies.path + "/" + std::filesystem::path(built).filename().string();
    std::error_code ec;
    std::filesystem::copy_file(built, copy, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec || ::chmod(copy.c_str(), 0755) != 0) return built;
    return copy;
}

std::string cli_binary() {
    static const std::string path = reachable_by_account(env_or("PTYVISOR_BIN", PTYVISOR_BIN_DEFAULT));
    return path;
}
std::string backend() { return env_or("PTYVISOR_TEST_BACKEND", "direct"); }
bool full_scale() { return env_or("PTYVISOR_TEST_SCALE", "") == "full"; }
std::size_t scaled(std::size_t ci, std::size_t full) { return full_scale() ? full : ci; }
std::size_t scaled(std::size_t ci, std::size_t sanitized, std::size_t full) {
    if (full_scale()) return full;
#if defined(__SANITIZE_ADDRESS__)
    (void)ci;
    return sanitized;
#else
    // Every daemon under memcheck (tests/reliability/valgrind.sh), some fifty times slower.
    return std::getenv("PTYVISOR_VALGRIND") != nullptr ? sanitized : ci;
#endif
}
std::string account_name() { return env_or("PTYVISOR_TEST_ACCOUNT", "ptyvisor-test"); }

std::optional<Account> lookup_account(const std::string& name) {
    return from_passwd(::getpwnam(name.c_str()));
}

std::optional<Account> lookup_uid(uid_t uid) { return from_passwd(::getpwuid(uid)); }

TempDir::TempDir() {
    std::string tmpl = "/tmp/ptyvisor-itest.XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr)
        throw std::system_error(errno, std::generic_category(), "mkdtemp");
    path_ = tmpl;
    if (::chmod(path_.c_str(), 0755) != 0)
        throw std::system_error(errno, std::generic_category(), "chmod " + path_);
}

TempDir::~TempDir() {
    if (keep_ || path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_text_file(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + path);
}

short wait_fd(int fd, short events, Clock::time_point deadline) {
    for (;;) {
        const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
        if (left < 0) return 0;
        pollfd p{fd, events, 0};
        const int n = ::poll(&p, 1, static_cast<int>(left));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return 0;
        return p.revents;
    }
}

UniqueFd open_pidfd(pid_t pid) { return UniqueFd(ptyvisor::pidfd_open(pid)); }

bool wait_pidfd_exit(int pidfd, Millis timeout) {
    return (wait_fd(pidfd, POLLIN, Clock::now() + timeout) & POLLIN) != 0;
}

long count_fds(pid_t pid) {
    const std::string path = "/proc/" + std::to_string(pid) + "/fd";
    DIR* d = ::opendir(path.c_str());
    if (d == nullptr) return -1;
    long n = 0;
    while (const dirent* e = ::readdir(d)) {
        if (e->d_name[0] != '.') ++n;
    }
    ::closedir(d);
    return n;  // opendir's own descriptor is ours, not the target's (pid is never us)
}

std::string fd_listing(pid_t pid) {
    std::error_code ec;
    std::string out;
    const std::filesystem::path dir = "/proc/" + std::to_string(pid) + "/fd";
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        std::error_code link_ec;
        const auto target = std::filesystem::read_symlink(entry.path(), link_ec);
        out += entry.path().filename().string() + " -> " +
               (link_ec ? std::string("?") : target.string()) + "\n";
    }
    return out;
}

long rss_kib(pid_t pid) {
    const std::string text = read_text_file("/proc/" + std::to_string(pid) + "/status");
    const auto v = number_after(text, "VmRSS:");
    return v ? *v : -1;
}

bool drop_privileges(uid_t uid, gid_t gid, std::span<const gid_t> groups) {
    if (::setgroups(groups.size(), groups.data()) != 0) return false;
    if (::setresgid(gid, gid, gid) != 0) return false;
    if (::setresuid(uid, uid, uid) != 0) return false;
    return true;
}

int shell_status(int cld_code, int status) {
    if (cld_code == CLD_EXITED) return status;
    return 128 + status;
}

CStrings::CStrings(const std::vector<std::string>& strings) : storage_(strings) {
    for (auto& s : storage_) pointers_.push_back(s.data());
    pointers_.push_back(nullptr);
}

std::vector<std::string> client_environment(const Account& account, const std::string& socket,
                                            const std::string& term) {
    return {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=" + account.home,
        "USER=" + account.name,
        "LOGNAME=" + account.name,
        "LC_ALL=C",
        "TERM=" + term,
        "PTYVISOR_SOCKET=" + socket,
    };
}

std::string without_cr(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (const char c : s)
        if (c != '\r') out += c;
    return out;
}

std::optional<long> number_after(const std::string& text, const std::string& key) {
    const auto at = text.find(key);
    if (at == std::string::npos) return std::nullopt;
    std::size_t i = at + key.size();
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    long value = 0;
    const auto [end, ec] = std::from_chars(text.data() + i, text.data() + text.size(), value);
    if (ec != std::errc{}) return std::nullopt;
    return value;
}

}  // namespace ptyvisor::itest
