// Turns a code address into 'function [object]' for call sites. Off the hot path: flush only.
#pragma once

#include <string>

namespace sonde {

std::string symbolize(const void* address);

}  // namespace sonde
