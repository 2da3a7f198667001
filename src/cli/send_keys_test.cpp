#include "cli/send_keys.h"

#include <gtest/gtest.h>

namespace ptyvisor::cli {
namespace {

TEST(SendKeys, NamedKeysAreXtermSequences) {
    EXPECT_EQ(key_bytes("Enter"), "\r");
    EXPECT_EQ(key_bytes("Tab"), "\t");
    EXPECT_EQ(key_bytes("Escape"), "\x1b");
    EXPECT_EQ(key_bytes("Esc"), "\x1b");
    EXPECT_EQ(key_bytes("Space"), " ");
    EXPECT_EQ(key_bytes("BSpace"), "\x7f");
    EXPECT_EQ(key_bytes("Backspace"), "\x7f");
    EXPECT_EQ(key_bytes("Up"), "\x1b[A");
    EXPECT_EQ(key_bytes("Down"), "\x1b[B");
    EXPECT_EQ(key_bytes("Right"), "\x1b[C");
    EXPECT_EQ(key_bytes("Left"), "\x1b[D");
    EXPECT_EQ(key_bytes("Home"), "\x1b[H");
    EXPECT_EQ(key_bytes("End"), "\x1b[F");
    EXPECT_EQ(key_bytes("PageUp"), "\x1b[5~");
    EXPECT_EQ(key_bytes("PageDown"), "\x1b[6~");
    EXPECT_EQ(key_bytes("Delete"), "\x1b[3~");
    EXPECT_EQ(key_bytes("Insert"), "\x1b[2~");
    EXPECT_EQ(key_bytes("F1"), "\x1bOP");
    EXPECT_EQ(key_bytes("F4"), "\x1bOS");
    EXPECT_EQ(key_bytes("F5"), "\x1b[15~");
    EXPECT_EQ(key_bytes("F12"), "\x1b[24~");
    EXPECT_EQ(key_bytes("BTab"), "\x1b[Z");
}

TEST(SendKeys, NamesAreCaseInsensitiveAsInTmux) {
    EXPECT_EQ(key_bytes("enter"), "\r");
    EXPECT_EQ(key_bytes("ESCAPE"), "\x1b");
    EXPECT_EQ(key_bytes("pgup"), "\x1b[5~");
    EXPECT_EQ(key_bytes("f10"), "\x1b[21~");
}

TEST(SendKeys, ControlWithALetterOrPunctuation) {
    EXPECT_EQ(key_bytes("C-c"), "\x03");
    EXPECT_EQ(key_bytes("C-C"), "\x03");
    EXPECT_EQ(key_bytes("c-d"), "\x04");
    EXPECT_EQ(key_bytes("C-a"), "\x01");
    EXPECT_EQ(key_bytes("C-z"), "\x1a");
    EXPECT_EQ(key_bytes("C-["), "\x1b");
    EXPECT_EQ(key_bytes("C-\\"), "\x1c");
    EXPECT_EQ(key_bytes("C-]"), "\x1d");
    EXPECT_EQ(key_bytes("C-_"), "\x1f");
    EXPECT_EQ(key_bytes("C-?"), "\x7f");
    EXPECT_EQ(key_bytes("C-@"), std::string(1, '\0'));
    EXPECT_EQ(key_bytes("C-Space"), std::string(1, '\0'));
    EXPECT_EQ(key_bytes("^c"), "\x03");
    EXPECT_EQ(key_bytes("^["), "\x1b");
}

TEST(SendKeys, MetaIsAnEscapePrefix) {
    EXPECT_EQ(key_bytes("M-x"), "\x1b" "x");
    EXPECT_EQ(key_bytes("M-Enter"), "\x1b\r");
    EXPECT_EQ(key_bytes("M-C-x"), "\x1b\x18");
    EXPECT_EQ(key_bytes("C-M-x"), "\x1b\x18");
    EXPECT_EQ(key_bytes("M-Up"), "\x1b\x1b[A");
}

TEST(SendKeys, WhatNamesNoKeyIsNotAKey) {
    for (const char* text : {"", "hello", "Enterprise", "C-", "M-", "C-cc", "C-Up", "C-1", "F13", "F0", "^cc", "^1"})
        EXPECT_EQ(key_bytes(text), std::nullopt) << text;
    EXPECT_EQ(key_bytes("x"), "x") << "a single character is itself";
    EXPECT_EQ(key_bytes("^"), "^");
}

TEST(SendKeys, ArgumentsAreSentOneAfterTheOtherAndUnknownOnesLiterally) {
    EXPECT_EQ(keys_to_bytes({"ls -l", "Enter"}), "ls -l\r");
    EXPECT_EQ(keys_to_bytes({"echo", "Space", "hi", "C-m"}), "echo hi\r");
    EXPECT_EQ(keys_to_bytes({"C-c"}), "\x03");
    EXPECT_EQ(keys_to_bytes({"q", "Escape", ":wq", "Enter"}), "q\x1b:wq\r");
    EXPECT_EQ(keys_to_bytes({}), "");
}

}  // namespace
}  // namespace ptyvisor::cli
