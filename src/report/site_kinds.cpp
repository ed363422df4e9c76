// SPDX-License-Identifier: MIT
#include "report/site_kinds.hpp"

#include "report/owner.hpp"

namespace gpumemprof::report {

std::vector<const DeviceSummary::SiteKind*> site_kinds(const ReportInput& in, const ResolvedReport& r) {
    std::vector<const DeviceSummary::SiteKind*> out(r.sites.size(), nullptr);
    for (const DeviceSummary& d : in.devices)
        for (const DeviceSummary::SiteKind& k : d.site_kinds)
            if (const std::ptrdiff_t i = r.site_by_id(k.site); i >= 0 && !out[static_cast<std::size_t>(i)])
                out[static_cast<std::size_t>(i)] = &k;
    return out;
}

std::vector<std::string> site_kind_labels(const ReportInput& in, const ResolvedReport& r,
                                          const std::vector<const DeviceSummary::SiteKind*>& kinds,
                                          const std::vector<std::string>& owners) {
    std::vector<std::string> out(kinds.size());
    const bool attached = in.torch_attached();
    for (std::size_t i = 0; i < kinds.size(); ++i) {
        if (kinds[i]) {
            out[i] = kinds[i]->kind;
        } else if (attached && i < r.sites.size() && r.sites[i].counters().total_count > 0) {
            // owners[i] is "" for PyTorch's own code outside its device allocator (a tensor's
            // owner is the program); the innermost frame tells.
            std::string owner = i < owners.size() ? owners[i] : std::string();
            if (owner.empty() && owning_library(r, r.sites[i].stack) == "PyTorch")
                owner = "PyTorch";
            // "PyTorch (libtorch_cuda)" -> "PyTorch's own memory (libtorch_cuda)"
            const std::size_t paren = owner.find(" (");
            out[i] = owner.empty() ? std::string("outside PyTorch's allocator")
                                   : owner.substr(0, paren) + "'s own memory" +
                                         (paren == std::string::npos ? std::string() : owner.substr(paren));
        }
    }
    return out;
}

} // namespace gpumemprof::report
