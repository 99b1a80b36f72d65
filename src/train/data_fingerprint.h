// The fingerprint of a token file (its size and CRC32), saved in every checkpoint's client state
// and compared on resume: a data file changed between save and resume would silently feed the
// resumed run other batches than the interrupted one saw.
#pragma once

#include <string>

namespace deepshard::train {

// "size <bytes> crc32 <8 hex digits>"; throws IoError naming the file when it cannot be read.
std::string data_fingerprint(const std::string& path);

}  // namespace deepshard::train
