// Implementation of readable_number.h.
#include "monitor/readable_number.h"

#include <cmath>
#include <cstdio>

namespace deepshard::monitor {
namespace {

std::string with_separators(long long whole) {
  std::string digits = std::to_string(whole < 0 ? -whole : whole);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return whole < 0 ? "-" + out : out;
}

}  // namespace

std::string readable_number(double value) {
  if (!std::isfinite(value)) return std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf";
  if (std::fabs(value) >= 1000.0) return with_separators(std::llround(value));
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4g", value);
  return buffer;
}

std::string readable_share(double share) {
  if (!std::isfinite(share)) return readable_number(share);
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f %%", share * 100.0);
  return buffer;
}

}  // namespace deepshard::monitor
