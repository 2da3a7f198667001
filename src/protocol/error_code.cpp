#include "protocol/error_code.h"

#include <array>
#include <utility>

namespace ptyvisor::protocol {
namespace {

constexpr std::array<std::pair<ErrorCode, std::string_view>, 17> kNames{{
    {ErrorCode::BadFrame, "bad_frame"},
    {ErrorCode::UnsupportedVersion, "unsupported_version"},
    {ErrorCode::TooBig, "too_big"},
    {ErrorCode::UnexpectedFrame, "unexpected_frame"},
    {ErrorCode::WrongFdCount, "wrong_fd_count"},
    {ErrorCode::NotADirectory, "not_a_directory"},
    {ErrorCode::CwdMismatch, "cwd_mismatch"},
    {ErrorCode::NotAllowed, "not_allowed"},
    {ErrorCode::Busy, "busy"},
    {ErrorCode::RateLimited, "rate_limited"},
    {ErrorCode::Overloaded, "overloaded"},
    {ErrorCode::HandshakeTimeout, "handshake_timeout"},
    {ErrorCode::StartFailed, "start_failed"},
    {ErrorCode::Internal, "internal"},
    {ErrorCode::ShuttingDown, "shutting_down"},
    {ErrorCode::NoSuchSession, "no_such_session"},
    {ErrorCode::SessionEnded, "session_ended"},
}};

}  // namespace

std::string_view to_string(ErrorCode code) {
    for (const auto& [c, name] : kNames)
        if (c == code) return name;
    return "internal";
}

std::optional<ErrorCode> error_code_from_string(std::string_view name) {
    for (const auto& [c, n] : kNames)
        if (n == name) return c;
    return std::nullopt;
}

}  // namespace ptyvisor::protocol
