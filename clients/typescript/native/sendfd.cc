// sendfd: the one thing Node's `net` cannot do for ptyvisor, sending START with the working
// directory's descriptor in an SCM_RIGHTS message (docs/protocol.md, section 5.1).
//
// sendWithFd(socketFd, frame, dirFd) writes the frame on the socket, an already connected
// AF_UNIX stream that the runtime's event loop owns (non-blocking), with dirFd attached to its
// first byte, and returns how many bytes went (the caller writes the rest through the event
// loop), or -errno when the daemon has already closed (EPIPE, ECONNRESET: it refused the peer,
// and its ERROR frame is waiting to be read). Any other failure throws, with `code` set to the
// errno's name. The descriptor is duplicated by the kernel; the caller still owns dirFd.
#include <napi.h>

#include <cerrno>
#include <cstring>
#include <poll.h>
#include <string>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

Napi::Error ErrnoError(Napi::Env env, const std::string& what, int err) {
  Napi::Error e = Napi::Error::New(env, what + ": " + std::strerror(err));
  const char* name = strerrorname_np(err);
  e.Set("code", Napi::String::New(env, name ? name : "EIO"));
  e.Set("errno", Napi::Number::New(env, -err));
  return e;
}

// sendmsg of the first chunk with the descriptor. The kernel caps descriptors in flight at
// the sender's RLIMIT_NOFILE soft limit (ETOOMANYREFS): retry once with it raised to the hard
// limit, as protocol::send_with_fd does, and restore it.
ssize_t SendWithFd(int sock, const uint8_t* data, size_t len, int fd_to_send) {
  iovec iov{const_cast<uint8_t*>(data), len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &fd_to_send, sizeof(int));
  for (;;) {
    ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n >= 0 || errno == EINTR) {
      if (n >= 0) return n;
      continue;
    }
    if (errno != ETOOMANYREFS) return -1;
    rlimit saved{};
    if (::getrlimit(RLIMIT_NOFILE, &saved) != 0 || saved.rlim_cur == saved.rlim_max) {
      errno = ETOOMANYREFS;
      return -1;
    }
    rlimit raised = saved;
    raised.rlim_cur = saved.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &raised);
    n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    int err = errno;
    ::setrlimit(RLIMIT_NOFILE, &saved);
    errno = err;
    return n;
  }
}

// Waits for the socket to take more bytes; a fresh connection normally takes START at once.
bool WaitWritable(int sock, int timeout_ms) {
  pollfd p{sock, POLLOUT, 0};
  int ready;
  do {
    ready = ::poll(&p, 1, timeout_ms);
  } while (ready < 0 && errno == EINTR);
  return ready > 0;
}

Napi::Value SendWithFdJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() != 3 || !info[0].IsNumber() || !info[1].IsBuffer() || !info[2].IsNumber()) {
    Napi::TypeError::New(env, "sendWithFd(socketFd: number, frame: Buffer, dirFd: number)")
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int sock = info[0].As<Napi::Number>().Int32Value();
  Napi::Buffer<uint8_t> frame = info[1].As<Napi::Buffer<uint8_t>>();
  int dir_fd = info[2].As<Napi::Number>().Int32Value();
  if (frame.Length() == 0) {
    Napi::TypeError::New(env, "sendWithFd: empty frame").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  for (int attempt = 0;; ++attempt) {
    ssize_t sent = SendWithFd(sock, frame.Data(), frame.Length(), dir_fd);
    if (sent >= 0) return Napi::Number::New(env, static_cast<double>(sent));
    int err = errno;
    if (err == EPIPE || err == ECONNRESET) return Napi::Number::New(env, -err);
    // The daemon reads START within its handshake timeout (5 s); wait at most that long.
    if ((err == EAGAIN || err == EWOULDBLOCK) && attempt == 0 && WaitWritable(sock, 5000)) continue;
    ErrnoError(env, "sendmsg START", err).ThrowAsJavaScriptException();
    return env.Undefined();
  }
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("sendWithFd", Napi::Function::New(env, SendWithFdJs));
  return exports;
}

}  // namespace

NODE_API_MODULE(sendfd, Init)
