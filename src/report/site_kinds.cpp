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

std::vector<std::string> site_kind_labels(const ReportInput& in,
                                          const std::vector<const DeviceSummary::SiteKind*>& kinds,
                                          const std::vector<std::string>& owners) {
    std::vector<std::string> out(kinds.size());
    const bool attached = in.torch_attached();
    for (std::size_t i = 0; i < kinds.size(); ++i) {
        if (kinds[i])
            out[i] = kinds[i]->kind;
        else if (attached)
            out[i] =
                i < owners.size() && !owners[i].empty() ? owners[i] + "'s own memory" : "outside PyTorch's allocator";
    }
    return out;
}

} // namespace gpumemprof::report
