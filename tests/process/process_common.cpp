// The process layer's parts that are the same on every OS.
#include "process.hpp"

namespace reservoir::process {

Child::~Child() {
  if (id_ == 0) return;
  (void)kill();
  ProcessResult ignored;
  (void)wait(&ignored);
}

std::error_code run_process(const std::string& path, const std::vector<std::string>& args,
                            ProcessResult* out) {
  Child child;
  if (std::error_code ec = child.start(path, args)) return ec;
  return child.wait(out);
}

}  // namespace reservoir::process
