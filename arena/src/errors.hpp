// Message pieces every arena file may use (errors.cpp). Bottom layer: no other file of arena/src.
#pragma once

#include <string>

namespace reservoir::detail {

// "0x7f12..." for messages ("%p" prints no 0x on Windows).
std::string hex_address(const void* p);

}  // namespace reservoir::detail
