// A named parameter shape's element count (parameter_shapes.h); each architecture's shapes are in
// its folder.
#include "deepshard/models/parameter_shapes.h"

namespace deepshard::models {

int64_t NamedShape::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace deepshard::models
