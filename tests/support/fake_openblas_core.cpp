// Test-only stand-in for OpenBLAS's CPU detection: preloaded (LD_PRELOAD) into a deepshard process,
// its openblas_get_corename() is the one dlsym(RTLD_DEFAULT) finds, so the process believes
// OpenBLAS fell back to its generic `Prescott` core. The real OpenBLAS still does the math.
extern "C" __attribute__((visibility("default"))) const char* openblas_get_corename() {
  return "Prescott";
}
