// Sessions that outlive their connection (protocol version 2, docs/protocol.md section 9):
// detach, attach with replay, observers, takeover, LIST, READ, WAIT, KILL, SEND, retention,
// and who may do what. Spoken at the wire, so that what is tested is the protocol itself.
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include "protocol/session_payloads.h"
#include "support/fixture.h"
#include "support/sessions_fixture.h"

namespace ptyvisor::itest {
namespace {

using protocol::FrameType;

TEST_F(Sessions, ADetachedSessionSurvivesItsClientAndReadReturnsEveryByte) {
    DaemonConfig cfg = config();
    cfg.output_log_bytes = 8 << 20;  // room for all of it
    ASSERT_NE(start_daemon(cfg), nullptr);
    const int n = 400000;  // 2.7 MiB
    const std::string id = start_detached({"seq", "1", std::to_string(n)});
    ASSERT_FALSE(id.empty());
    const auto exited = wait_exit(id, 30000);
    ASSERT_TRUE(exited);
    EXPECT_TRUE(exited->matched);
    ASSERT_TRUE(exited->exit);
    EXPECT_EQ(exited->exit->code, 0);
    const auto r = read_log(id);
    ASSERT_TRUE(r);
    const std::string expected = seq_output(n);
    EXPECT_EQ(r->log.start, 0u);
    EXPECT_EQ(r->log.offset, 0u);
    EXPECT_EQ(r->log.end, expected.size());
    EXPECT_EQ(r->log.length, expected.size());
    EXPECT_EQ(r->bytes.size(), expected.size());
    EXPECT_TRUE(r->bytes == expected) << "the log's bytes differ from what the command wrote";
    EXPECT_EQ(r->log.state, protocol::State::Exited);
}

TEST_F(Sessions, ALogThatWrappedReportsTheTrueStart) {
    DaemonConfig cfg = config();
    cfg.output_buffer_bytes = 65536;
    cfg.output_log_bytes = 131072;
    ASSERT_NE(start_daemon(cfg), nullptr);
    const int n = 150000;  // about 1 MiB, eight times the log
    const std::string id = start_detached({"seq", "1", std::to_string(n)});
    ASSERT_FALSE(id.empty());
    ASSERT_TRUE(wait_exit(id, 30000));
    const auto r = read_log(id, {protocol::LogPosition::Kind::Offset, 0});
    ASSERT_TRUE(r);
    const std::string expected = seq_output(n);
    EXPECT_EQ(r->log.end, expected.size());
    EXPECT_EQ(r->log.start, expected.size() - 131072) << "the log holds its capacity, the newest bytes";
    EXPECT_EQ(r->log.offset, r->log.start) << "an offset before the start is read from the start";
    EXPECT_EQ(r->log.length, 131072u);
    EXPECT_TRUE(r->bytes == expected.substr(r->log.start)) << "the bytes held are the stream's last";
}

TEST_F(Sessions, AnObserversInputIsRefused) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_detached({"cat"});
    ASSERT_FALSE(id.empty());
    for (const bool as_root : {false, true}) {
        auto o = attach(id, /*observe=*/true, false, {}, as_root);
        ASSERT_NE(o, nullptr);
        const auto a = expect_attached(*o);
        ASSERT_TRUE(a);
        EXPECT_TRUE(a->observe);
        ASSERT_EQ(o->send_frame(FrameType::Input, "typed by an observer\n"), 0);
        const auto e = o->expect_error(kReply);
        ASSERT_TRUE(e) << (as_root ? "root" : "agent") << " observer";
        EXPECT_EQ(e->code, protocol::ErrorCode::NotAllowed);
    }
    // Nothing of it reached the terminal.
    const auto r = read_log(id);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->bytes.find("observer"), std::string::npos) << r->bytes;
}

TEST_F(Sessions, RootMayObserveButNotControl) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_detached({"cat"});
    ASSERT_FALSE(id.empty());
    auto c = attach(id, /*observe=*/false, false, {}, /*as_root=*/true);
    ASSERT_NE(c, nullptr);
    const auto e = c->expect_error(kReply);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code, protocol::ErrorCode::NotAllowed);
    auto root = connect_as(0, 0, {0});
    ASSERT_NE(root, nullptr);
    EXPECT_EQ(error_of(exchange(*root, FrameType::Kill, protocol::encode(protocol::KillRequest{id, 0}))), "not_allowed");
}

// observer_group (configuration.md): a member, here by a supplementary group only, may watch
// the agent's sessions (LIST, ATTACH as observer with the log replayed) and nothing else: no
// control, no KILL, no INPUT. The socket is root:<the agent's group> 0660, so an observer
// holds that group too, for the connect() alone; without the observer group the same uid
// is refused at once.
TEST_F(Sessions, AnObserverGroupMemberMayWatchButNotControl) {
    constexpr uid_t kNobody = 65534;
    constexpr gid_t kNogroup = 65534, kObservers = 4;  // Debian's adm
    DaemonConfig cfg = config();
    cfg.observer_group = "adm";
    ASSERT_NE(start_daemon(cfg), nullptr);
    const std::string id = start_detached({"sh", "-c", "echo seen-by-the-observer; exec cat"});
    ASSERT_FALSE(id.empty());

    const gid_t socket_group = account_->gid;
    auto stranger = connect_as(kNobody, kNogroup, {socket_group});
    ASSERT_NE(stranger, nullptr);
    const auto refused_at_accept = stranger->expect_error(kReply);  // before any request of its own
    ASSERT_TRUE(refused_at_accept);
    EXPECT_EQ(refused_at_accept->code, protocol::ErrorCode::NotAllowed);

    auto lister = connect_as(kNobody, kNogroup, {socket_group, kObservers});
    ASSERT_NE(lister, nullptr);
    const auto listed = exchange(*lister, FrameType::List, "");
    ASSERT_EQ(listed.size(), 1u);
    ASSERT_EQ(listed.front().type, FrameType::Sessions) << listed.front().text();
    const auto sessions = protocol::decode_sessions(listed.front().text());
    ASSERT_TRUE(sessions) << sessions.error;
    ASSERT_EQ(sessions.value->size(), 1u);
    EXPECT_EQ(sessions.value->front().id, id);

    auto observer = connect_as(kNobody, kNogroup, {socket_group, kObservers});
    ASSERT_NE(observer, nullptr);
    ASSERT_EQ(observer->send_frame(FrameType::Attach, protocol::encode(protocol::AttachRequest{id, {protocol::LogPosition::Kind::Start, 0}, true, false})), 0);
    const auto a = expect_attached(*observer);
    ASSERT_TRUE(a);
    EXPECT_TRUE(a->observe);
    std::string seen;
    EXPECT_TRUE(observer->read_output_until("seen-by-the-observer", kReply, &seen)) << seen;
    ASSERT_EQ(observer->send_frame(FrameType::Input, "typed by an observer\n"), 0);
    const auto refused_input = observer->expect_error(kReply);
    ASSERT_TRUE(refused_input);
    EXPECT_EQ(refused_input->code, protocol::ErrorCode::NotAllowed);

    auto controller = connect_as(kNobody, kNogroup, {socket_group, kObservers});
    ASSERT_NE(controller, nullptr);
    ASSERT_EQ(controller->send_frame(FrameType::Attach, protocol::encode(protocol::AttachRequest{id, {}, false, true})), 0);
    const auto refused_control = controller->expect_error(kReply);
    ASSERT_TRUE(refused_control);
    EXPECT_EQ(refused_control->code, protocol::ErrorCode::NotAllowed);

    auto killer = connect_as(kNobody, kNogroup, {socket_group, kObservers});
    ASSERT_NE(killer, nullptr);
    EXPECT_EQ(error_of(exchange(*killer, FrameType::Kill, protocol::encode(protocol::KillRequest{id, 0}))), "not_allowed");
    // The session ran on, untouched.
    const auto after = list();
    ASSERT_EQ(after.size(), 1u);
    EXPECT_EQ(after.front().state, protocol::State::Running);
}

TEST_F(Sessions, TakingOverIsExplicit) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_detached({"cat"});
    ASSERT_FALSE(id.empty());
    auto first = attach(id, false);
    ASSERT_NE(first, nullptr);
    ASSERT_TRUE(expect_attached(*first));
    auto second = attach(id, false);
    ASSERT_NE(second, nullptr);
    const auto busy = second->expect_error(kReply);
    ASSERT_TRUE(busy);
    EXPECT_EQ(busy->code, protocol::ErrorCode::Busy);

    auto third = attach(id, false, /*takeover=*/true);
    ASSERT_NE(third, nullptr);
    ASSERT_TRUE(expect_attached(*third));
    auto in = first->next(kReply);
    ASSERT_EQ(in.kind, Incoming::Kind::Frame) << in.describe();
    ASSERT_EQ(in.frame.type, FrameType::Detached);
    EXPECT_EQ(protocol::decode_detached(in.frame.text()).value->reason, "taken_over");
    EXPECT_TRUE(first->expect_eof(kReply));
    // The new controller's input reaches the session.
    ASSERT_EQ(third->send_frame(FrameType::Input, "from the new controller\n"), 0);
    std::string seen;
    EXPECT_TRUE(third->read_output_until("from the new controller", kReply, &seen)) << seen;
}

TEST_F(Sessions, DetachLeavesTheSessionRunning) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(start_session(*c, {"cat"}));  // bound: without DETACH, a disconnect would end it
    ASSERT_EQ(c->send_frame(FrameType::Detach, ""), 0);
    auto in = c->next(kReply);
    ASSERT_EQ(in.kind, Incoming::Kind::Frame) << in.describe();
    EXPECT_EQ(in.frame.type, FrameType::Detached);
    EXPECT_TRUE(c->expect_eof(kReply));
    const auto sessions = list();
    ASSERT_EQ(sessions.size(), 1u);
    EXPECT_EQ(sessions[0].state, protocol::State::Running);
    EXPECT_TRUE(sessions[0].detached);
    EXPECT_EQ(sessions[0].clients, 0u);
    EXPECT_EQ(sessions[0].argv, std::vector<std::string>{"cat"});
}

// LIST's reply has a bound (256 KiB). Sessions whose argv alone fill it must not make LIST
// fail or grow past it: the newest that fit are listed, oldest first, and the reply says it
// was cut.
TEST_F(Sessions, AListTooBigForItsFrameKeepsTheNewestAndSaysItWasCut) {
    ASSERT_NE(start_daemon(), nullptr);
    std::vector<std::string> ids;
    for (int i = 0; i < 16; ++i) {
        // sh takes the padding as $0; 20000 bytes each, 320000 in all.
        ids.push_back(start_detached({"sh", "-c", "exec sleep 600", std::string(20000, static_cast<char>('a' + i))}));
        ASSERT_FALSE(ids.back().empty());
    }
    const auto frames = request(FrameType::List, "");
    ASSERT_EQ(frames.size(), 1u);
    ASSERT_EQ(frames.front().type, FrameType::Sessions);
    const std::string_view text = frames.front().text();
    EXPECT_LE(text.size(), protocol::kMaxStatusPayloadSize);
    EXPECT_NE(text.find(R"("truncated":true)"), std::string_view::npos);
    const auto d = protocol::decode_sessions(text);
    ASSERT_TRUE(d) << d.error;
    const auto& listed = *d.value;
    ASSERT_FALSE(listed.empty());
    ASSERT_LT(listed.size(), ids.size());
    // The newest, in order: the tail of the ids started.
    for (std::size_t i = 0; i < listed.size(); ++i)
        EXPECT_EQ(listed[i].id, ids[ids.size() - listed.size() + i]) << i;
    EXPECT_EQ(listed.back().argv.back(), std::string(20000, 'p'));
}

TEST_F(Sessions, ABoundSessionStillEndsWithItsClient) {
    ASSERT_NE(start_daemon(), nullptr);
    auto c = connect_as_account();
    ASSERT_NE(c, nullptr);
    const auto started = start_session(*c, {"cat"});
    ASSERT_TRUE(started);
    // An observer sees the end: the controller's disconnect ends a bound session.
    auto o = attach(started->id, /*observe=*/true);
    ASSERT_NE(o, nullptr);
    ASSERT_TRUE(expect_attached(*o));
    c.reset();
    std::string seen;
    const auto exit = o->read_until_exit(kReply, &seen);
    ASSERT_TRUE(exit) << seen;
    EXPECT_EQ(exit->reason, protocol::ExitReason::Disconnected);
}

TEST_F(Sessions, WaitForExitAndItsTimeout) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string quick = start_detached({"sh", "-c", "sleep 0.2; exit 3"});
    const std::string slow = start_detached({"sleep", "60"});
    ASSERT_FALSE(quick.empty());
    ASSERT_FALSE(slow.empty());
    const auto q = wait_exit(quick);
    ASSERT_TRUE(q);
    EXPECT_TRUE(q->matched);
    EXPECT_EQ(q->reason, "exit");
    ASSERT_TRUE(q->exit);
    EXPECT_EQ(q->exit->code, 3);
    const auto s = wait_exit(slow, 300);
    ASSERT_TRUE(s);
    EXPECT_FALSE(s->matched);
    EXPECT_EQ(s->reason, "timeout");
    EXPECT_EQ(s->state, protocol::State::Running);
}

TEST_F(Sessions, WaitForTextAndItsTimeout) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_detached({"sh", "-c", "sleep 0.2; echo server listening on 8080; sleep 60"});
    ASSERT_FALSE(id.empty());
    protocol::WaitRequest w;
    w.id = id;
    w.what = protocol::WaitRequest::For::Text;
    w.pattern = "listening on [0-9]+";
    const auto r = wait(w);
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->matched);
    EXPECT_EQ(r->reason, "text");
    const auto log = read_log(id);
    ASSERT_TRUE(log);
    ASSERT_LE(r->match_end, log->bytes.size());
    EXPECT_EQ(log->bytes.substr(r->match_start, r->match_end - r->match_start), "listening on 8080");

    w.pattern = "never (printed)+";
    w.timeout_ms = 300;
    const auto t = wait(w);
    ASSERT_TRUE(t);
    EXPECT_FALSE(t->matched);
    EXPECT_EQ(t->reason, "timeout");
}

TEST_F(Sessions, WaitForQuietAndItsTimeout) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string settling = start_detached({"sh", "-c", "for i in 1 2 3; do echo $i; sleep 0.1; done; sleep 60"});
    const std::string busy = start_detached({"sh", "-c", "while :; do echo busy; sleep 0.05; done"});
    ASSERT_FALSE(settling.empty());
    ASSERT_FALSE(busy.empty());
    protocol::WaitRequest w;
    w.id = settling;
    w.what = protocol::WaitRequest::For::Quiet;
    w.quiet_ms = 600;
    const auto r = wait(w);
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->matched);
    EXPECT_EQ(r->reason, "quiet");
    EXPECT_EQ(r->offset, 9u) << "all three lines were out before the quiet";  // "1\r\n2\r\n3\r\n"

    w.id = busy;
    w.quiet_ms = 500;
    w.timeout_ms = 1500;
    const auto b = wait(w);
    ASSERT_TRUE(b);
    EXPECT_FALSE(b->matched);
    EXPECT_EQ(b->reason, "timeout");
}

TEST_F(Sessions, ALateReaderAfterExitStillFindsTheStatusAndTheLog) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_detached({"sh", "-c", "printf 'last words'; exit 5"});
    ASSERT_FALSE(id.empty());
    ASSERT_TRUE(wait_exit(id));
    const auto sessions = list();
    ASSERT_EQ(sessions.size(), 1u);
    EXPECT_EQ(sessions[0].state, protocol::State::Exited);
    ASSERT_TRUE(sessions[0].exit);
    EXPECT_EQ(sessions[0].exit->code, 5);
    const auto r = read_log(id);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->bytes, "last words");
    ASSERT_TRUE(r->log.exit);
    EXPECT_EQ(r->log.exit->code, 5);
    // An observer that attaches now reads the rest and the EXIT.
    auto o = attach(id, true, false, {protocol::LogPosition::Kind::Start, 0});
    ASSERT_NE(o, nullptr);
    ASSERT_TRUE(expect_attached(*o));
    std::string seen;
    const auto exit = o->read_until_exit(kReply, &seen);
    ASSERT_TRUE(exit) << seen;
    EXPECT_EQ(exit->code, 5);
    EXPECT_EQ(o->output(), "last words");
}

TEST_F(Sessions, AnExitedSessionGoesWhenItsRetentionEnds) {
    DaemonConfig cfg = config();
    cfg.retention = 1.0;
    ASSERT_NE(start_daemon(cfg), nullptr);
    const std::string id = start_detached({"true"});
    ASSERT_FALSE(id.empty());
    ASSERT_TRUE(wait_exit(id));
    const auto t0 = Clock::now();
    EXPECT_TRUE(read_log(id)) << "kept right after its exit";
    // No event says "expired" but its absence: look until it is gone, within a deadline.
    std::string code;
    while (Clock::now() - t0 < Millis(10000)) {
        code = error_of(request(FrameType::Read, protocol::encode(protocol::ReadRequest{id, {}, 1})));
        if (code == "no_such_session") break;
        std::this_thread::sleep_for(Millis(100));
    }
    EXPECT_EQ(code, "no_such_session");
    EXPECT_GE(Clock::now() - t0, Millis(900)) << "gone before its retention ended";
    EXPECT_TRUE(list().empty());
}

TEST_F(Sessions, KillEndsTheSessionAndKillWithASignalSignalsIt) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string a = start_detached({"sleep", "60"});
    const std::string b = start_detached({"sleep", "60"});
    ASSERT_FALSE(a.empty());
    ASSERT_FALSE(b.empty());
    const auto killed = request(FrameType::Kill, protocol::encode(protocol::KillRequest{a, 0}));
    ASSERT_EQ(killed.size(), 1u);
    ASSERT_EQ(killed[0].type, FrameType::Killed);
    const auto k = protocol::decode_killed(killed[0].text());
    ASSERT_TRUE(k) << k.error;
    EXPECT_EQ(k.value->state, protocol::State::Exited);
    ASSERT_TRUE(k.value->exit);
    EXPECT_EQ(k.value->exit->reason, protocol::ExitReason::Stopped);

    const auto signalled = request(FrameType::Kill, protocol::encode(protocol::KillRequest{b, SIGTERM}));
    ASSERT_EQ(signalled.size(), 1u);
    EXPECT_EQ(signalled[0].type, FrameType::Killed);
    const auto w = wait_exit(b);
    ASSERT_TRUE(w && w->exit);
    EXPECT_EQ(w->exit->kind, protocol::ExitStatus::Kind::Signaled);
    EXPECT_EQ(w->exit->signal, SIGTERM);
    EXPECT_EQ(error_of(request(FrameType::Kill, protocol::encode(protocol::KillRequest{b, SIGTERM}))), "session_ended");
}

TEST_F(Sessions, SendWritesInputWithoutAttaching) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string id = start_detached({"cat"});
    ASSERT_FALSE(id.empty());
    const std::string input = "sent without attaching\n";
    const auto payload = protocol::encode_send(id, std::span(reinterpret_cast<const std::uint8_t*>(input.data()), input.size()));
    const auto sent = request(FrameType::Send, std::string(payload.begin(), payload.end()));
    ASSERT_EQ(sent.size(), 1u);
    ASSERT_EQ(sent[0].type, FrameType::Sent);
    EXPECT_EQ(protocol::decode_sent(sent[0].text()).value->bytes, input.size());
    protocol::WaitRequest w;
    w.id = id;
    w.what = protocol::WaitRequest::For::Text;
    w.pattern = "sent without attaching\\r\\nsent without attaching";  // the echo, then cat's copy
    const auto r = wait(w);
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->matched);
}

TEST_F(Sessions, AnUnknownIdIsNoSuchSession) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string nobody(32, 'a');
    EXPECT_EQ(error_of(request(FrameType::Read, protocol::encode(protocol::ReadRequest{nobody, {}, 1}))), "no_such_session");
    auto c = attach(nobody, true);
    ASSERT_NE(c, nullptr);
    const auto e = c->expect_error(kReply);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code, protocol::ErrorCode::NoSuchSession);
}

// The slow reader: an observer that stops reading loses the oldest bytes, is told so, and
// never slows the program, which writes far more than the log holds meanwhile.
TEST_F(Sessions, ASlowObserverNeverSlowsTheProgramAndIsToldWhatItLost) {
    DaemonConfig cfg = config();
    cfg.output_buffer_bytes = 65536;
    cfg.output_log_bytes = 131072;
    cfg.socket_buffer_bytes = 4096;
    ASSERT_NE(start_daemon(cfg), nullptr);
    // The program waits for a line, so that the observer is attached before it writes.
    const std::string id = start_detached({"sh", "-c", "read go; seq 1 1000000; sleep 60"});
    ASSERT_FALSE(id.empty());
    auto o = attach(id, true, false, {protocol::LogPosition::Kind::Start, 0});
    ASSERT_NE(o, nullptr);
    const int small = 4096;
    ::setsockopt(o->fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    const auto attached = expect_attached(*o);
    ASSERT_TRUE(attached);
    EXPECT_EQ(attached->offset, 0u);
    const std::string go = "go\n";
    const auto payload = protocol::encode_send(id, std::span(reinterpret_cast<const std::uint8_t*>(go.data()), go.size()));
    ASSERT_EQ(request(FrameType::Send, std::string(payload.begin(), payload.end())).size(), 1u);
    // The observer reads nothing while the program finishes: the quiet is the event.
    protocol::WaitRequest w;
    w.id = id;
    w.what = protocol::WaitRequest::For::Quiet;
    w.quiet_ms = 500;
    w.timeout_ms = 60000;
    const auto r = wait(w);
    ASSERT_TRUE(r);
    ASSERT_TRUE(r->matched) << r->reason;
    const std::uint64_t echo = 4;  // "go\r\n", the terminal's echo of the line
    EXPECT_EQ(r->offset, echo + seq_output(1000000).size()) << "the program wrote everything, unslowed";
    // Now the observer reads: some OUTPUT, a DROPPED, and the rest, all in order.
    std::uint64_t at = attached->offset;
    bool dropped = false;
    while (at < r->offset) {
        auto in = o->next(kReply);
        ASSERT_EQ(in.kind, Incoming::Kind::Frame) << in.describe() << " at " << at;
        if (in.frame.type == FrameType::Dropped) {
            const auto d = protocol::decode_dropped(in.frame.text());
            ASSERT_TRUE(d);
            EXPECT_EQ(d.value->lost, d.value->offset - at);
            at = d.value->offset;
            dropped = true;
            continue;
        }
        ASSERT_EQ(in.frame.type, FrameType::Output);
        at += in.frame.payload.size();
    }
    EXPECT_TRUE(dropped);
    EXPECT_EQ(at, r->offset);
}

TEST_F(Sessions, AProcessInsideASessionCannotAttachToAnother) {
    ASSERT_NE(start_daemon(), nullptr);
    const std::string target = start_detached({"cat"});
    ASSERT_FALSE(target.empty());
    // From inside a second session, speak the protocol as a client would (Python, standard
    // library), and print what the daemon answers.
    // A peer inside a session is refused at accept, before it says anything: read first,
    // and send the ATTACH only if nothing came (a daemon that let it through then answers it).
    const std::string script =
        "import json,socket,struct,sys\n"
        "s=socket.socket(socket.AF_UNIX,socket.SOCK_STREAM)\n"
        "s.connect(sys.argv[1])\n"
        "s.settimeout(2)\n"
        "try:\n"
        "    d=s.recv(4096)\n"
        "except socket.timeout:\n"
        "    p=json.dumps({'id':sys.argv[2],'role':'controller'}).encode()\n"
        "    s.sendall(b'PV'+bytes([2,12])+struct.pack('>I',len(p))+p)\n"
        "    s.settimeout(10)\n"
        "    d=s.recv(4096)\n"
        "print('answer', d[3], d[8:].decode())\n";
    const std::string inside = start_detached({"python3", "-c", script, socket_, target});
    ASSERT_FALSE(inside.empty());
    ASSERT_TRUE(wait_exit(inside));
    const auto r = read_log(inside);
    ASSERT_TRUE(r);
    EXPECT_NE(r->bytes.find("answer 9 "), std::string::npos) << r->bytes;  // ERROR
    EXPECT_NE(r->bytes.find("not_allowed"), std::string::npos) << r->bytes;
    // The target never had a second client.
    for (const auto& s : list()) {
        if (s.id == target) {
            EXPECT_EQ(s.clients, 0u);
        }
    }
}

}  // namespace
}  // namespace ptyvisor::itest
