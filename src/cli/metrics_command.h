// `ptyvisor metrics`: the daemon's STATUS report (docs/protocol.md 5.7) as metrics, for
// Prometheus (docs/operations.md, "Metrics", lists every family).
//
// No frame of its own: it sends STATUS_REQUEST (root only, as `ptyvisor status`) and renders
// the reply. Every member of the reply that an older daemon leaves out is left out of the
// metrics too, never shown as zero.
//
// Two dialects of one set of families, because the two readers disagree on counters:
//  - OpenMetrics 1.0 (stdout; the command-line contract): a counter family `x` has samples
//    `x_total`, families carry `# UNIT`, and the text ends with `# EOF`.
//  - the Prometheus text format 0.0.4 (--textfile): what node_exporter's textfile collector
//    and `promtool check metrics` parse. There a counter's # TYPE and # HELP name the sample
//    (`x_total`); OpenMetrics' `x` would make them a family with no samples, and `x_total` an
//    untyped one without help. (Neither has OpenMetrics' info type: the build's facts are a
//    gauge, ptyvisor_build_info, as node_exporter's are.)
#pragma once

#include <optional>
#include <string>

#include "protocol/payloads.h"

namespace ptyvisor::cli {

enum class MetricsFormat { OpenMetrics, PrometheusText };

// The metrics in `report`, in `format`. Pure: same report, same text. Label values are
// escaped (backslash, double quote, newline); a session without an id (a version 1 daemon)
// or with an id already seen has no per-session series.
std::string render_metrics(const protocol::StatusReply& report, MetricsFormat format);

struct MetricsOptions {
    std::optional<std::string> socket;    // --socket
    std::optional<std::string> textfile;  // --textfile: write there instead of stdout
};

// Writes `text` to `path` atomically: a temporary file in the same directory (named so that
// node_exporter, which reads only *.prom, never reads it half-written), fsync, mode 0644,
// rename over `path`, fsync of the directory. False with `why`; no temporary file is left.
bool write_file_atomically(const std::string& path, const std::string& text, std::string& why);

// Exit status 0, or 255 with the reason on stderr.
int metrics_command(const MetricsOptions& options);

}  // namespace ptyvisor::cli
