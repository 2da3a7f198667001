#include "support/fixture.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>

namespace ptyvisor::itest {

void EndToEnd::SetUp() {
    if (::geteuid() != 0) GTEST_SKIP() << "the integration suite must run as root (it starts ptyvisord)";
    account_ = lookup_account(account_name());
    ASSERT_TRUE(account_) << "account '" << account_name()
                          << "' is missing: run tests/integration/ensure-account.sh as root";
    ASSERT_FALSE(daemon_binary().empty()) << "set PTYVISORD_BIN to the ptyvisord binary";
    ASSERT_FALSE(cli_binary().empty()) << "set PTYVISOR_BIN to the ptyvisor binary";
    ASSERT_TRUE(account_can_execute(*account_, cli_binary()))
        << "account '" << account_->name << "' cannot execute " << cli_binary()
        << " (its directories are out of the account's reach, and copying it to a 0755 "
           "directory under /tmp failed): build in a directory the account can search";
    dir_ = std::make_unique<TempDir>();
    work_ = *dir_ / "work";
    state_ = *dir_ / "state";
    socket_ = *dir_ / "ptyvisord.sock";
    ASSERT_EQ(::mkdir(work_.c_str(), 0755), 0);
    ASSERT_EQ(::chown(work_.c_str(), account_->uid, account_->gid), 0);
    ASSERT_EQ(::mkdir(state_.c_str(), 0700), 0);
    RecordProperty("backend", backend());
}

void EndToEnd::TearDown() {
    for (auto& d : daemons_) {
        if (d->running() && !d->stop(SIGTERM, Millis(30000))) {
            ADD_FAILURE() << "daemon " << d->pid() << " ignored SIGTERM for 30 s";
            d->stop(SIGKILL, Millis(30000));
        }
    }
    connectors_.clear();
    if (HasFailure() && dir_) {
        for (auto& d : daemons_) {
            std::string log = d->log();
            if (log.size() > 16000) log = "[...]\n" + log.substr(log.size() - 16000);
            std::cerr << "--- daemon " << d->pid() << " log (" << d->log_path() << ") ---\n"
                      << log << "--- end of daemon log ---\n";
        }
        if (std::getenv("PTYVISOR_TEST_KEEP") != nullptr) {
            dir_->keep();
            std::cerr << "kept " << dir_->path() << "\n";
        }
    }
    daemons_.clear();
}

DaemonConfig EndToEnd::config() const {
    DaemonConfig c;
    c.user = account_ ? account_->name : account_name();
    c.socket = socket_;
    c.backend = backend();
    c.state_directory = state_;
    return c;
}

DaemonProcess* EndToEnd::start_daemon(const DaemonConfig& cfg) {
    std::string error;
    auto d = DaemonProcess::start(cfg, dir_->path(), error);
    if (!d) {
        ADD_FAILURE() << "ptyvisord did not become ready: " << error;
        return nullptr;
    }
    daemons_.push_back(std::move(d));
    return daemons_.back().get();
}

ClientOptions EndToEnd::client_options(ClientOptions::Stdin mode) const {
    ClientOptions o;
    o.stdin_mode = mode;
    o.cwd = work_;
    o.env = client_environment(*account_, socket_,
                               mode == ClientOptions::Stdin::Pty ? "xterm" : "dumb");
    return o;
}

std::unique_ptr<ClientProcess> EndToEnd::run_cli(const std::vector<std::string>& args,
                                                 ClientOptions::Stdin mode) {
    return run_cli(args, client_options(mode));
}

std::unique_ptr<ClientProcess> EndToEnd::run_cli(const std::vector<std::string>& args,
                                                 const ClientOptions& options) {
    std::string error;
    auto c = ClientProcess::spawn(cli_binary(), args, *account_, options, error);
    if (!c) ADD_FAILURE() << "cannot start the CLI: " << error;
    return c;
}

Connector* EndToEnd::connector_for(uid_t uid, gid_t gid, const std::vector<gid_t>& groups) {
    for (auto& h : connectors_)
        if (h.uid == uid && h.gid == gid && h.groups == groups) return h.connector.get();
    std::string error;
    auto c = Connector::start(uid, gid, groups, error);
    if (!c) {
        ADD_FAILURE() << "cannot start a connector: " << error;
        return nullptr;
    }
    connectors_.push_back({uid, gid, groups, std::move(c)});
    return connectors_.back().connector.get();
}

std::unique_ptr<RawClient> EndToEnd::connect_as(uid_t uid, gid_t gid, std::vector<gid_t> groups) {
    Connector* c = connector_for(uid, gid, groups);
    if (c == nullptr) return nullptr;
    std::string error;
    auto client = connect_raw(*c, socket_, error);
    if (!client) ADD_FAILURE() << error;
    return client;
}

std::string EndToEnd::start_detached(const std::vector<std::string>& argv,
                                     const std::function<void(protocol::StartRequest&)>& adjust) {
    auto c = connect_as_account();
    if (!c) return {};
    UniqueFd cwd = open_work_dir();
    auto request = RawClient::start_request(argv, session_env(), cwd.get());
    request.detach = true;
    if (adjust) adjust(request);
    if (const int e = c->send_start(request, {cwd.get()}); e != 0) {
        ADD_FAILURE() << "START: " << std::strerror(-e);
        return {};
    }
    std::string seen;
    const auto started = c->expect_started(Millis(10000), &seen);
    if (!started) {
        ADD_FAILURE() << "no STARTED: " << seen;
        return {};
    }
    EXPECT_TRUE(protocol::is_session_id(started->id)) << started->id;
    EXPECT_NE(started->unit.find(started->id), std::string::npos);
    return started->id;
}

std::optional<EndToEnd::StatusSeen> EndToEnd::status_as_root() {
    auto root = connect_as(0, 0, {});
    if (!root) return std::nullopt;
    return status_of(*root);
}

std::optional<EndToEnd::StatusSeen> EndToEnd::status_of(RawClient& client) {
    RawClient* root = &client;
    if (const int e = root->send_frame(protocol::FrameType::StatusRequest, ""); e != 0) {
        ADD_FAILURE() << "STATUS_REQUEST: " << std::strerror(-e);
        return std::nullopt;
    }
    const Incoming in = root->next(Millis(10000));
    if (in.kind != Incoming::Kind::Frame || in.frame.type != protocol::FrameType::Status) {
        ADD_FAILURE() << "no STATUS: " << in.describe();
        return std::nullopt;
    }
    auto report = protocol::decode_status(in.frame.text());
    if (!report) {
        ADD_FAILURE() << report.error << "\n" << in.frame.text();
        return std::nullopt;
    }
    std::string seen;
    EXPECT_TRUE(root->expect_eof(Millis(10000), &seen)) << "STATUS is the last frame: " << seen;
    return StatusSeen{std::move(*report.value), std::string(in.frame.text())};
}

std::unique_ptr<RawClient> EndToEnd::connect_as_account() {
    return connect_as(account_->uid, account_->gid, {account_->gid});
}

UniqueFd EndToEnd::open_work_dir() const {
    return UniqueFd(::open(work_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

std::vector<std::string> EndToEnd::session_env() const {
    return {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME=" + account_->home, "LC_ALL=C", "TERM=xterm"};
}

std::optional<protocol::Started> EndToEnd::start_session(RawClient& client,
                                                         const std::vector<std::string>& argv) {
    UniqueFd cwd = open_work_dir();
    if (!cwd) {
        ADD_FAILURE() << "cannot open " << work_;
        return std::nullopt;
    }
    const auto request = RawClient::start_request(argv, session_env(), cwd.get());
    if (const int err = client.send_start(request, {cwd.get()}); err != 0) {
        ADD_FAILURE() << "sending START failed: " << std::strerror(-err);
        return std::nullopt;
    }
    std::string seen;
    auto started = client.expect_started(Millis(20000), &seen);
    if (!started) ADD_FAILURE() << "expected STARTED, got: " << seen;
    return started;
}

std::optional<pid_t> read_number(RawClient& client, const std::string& key) {
    std::string seen;
    // The line is complete once a newline follows the key.
    const auto deadline = Clock::now() + Millis(20000);
    while (Clock::now() < deadline) {
        const auto at = client.output().find(key);
        if (at != std::string::npos && client.output().find('\n', at) != std::string::npos) {
            const auto v = number_after(client.output().substr(at), key);
            if (v) return static_cast<pid_t>(*v);
            break;
        }
        const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
        const Incoming in = client.next(left);
        if (in.kind != Incoming::Kind::Frame || in.frame.type != protocol::FrameType::Output) {
            seen = in.describe();
            break;
        }
        // Append through the public reader to keep one code path for OUTPUT.
        const std::string text(in.frame.text());
        client.append_output(text);
    }
    ADD_FAILURE() << "no '" << key << "<number>' line in the session output; output so far: '"
                  << client.output() << "'; then: " << seen;
    return std::nullopt;
}

std::optional<pid_t> read_number(ClientProcess& client, const std::string& key) {
    const bool ok = client.read_until(
        [&](const std::string& out) {
            const auto at = out.find(key);
            return at != std::string::npos && out.find('\n', at) != std::string::npos;
        },
        Millis(20000));
    if (ok) {
        const auto v = number_after(client.out().substr(client.out().find(key)), key);
        if (v) return static_cast<pid_t>(*v);
    }
    ADD_FAILURE() << "no '" << key << "<number>' line from the CLI; " << client.transcript();
    return std::nullopt;
}

std::vector<std::string> hup_immune_sleepers() {
    return {"sh", "-c",
            "trap '' HUP; sleep 1000 </dev/null >/dev/null 2>&1 & echo bg=$!; echo pid=$$; "
            "exec sleep 1000"};
}

}  // namespace ptyvisor::itest
