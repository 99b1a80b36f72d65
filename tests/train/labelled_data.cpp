// Implementation of the classification tests' helpers (labelled_data.h).
#include "train/labelled_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

namespace deepshard::testing {

std::string make_labelled_data(const TempDir& dir) {
  const std::string text = read_file(source_dir() + "/tests/train/data/corpus.txt");
  std::filesystem::create_directories(dir.file("docs"));
  const std::vector<std::string> names = {"ca01", "ca02", "ca03", "ca04", "ca05",
                                          "cb01", "cc01", "cd01", "ce01", "ce02"};
  const size_t chunk = text.size() / names.size();
  for (size_t i = 0; i < names.size(); ++i)
    write_file(dir.file("docs/" + names[i]), text.substr(i * chunk, chunk));
  auto r = run_deepshard({"prepare-data", dir.file("docs"), "-o", dir.file("genre.bin"), "--labels",
                          "brown-genre", "--passage-tokens", "48", "--valid-fraction", "0.2"},
                         60);
  EXPECT_EQ(r.exit_status, 0) << r.output;
  return dir.file("genre.bin");
}

std::string classification_section(const TempDir& dir, const nlohmann::json& more) {
  nlohmann::json j = {{"model", {{"arch", "bert"}, {"intermediate_size", 128}}},
                      {"data", {{"valid", dir.file("genre.valid.bin")}}},
                      {"task", {{"type", "classification"}}}};
  if (!more.is_null()) j.merge_patch(more);  // a null patch would replace the whole document
  return j.dump();
}

}  // namespace deepshard::testing
