// SPDX-License-Identifier: MIT
// report/user_code: which frames are the user's own code, and the line the reports lead with.
#include "report/user_code.hpp"

#include <catch2/catch.hpp>

using namespace gpumemprof::report;

namespace {

SymbolFrame py(const std::string& file, int line, const std::string& function) {
    SymbolFrame f;
    f.python = true;
    f.file = file;
    f.line = line;
    f.function = function;
    return f;
}

SymbolFrame native(const std::string& module, const std::string& function) {
    SymbolFrame f;
    f.module = module;
    f.function = function;
    return f;
}

// A module Inductor wrote (seen on the H100 under attach_check's TORCHINDUCTOR_CACHE_DIR).
const std::string kInductor =
    "/tmp/attach-dcv2a99n/inductor/cb/ccbrvo4qrndqu4lykywjxkskecketcromuwjdewrfcn6siqyqiks.py";

} // namespace

TEST_CASE("user code: a script's frames, not the libraries' or the interpreter's", "[user_code]") {
    const UserCode user("/usr/bin/python3.12", "");
    CHECK(user.is_user(py("/work/train.py", 57, "forward")));
    CHECK_FALSE(
        user.is_user(py("/opt/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", 1790, "_call_impl")));
    CHECK_FALSE(user.is_user(py("/usr/lib/python3/dist-packages/numpy/core/numeric.py", 10, "zeros")));
    CHECK_FALSE(user.is_user(py("/usr/lib/python3.12/threading.py", 1010, "run")));
    CHECK_FALSE(user.is_user(py("<frozen importlib._bootstrap>", 488, "_call_with_frames_removed")));
    CHECK_FALSE(user.is_user(py("<eval_with_key>.3", 12, "forward")));
    // A Python program's native frames are the interpreter's or libraries': never the user's.
    CHECK_FALSE(user.is_user(native("python3.12", "_PyEval_EvalFrameDefault")));
    CHECK_FALSE(user.is_user(native("libtorch_cpu.so", "at::native::add")));
    // A native program's own code is its executable's.
    const UserCode app("/opt/app/bin/solver", "");
    CHECK(app.is_user(native("solver", "step(int)")));
    CHECK_FALSE(app.is_user(native("libcublas.so.13", "cublasSgemm_v2")));
}

TEST_CASE("user code: torch.compile's generated modules are not the user's; the line that ran them is", "[user_code]") {
    // On the H100, compile_reduce_overhead's top sites were led by Inductor's generated module
    // (`.../inductor/cb/ccbrvo....py:104:partition_0   <- your code`), not by the script's line.
    const UserCode user("/usr/bin/python3.12", "");
    CHECK_FALSE(user.is_user(py(kInductor, 104, "partition_0")));
    CHECK_FALSE(user.is_user(py("/tmp/torchinductor_root/xy/anything.py", 3, "call")));
    // The shape alone decides outside the default cache: the subfolder must be the name's 2nd
    // and 3rd characters, the name "c" and 51 base32 characters.
    CHECK(user.is_user(
        py("/tmp/attach-dcv2a99n/inductor/zz/ccbrvo4qrndqu4lykywjxkskecketcromuwjdewrfcn6siqyqiks.py", 1, "f")));
    CHECK(user.is_user(
        py("/tmp/attach-dcv2a99n/inductor/cb/ccbrvo4qrndqu4lykywjxkskecketcromuwjdewrfcn6siqyqik.py", 1, "f")));
    CHECK(user.is_user(
        py("/tmp/attach-dcv2a99n/inductor/cb/ccbrvo4qrndqu4lykywjxkskecketcromuwjdewrfcn6siqyqi1s.py", 1, "f")));
    CHECK(user.is_user(py("/work/cb/ccbrvo4qrndqu4lykywjxkskecketcromuwjdewrfcn6siqyqiks.txt", 1, "f")));
    CHECK(user.is_user(py("cb/ccbrvo4qrndqu4lykywjxkskecketcromuwjdewrfcn6siqyqiks.py", 1, "f")));

    // Root first: the script, dynamo's frames, the generated module, then the allocation.
    const std::vector<SymbolFrame> stack = {
        py("/work/compiled.py", 30, "<module>"),
        py("/work/compiled.py", 24, "main"),
        py("/opt/venv/lib/python3.12/site-packages/torch/_dynamo/eval_frame.py", 414, "__call__"),
        py(kInductor, 104, "partition_0"),
        native("libcublas.so.13", "cublasCreate_v2"),
    };
    CHECK(user.innermost_user(stack) == 1);
    CHECK(user.user_line(stack) == "compiled.py:24:main");

    // GPUMEMPROF_USER_CODE says otherwise: its globs decide alone.
    const UserCode globbed("/usr/bin/python3.12", " */inductor/*, /nowhere/*");
    CHECK(globbed.user_line(stack) == "ccbrvo4qrndqu4lykywjxkskecketcromuwjdewrfcn6siqyqiks.py:104:partition_0");
    CHECK_FALSE(globbed.is_user(py("/work/compiled.py", 24, "main")));
}
