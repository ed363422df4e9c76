// SPDX-License-Identifier: MIT
#include "report/frame_table.hpp"

namespace gpumemprof::report {

std::uint32_t FrameTable::add(const SymbolFrame& f) {
    std::string key;
    key.reserve(f.function.size() + f.file.size() + f.module.size() + 32);
    key += f.function;
    key += '\0';
    key += f.file;
    key += '\0';
    key += std::to_string(f.line);
    key += '\0';
    key += f.module;
    key += '\0';
    key += std::to_string(f.offset);
    key += f.python ? "\1" : "";
    const auto [it, fresh] = by_content_.emplace(std::move(key), static_cast<std::uint32_t>(frames_.size()));
    if (!fresh)
        return it->second;
    std::string label = frame_label(f);
    const auto [lit, new_label] = by_label_.emplace(label, static_cast<std::uint32_t>(labels_.size()));
    if (new_label)
        labels_.push_back(std::move(label));
    frames_.push_back(f);
    label_of_.push_back(lit->second);
    return it->second;
}

} // namespace gpumemprof::report
