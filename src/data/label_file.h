// Label files: passages of a token file, each a span of consecutive tokens of one document with
// the class of that document, as `deepshard prepare-data --labels` writes them beside the token
// files for a classification task (docs/data.md has the format). Text, one passage a line:
//   deepshard-labels 1
//   tokens <the token file's token count>
//   classes <name> <name> ...
//   <start> <length> <class name> <document>
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepshard::data {

class TokenFile;

struct Passage {
  int64_t start = 0;   // first token in the token file
  int64_t length = 0;  // tokens
  int64_t label = 0;   // index into LabelFile::classes
  std::string document;
};

struct LabelFile {
  std::string path;    // where it was read from (messages)
  int64_t tokens = 0;  // token count of the token file the passages index
  std::vector<std::string> classes;
  std::vector<Passage> passages;
};

// Writes `labels` (its path ignored) to `path` through a temporary file renamed into place.
// Throws IoError naming the file.
void write_label_file(const std::string& path, const LabelFile& labels);

// Reads and checks a label file: the header lines, every passage line (start >= 0, length >= 1,
// start + length within the header's token count, a class of the classes line, a document
// name); at least one passage. Throws IoError "PATH:LINE: problem".
LabelFile read_label_file(const std::string& path);

// Throws IoError naming both files unless `labels` describes `tokens` (the same token count) and
// every passage holds at least `window` tokens (naming the first passage that does not).
void check_labels_match(const LabelFile& labels, const TokenFile& tokens, int64_t window);

// The label file that goes with a token file: PATH without ".bin", plus ".labels".
std::string label_path_for(const std::string& token_path);

}  // namespace deepshard::data
