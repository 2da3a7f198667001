#include "web/token.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace ptyvisor::web {
namespace {

class TokenFile : public ::testing::Test {
protected:
    void SetUp() override {
        char dir_template[] = "/tmp/web_token_test.XXXXXX";
        ASSERT_NE(::mkdtemp(dir_template), nullptr);
        dir_ = dir_template;
        path_ = dir_ + "/token";
    }
    void TearDown() override {
        ::unlink(path_.c_str());
        ::unlink((dir_ + "/link").c_str());
        ::rmdir(dir_.c_str());
    }
    void write(const std::string& text, mode_t mode) {
        std::ofstream(path_) << text;
        ASSERT_EQ(::chmod(path_.c_str(), mode), 0);
    }
    std::string dir_, path_;
};

TEST(Token, GeneratedTokensAre64LowercaseHexDigitsAndDiffer) {
    std::string a, b, why;
    ASSERT_TRUE(generate_token(a, why)) << why;
    ASSERT_TRUE(generate_token(b, why)) << why;
    EXPECT_EQ(a.size(), 64u);
    EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
    EXPECT_NE(a, b);
    EXPECT_TRUE(valid_token(a, why)) << why;
}

TEST(Token, ValidityBoundsLengthAndAlphabet) {
    std::string why;
    EXPECT_FALSE(valid_token("", why));
    EXPECT_FALSE(valid_token("short", why));
    EXPECT_FALSE(valid_token(std::string(15, 'a'), why));
    EXPECT_TRUE(valid_token(std::string(16, 'a'), why));
    EXPECT_TRUE(valid_token("Abc.def_ghi~jkl-mno", why));
    EXPECT_FALSE(valid_token(std::string(257, 'a'), why));
    // Characters that would need escaping in a URL or end a cookie.
    EXPECT_FALSE(valid_token("abcdefghijklmnop;x", why));
    EXPECT_FALSE(valid_token("abcdefghijklmnop x", why));
    EXPECT_FALSE(valid_token("abcdefghijklmnop%20", why));
    EXPECT_FALSE(valid_token("abcdefghijklmnop&a=b", why));
}

TEST(Token, ComparisonIsExact) {
    const std::string t = "0123456789abcdef0123";
    EXPECT_TRUE(tokens_equal(t, t));
    EXPECT_FALSE(tokens_equal("", t));
    EXPECT_FALSE(tokens_equal(t.substr(0, t.size() - 1), t));
    EXPECT_FALSE(tokens_equal(t + "0", t));
    std::string other = t;
    other[0] = '1';
    EXPECT_FALSE(tokens_equal(other, t));
    other = t;
    other.back() = 'x';
    EXPECT_FALSE(tokens_equal(other, t));
    // A prefix padded with NULs must not match.
    EXPECT_FALSE(tokens_equal(std::string(t.size(), '\0'), t));
}

TEST_F(TokenFile, FirstLineWithTrailingSpaceStripped) {
    write("abcdefghijklmnopqrstuvwxyz \r\nsecond line\n", 0600);
    std::string token, why;
    ASSERT_TRUE(read_token_file(path_, ::getuid(), token, why)) << why;
    EXPECT_EQ(token, "abcdefghijklmnopqrstuvwxyz");
}

TEST_F(TokenFile, RefusesEmptyAndShortTokens) {
    std::string token, why;
    write("\n", 0600);
    EXPECT_FALSE(read_token_file(path_, ::getuid(), token, why));
    EXPECT_NE(why.find("empty"), std::string::npos) << why;
    write("0123456789abcde\n", 0600);  // 15
    EXPECT_FALSE(read_token_file(path_, ::getuid(), token, why));
    EXPECT_NE(why.find("shorter"), std::string::npos) << why;
}

TEST_F(TokenFile, RefusesAFileOthersOrTheGroupMayRead) {
    std::string token, why;
    write("abcdefghijklmnopqrstuvwxyz\n", 0640);
    EXPECT_FALSE(read_token_file(path_, ::getuid(), token, why));
    EXPECT_NE(why.find("group or others"), std::string::npos) << why;
    write("abcdefghijklmnopqrstuvwxyz\n", 0604);
    EXPECT_FALSE(read_token_file(path_, ::getuid(), token, why));
    write("abcdefghijklmnopqrstuvwxyz\n", 0400);
    EXPECT_TRUE(read_token_file(path_, ::getuid(), token, why)) << why;
}

TEST_F(TokenFile, RefusesAFileOfAnotherOwner) {
    write("abcdefghijklmnopqrstuvwxyz\n", 0600);
    std::string token, why;
    EXPECT_FALSE(read_token_file(path_, ::getuid() + 1, token, why));
    EXPECT_NE(why.find("not owned"), std::string::npos) << why;
}

TEST_F(TokenFile, RefusesASymlinkAndADirectory) {
    write("abcdefghijklmnopqrstuvwxyz\n", 0600);
    const std::string link = dir_ + "/link";
    ASSERT_EQ(::symlink(path_.c_str(), link.c_str()), 0);
    std::string token, why;
    EXPECT_FALSE(read_token_file(link, ::getuid(), token, why));
    EXPECT_FALSE(read_token_file(dir_, ::getuid(), token, why));
    EXPECT_FALSE(read_token_file(dir_ + "/missing", ::getuid(), token, why));
}

}  // namespace
}  // namespace ptyvisor::web
