#include "protocol/control_payloads.h"

#include <nlohmann/json.hpp>

#include "protocol/json_members.h"

namespace ptyvisor::protocol {

namespace {

using nlohmann::json;
using json_members::dump;

struct Reader : json_members::MemberReader {
    bool id(std::string& out) {
        if (!str("id", out, kSessionIdLength)) return false;
        if (!is_session_id(out)) return fail("id", "must be 32 lowercase hex digits");
        return true;
    }
};

template <class T, class F>
Decoded<T> decode_with(std::string_view text, F read) {
    std::string why;
    const auto o = json_members::parse_object(text, 0, why);
    if (!o) return Decoded<T>::fail(why);
    T v{};
    Reader r{{*o, why}};
    if (!read(r, v)) return Decoded<T>::fail(why);
    return {std::move(v), {}};
}

}  // namespace

std::string_view to_string(ControllerNotice::Kind kind) {
    return kind == ControllerNotice::Kind::Supervisor ? "supervisor" : "agent";
}

std::string encode(const ControlRequest& v) { return dump({{"take", v.take}}); }

std::string encode(const ControllerNotice& v) {
    json j{{"controller", to_string(v.controller)}, {"since", v.since}, {"you", v.you}};
    if (v.uid) j["uid"] = *v.uid;
    return dump(j);
}

std::string encode(const RefusedNotice& v) {
    return dump({{"code", v.code}, {"message", v.message}, {"what", v.what}, {"count", v.count}});
}

std::string encode(const RecordingRequest& v) {
    return dump({{"id", v.id}, {"offset", v.offset}, {"max_bytes", v.max_bytes}});
}

std::string encode(const CastReply& v) {
    return dump({{"id", v.id}, {"offset", v.offset}, {"length", v.length}, {"size", v.size}});
}

Decoded<ControlRequest> decode_control(std::string_view text) {
    return decode_with<ControlRequest>(text, [](Reader& r, ControlRequest& v) { return r.boolean("take", v.take); });
}

Decoded<ControllerNotice> decode_controller(std::string_view text) {
    return decode_with<ControllerNotice>(text, [](Reader& r, ControllerNotice& v) {
        std::string kind;
        if (!r.str("controller", kind, 16)) return false;
        if (kind == "agent") v.controller = ControllerNotice::Kind::Agent;
        else if (kind == "supervisor") v.controller = ControllerNotice::Kind::Supervisor;
        else return r.fail("controller", "is unknown");
        std::int64_t uid = 0;
        if (r.find("uid", false)) {
            if (!r.i64("uid", uid)) return false;
            v.uid = uid;
        }
        return r.i64("since", v.since) && r.boolean("you", v.you);
    });
}

Decoded<RefusedNotice> decode_refused(std::string_view text) {
    return decode_with<RefusedNotice>(text, [](Reader& r, RefusedNotice& v) {
        return r.str("code", v.code, 64) && r.str("message", v.message, 4096) && r.str("what", v.what, 16) &&
               r.u64("count", v.count, UINT64_MAX);
    });
}

Decoded<RecordingRequest> decode_recording(std::string_view text) {
    return decode_with<RecordingRequest>(text, [](Reader& r, RecordingRequest& v) {
        if (!r.id(v.id) || !r.u64("offset", v.offset, UINT64_MAX, false) ||
            !r.u64("max_bytes", v.max_bytes, kMaxRecordingChunk, false))
            return false;
        if (v.max_bytes == 0) return r.fail("max_bytes", "must be at least 1");
        return true;
    });
}

Decoded<CastReply> decode_cast(std::string_view text) {
    return decode_with<CastReply>(text, [](Reader& r, CastReply& v) {
        return r.id(v.id) && r.u64("offset", v.offset, UINT64_MAX) && r.u64("length", v.length, kMaxRecordingChunk) &&
               r.u64("size", v.size, UINT64_MAX);
    });
}

}  // namespace ptyvisor::protocol
