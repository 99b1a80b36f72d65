// Shared by the classification tests: a labelled corpus made from the training tests' fixed text
// with `prepare-data --labels brown-genre`, and the run-file section of a classification run of
// the tiny BERT.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "support/test_support.h"

namespace deepshard::testing {

// <dir>/genre.bin, genre.valid.bin and their .labels: tests/train/data/corpus.txt cut into 10
// documents of equal length named as Brown's texts (ca01-ca05, cb01, cc01, cd01, ce01, ce02: 5
// genres), passages of 48 bytes, 2 documents (ca05, ce02: every 5th) for validation, so that the
// training passages' commonest class (news) is that of half the validation passages. Returns the
// training token file.
std::string make_labelled_data(const TempDir& dir);

// The tiny run file's model as a BERT with task.type "classification" and data.valid the
// validation file of make_labelled_data; `more` merged over the whole (JSON text).
std::string classification_section(const TempDir& dir, const nlohmann::json& more = {});

}  // namespace deepshard::testing
