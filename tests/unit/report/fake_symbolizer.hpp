// SPDX-License-Identifier: MIT
// A Symbolizer with made-up names for formatting tests.
#pragma once

#include "report/symbolizer.hpp"

#include <map>

namespace gpumemprof::test {

class FakeSymbolizer final : public report::Symbolizer {
public:
    std::map<std::uintptr_t, std::vector<report::SymbolFrame>> table;
    int calls = 0;

    void add(std::uintptr_t ip, std::string function, std::string file, int line, std::string module = "app") {
        table[ip].push_back(report::SymbolFrame{std::move(function), std::move(file), line, std::move(module), ip});
    }
    const std::vector<report::SymbolFrame>& resolve(std::uintptr_t ip) override {
        ++calls;
        auto& v = table[ip];
        if (v.empty())
            v.push_back(report::SymbolFrame{"", "", 0, "??", ip});
        return v;
    }
};

} // namespace gpumemprof::test
