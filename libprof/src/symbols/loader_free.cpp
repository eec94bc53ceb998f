#include "symbols/loader_free.hpp"

namespace sonde {
namespace {
thread_local bool t_loader_free = false;
}  // namespace

LoaderFree::LoaderFree() : outer_(t_loader_free) { t_loader_free = true; }
LoaderFree::~LoaderFree() { t_loader_free = outer_; }

bool loader_free() { return t_loader_free; }

}  // namespace sonde
