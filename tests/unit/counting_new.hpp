// SPDX-License-Identifier: MIT
// A test executable that links counting_new.cpp has every global operator new and delete
// replaced (plain, array, sized, aligned, nothrow; all of them over malloc/free, so each new pairs
// with our delete, also under ASan). The throwing forms - what the code under test uses - can be
// counted and made to fail; the nothrow forms are only passed through (Catch allocates with them
// while it reports, and must keep working).
#pragma once

namespace counting_new {

/// Zeroes the count and counts every throwing operator new from now on.
void start_counting();
/// Stops counting; returns how many throwing operator new calls there were since start_counting().
long stop_counting();

/// n >= 0: the throwing operator new after n more successful ones throws std::bad_alloc (once);
/// n < 0: none fails.
void fail_after(long n);
/// How many operator new calls fail_after made throw, since the program began.
long thrown();

/// fail_after(n) for a scope.
struct FailAfter {
    explicit FailAfter(long n) { fail_after(n); }
    ~FailAfter() { fail_after(-1); }
    FailAfter(const FailAfter&) = delete;
    FailAfter& operator=(const FailAfter&) = delete;
};

} // namespace counting_new
