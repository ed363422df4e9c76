// SPDX-License-Identifier: MIT
#include "report/site_kinds.hpp"

namespace gpumemprof::report {

std::vector<const DeviceSummary::SiteKind*> site_kinds(const ReportInput& in, const ResolvedReport& r) {
    std::vector<const DeviceSummary::SiteKind*> out(r.sites.size(), nullptr);
    for (const DeviceSummary& d : in.devices)
        for (const DeviceSummary::SiteKind& k : d.site_kinds)
            if (const std::ptrdiff_t i = r.site_by_id(k.site); i >= 0 && !out[static_cast<std::size_t>(i)])
                out[static_cast<std::size_t>(i)] = &k;
    return out;
}

} // namespace gpumemprof::report
