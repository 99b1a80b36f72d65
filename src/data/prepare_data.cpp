// prepare_data: input files (directories expanded) become documents; valid_fraction of them (at
// least one, leaving at least one), spread evenly over the sorted list so that a corpus sorted by
// genre or source validates on all of them, is the validation split; each split's documents are
// joined by a newline, tokenized (byte-level or GPT-2 BPE) and written as a token file; with
// labels, each document's passages and class go to a label file beside it.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "data/corpus.h"
#include "data/label_file.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "deepshard/util/error.h"

namespace deepshard::data {
namespace {

namespace fs = std::filesystem;

// Regular files under `dir` (recursively, hidden names skipped), sorted by path.
std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  auto it = fs::recursive_directory_iterator(dir, ec);
  DS_CHECK(!ec, IoError, dir, ": cannot list the directory: ", ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    DS_CHECK(!ec, IoError, dir, ": cannot list the directory: ", ec.message());
    if (it->path().filename().string().starts_with(".")) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  DS_CHECK(!files.empty(), IoError, dir, ": no files inside");
  return files;
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (fs::is_directory(input, ec)) {
      std::vector<std::string> inside = files_in(input);
      files.insert(files.end(), inside.begin(), inside.end());
    } else {
      files.push_back(input);  // read_text_file reports a missing file
    }
  }
  return files;
}

// Whether document `i` of `n` is one of the `n_valid` validation documents: the i where
// floor(i * n_valid / n) steps up, i.e. every (n / n_valid)-th document, the last one included.
bool is_validation(int64_t i, int64_t n, int64_t n_valid) {
  return (i + 1) * n_valid / n > i * n_valid / n;
}

std::string join_documents(const std::vector<std::string>& docs) {
  std::string text;
  for (size_t i = 0; i < docs.size(); ++i) text += (i > 0 ? "\n" : "") + docs[i];
  return text;
}

// The size of the validation part of `n` items: round(fraction * n), kept within [1, n - 1].
int64_t valid_count(int64_t n, double fraction) {
  auto count = static_cast<int64_t>(std::llround(fraction * static_cast<double>(n)));
  return std::clamp<int64_t>(count, 1, n - 1);
}

std::string default_valid_path(const std::string& output) {
  std::string stem = output.ends_with(".bin") ? output.substr(0, output.size() - 4) : output;
  return stem + ".valid.bin";
}

// One split of labelled documents: each tokenized on its own, joined by the newline's tokens,
// cut into passages of `passage_tokens` (the rest of a document shorter than that left out).
struct LabelledSplit {
  std::vector<uint16_t> tokens;
  LabelFile labels;
};

LabelledSplit labelled_split(const Tokenizer& tokenizer, const std::vector<std::string>& docs,
                             const std::vector<std::string>& files,
                             const std::vector<int64_t>& genres, int64_t passage_tokens) {
  LabelledSplit split;
  split.labels.classes = brown_genres();
  const std::vector<uint16_t> newline = tokenizer.encode("\n");
  for (size_t d = 0; d < docs.size(); ++d) {
    if (d > 0) split.tokens.insert(split.tokens.end(), newline.begin(), newline.end());
    const std::vector<uint16_t> doc = tokenizer.encode(docs[d]);
    const auto start = static_cast<int64_t>(split.tokens.size());
    split.tokens.insert(split.tokens.end(), doc.begin(), doc.end());
    const std::string name = fs::path(files[d]).filename().string();
    for (int64_t at = 0; at + passage_tokens <= static_cast<int64_t>(doc.size());
         at += passage_tokens)
      split.labels.passages.push_back({start + at, passage_tokens, genres[d], name});
  }
  split.labels.tokens = static_cast<int64_t>(split.tokens.size());
  return split;
}

}  // namespace

PrepareSummary prepare_data(const PrepareOptions& options) {
  DS_CHECK(!options.inputs.empty(), UsageError, "prepare-data: no input files");
  DS_CHECK(!options.output.empty(), UsageError, "prepare-data: no output file");
  DS_CHECK(options.valid_fraction > 0 && options.valid_fraction < 1, UsageError,
           "prepare-data: the validation fraction must be in (0, 1), got ", options.valid_fraction);
  PrepareSummary summary;
  summary.train_path = options.output;
  summary.valid_path =
      options.valid_output.empty() ? default_valid_path(options.output) : options.valid_output;
  DS_CHECK(fs::weakly_canonical(summary.train_path) != fs::weakly_canonical(summary.valid_path),
           UsageError, "prepare-data: the training and validation outputs are the same file (",
           summary.train_path, ")");

  DS_CHECK(options.labels.empty() || options.labels == "brown-genre", UsageError,
           "prepare-data: unknown labels \"", options.labels, "\" (known: brown-genre)");
  DS_CHECK(options.passage_tokens >= 1, UsageError,
           "prepare-data: the passage length must be at least 1 token, got ",
           options.passage_tokens);
  std::vector<std::string> files = expand_inputs(options.inputs);
  std::vector<int64_t> genres;  // with labels: each document's, checked before reading any
  for (const std::string& file : files) {
    if (!options.labels.empty()) genres.push_back(brown_genre_of(file));
  }
  std::vector<std::string> docs;
  docs.reserve(files.size());
  for (const std::string& file : files) docs.push_back(read_text_file(file));
  const auto n = static_cast<int64_t>(docs.size());
  summary.documents = n;

  const std::unique_ptr<Tokenizer> made = make_tokenizer(options.tokenizer, options.bpe_dir);
  const Tokenizer& tokenizer = *made;
  std::vector<uint16_t> train, valid;
  LabelFile labels[2];  // with labels: the training and validation passages
  if (!options.labels.empty()) {
    // Split by document, as below; a single document cannot be split by document.
    DS_CHECK(n >= 2, UsageError, "prepare-data: --labels needs at least 2 documents (", files[0],
             " alone cannot be split by document)");
    const int64_t n_valid = valid_count(n, options.valid_fraction);
    std::vector<std::string> part_docs[2], part_files[2];
    std::vector<int64_t> part_genres[2];
    for (int64_t i = 0; i < n; ++i) {
      const int side = is_validation(i, n, n_valid) ? 1 : 0;
      part_docs[side].push_back(std::move(docs[size_t(i)]));
      part_files[side].push_back(files[size_t(i)]);
      part_genres[side].push_back(genres[size_t(i)]);
    }
    LabelledSplit parts[2];
    for (int side : {0, 1}) {
      parts[side] = labelled_split(tokenizer, part_docs[side], part_files[side], part_genres[side],
                                   options.passage_tokens);
      DS_CHECK(!parts[side].labels.passages.empty(), IoError, "prepare-data: the ",
               side ? "validation" : "training", " documents hold no passage of ",
               options.passage_tokens, " tokens (--passage-tokens is longer than each of them)");
    }
    for (int side : {0, 1}) labels[side] = std::move(parts[side].labels);
    train = std::move(parts[0].tokens);
    valid = std::move(parts[1].tokens);
    summary.train_documents = n - n_valid;
    summary.valid_documents = n_valid;
  } else if (n >= 2) {
    int64_t n_valid = valid_count(n, options.valid_fraction);
    std::vector<std::string> train_docs, valid_docs;
    for (int64_t i = 0; i < n; ++i)
      (is_validation(i, n, n_valid) ? valid_docs : train_docs).push_back(std::move(docs[i]));
    train = tokenizer.encode(join_documents(train_docs));
    valid = tokenizer.encode(join_documents(valid_docs));
    summary.train_documents = n - n_valid;
    summary.valid_documents = n_valid;
  } else {
    // One document: split its token stream at the fraction instead.
    std::vector<uint16_t> all = tokenizer.encode(docs[0]);
    const auto n_tokens = static_cast<int64_t>(all.size());
    DS_CHECK(n_tokens >= 2, IoError, files[0], ": ", n_tokens,
             " token(s), too short to split into training and validation tokens");
    int64_t n_valid = valid_count(n_tokens, options.valid_fraction);
    train.assign(all.begin(), all.end() - n_valid);
    valid.assign(all.end() - n_valid, all.end());
    summary.train_documents = summary.valid_documents = 1;
  }
  write_token_file(summary.train_path, train, tokenizer.vocab_size());
  write_token_file(summary.valid_path, valid, tokenizer.vocab_size());
  summary.train_tokens = static_cast<int64_t>(train.size());
  summary.valid_tokens = static_cast<int64_t>(valid.size());
  if (!options.labels.empty()) {  // after the token files they index
    summary.train_labels_path = label_path_for(summary.train_path);
    summary.valid_labels_path = label_path_for(summary.valid_path);
    write_label_file(summary.train_labels_path, labels[0]);
    write_label_file(summary.valid_labels_path, labels[1]);
    summary.train_passages = static_cast<int64_t>(labels[0].passages.size());
    summary.valid_passages = static_cast<int64_t>(labels[1].passages.size());
  }
  return summary;
}

}  // namespace deepshard::data
