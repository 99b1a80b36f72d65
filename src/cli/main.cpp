// The deepshard executable's entry point (the commands: dispatch.cpp).
#include "cli/commands.h"

int main(int argc, char** argv) { return deepshard::cli::run_cli(argc, argv); }
