// The Brown corpus's genres (corpus.h): the 15 categories its file names carry in their second
// letter (ca01 is press reportage, cr09 humour), named as NLTK names them.
#include <array>
#include <cctype>
#include <filesystem>

#include "data/corpus.h"
#include "deepshard/util/error.h"

namespace deepshard::data {
namespace {

constexpr std::array<char, 15> kLetters = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h',
                                           'j', 'k', 'l', 'm', 'n', 'p', 'r'};

}  // namespace

const std::vector<std::string>& brown_genres() {
  static const std::vector<std::string> names = {
      "news",    "editorial",       "reviews",    "religion", "hobbies",
      "lore",    "belles_lettres",  "government", "learned",  "fiction",
      "mystery", "science_fiction", "adventure",  "romance",  "humor"};
  return names;
}

int64_t brown_genre_of(const std::string& path) {
  const std::string name = std::filesystem::path(path).filename().string();
  const bool shaped = name.size() == 4 && name[0] == 'c' && std::isdigit(name[2]) != 0 &&
                      std::isdigit(name[3]) != 0;
  for (size_t i = 0; shaped && i < kLetters.size(); ++i) {
    if (name[1] == kLetters[i]) return static_cast<int64_t>(i);
  }
  throw IoError(path +
                ": not a Brown corpus text name (c<genre letter a-r, no i, o, q><2 digits>, as "
                "ca01 or cr09): its genre is unknown");
}

}  // namespace deepshard::data
