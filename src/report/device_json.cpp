// SPDX-License-Identifier: MIT
#include "report/device_json.hpp"

namespace gpumemprof::report {

void write_reserved_peak(util::JsonWriter& w, const pool::ReservedPeak& p) {
    w.key("at_reserved_peak").begin_object();
    w.field("reserved", p.reserved);
    w.field("allocated", p.allocated);
    w.field("inactive_split_bytes", p.inactive_split_bytes);
    w.end_object();
}

void write_model(util::JsonWriter& w, const char* key, const DeviceSummary& d) {
    w.key(key).begin_object();
    w.key("memory_stats").raw(stats::to_json(d.model));
    w.field("unserved", d.model_unserved);
    write_reserved_peak(w, d.model_at_reserved_peak);
    w.end_object();
}

} // namespace gpumemprof::report
