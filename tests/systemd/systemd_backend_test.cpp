// The systemd backend against a real systemd 252: run inside the test harness
// (tests/harness/up.sh) as root, through $HARNESS_EXEC, so that PIDs and pidfds are those of
// the harness' PID namespace. tests/systemd/run.sh does all of that.
//
// Every wait drives the sd-event loop until a condition holds, with a timeout only as a
// safety bound; nothing sleeps to synchronise.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/systemd/bus_connection.h"
#include "backends/systemd/main_pid_tracker.h"
#include "backends/systemd/sd_ptr.h"
#include "backends/systemd/session_units.h"
#include "backends/systemd/systemd_backend.h"
#include "common/event.h"
#include "common/linux.h"
#include "common/unique_fd.h"

namespace ptyvisor::backends {
namespace {

using namespace std::chrono_literals;
using protocol::ExitReason;
using protocol::ExitStatus;
using systemd::BusError;
using systemd::BusPtr;
using systemd::MessagePtr;

constexpr const char* kAccount = "ptyvisor-test";
constexpr const char* kAgentUnit = "ptyvisor-test-agent.service";

// Runs the loop until `done()` holds or `timeout` passes; returns done().
bool run_until(sd_event* e, const std::function<bool()>& done, std::chrono::milliseconds timeout = 15s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        const auto left = deadline - std::chrono::steady_clock::now();
        if (left <= 0s) return done();
        const auto usec = std::chrono::duration_cast<std::chrono::microseconds>(left).count();
        if (sd_event_run(e, static_cast<uint64_t>(usec)) < 0) return done();
    }
    return true;
}

// A PTY whose master is read into `output` by the loop.
struct Pty {
    UniqueFd master;
    UniqueFd slave;
    std::string path;
    std::string output;
    bool eof = false;
    EventSource source;

    bool open(sd_event* e) {
        master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
        if (!master || ::grantpt(master.get()) != 0 || ::unlockpt(master.get()) != 0) return false;
        char name[128];
        if (::ptsname_r(master.get(), name, sizeof name) != 0) return false;
        path = name;
        slave.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
        if (!slave) return false;
        sd_event_source* s = nullptr;
        if (sd_event_add_io(e, &s, master.get(), EPOLLIN, &Pty::on_readable, this) < 0) return false;
        source.reset(s);
        return true;
    }
    static int on_readable(sd_event_source* s, int fd, uint32_t, void* userdata) {
        auto* self = static_cast<Pty*>(userdata);
        char buf[4096];
        for (;;) {
            const ssize_t n = ::read(fd, buf, sizeof buf);
            if (n > 0) { self->output.append(buf, static_cast<size_t>(n)); continue; }
            if (n < 0 && errno == EAGAIN) return 0;
            // EIO: every slave fd is closed (the session ended and we gave ours away).
            self->eof = true;
            sd_event_source_set_enabled(s, SD_EVENT_OFF);
            return 0;
        }
    }
    bool contains(const std::string& s) const { return output.find(s) != std::string::npos; }
    void write(const std::string& s) const { ASSERT_EQ(::write(master.get(), s.data(), s.size()), static_cast<ssize_t>(s.size())); }
};

struct Observed {
    bool started = false;
    pid_t pid = 0;
    bool start_failed = false;
    std::string start_error;
    bool exited = false;
    ExitStatus status;
    int events = 0;  // on_exited must never precede on_started
    bool out_of_order = false;
};

SessionEvents observe(Observed& o) {
    SessionEvents ev;
    ev.on_started = [&o](pid_t pid) { o.started = true; o.pid = pid; ++o.events; };
    ev.on_start_failed = [&o](std::string why) { o.start_failed = true; o.start_error = std::move(why); ++o.events; };
    ev.on_exited = [&o](ExitStatus s) {
        if (!o.started) o.out_of_order = true;
        o.exited = true;
        o.status = std::move(s);
        ++o.events;
    };
    return ev;
}

std::string random_unit(const std::string& prefix = "ptyvisor") {
    unsigned char bytes[16];
    EXPECT_EQ(::getrandom(bytes, sizeof bytes, 0), 16);
    static const char* hex = "0123456789abcdef";
    std::string name = prefix + "-";
    for (unsigned char b : bytes) { name += hex[b >> 4]; name += hex[b & 15]; }
    return name + ".service";
}

Account test_account() {
    Account a;
    const passwd* pw = ::getpwnam(kAccount);
    if (!pw) return a;
    a.name = pw->pw_name;
    a.uid = pw->pw_uid;
    a.gid = pw->pw_gid;
    a.home = pw->pw_dir;
    a.shell = pw->pw_shell;
    return a;
}

// A separate, synchronous connection for the test's own look-ups.
BusPtr open_test_bus() {
    sd_bus* raw = nullptr;
    EXPECT_GE(sd_bus_open_system(&raw), 0);
    return BusPtr(raw);
}

// Units matching `pattern`, with their ActiveState.
std::vector<std::pair<std::string, std::string>> list_units(sd_bus* bus, const std::string& pattern) {
    std::vector<std::pair<std::string, std::string>> out;
    BusError error;
    sd_bus_message* raw = nullptr;
    const int r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                     "org.freedesktop.systemd1.Manager", "ListUnitsByPatterns",
                                     error.get(), &raw, "asas", 0, 1, pattern.c_str());
    MessagePtr reply(raw);
    EXPECT_GE(r, 0) << error.message();
    if (r < 0) return out;
    sd_bus_message_enter_container(reply.get(), 'a', "(ssssssouso)");
    for (;;) {
        const char *name, *desc, *load, *active, *sub, *following, *path, *jt, *jp;
        uint32_t id;
        if (sd_bus_message_read(reply.get(), "(ssssssouso)", &name, &desc, &load, &active, &sub,
                                &following, &path, &id, &jt, &jp) <= 0)
            break;
        out.emplace_back(name, active);
    }
    return out;
}

pid_t unit_main_pid(sd_bus* bus, const std::string& unit) {
    char* path = nullptr;
    sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit.c_str(), &path);
    uint32_t pid = 0;
    BusError error;
    sd_bus_get_property_trivial(bus, "org.freedesktop.systemd1", path,
                                "org.freedesktop.systemd1.Service", "MainPID", error.get(), 'u', &pid);
    std::free(path);
    return static_cast<pid_t>(pid);
}

uint64_t unit_property_u64(sd_bus* bus, const std::string& unit, const char* iface, const char* name) {
    char* path = nullptr;
    sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit.c_str(), &path);
    uint64_t v = 0;
    BusError error;
    EXPECT_GE(sd_bus_get_property_trivial(bus, "org.freedesktop.systemd1", path, iface, name,
                                          error.get(), 't', &v), 0) << error.message();
    std::free(path);
    return v;
}

// Bus names holding a reference on the unit (AddRef/RefUnit).
std::vector<std::string> unit_refs(sd_bus* bus, const std::string& unit) {
    char* path = nullptr;
    sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit.c_str(), &path);
    char** refs = nullptr;
    BusError error;
    sd_bus_get_property_strv(bus, "org.freedesktop.systemd1", path, "org.freedesktop.systemd1.Unit",
                             "Refs", error.get(), &refs);
    std::free(path);
    std::vector<std::string> out;
    for (char** r = refs; r && *r; ++r) {
        out.emplace_back(*r);
        std::free(*r);
    }
    std::free(static_cast<void*>(refs));
    return out;
}

int run_command(const std::string& cmd) {
    const int st = std::system(cmd.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

class SystemdBackendTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_EQ(::geteuid(), 0u) << "run as root, inside the harness (tests/systemd/run.sh)";
        ASSERT_EQ(sd_event_new(&event_), 0);
        account_ = test_account();
        ASSERT_FALSE(account_.name.empty()) << "missing account " << kAccount
                                            << " (tests/harness/ensure-account.sh)";
        backend_ = make(options());
        ASSERT_TRUE(backend_);
        bus_ = open_test_bus();
        ASSERT_TRUE(bus_);
    }
    void TearDown() override {
        backend_.reset();
        bus_.reset();
        sd_event_unref(event_);
    }

    BackendOptions options() const {
        BackendOptions o;
        o.event = event_;
        return o;
    }
    std::unique_ptr<Backend> make(const BackendOptions& o) {
        std::string why;
        auto b = make_systemd_backend(o, why);
        EXPECT_TRUE(b) << why;
        return b;
    }

    SessionSpec spec(std::vector<std::string> argv, Pty& pty) {
        SessionSpec s;
        s.unit_name = random_unit();
        s.argv = std::move(argv);
        s.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "TERM=dumb", "HOME=/nonexistent",
                 "USER=" + account_.name, "LANG=C"};
        cwds_.emplace_back(::open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        s.cwd = cwds_.back().get();
        struct stat st {};
        EXPECT_EQ(::fstat(s.cwd, &st), 0);
        s.cwd_dev = st.st_dev;
        s.cwd_ino = st.st_ino;
        s.tty = UniqueFd(::fcntl(pty.slave.get(), F_DUPFD_CLOEXEC, 3));
        s.tty_path = pty.path;
        s.account = account_;
        return s;
    }

    // Starts argv on a new PTY; the test's own slave fd is closed so the master sees EOF.
    std::unique_ptr<SessionProcesses> start(std::vector<std::string> argv, Pty& pty, Observed& o,
                                   std::map<std::string, std::string> props = {}) {
        EXPECT_TRUE(pty.open(event_));
        SessionSpec s = spec(std::move(argv), pty);
        s.properties = std::move(props);
        pty.slave.reset();
        std::string why;
        auto session = resolve_and_start(std::move(s), observe(o), why);
        EXPECT_TRUE(session) << why;
        return session;
    }

    bool stop(SessionProcesses& session, std::string* why_out = nullptr) {
        bool done = false, ok = false;
        std::string why;
        session.stop(Clock::now() + 10s, [&](bool k, std::string w) { done = true; ok = k; why = std::move(w); });
        EXPECT_FALSE(done) << "done() must come from the loop";
        EXPECT_TRUE(run_until(event_, [&] { return done; }, 15s));
        if (why_out) *why_out = why;
        EXPECT_TRUE(ok) << why;
        return ok;
    }

    bool unit_listed(const std::string& unit) { return !list_units(bus_.get(), unit).empty(); }

    // As the server does: the backend's Resolver first (here on the test's thread), then start().
    std::unique_ptr<SessionProcesses> resolve_and_start(SessionSpec s, SessionEvents events, std::string& why) {
        if (const auto resolve = backend_->resolver(); resolve && !resolve(s, why)) return nullptr;
        return backend_->start(std::move(s), std::move(events), why);
    }

    std::vector<UniqueFd> cwds_;  // the working directories the specs borrow

    sd_event* event_ = nullptr;
    Account account_;
    std::unique_ptr<Backend> backend_;
    BusPtr bus_;
};

TEST_F(SystemdBackendTest, ExitCodeAndOutput) {
    Pty pty;
    Observed o;
    auto s = start({"/bin/sh", "-c", "echo hi; exit 3"}, pty, o);
    ASSERT_TRUE(s);
    EXPECT_FALSE(o.started) << "on_started must come from the loop";
    ASSERT_TRUE(run_until(event_, [&] { return o.exited && pty.contains("hi"); }));
    EXPECT_TRUE(o.started);
    EXPECT_GT(o.pid, 0);
    EXPECT_FALSE(o.out_of_order);
    EXPECT_EQ(o.status.kind, ExitStatus::Kind::Exited);
    EXPECT_EQ(o.status.code, 3);
    EXPECT_EQ(o.status.unit_result, "exit-code");
    EXPECT_EQ(o.status.reason, ExitReason::Exited);
    EXPECT_EQ(s->main_pid(), o.pid);
    stop(*s);
    EXPECT_FALSE(unit_listed(s->unit()));
    EXPECT_EQ(o.events, 2);
}

TEST_F(SystemdBackendTest, RunsAsTheAccountInTheDirectoryOnTheTty) {
    Pty pty;
    Observed o;
    auto s = start({"sh", "-c", "echo \"id=$(id -u) cwd=$(pwd) tty=$(tty)\""}, pty, o);
    ASSERT_TRUE(s);
    ASSERT_TRUE(run_until(event_, [&] { return o.exited && pty.contains("tty="); }));
    EXPECT_TRUE(pty.contains("id=" + std::to_string(account_.uid) + " ")) << pty.output;
    EXPECT_TRUE(pty.contains("cwd=/tmp ")) << pty.output;
    EXPECT_TRUE(pty.contains("tty=" + pty.path)) << pty.output;
    EXPECT_EQ(o.status.code, 0);
    EXPECT_EQ(o.status.unit_result, "success");
    stop(*s);
}

TEST_F(SystemdBackendTest, DollarSignsReachTheCommandLiterally) {
    Pty pty;
    Observed o;
    auto s = start({"printf", "%s\\n", "a$HOME${HOME}$$b"}, pty, o);
    ASSERT_TRUE(s);
    ASSERT_TRUE(run_until(event_, [&] { return o.exited && pty.contains("b"); }));
    EXPECT_TRUE(pty.contains("a$HOME${HOME}$$b")) << pty.output;
    EXPECT_EQ(o.status.code, 0);
    stop(*s);
}

TEST_F(SystemdBackendTest, SignalDeath) {
    Pty pty;
    Observed o;
    auto s = start({"/bin/sh", "-c", "kill -KILL $$"}, pty, o);
    ASSERT_TRUE(s);
    ASSERT_TRUE(run_until(event_, [&] { return o.exited; }));
    EXPECT_EQ(o.status.kind, ExitStatus::Kind::Signaled);
    EXPECT_EQ(o.status.signal, SIGKILL);
    EXPECT_FALSE(o.status.core_dumped);
    EXPECT_EQ(o.status.unit_result, "signal");
    EXPECT_EQ(o.status.reason, ExitReason::Exited);
    stop(*s);
}

TEST_F(SystemdBackendTest, RuntimeMaxSecIsATimeout) {
    Pty pty;
    Observed o;
    auto s = start({"sleep", "10"}, pty, o, {{"RuntimeMaxSec", "1"}});
    ASSERT_TRUE(s);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(run_until(event_, [&] { return o.exited; }, 8s));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
    EXPECT_EQ(o.status.unit_result, "timeout");
    EXPECT_EQ(o.status.reason, ExitReason::Timeout);
    EXPECT_EQ(o.status.kind, ExitStatus::Kind::Signaled);
    EXPECT_EQ(o.status.signal, SIGTERM);
    stop(*s);
}

TEST_F(SystemdBackendTest, PropertiesReachTheUnit) {
    Pty pty;
    Observed o;
    auto s = start({"sleep", "100"}, pty, o,
                   {{"MemoryMax", "64M"}, {"TasksMax", "32"}, {"CPUQuota", "50%"},
                    {"NoNewPrivileges", "yes"}, {"LimitCORE", "0"}});
    ASSERT_TRUE(s);
    ASSERT_TRUE(run_until(event_, [&] { return o.started; }));
    EXPECT_EQ(unit_property_u64(bus_.get(), s->unit(), "org.freedesktop.systemd1.Service", "MemoryMax"), 64ull << 20);
    EXPECT_EQ(unit_property_u64(bus_.get(), s->unit(), "org.freedesktop.systemd1.Service", "TasksMax"), 32u);
    EXPECT_EQ(unit_property_u64(bus_.get(), s->unit(), "org.freedesktop.systemd1.Service", "CPUQuotaPerSecUSec"), 500000u);
    EXPECT_EQ(unit_property_u64(bus_.get(), s->unit(), "org.freedesktop.systemd1.Service", "LimitCORE"), 0u);
    stop(*s);
    EXPECT_FALSE(unit_listed(s->unit()));
}

TEST_F(SystemdBackendTest, StopLeavesNoUnitAndNoProcess) {
    Pty pty;
    Observed o;
    auto s = start({"sleep", "100"}, pty, o);
    ASSERT_TRUE(s);
    ASSERT_TRUE(run_until(event_, [&] { return o.started; }));
    ASSERT_GT(o.pid, 0);
    UniqueFd pidfd(pidfd_open(o.pid));
    ASSERT_TRUE(pidfd);
    EXPECT_TRUE(pidfd_alive(pidfd.get()));
    EXPECT_TRUE(unit_listed(s->unit()));
    EXPECT_EQ(unit_refs(bus_.get(), s->unit()).size(), 1u) << "AddRef=yes holds the unit for us";
    stop(*s);
    EXPECT_FALSE(unit_listed(s->unit()));
    EXPECT_FALSE(pidfd_alive(pidfd.get()));
    // Stopping again (the unit is gone) still succeeds.
    stop(*s);
}

TEST_F(SystemdBackendTest, StopWhileStarting) {
    Pty pty;
    Observed o;
    auto s = start({"sleep", "100"}, pty, o);
    ASSERT_TRUE(s);
    stop(*s);  // before the loop ever ran: the start job is still queued
    EXPECT_FALSE(unit_listed(s->unit()));
    EXPECT_EQ(o.events, o.started ? (o.exited ? 2 : 1) : (o.start_failed ? 1 : 0));
}

TEST_F(SystemdBackendTest, SignalAll) {
    Pty pty;
    Observed o;
    auto s = start({"sleep", "100"}, pty, o);
    ASSERT_TRUE(s);
    ASSERT_TRUE(run_until(event_, [&] { return o.started; }));
    EXPECT_EQ(s->signal_all(SIGUSR1), 0);
    ASSERT_TRUE(run_until(event_, [&] { return o.exited; }));
    EXPECT_EQ(o.status.kind, ExitStatus::Kind::Signaled);
    EXPECT_EQ(o.status.signal, SIGUSR1);
    stop(*s);
}

TEST_F(SystemdBackendTest, ImmediateFailures) {
    Pty pty;
    ASSERT_TRUE(pty.open(event_));
    std::string why;
    Observed o;
    {
        SessionSpec s = spec({"definitely-not-a-command-xyz"}, pty);
        EXPECT_FALSE(resolve_and_start(std::move(s), observe(o), why));
        EXPECT_NE(why.find("command not found: definitely-not-a-command-xyz"), std::string::npos) << why;
    }
    {
        SessionSpec s = spec({"true"}, pty);
        s.cwd_ino += 1;
        EXPECT_FALSE(resolve_and_start(std::move(s), observe(o), why));
        EXPECT_NE(why.find("working directory changed"), std::string::npos) << why;
    }
    {
        SessionSpec s = spec({"true"}, pty);
        s.properties = {{"Bogus", "1"}};
        EXPECT_FALSE(resolve_and_start(std::move(s), observe(o), why));
        EXPECT_NE(why.find("Bogus"), std::string::npos) << why;
    }
    {
        SessionSpec s = spec({"true"}, pty);
        s.unit_name = "not-ours.service";
        EXPECT_FALSE(resolve_and_start(std::move(s), observe(o), why));
    }
    EXPECT_EQ(o.events, 0);
}

// A failure systemd would only see after fork (217/USER) is refused before the unit exists,
// because after fork it is indistinguishable from a command that exits 217.
TEST_F(SystemdBackendTest, MissingAccountIsRefusedBeforeStart) {
    Pty pty;
    ASSERT_TRUE(pty.open(event_));
    SessionSpec s = spec({"true"}, pty);
    s.account.name = "ptyvisor-no-such-user";
    Observed o;
    std::string why;
    auto session = resolve_and_start(std::move(s), observe(o), why);
    EXPECT_FALSE(session);
    EXPECT_NE(why.find("ptyvisor-no-such-user"), std::string::npos) << why;
    EXPECT_EQ(o.events, 0);
}

// A command that runs and exits with one of systemd's own exec-failure codes is reported as
// the exit it is, whichever of exit and exec notification systemd saw first.
TEST_F(SystemdBackendTest, ExitCodesInSystemdsRangeAreExits) {
    for (const int code : {200, 203, 217, 243}) {
        Pty pty;
        ASSERT_TRUE(pty.open(event_));
        SessionSpec s = spec({"sh", "-c", "exit " + std::to_string(code)}, pty);
        pty.slave.reset();
        Observed o;
        std::string why;
        auto session = resolve_and_start(std::move(s), observe(o), why);
        ASSERT_TRUE(session) << why;
        ASSERT_TRUE(run_until(event_, [&] { return o.exited || o.start_failed; }));
        EXPECT_FALSE(o.start_failed) << code << ": " << o.start_error;
        EXPECT_TRUE(o.started) << code;
        EXPECT_EQ(o.status.kind, ExitStatus::Kind::Exited) << code;
        EXPECT_EQ(o.status.code, code);
        stop(*session);
    }
}

TEST_F(SystemdBackendTest, ValidateProperties) {
    std::string why;
    EXPECT_TRUE(validate_systemd_properties({{"MemoryMax", "512M"}, {"TasksMax", "256"},
                                             {"CPUQuota", "50%"}, {"RuntimeMaxSec", "30"},
                                             {"NoNewPrivileges", "yes"}, {"PrivateTmp", "no"},
                                             {"ProtectSystem", "strict"}, {"ProtectHome", "read-only"},
                                             {"LimitCORE", "0"}},
                                            why)) << why;
    EXPECT_FALSE(validate_systemd_properties({{"MemoryMax", "lots"}}, why));
    EXPECT_NE(why.find("MemoryMax"), std::string::npos);
    EXPECT_FALSE(validate_systemd_properties({{"TasksMax", "-1"}}, why));
    EXPECT_FALSE(validate_systemd_properties({{"CPUQuota", "50"}}, why));
    EXPECT_FALSE(validate_systemd_properties({{"ProtectSystem", "maybe"}}, why));
    EXPECT_FALSE(validate_systemd_properties({{"ExecStart", "/bin/sh"}}, why));
    EXPECT_NE(why.find("unsupported"), std::string::npos) << why;
}

TEST_F(SystemdBackendTest, CleanupOrphansStopsAnotherInstancesUnits) {
    ASSERT_EQ(run_command("systemd-run --quiet --unit=ptyvisor-bystander sleep 1000"), 0);
    Pty pty;
    Observed o;
    auto s = start({"sleep", "100"}, pty, o);
    ASSERT_TRUE(s);
    ASSERT_TRUE(run_until(event_, [&] { return o.started; }));

    auto other = make(options());
    ASSERT_TRUE(other);
    std::string why;
    EXPECT_TRUE(other->cleanup_orphans(Clock::now() + 10s, why)) << why;
    for (const auto& [name, state] : list_units(bus_.get(), "ptyvisor-*"))
        if (name != "ptyvisor-bystander.service") {
            EXPECT_TRUE(state == "inactive" || state == "failed") << name << " " << state;
        }
    const auto bystander = list_units(bus_.get(), "ptyvisor-bystander.service");
    ASSERT_EQ(bystander.size(), 1u);
    EXPECT_EQ(bystander[0].second, "active") << "cleanup must touch only session units";

    ASSERT_TRUE(run_until(event_, [&] { return o.exited; }));
    stop(*s);
    EXPECT_FALSE(unit_listed(s->unit()));
    other.reset();
    run_command("systemctl stop ptyvisor-bystander.service");
}

// backend.h: destroying a session without stop() leaves its unit and processes running (it
// only drops our reference), until the next run's cleanup_orphans() stops them.
TEST_F(SystemdBackendTest, DestroyedWithoutStopItRunsOnUntilTheNextRunCleansUp) {
    Pty pty;
    Observed o;
    auto s = start({"sleep", "100"}, pty, o);
    ASSERT_TRUE(s);
    ASSERT_TRUE(run_until(event_, [&] { return o.started; }));
    const std::string unit = s->unit();
    UniqueFd main(pidfd_open(o.pid));
    ASSERT_TRUE(main);

    s.reset();
    run_until(event_, [] { return false; }, 300ms);  // UnrefUnit goes out, and is handled
    EXPECT_TRUE(pidfd_alive(main.get())) << "the destructor ended the session";
    const auto listed = list_units(bus_.get(), unit);
    ASSERT_EQ(listed.size(), 1u) << "the unit is gone";
    EXPECT_EQ(listed[0].second, "active");
    EXPECT_TRUE(unit_refs(bus_.get(), unit).empty()) << "our reference was dropped";
    EXPECT_EQ(o.events, 1) << "no event after the destructor";

    auto next = make(options());
    ASSERT_TRUE(next);
    std::string why;
    EXPECT_TRUE(next->cleanup_orphans(Clock::now() + 10s, why)) << why;
    EXPECT_TRUE(run_until(event_, [&] { return !pidfd_alive(main.get()); }, 10s));
    for (const auto& [name, state] : list_units(bus_.get(), unit))
        EXPECT_TRUE(state == "inactive" || state == "failed") << name << " " << state;
}

TEST_F(SystemdBackendTest, PeerInsideASessionIsRefused) {
    Pty pty;
    Observed o;
    auto s = start({"/bin/sh", "-c", "sleep 100 & wait"}, pty, o);
    ASSERT_TRUE(s);
    ASSERT_TRUE(run_until(event_, [&] { return o.started; }));
    UniqueFd inside(pidfd_open(o.pid));
    ASSERT_TRUE(inside);
    Peer peer;
    peer.pid = o.pid;
    peer.pidfd = inside.get();
    std::string why;
    EXPECT_EQ(backend_->check_peer(peer, why), PeerVerdict::Refused);
    EXPECT_NE(why.find("inside a session"), std::string::npos) << why;

    UniqueFd self(pidfd_open(::getpid()));
    Peer me{::getpid(), 0, 0, self.get()};
    EXPECT_EQ(backend_->check_peer(me, why), PeerVerdict::Allowed) << why;
    stop(*s);
}

TEST_F(SystemdBackendTest, AllowedUnitMainPidFollowsRestarts) {
    run_command("systemctl stop ptyvisor-test-agent.service 2>/dev/null");
    ASSERT_EQ(run_command("systemd-run --quiet --unit=ptyvisor-test-agent sleep 1000"), 0);
    const pid_t first = unit_main_pid(bus_.get(), kAgentUnit);
    ASSERT_GT(first, 0);

    BackendOptions opts = options();
    opts.allowed_units = {kAgentUnit};
    auto backend = make(opts);
    ASSERT_TRUE(backend);
    std::string why;

    UniqueFd agent(pidfd_open(first));
    ASSERT_TRUE(agent);
    EXPECT_EQ(backend->check_peer(Peer{first, 0, 0, agent.get()}, why), PeerVerdict::Allowed) << why;
    UniqueFd self(pidfd_open(::getpid()));
    EXPECT_EQ(backend->check_peer(Peer{::getpid(), 0, 0, self.get()}, why), PeerVerdict::Refused);
    EXPECT_NE(why.find("not the main process"), std::string::npos) << why;
    // The accept-time shortcut (Backend::refuses_pid) agrees, from the PID alone.
    EXPECT_TRUE(backend->refuses_pid(::getpid(), why));
    EXPECT_NE(why.find("not the main process"), std::string::npos) << why;
    EXPECT_FALSE(backend->refuses_pid(first, why));

    ASSERT_EQ(run_command("systemctl restart ptyvisor-test-agent.service"), 0);
    const pid_t second = unit_main_pid(bus_.get(), kAgentUnit);
    ASSERT_GT(second, 0);
    ASSERT_NE(second, first);
    UniqueFd agent2(pidfd_open(second));
    ASSERT_TRUE(agent2);
    // The loop has not run since the restart, so the cache cannot know the new MainPID yet:
    // the new main process must be a doubt, never a refusal (it would be the agent, refused
    // for connecting too soon after its unit started).
    const Peer new_main{second, 0, 0, agent2.get()};
    EXPECT_EQ(backend->check_peer(new_main, why), PeerVerdict::Unsure) << why;
    EXPECT_NE(why.find("not known yet"), std::string::npos) << why;
    // Nor may the shortcut refuse it, or any other process: the cached MainPID is dead.
    EXPECT_FALSE(backend->refuses_pid(second, why));
    EXPECT_FALSE(backend->refuses_pid(::getpid(), why));
    auto rechecked = std::make_shared<std::function<void()>>();
    bool done = false;
    *rechecked = [&] { done = true; };
    backend->recheck(rechecked);
    EXPECT_FALSE(done) << "recheck answers from the loop, not from inside the call";
    ASSERT_TRUE(run_until(event_, [&] { return done; }, 10s));
    EXPECT_EQ(backend->check_peer(new_main, why), PeerVerdict::Allowed) << why;
    EXPECT_EQ(backend->check_peer(Peer{first, 0, 0, agent.get()}, why), PeerVerdict::Refused);
    // Once the restart's PropertiesChanged has been read back too, the shortcut refuses the
    // old main process again, and never the new one.
    EXPECT_TRUE(run_until(event_, [&] { return backend->refuses_pid(first, why); }, 10s));
    EXPECT_FALSE(backend->refuses_pid(second, why));
    // A stale PID without a pidfd (the number may be reused) is refused as well.
    EXPECT_EQ(backend->check_peer(Peer{first, 0, 0, -1}, why), PeerVerdict::Refused);
    run_command("systemctl stop ptyvisor-test-agent.service");
}

// A source that is always ready (the listener under a connection flood, a bulk session's
// PTY) must not starve systemd's messages: the recheck after a restart still completes.
TEST_F(SystemdBackendTest, BusIsServedWhileAnotherSourceIsAlwaysReady) {
    run_command("systemctl stop ptyvisor-test-agent.service 2>/dev/null");
    BackendOptions opts = options();
    opts.allowed_units = {kAgentUnit};
    auto backend = make(opts);
    ASSERT_TRUE(backend);
    UniqueFd busy(::eventfd(1, EFD_CLOEXEC));  // readable, and never read
    ASSERT_TRUE(busy);
    sd_event_source* raw = nullptr;
    long busy_calls = 0;
    ASSERT_GE(sd_event_add_io(event_, &raw, busy.get(), EPOLLIN,
                              [](sd_event_source*, int, uint32_t, void* calls) {
                                  ++*static_cast<long*>(calls);
                                  return 0;
                              },
                              &busy_calls),
              0);
    EventSource busy_source(raw);

    for (int round = 0; round < 5; ++round) {
        ASSERT_EQ(run_command("systemctl restart ptyvisor-test-agent.service 2>/dev/null || "
                              "systemd-run --quiet --unit=ptyvisor-test-agent sleep 1000"),
                  0);
        const pid_t main_pid = unit_main_pid(bus_.get(), kAgentUnit);
        ASSERT_GT(main_pid, 0);
        UniqueFd agent(pidfd_open(main_pid));
        ASSERT_TRUE(agent);
        auto rechecked = std::make_shared<std::function<void()>>();
        bool done = false;
        *rechecked = [&] { done = true; };
        backend->recheck(rechecked);
        ASSERT_TRUE(run_until(event_, [&] { return done; }, 10s)) << "round " << round;
        std::string why;
        EXPECT_EQ(backend->check_peer(Peer{main_pid, 0, 0, agent.get()}, why), PeerVerdict::Allowed) << why;
    }
    EXPECT_GT(busy_calls, 0);
    run_command("systemctl stop ptyvisor-test-agent.service");
}

// A process that outlives the agent in its unit can send START after START, each one a
// recheck. Rounds are spaced: one asked for right after another waits for its turn, and
// every recheck asked for meanwhile shares it.
TEST_F(SystemdBackendTest, RecheckRoundsAreSpacedAndShared) {
    std::string why;
    auto conn = systemd::BusConnection::open(event_, why);
    ASSERT_TRUE(conn) << why;
    systemd::MainPidTracker tracker(conn, {kAgentUnit}, std::chrono::seconds(1));
    ASSERT_TRUE(tracker.load(why)) << why;

    auto first = std::make_shared<std::function<void()>>();
    bool first_done = false;
    *first = [&] { first_done = true; };
    tracker.recheck(first);
    EXPECT_EQ(tracker.rounds_started(), 1u) << "the first round goes at once";
    ASSERT_TRUE(run_until(event_, [&] { return first_done; }, 10s));

    int later_done = 0;
    std::vector<std::shared_ptr<std::function<void()>>> later;
    for (int i = 0; i < 50; ++i) {
        later.push_back(std::make_shared<std::function<void()>>([&] { ++later_done; }));
        tracker.recheck(later.back());
    }
    EXPECT_EQ(tracker.rounds_started(), 1u) << "within the interval, no second round yet";
    ASSERT_TRUE(run_until(event_, [&] { return later_done == 50; }, 10s));
    EXPECT_EQ(tracker.rounds_started(), 2u) << "fifty rechecks, one round";
}

TEST_F(SystemdBackendTest, OtherProcessesOfAnAllowedUnitAreRefusedWithoutARecheck) {
    run_command("systemctl stop ptyvisor-test-agent.service 2>/dev/null");
    // The unit's main process starts a background process and hands us its PID through a
    // FIFO: opening it for reading waits for the writer, with no polling.
    const std::string fifo = "/tmp/ptyvisor-test-agent-child." + std::to_string(::getpid());
    ::unlink(fifo.c_str());
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
    ASSERT_EQ(run_command("systemd-run --quiet --unit=ptyvisor-test-agent -p Type=exec "
                          "sh -c 'sleep 1000 & echo $! > " + fifo + "; exec sleep 1001'"),
              0);
    const pid_t main_pid = unit_main_pid(bus_.get(), kAgentUnit);
    ASSERT_GT(main_pid, 0);
    pid_t child = 0;
    {
        UniqueFd in(::open(fifo.c_str(), O_RDONLY | O_CLOEXEC));
        ASSERT_TRUE(in) << std::strerror(errno);
        char text[32] = {};
        ASSERT_GT(::read(in.get(), text, sizeof text - 1), 0);
        child = static_cast<pid_t>(std::strtol(text, nullptr, 10));
    }
    ::unlink(fifo.c_str());
    ASSERT_GT(child, 0);
    ASSERT_NE(child, main_pid);
    BackendOptions opts = options();
    opts.allowed_units = {kAgentUnit};
    auto backend = make(opts);
    ASSERT_TRUE(backend);

    // The background sleep: same unit, same cgroup, not the main process.
    UniqueFd child_fd(pidfd_open(child));
    ASSERT_TRUE(child_fd);
    std::string why;
    EXPECT_EQ(backend->check_peer(Peer{child, 0, 0, child_fd.get()}, why), PeerVerdict::Refused) << why;
    EXPECT_NE(why.find("not the main process"), std::string::npos) << why;

    // A recheck whose caller let go is never called; one that is still held is.
    auto dropped = std::make_shared<std::function<void()>>();
    auto kept = std::make_shared<std::function<void()>>();
    bool dropped_called = false, kept_called = false;
    *dropped = [&] { dropped_called = true; };
    *kept = [&] { kept_called = true; };
    backend->recheck(dropped);
    backend->recheck(kept);
    dropped.reset();
    ASSERT_TRUE(run_until(event_, [&] { return kept_called; }, 10s));
    EXPECT_FALSE(dropped_called);
    run_command("systemctl stop ptyvisor-test-agent.service");
}

// Any local user may send a signal addressed to the daemon's own bus connection, with any
// path, interface and member (the system bus allows every signal): dbus-daemon checks a
// match's sender= only for broadcasts, and sd-bus cannot check a well-known sender name
// itself. Such a signal must change nothing.
class SignalForger {
public:
    SignalForger() {
        sd_bus* raw = nullptr;
        EXPECT_GE(sd_bus_open_system(&raw), 0);
        bus_.reset(raw);
    }

    // A signal addressed to `target`, with `fill` appending its arguments.
    void send(const std::string& target, const std::string& path, const char* interface,
              const char* member, const std::function<int(sd_bus_message*)>& fill) const {
        sd_bus_message* raw = nullptr;
        ASSERT_GE(sd_bus_message_new_signal(bus_.get(), &raw, path.c_str(), interface, member), 0);
        MessagePtr m(raw);
        ASSERT_GE(sd_bus_message_set_destination(m.get(), target.c_str()), 0);
        ASSERT_GE(fill(m.get()), 0);
        ASSERT_GE(sd_bus_send(bus_.get(), m.get(), nullptr), 0);
        ASSERT_GE(sd_bus_flush(bus_.get()), 0);
    }

private:
    BusPtr bus_;
};

constexpr const char* kMarkerInterface = "net.ptyvisor.Test";

// Counts the marker signals `conn` has dispatched: the forger's messages reach it in the
// order they were sent, and sd-bus dispatches them in that order.
int count_markers(sd_bus_message* m, void* count, sd_bus_error*) {
    if (sd_bus_message_is_signal(m, kMarkerInterface, "Marker") > 0) ++*static_cast<int*>(count);
    return 0;
}

TEST_F(SystemdBackendTest, SignalsAddressedToTheDaemonAreIgnored) {
    run_command("systemctl stop ptyvisor-test-agent.service 2>/dev/null");
    ASSERT_EQ(run_command("systemd-run --quiet --unit=ptyvisor-test-agent sleep 1000"), 0);
    const pid_t agent_pid = unit_main_pid(bus_.get(), kAgentUnit);
    ASSERT_GT(agent_pid, 0);
    UniqueFd agent(pidfd_open(agent_pid));
    ASSERT_TRUE(agent);

    // The backend on a connection the test can see: its unique name is the target.
    std::string why;
    auto conn = systemd::BusConnection::open(event_, why);
    ASSERT_TRUE(conn) << why;
    auto tracker = std::make_unique<systemd::MainPidTracker>(conn, std::vector<std::string>{kAgentUnit});
    ASSERT_TRUE(tracker->load(why)) << why;
    BackendOptions opts = options();
    opts.allowed_units = {kAgentUnit};
    backend_ = std::make_unique<SystemdBackend>(opts, conn, std::move(tracker));
    const char* unique = nullptr;
    ASSERT_GE(sd_bus_get_unique_name(conn->bus(), &unique), 0);
    const std::string target = unique;
    int markers = 0;
    sd_bus_slot* raw_slot = nullptr;
    ASSERT_GE(sd_bus_add_filter(conn->bus(), &raw_slot, &count_markers, &markers), 0);
    systemd::SlotPtr marker_filter(raw_slot);
    const Peer agent_peer{agent_pid, 0, 0, agent.get()};
    ASSERT_EQ(backend_->check_peer(agent_peer, why), PeerVerdict::Allowed) << why;

    Pty pty;
    Observed o;
    auto s = start({"sleep", "1000"}, pty, o);
    ASSERT_TRUE(s);
    ASSERT_TRUE(run_until(event_, [&] { return o.started; }));
    const std::string unit = s->unit();
    const std::string path = systemd::unit_object_path(unit);

    SignalForger forger;
    // "The unit went inactive": taken as the end of the session, it would report an exit
    // while the command runs.
    forger.send(target, path, "org.freedesktop.DBus.Properties", "PropertiesChanged", [](sd_bus_message* m) {
        return sd_bus_message_append(m, "sa{sv}as", "org.freedesktop.systemd1.Unit", 1, "ActiveState",
                                     "s", "inactive", 0);
    });
    forger.send(target, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "JobRemoved",
                [&](sd_bus_message* m) {
                    return sd_bus_message_append(m, "uoss", 1u, "/org/freedesktop/systemd1/job/1",
                                                 unit.c_str(), "failed");
                });
    forger.send(target, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "UnitRemoved",
                [&](sd_bus_message* m) { return sd_bus_message_append(m, "so", unit.c_str(), path.c_str()); });
    // "systemd left the bus", then "systemd is back": every listener would re-read its state.
    for (const char* owner : {"", ":1.9999"})
        forger.send(target, "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged",
                    [&](sd_bus_message* m) {
                        return sd_bus_message_append(m, "sss", "org.freedesktop.systemd1", ":1.1", owner);
                    });
    // "The agent's unit changed": its MainPID would be in doubt until read again.
    forger.send(target, systemd::unit_object_path(kAgentUnit), "org.freedesktop.DBus.Properties",
                "PropertiesChanged", [](sd_bus_message* m) {
                    return sd_bus_message_append(m, "sa{sv}as", "org.freedesktop.systemd1.Service", 1,
                                                 "MainPID", "u", 1u, 0);
                });
    forger.send(target, "/", kMarkerInterface, "Marker", [](sd_bus_message*) { return 0; });
    ASSERT_TRUE(run_until(event_, [&] { return markers == 1; }, 10s)) << "the forged signals were not delivered";
    EXPECT_EQ(backend_->check_peer(agent_peer, why), PeerVerdict::Allowed) << why;
    // "The bus connection is gone": the backend would reconnect. (dbus-daemon may also cut
    // the forger for using the local interface; a second forger sends the next marker.)
    forger.send(target, "/org/freedesktop/DBus/Local", "org.freedesktop.DBus.Local", "Disconnected",
                [](sd_bus_message*) { return 0; });
    SignalForger().send(target, "/", kMarkerInterface, "Marker", [](sd_bus_message*) { return 0; });
    ASSERT_TRUE(run_until(event_, [&] { return markers == 2; }, 10s));

    // Whatever the backend asked systemd on reading them (a state read, say) is answered, and
    // the answer handled, before the answer to a call it sends after them.
    bool answered = false;
    sd_bus_slot* raw_call = nullptr;
    ASSERT_GE(sd_bus_call_method_async(conn->bus(), &raw_call, "org.freedesktop.systemd1",
                                       "/org/freedesktop/systemd1", "org.freedesktop.DBus.Peer", "Ping",
                                       [](sd_bus_message*, void* done, sd_bus_error*) {
                                           *static_cast<bool*>(done) = true;
                                           return 0;
                                       },
                                       &answered, ""),
              0);
    systemd::SlotPtr call(raw_call);
    ASSERT_TRUE(run_until(event_, [&] { return answered; }, 10s));

    EXPECT_FALSE(o.exited) << "a forged signal ended the session";
    EXPECT_FALSE(o.start_failed);
    EXPECT_EQ(list_units(bus_.get(), unit), (std::vector<std::pair<std::string, std::string>>{{unit, "active"}}));
    EXPECT_EQ(backend_->check_peer(agent_peer, why), PeerVerdict::Allowed) << why;
    const char* still = nullptr;
    ASSERT_GE(sd_bus_get_unique_name(conn->bus(), &still), 0);
    EXPECT_EQ(std::string(still), target) << "a forged Disconnected made the backend reconnect";
    stop(*s);
    EXPECT_FALSE(unit_listed(unit));
    run_command("systemctl stop ptyvisor-test-agent.service");
}

TEST_F(SystemdBackendTest, SessionSurvivesDaemonReexec) {
    Pty pty;
    Observed o;
    auto s = start({"/bin/sh", "-c", "echo before; read line; echo \"got:$line\"; exit 4"}, pty, o);
    ASSERT_TRUE(s);
    ASSERT_TRUE(run_until(event_, [&] { return o.started && pty.contains("before"); }));
    ASSERT_EQ(run_command("systemctl daemon-reexec"), 0);
    pty.write("hello\n");
    ASSERT_TRUE(run_until(event_, [&] { return o.exited && pty.contains("got:hello"); }));
    EXPECT_EQ(o.status.kind, ExitStatus::Kind::Exited);
    EXPECT_EQ(o.status.code, 4);
    EXPECT_EQ(o.status.unit_result, "exit-code");
    stop(*s);
    EXPECT_FALSE(unit_listed(s->unit()));
}

TEST_F(SystemdBackendTest, ExitDuringDaemonReexecIsStillReported) {
    Pty pty;
    Observed o;
    auto s = start({"/bin/sh", "-c", "read line; exit 5"}, pty, o);
    ASSERT_TRUE(s);
    ASSERT_TRUE(run_until(event_, [&] { return o.started; }));
    // The command exits while PID 1 is re-executing (or just before): the signal may be lost.
    pty.write("x\n");
    ASSERT_EQ(run_command("systemctl daemon-reexec"), 0);
    ASSERT_TRUE(run_until(event_, [&] { return o.exited; }));
    EXPECT_EQ(o.status.kind, ExitStatus::Kind::Exited);
    EXPECT_EQ(o.status.code, 5);
    stop(*s);
    EXPECT_FALSE(unit_listed(s->unit()));
}

}  // namespace
}  // namespace ptyvisor::backends

namespace ptyvisor::backends {
namespace {

TEST_F(SystemdBackendTest, SessionSurvivesBusRestart) {
    Pty pty;
    Observed o;
    auto s = start({"/bin/sh", "-c", "echo before; read line; echo \"got:$line\"; exit 6"}, pty, o);
    ASSERT_TRUE(s);
    ASSERT_TRUE(run_until(event_, [&] { return o.started && pty.contains("before"); }));
    // dbus-daemon goes away: sd-bus reports Disconnected, the backend reconnects, takes a new
    // reference on the unit, re-adds its matches and re-reads the state.
    bus_.reset();
    ASSERT_EQ(run_command("systemctl restart dbus.service"), 0);
    bus_ = open_test_bus();
    // While the bus was down nobody held a reference on the unit (references belong to a
    // connection): had the command ended then, systemd could have collected the unit and
    // the exit would read Unknown/BackendFailed. Wait until the backend holds a reference
    // again, then let the command finish: its exact status must come through.
    ASSERT_TRUE(run_until(event_, [&] { return !unit_refs(bus_.get(), s->unit()).empty(); }));
    pty.write("hello\n");
    ASSERT_TRUE(run_until(event_, [&] { return o.exited && pty.contains("got:hello"); }));
    EXPECT_EQ(o.status.kind, ExitStatus::Kind::Exited);
    EXPECT_EQ(o.status.code, 6);
    EXPECT_EQ(o.status.unit_result, "exit-code");
    stop(*s);
    EXPECT_FALSE(unit_listed(s->unit()));

    // The backend still starts sessions on its new connection.
    Pty pty2;
    Observed o2;
    auto s2 = start({"/bin/sh", "-c", "exit 7"}, pty2, o2);
    ASSERT_TRUE(s2);
    ASSERT_TRUE(run_until(event_, [&] { return o2.exited; }));
    EXPECT_EQ(o2.status.code, 7);
    stop(*s2);
}

}  // namespace
}  // namespace ptyvisor::backends
