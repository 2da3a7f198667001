// Speaking the wire protocol directly, for the cases the CLI never produces: hostile frames,
// hostile descriptors, silence, slow reading, STOP.
//
// Connector: SO_PEERCRED records the credentials of the process that calls connect(), and the
// daemon may also look at that process (pidfd, cgroup) for as long as the connection lives.
// A Connector is a helper process that holds the wanted uid/gid/groups, stays alive, and
// connects on request, handing each connected socket back over SCM_RIGHTS.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "protocol/frame.h"
#include "protocol/payloads.h"
#include "support/util.h"

namespace ptyvisor::itest {

class Connector {
public:
    static std::unique_ptr<Connector> start(uid_t uid, gid_t gid, std::vector<gid_t> groups,
                                            std::string& error);
    ~Connector();
    Connector(const Connector&) = delete;
    Connector& operator=(const Connector&) = delete;

    // Connects to the Unix socket at `path` as the helper; on failure returns an invalid fd
    // and sets `err` to the errno.
    UniqueFd connect(const std::string& path, int& err);
    [[nodiscard]] pid_t pid() const { return pid_; }

private:
    Connector() = default;
    pid_t pid_ = -1;
    UniqueFd pidfd_;
    UniqueFd control_;
};

// What the daemon sent: a frame, the end of the stream, or nothing before the deadline.
struct Incoming {
    enum class Kind { Frame, Eof, Timeout, BadStream };
    Kind kind = Kind::Timeout;
    protocol::Frame frame{};
    std::string detail;  // BadStream: the offending header bytes
    std::string describe() const;
};

class RawClient {
public:
    explicit RawClient(UniqueFd socket) : socket_(std::move(socket)) {}

    [[nodiscard]] int fd() const { return socket_.get(); }

    // Sends bytes with `fds` attached to the first byte (any number, 0..253). 0 or -errno.
    int send(const std::vector<std::uint8_t>& bytes, const std::vector<int>& fds = {});
    int send_frame(protocol::FrameType type, const std::string& payload,
                   const std::vector<int>& fds = {});

    // START for `argv` with the working directory `cwd_fd` (its real st_dev/st_ino unless
    // overridden by the caller through a custom StartRequest).
    static protocol::StartRequest start_request(const std::vector<std::string>& argv,
                                                const std::vector<std::string>& env, int cwd_fd);
    // START the way ptyvisor's own client sends it: protocol::send_with_fd, one descriptor.
    int send_start_as_client(const protocol::StartRequest& request, int cwd_fd);
    int send_start(const protocol::StartRequest& request, const std::vector<int>& fds);

    // Next frame within `timeout`. `read_chunk` bounds each recv (slow readers use small ones).
    Incoming next(Millis timeout, std::size_t read_chunk = 65536);
    // Reads frames until an ERROR arrives; nullopt if anything else (EOF, timeout, EXIT...)
    // comes first. `seen` collects a description of what did arrive.
    std::optional<protocol::ErrorReply> expect_error(Millis timeout, std::string* seen = nullptr);
    // Reads frames until STARTED; nullopt otherwise (ERROR described in `seen`).
    std::optional<protocol::Started> expect_started(Millis timeout, std::string* seen = nullptr);
    // Reads OUTPUT (appending to output()) until `needle` appears; false on anything else.
    bool read_output_until(const std::string& needle, Millis timeout, std::string* seen = nullptr);
    // Reads OUTPUT until EXIT; nullopt on anything else.
    std::optional<protocol::ExitStatus> read_until_exit(Millis timeout, std::string* seen = nullptr);
    // True when the daemon closes the connection (EOF or reset) within `timeout` with no
    // further frame; any frame that arrives is described in `seen` and makes it false.
    bool expect_eof(Millis timeout, std::string* seen = nullptr);

    [[nodiscard]] const std::string& output() const { return output_; }
    void clear_output() { output_.clear(); }
    void append_output(const std::string& text) { output_ += text; }

private:
    UniqueFd socket_;
    std::vector<std::uint8_t> buffer_;
    std::size_t start_ = 0;
    std::size_t received_ = 0;  // bytes of frames consumed from the socket so far
    std::string output_;
};

// A connected socket with the given credentials, or the errno of the failed connect.
std::unique_ptr<RawClient> connect_raw(Connector& connector, const std::string& socket_path,
                                       std::string& error);

}  // namespace ptyvisor::itest
