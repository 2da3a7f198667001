// The console's token: the one secret that lets a browser in (docs/console-api.md, "Authentication").
//
// Invariants: a token is 16..256 characters of [A-Za-z0-9._~-], so that it travels unescaped
// in a query string and a cookie; a generated one is 32 random bytes as 64 lowercase hex
// digits. Tokens are only ever compared with tokens_equal(), whose time does not depend on
// where the first difference is.
#pragma once

#include <string>
#include <string_view>
#include <sys/types.h>

namespace ptyvisor::web {

inline constexpr std::size_t kMinTokenLength = 16;
inline constexpr std::size_t kMaxTokenLength = 256;

// 64 lowercase hex digits from getrandom(2). False with `why` when the kernel has no entropy
// to give (it blocks until it has, so in practice only on an unexpected error).
bool generate_token(std::string& token, std::string& why);

// Whether `token` has an allowed length and alphabet; `why` says what is wrong.
bool valid_token(std::string_view token, std::string& why);

// Reads the first line of `path` (trailing spaces, tabs and CR stripped) as the token. Refuses
// a path that is not a regular file (a symlink included), is not owned by `owner`, or that its
// group or others may read or write: the token is the whole of the console's authentication.
bool read_token_file(const std::string& path, uid_t owner, std::string& token, std::string& why);

// Constant-time comparison: every byte of `expected` is looked at whatever `given` is.
bool tokens_equal(std::string_view given, std::string_view expected);

}  // namespace ptyvisor::web
