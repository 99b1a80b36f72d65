// Seeded mutation of valid inputs for the reader fuzz tests: each case starts from a valid file
// and applies 1-4 mutations (bit flip, byte set to a boundary value, byte run deleted or
// duplicated, truncation, an 8-byte little-endian field overwritten with a huge/negative value,
// random bytes inserted). Deterministic per (seed, case).
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace deepshard::fuzz {

// Cases per reader: $DEEPSHARD_FUZZ_CASES (scripts/fuzz.sh sets a large number), else `fallback`.
int fuzz_cases(int fallback);
// The seed: $DEEPSHARD_FUZZ_SEED, else 1.
uint64_t fuzz_seed();

std::string mutate(const std::string& input, std::mt19937_64& rng);

}  // namespace deepshard::fuzz
