#include "web/token.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/unique_fd.h"

namespace ptyvisor::web {

bool generate_token(std::string& token, std::string& why) {
    unsigned char bytes[32];
    std::size_t got = 0;
    while (got < sizeof bytes) {
        const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            why = std::string("getrandom: ") + std::strerror(errno);
            return false;
        }
        got += static_cast<std::size_t>(n);
    }
    static constexpr char kHex[] = "0123456789abcdef";
    token.clear();
    for (const unsigned char b : bytes) {
        token.push_back(kHex[b >> 4]);
        token.push_back(kHex[b & 0xf]);
    }
    return true;
}

bool valid_token(std::string_view token, std::string& why) {
    if (token.empty()) {
        why = "the token is empty";
        return false;
    }
    if (token.size() < kMinTokenLength) {
        why = "the token is shorter than " + std::to_string(kMinTokenLength) + " characters";
        return false;
    }
    if (token.size() > kMaxTokenLength) {
        why = "the token is longer than " + std::to_string(kMaxTokenLength) + " characters";
        return false;
    }
    for (const char c : token) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                        c == '_' || c == '~' || c == '-';
        if (!ok) {
            why = "the token may hold only letters, digits and . _ ~ - (it goes in a URL and a cookie)";
            return false;
        }
    }
    return true;
}

bool read_token_file(const std::string& path, uid_t owner, std::string& token, std::string& why) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
    if (!fd) {
        why = "cannot open the token file " + path + ": " + std::strerror(errno);
        return false;
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) {
        why = "cannot stat the token file " + path + ": " + std::strerror(errno);
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        why = "the token file " + path + " is not a regular file";
        return false;
    }
    if (st.st_uid != owner) {
        why = "the token file " + path + " is not owned by uid " + std::to_string(owner);
        return false;
    }
    if ((st.st_mode & 077) != 0) {
        why = "the token file " + path + " is open to its group or others (chmod 600 it)";
        return false;
    }
    // The first line is all we need; a longer one is refused by valid_token() anyway.
    char buffer[kMaxTokenLength + 2];
    std::size_t got = 0;
    while (got < sizeof buffer) {
        const ssize_t n = ::read(fd.get(), buffer + got, sizeof buffer - got);
        if (n < 0) {
            if (errno == EINTR) continue;
            why = "cannot read the token file " + path + ": " + std::strerror(errno);
            return false;
        }
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    std::string_view text(buffer, got);
    if (const auto nl = text.find('\n'); nl != std::string_view::npos) text = text.substr(0, nl);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
    std::string reason;
    if (!valid_token(text, reason)) {
        why = "the token file " + path + ": " + reason;
        return false;
    }
    token.assign(text);
    return true;
}

bool tokens_equal(std::string_view given, std::string_view expected) {
    // The length of the expected token is not the secret; its bytes are. Every byte of
    // `expected` is compared against something, and the differences accumulate without a branch.
    unsigned difference = given.size() == expected.size() ? 0u : 1u;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
        difference |= static_cast<unsigned>(g ^ static_cast<unsigned char>(expected[i]));
    }
    return difference == 0;
}

}  // namespace ptyvisor::web
