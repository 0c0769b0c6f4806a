#include "runtime/client/cli.hpp"

int main(int argc, char** argv) {
  return butlers::client::run_cli(argc, argv);
}
