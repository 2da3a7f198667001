// Connection: SNAPSHOT (protocol version 3), answered by the screen broker.
#include "protocol/screen_payloads.h"
#include "server/connection.h"
#include "server/server.h"

namespace ptyvisor::server {

using protocol::ErrorCode;
using protocol::FrameType;

void Connection::handle_snapshot(const protocol::Frame& frame) {
    const auto request = protocol::decode_snapshot(frame.text());
    if (!request) return send_error(ErrorCode::BadFrame, "SNAPSHOT: " + request.error);
    // Whoever may READ a session's output may see its screen: it is made of that output.
    Session* session = find_session(request.value->id, Request::Read);
    if (!session) return;
    enter(Stage::Request);
    snapshot_ticket_ = server_.screens().snapshot(*session, *request.value,
                                                  guarded("snapshot", [this](bool ok, std::string text) {
                                                      snapshot_ticket_ = 0;
                                                      if (!ok) return send_error(ErrorCode::Internal, text);
                                                      if (!reserve_reply(text.size()))
                                                          return send_error(ErrorCode::Busy,
                                                                            "too many replies are waiting for their "
                                                                            "clients to read them; try again");
                                                      reply(FrameType::Screen, text);
                                                  }));
    update_socket_events();
}

}  // namespace ptyvisor::server
