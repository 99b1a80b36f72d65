// Implementation of the mutator (see mutator.h).
#include "fuzz/mutator.h"

#include <cstdlib>
#include <cstring>

namespace deepshard::fuzz {

int fuzz_cases(int fallback) {
  const char* env = std::getenv("DEEPSHARD_FUZZ_CASES");
  return env != nullptr ? std::atoi(env) : fallback;
}

uint64_t fuzz_seed() {
  const char* env = std::getenv("DEEPSHARD_FUZZ_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 1;
}

std::string mutate(const std::string& input, std::mt19937_64& rng) {
  std::string s = input;
  auto pick = [&](size_t n) { return n == 0 ? size_t(0) : size_t(rng() % n); };
  const int count = 1 + int(rng() % 4);
  for (int m = 0; m < count; ++m) {
    switch (rng() % 7) {
      case 0:  // flip a bit
        if (!s.empty()) s[pick(s.size())] ^= char(1 << (rng() % 8));
        break;
      case 1: {  // a boundary byte
        static const unsigned char kBytes[] = {0, 0xff, 0x7f, 0x80, '"', '{', '[', ',', ':', '0'};
        if (!s.empty()) s[pick(s.size())] = char(kBytes[rng() % sizeof(kBytes)]);
        break;
      }
      case 2: {  // delete a run
        if (s.empty()) break;
        const size_t at = pick(s.size());
        s.erase(at, 1 + pick(std::min<size_t>(64, s.size() - at)));
        break;
      }
      case 3: {  // duplicate a run
        if (s.empty()) break;
        const size_t at = pick(s.size());
        s.insert(at, s.substr(at, 1 + pick(64)));
        break;
      }
      case 4:  // truncate
        s.resize(pick(s.size() + 1));
        break;
      case 5: {  // an 8-byte field: huge, negative, or off by a little
        if (s.size() < 8) break;
        static const uint64_t kValues[] = {~0ULL, 1ULL << 63, 1ULL << 40, 0, 0xffffffffULL, 7};
        const size_t at = pick(s.size() - 7);
        uint64_t v = kValues[rng() % 6];
        std::memcpy(&s[at], &v, 8);
        break;
      }
      default: {  // random bytes
        const size_t at = pick(s.size() + 1);
        std::string junk(1 + pick(16), '\0');
        for (char& c : junk) c = char(rng());
        s.insert(at, junk);
      }
    }
  }
  return s;
}

}  // namespace deepshard::fuzz
