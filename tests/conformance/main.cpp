// Runner of the conformance suite: every case runs the same body on std::vector<T> and DynArray<T>.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
