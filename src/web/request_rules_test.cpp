#include "web/request_rules.h"

#include <gtest/gtest.h>

#include "web/assets.h"
#include "web/routes.h"

namespace ptyvisor::web {
namespace {

const std::string kToken = "0123456789abcdef0123456789abcdef";
const std::string kId = "0123456789abcdef0123456789abcdef";

HostRule tcp(std::uint16_t port, std::string listen = "127.0.0.1") { return {false, port, std::move(listen)}; }

TEST(RequestRules, QueryParameters) {
    EXPECT_EQ(query_param("token=abc&id=1", "token"), "abc");
    EXPECT_EQ(query_param("id=1&token=abc", "token"), "abc");
    EXPECT_EQ(query_param("token=a%2Fb+c", "token"), "a/b c");
    EXPECT_EQ(query_param("token=", "token"), "");
    EXPECT_EQ(query_param("token", "token"), "");
    EXPECT_EQ(query_param("xtoken=abc", "token"), std::nullopt);
    EXPECT_EQ(query_param("", "token"), std::nullopt);
    EXPECT_EQ(query_param("token=first&token=second", "token"), "first");
    // Malformed escapes give nothing rather than something half-decoded.
    EXPECT_EQ(query_param("token=abc%2", "token"), std::nullopt);
    EXPECT_EQ(query_param("token=abc%zz", "token"), std::nullopt);
    EXPECT_EQ(query_param("token=%", "token"), std::nullopt);
}

TEST(RequestRules, SplitTarget) {
    EXPECT_EQ(split_target("/a?b=c").path, "/a");
    EXPECT_EQ(split_target("/a?b=c").query, "b=c");
    EXPECT_EQ(split_target("/a").query, "");
    EXPECT_EQ(split_target("/a?b?c").query, "b?c");
}

TEST(RequestRules, Cookies) {
    EXPECT_EQ(cookie_value("ptyvisor_token=abc", kTokenCookie), "abc");
    EXPECT_EQ(cookie_value("a=1; ptyvisor_token=abc; b=2", kTokenCookie), "abc");
    EXPECT_EQ(cookie_value("a=1;ptyvisor_token=abc", kTokenCookie), "abc");
    EXPECT_EQ(cookie_value("ptyvisor_token=\"abc\"", kTokenCookie), "abc");
    EXPECT_EQ(cookie_value("xptyvisor_token=abc", kTokenCookie), std::nullopt);
    EXPECT_EQ(cookie_value("ptyvisor_token", kTokenCookie), std::nullopt);
    EXPECT_EQ(cookie_value("", kTokenCookie), std::nullopt);
    EXPECT_EQ(cookie_value("ptyvisor_token=one; ptyvisor_token=two", kTokenCookie), "one");
}

TEST(RequestRules, LoopbackHostsOnTheRightPort) {
    const auto rule = tcp(8650);
    EXPECT_TRUE(host_allowed("127.0.0.1:8650", rule));
    EXPECT_TRUE(host_allowed("localhost:8650", rule));
    EXPECT_TRUE(host_allowed("LocalHost:8650", rule));
    EXPECT_TRUE(host_allowed("[::1]:8650", rule));
    EXPECT_FALSE(host_allowed("127.0.0.1:8651", rule));
    EXPECT_FALSE(host_allowed("127.0.0.1", rule));
    EXPECT_FALSE(host_allowed("localhost", rule));
    EXPECT_FALSE(host_allowed("", rule));
    EXPECT_FALSE(host_allowed("::1:8650", rule));
}

TEST(RequestRules, DnsRebindingHostsAreRefused) {
    const auto rule = tcp(8650);
    // A name the attacker controls that resolves to 127.0.0.1 keeps its own name in Host.
    EXPECT_FALSE(host_allowed("evil.example:8650", rule));
    EXPECT_FALSE(host_allowed("127.0.0.1.nip.io:8650", rule));
    EXPECT_FALSE(host_allowed("localhost.evil.example:8650", rule));
    EXPECT_FALSE(host_allowed("evil.localhost:8650", rule));
    EXPECT_FALSE(host_allowed("127.0.0.1:8650.evil.example", rule));
    EXPECT_FALSE(host_allowed("127.0.0.1:8650:8650", rule));
    EXPECT_FALSE(host_allowed("[::1]x:8650", rule));
    EXPECT_FALSE(host_allowed("2130706433:8650", rule));  // 127.0.0.1 as a number
    EXPECT_FALSE(host_allowed("127.1:8650", rule));
    EXPECT_FALSE(host_allowed("0.0.0.0:8650", rule));
    EXPECT_FALSE(host_allowed("user@127.0.0.1:8650", rule));
}

TEST(RequestRules, TheListenHostIsAllowedToo) {
    EXPECT_TRUE(host_allowed("10.0.0.5:9000", tcp(9000, "10.0.0.5")));
    EXPECT_FALSE(host_allowed("10.0.0.6:9000", tcp(9000, "10.0.0.5")));
    EXPECT_TRUE(host_allowed("[fd00::1]:9000", tcp(9000, "fd00::1")));
    EXPECT_TRUE(host_allowed("[fd00::1]:9000", tcp(9000, "[fd00::1]")));
}

TEST(RequestRules, AUnixSocketAcceptsAnyHost) {
    HostRule rule;
    rule.unix_socket = true;
    EXPECT_TRUE(host_allowed("console.example.org", rule));
    EXPECT_TRUE(host_allowed("", rule));
}

TEST(RequestRules, OriginMustNameTheHost) {
    EXPECT_TRUE(origin_matches_host("http://127.0.0.1:8650", "127.0.0.1:8650"));
    EXPECT_TRUE(origin_matches_host("https://console.example.org", "console.example.org"));
    EXPECT_TRUE(origin_matches_host("http://LOCALHOST:8650", "localhost:8650"));
    EXPECT_FALSE(origin_matches_host("http://localhost:8650", "127.0.0.1:8650"));
    EXPECT_FALSE(origin_matches_host("http://evil.example", "127.0.0.1:8650"));
    EXPECT_FALSE(origin_matches_host("http://127.0.0.1:8651", "127.0.0.1:8650"));
    EXPECT_FALSE(origin_matches_host("", "127.0.0.1:8650"));
    EXPECT_FALSE(origin_matches_host("null", "127.0.0.1:8650"));
    EXPECT_FALSE(origin_matches_host("file://", "127.0.0.1:8650"));
    EXPECT_FALSE(origin_matches_host("ws://127.0.0.1:8650", "127.0.0.1:8650"));
    EXPECT_FALSE(origin_matches_host("http://127.0.0.1:8650/", "127.0.0.1:8650"));
    EXPECT_FALSE(origin_matches_host("http://x@127.0.0.1:8650", "127.0.0.1:8650"));
    EXPECT_FALSE(origin_matches_host("http://", ""));
}

Decision run(RequestFacts facts, const HostRule& rule = tcp(8650)) { return decide(facts, kToken, rule); }

RequestFacts get(std::string_view target, std::string_view cookie = {}) {
    RequestFacts f;
    f.method = "GET";
    f.target = target;
    f.host = "127.0.0.1:8650";
    f.cookie = cookie;
    return f;
}

using K = Decision::Kind;

TEST(Decide, TheTokenInTheQueryOfTheIndexBecomesACookie) {
    const std::string target = "/?token=" + kToken;
    EXPECT_EQ(run(get(target)).kind, K::SetCookieAndRedirect);
    const std::string cookie = "ptyvisor_token=" + kToken;
    EXPECT_EQ(run(get("/", cookie)).kind, K::Serve);
    EXPECT_EQ(run(get("/", cookie)).route.kind, Route::Kind::Index);
    // On another route the query token simply authorises.
    EXPECT_EQ(run(get("/api/info?token=" + kToken)).kind, K::Serve);
}

TEST(Decide, WithoutTheRightTokenNothingIsServed) {
    EXPECT_EQ(run(get("/")).kind, K::NoToken);
    EXPECT_EQ(run(get("/?token=wrong")).kind, K::NoToken);
    EXPECT_EQ(run(get("/?token=" + kToken + "x")).kind, K::NoToken);
    EXPECT_EQ(run(get("/assets/app.js", "ptyvisor_token=nope")).kind, K::NoToken);
    EXPECT_EQ(run(get("/api/sessions")).kind, K::NoToken);
    EXPECT_EQ(run(get("/no/such/page")).kind, K::NoToken);  // not even whether it exists
    auto ws = get("/ws/events");
    ws.websocket_upgrade = true;
    ws.origin = "http://127.0.0.1:8650";
    EXPECT_EQ(run(ws).kind, K::NoToken);
}

TEST(Decide, HostIsCheckedBeforeTheToken) {
    const std::string target = "/?token=" + kToken;
    auto f = get(target);
    f.host = "evil.example:8650";
    EXPECT_EQ(run(f).kind, K::BadHost);
    f.host = "";
    EXPECT_EQ(run(f).kind, K::BadHost);
}

TEST(Decide, MethodsAndRoutes) {
    const std::string cookie = "ptyvisor_token=" + kToken;
    auto post = get("/api/sessions", cookie);
    post.method = "POST";
    EXPECT_EQ(run(post).kind, K::MethodNotAllowed);
    EXPECT_EQ(run(get("/nothing", cookie)).kind, K::NotFound);
    EXPECT_EQ(run(get("/api/sessions/" + kId + "/recording", cookie)).route,
              (Route{Route::Kind::Recording, kId}));
    EXPECT_EQ(run(get("/api/sessions/xyz/recording", cookie)).kind, K::NotFound);
    EXPECT_EQ(run(get("/assets/vendor/xterm.js", cookie)).route, (Route{Route::Kind::Asset, "vendor/xterm.js"}));
    EXPECT_EQ(run(get("/assets/", cookie)).kind, K::NotFound);
}

TEST(Decide, WebSocketsNeedAnUpgradeAndTheOriginOfTheHost) {
    const std::string cookie = "ptyvisor_token=" + kToken;
    const std::string target = "/ws/terminal?id=" + kId;  // RequestFacts only views its strings
    auto ws = get(target, cookie);
    EXPECT_EQ(run(ws).kind, K::NotWebSocket);
    ws.websocket_upgrade = true;
    EXPECT_EQ(run(ws).kind, K::BadOrigin);  // no Origin
    ws.origin = "http://evil.example";
    EXPECT_EQ(run(ws).kind, K::BadOrigin);
    ws.origin = "http://localhost:8650";  // another name of the same machine is another origin
    EXPECT_EQ(run(ws).kind, K::BadOrigin);
    ws.origin = "http://127.0.0.1:8650";
    const auto d = run(ws);
    EXPECT_EQ(d.kind, K::Serve);
    EXPECT_EQ(d.route, (Route{Route::Kind::TerminalSocket, kId}));

    auto bad_id = get("/ws/terminal?id=../../etc", cookie);
    bad_id.websocket_upgrade = true;
    bad_id.origin = "http://127.0.0.1:8650";
    EXPECT_EQ(run(bad_id).kind, K::BadRequest);
}

TEST(Decide, BehindAUnixSocketTheProxysHostAndOriginAreUsed) {
    HostRule rule;
    rule.unix_socket = true;
    const std::string cookie = "ptyvisor_token=" + kToken;
    auto ws = get("/ws/events", cookie);
    ws.host = "console.example.org";
    ws.websocket_upgrade = true;
    ws.origin = "https://console.example.org";
    EXPECT_EQ(run(ws, rule).kind, K::Serve);
    ws.origin = "https://evil.example";
    EXPECT_EQ(run(ws, rule).kind, K::BadOrigin);
}

TEST(Routes, ContentTypes) {
    EXPECT_EQ(content_type_for("index.html"), "text/html; charset=utf-8");
    EXPECT_EQ(content_type_for("app.js"), "text/javascript; charset=utf-8");
    EXPECT_EQ(content_type_for("app.css"), "text/css; charset=utf-8");
    EXPECT_EQ(content_type_for("vendor/icon.svg"), "image/svg+xml");
    EXPECT_EQ(content_type_for("vendor/font.woff2"), "font/woff2");
    EXPECT_EQ(content_type_for("data.json"), "application/json");
    EXPECT_EQ(content_type_for("README"), "application/octet-stream");
}

TEST(Assets, TheIndexIsEmbeddedAndTheTableIsSorted) {
    const Asset* index = find_asset("index.html");
    ASSERT_NE(index, nullptr);
    EXPECT_NE(index->bytes.find("<html"), std::string_view::npos);
    EXPECT_EQ(find_asset("no-such-file"), nullptr);
    EXPECT_EQ(find_asset("../CMakeLists.txt"), nullptr);
    const auto all = embedded_assets();
    for (std::size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1].name, all[i].name);
}

}  // namespace
}  // namespace ptyvisor::web
