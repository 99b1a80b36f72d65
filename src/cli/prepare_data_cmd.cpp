// `deepshard prepare-data TEXT... -o FILE [--valid-output FILE] [--valid-fraction F]
// [--tokenizer byte|gpt2] [--bpe-dir DIR] [--labels brown-genre] [--passage-tokens N]`: text files
// (Brown corpus files are detected and their tags stripped) into training and validation token
// files, and with --labels the label files of a classification task; see docs/data.md.
#include <cstdio>
#include <string>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "data/corpus.h"
#include "deepshard/util/error.h"
#include "util/strings.h"

namespace deepshard::cli {
namespace {

constexpr const char* kHelp =
    R"(usage: deepshard prepare-data TEXT... -o FILE [--valid-output FILE] [--valid-fraction F]
                              [--tokenizer byte|gpt2] [--bpe-dir DIR]
                              [--labels brown-genre] [--passage-tokens N]

Turns text into token files for `deepshard train`: byte-level (vocabulary 256, the default) or
GPT-2's BPE (vocabulary 50257; train with model.vocab_size 50257).

  TEXT...               text files or directories (every regular file inside, sorted);
                        Brown corpus files ("word/tag ...") are turned back into plain prose
  -o, --output FILE     training token file
  --valid-output FILE   validation token file (default: FILE without .bin, plus .valid.bin)
  --valid-fraction F    the last fraction F of the documents is the validation split
                        (default 0.05; with a single document its tokens are split instead)
  --tokenizer NAME      byte (default) or gpt2
  --bpe-dir DIR         folder with GPT-2's encoder.json and vocab.bpe
                        (default: third_party/gpt2_bpe of the source tree)
  --labels brown-genre  also write label files (FILE without .bin, plus .labels; the same
                        beside the validation file): each document cut into passages labelled
                        with its Brown genre, read from its name (ca01 ... cr09)
  --passage-tokens N    tokens per passage with --labels (default 256; at least the
                        model.block_size of the classification run)
  -h, --help            this help
)";

}  // namespace

int run_prepare_data_command(const Args& args) {
  const std::vector<std::string> kOptions = {
      "--output",  "--valid-output", "--valid-fraction", "--tokenizer",
      "--bpe-dir", "--labels",       "--passage-tokens", "--help"};
  data::PrepareOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (arg.empty() || arg[0] != '-' || arg == "-") {
      options.inputs.push_back(arg);
      continue;
    }
    if (arg == "--") {  // everything after is an input
      options.inputs.insert(options.inputs.end(), args.begin() + i + 1, args.end());
      break;
    }
    // --name=value or --name value
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    auto value = [&]() -> std::string {
      if (eq != std::string::npos) return arg.substr(eq + 1);
      DS_CHECK(i + 1 < args.size(), UsageError, name, " needs a value");
      return args[++i];
    };
    if (name == "-o" || name == "--output") {
      options.output = value();
    } else if (name == "--valid-output") {
      options.valid_output = value();
    } else if (name == "--tokenizer") {
      options.tokenizer = value();
    } else if (name == "--bpe-dir") {
      options.bpe_dir = value();
    } else if (name == "--labels") {
      options.labels = value();
    } else if (name == "--passage-tokens") {
      options.passage_tokens = parse_int(name, value());
      DS_CHECK(options.passage_tokens >= 1, UsageError, "--passage-tokens must be at least 1, got ",
               options.passage_tokens);
    } else if (name == "--valid-fraction") {
      options.valid_fraction = parse_double(name, value());
      DS_CHECK(options.valid_fraction > 0 && options.valid_fraction < 1, UsageError,
               "--valid-fraction must be in (0, 1), got ", options.valid_fraction);
    } else {
      std::string guess = strings::closest_match(name, kOptions);
      throw UsageError("unknown option '" + name + "'" +
                       (guess.empty() ? "" : " (did you mean " + guess + "?)"));
    }
  }
  DS_CHECK(!options.inputs.empty(), UsageError, "no input text files");
  DS_CHECK(!options.output.empty(), UsageError, "no output file (-o FILE)");

  data::PrepareSummary s = data::prepare_data(options);
  std::printf("documents: %lld (%lld train, %lld valid)\n", static_cast<long long>(s.documents),
              static_cast<long long>(s.train_documents), static_cast<long long>(s.valid_documents));
  std::printf("train: %s: %lld tokens\n", s.train_path.c_str(),
              static_cast<long long>(s.train_tokens));
  std::printf("valid: %s: %lld tokens\n", s.valid_path.c_str(),
              static_cast<long long>(s.valid_tokens));
  if (!options.labels.empty()) {
    std::printf("labels: %s, %zu classes, passages of %lld tokens\n", options.labels.c_str(),
                data::brown_genres().size(), static_cast<long long>(options.passage_tokens));
    std::printf("train labels: %s: %lld passages\n", s.train_labels_path.c_str(),
                static_cast<long long>(s.train_passages));
    std::printf("valid labels: %s: %lld passages\n", s.valid_labels_path.c_str(),
                static_cast<long long>(s.valid_passages));
  }
  return 0;
}

}  // namespace deepshard::cli
