// What the tests may see of arena/src, for our own tests only: this header is not installed, and
// only test targets have its directory on their include path (as pal/testing's seam). The growth
// policy (growth.hpp): the tests plan steps for states no arena of theirs could be put in.
#pragma once

#include "../src/growth.hpp"
