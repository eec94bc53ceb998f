#include "store/peaks.hpp"

#include <fstream>
#include <sstream>

namespace sonde {

std::vector<Peak> read_peaks(const std::string& path, int& bad_lines) {
  bad_lines = 0;
  std::vector<Peak> peaks;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream fields(line);
    Peak p;
    std::string extra;
    if (!(fields >> p.resource >> p.threads >> p.value) || p.threads < 0 || !(p.value > 0)) {
      ++bad_lines;
      continue;
    }
    if (!(fields >> p.source)) p.source = "manual";
    peaks.push_back(std::move(p));
  }
  return peaks;
}

}  // namespace sonde
