// EndToEnd: the fixture every integration test uses.
//
// Each test gets its own temporary directory (socket, state directory, configuration, logs
// and a working directory owned by the test account) and starts its own daemon with the
// configuration it needs. The backend comes from env PTYVISOR_TEST_BACKEND (default
// "direct"), so the same tests run unchanged against `systemd` inside the harness.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "protocol/payloads.h"
#include "protocol/session_payloads.h"
#include "support/client_process.h"
#include "support/daemon.h"
#include "support/raw_client.h"
#include "support/util.h"

namespace ptyvisor::itest {

class EndToEnd : public ::testing::Test {
protected:
    void SetUp() override;
    void TearDown() override;

    // The default configuration for this test's directory and backend.
    [[nodiscard]] DaemonConfig config() const;
    // Starts a daemon (replacing none: an earlier one stays owned until TearDown). Returns
    // nullptr after recording a failure.
    DaemonProcess* start_daemon(const DaemonConfig& config);
    DaemonProcess* start_daemon() { return start_daemon(config()); }
    [[nodiscard]] DaemonProcess* daemon() const { return daemons_.empty() ? nullptr : daemons_.back().get(); }

    // Options for a CLI run: the test account's environment, the working directory.
    [[nodiscard]] ClientOptions client_options(ClientOptions::Stdin mode) const;
    // `ptyvisor ARGS...` as the test account. Returns nullptr after recording a failure.
    std::unique_ptr<ClientProcess> run_cli(const std::vector<std::string>& args,
                                           ClientOptions::Stdin mode = ClientOptions::Stdin::Null);
    std::unique_ptr<ClientProcess> run_cli(const std::vector<std::string>& args,
                                           const ClientOptions& options);

    // A raw protocol connection with the test account's credentials.
    std::unique_ptr<RawClient> connect_as_account();
    // A raw protocol connection with arbitrary credentials.
    std::unique_ptr<RawClient> connect_as(uid_t uid, gid_t gid, std::vector<gid_t> groups);
    // STATUS as root asks for it: the decoded reply and the frame's text (for messages).
    // Returns nullopt after recording a failure.
    struct StatusSeen {
        protocol::StatusReply reply;
        std::string text;
    };
    std::optional<StatusSeen> status_as_root();
    // The same on a connection already made (its peer may be anyone STATUS answers).
    std::optional<StatusSeen> status_of(RawClient& client);

    // The working directory (owned by the account), opened O_DIRECTORY.
    [[nodiscard]] UniqueFd open_work_dir() const;
    // The environment sent in raw STARTs.
    [[nodiscard]] std::vector<std::string> session_env() const;
    // START for argv in the working directory, sent with its fd; then STARTED is expected.
    // Returns the STARTED payload or nullopt after recording a failure.
    std::optional<protocol::Started> start_session(RawClient& client,
                                                   const std::vector<std::string>& argv);
    // START for argv, detached, on a connection of its own (closed once STARTED came);
    // `adjust` may change the request first (its environment, terminal, size). Returns the
    // session's id, or "" after recording a failure.
    std::string start_detached(const std::vector<std::string>& argv,
                               const std::function<void(protocol::StartRequest&)>& adjust = {});

    std::optional<Account> account_;
    std::unique_ptr<TempDir> dir_;
    std::string work_;    // cwd of clients and sessions, owned by the account
    std::string state_;   // the daemon's state_directory
    std::string socket_;  // the daemon's socket

private:
    Connector* connector_for(uid_t uid, gid_t gid, const std::vector<gid_t>& groups);
    std::vector<std::unique_ptr<DaemonProcess>> daemons_;
    struct Held {
        uid_t uid;
        gid_t gid;
        std::vector<gid_t> groups;
        std::unique_ptr<Connector> connector;
    };
    std::vector<Held> connectors_;
};

// Reads the session's output until a line "<key><number>" is complete; returns the number,
// or nullopt after recording a failure.
std::optional<pid_t> read_number(RawClient& client, const std::string& key);
std::optional<pid_t> read_number(ClientProcess& client, const std::string& key);

// A session command whose processes (the main one and a background one) both ignore SIGHUP,
// so that only a real kill by the supervisor ends them. Prints "bg=<pid>" and "pid=<pid>".
std::vector<std::string> hup_immune_sleepers();

}  // namespace ptyvisor::itest
