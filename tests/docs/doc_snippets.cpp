// Compiles every C++ block of the given Markdown files, so that the README and docs/ cannot drift
// from the library:
//   doc_snippets WORKDIR COMPILER [COMPILER ARGS...] -- FILE.md...
// A block is a fence opened by ```cpp (or ```c++), indented or not. The line before it may carry
// a marker that says how to compile it:
//   (none)                          a whole translation unit, compiled as it is
//   <!-- snippet: main -->          statements: wrapped in `int main() { ... }` after the prelude
//   <!-- snippet: declarations -->  namespace-scope code: compiled after the prelude
//   <!-- snippet: pmr -->           statements as main's, using std::pmr and ArenaResource:
//   compiled
//                                   where the library has them (RESERVOIR_HAS_ARENA_RESOURCE),
//                                   an empty main elsewhere (libc++ before 16, old macOS targets)
//   <!-- snippet: skip REASON -->   not compiled; the reason is required (say why it cannot be)
// The prelude is <reservoir/reservoir.hpp> and the standard headers snippets commonly use. Each
// block is compiled with COMPILER ARGS -fsyntax-only; the exit code is the number of blocks that
// did not compile (capped at 100), or 2 on bad usage or unreadable input.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr std::string_view kPrelude =
    "#include <reservoir/reservoir.hpp>\n"
    "#include <algorithm>\n#include <cstddef>\n#include <cstdint>\n#include <cstdio>\n"
    "#include <memory>\n#include <numeric>\n#include <span>\n#include <string>\n"
    "#include <string_view>\n#include <thread>\n#include <utility>\n#include <vector>\n";

struct Block {
  std::string file;
  int line = 0;        // of the opening fence, 1-based
  std::string mode;    // "", "main", "pmr", "declarations" or "skip"
  std::string reason;  // skip only
  std::string code;
};

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

// Reads the blocks of one file; false (with a message) on an unreadable file or a bad marker.
bool read_blocks(const std::string& path, std::vector<Block>* out) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "doc_snippets: cannot read %s\n", path.c_str());
    return false;
  }
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    lines.push_back(l);
  bool ok = true;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string t = trim(lines[i]);
    if (t.rfind("```", 0) != 0) continue;
    const std::string lang = trim(std::string_view(t).substr(3));
    const std::size_t indent = lines[i].find('`');
    std::size_t end = i + 1;
    while (end < lines.size() && trim(lines[end]).rfind("```", 0) != 0)
      ++end;
    if (lang == "cpp" || lang == "c++") {
      Block b;
      b.file = path;
      b.line = static_cast<int>(i + 1);
      std::size_t m = i;
      while (m > 0 && trim(lines[m - 1]).empty())
        --m;
      if (m > 0) {
        const std::string marker = trim(lines[m - 1]);
        constexpr std::string_view kOpen = "<!-- snippet:";
        if (marker.rfind(kOpen, 0) == 0 && marker.size() > kOpen.size() + 3 &&
            marker.compare(marker.size() - 3, 3, "-->") == 0) {
          const std::string body =
              trim(std::string_view(marker).substr(kOpen.size(), marker.size() - kOpen.size() - 3));
          b.mode = body.substr(0, body.find(' '));
          if (b.mode == "skip") b.reason = trim(std::string_view(body).substr(4));
          if ((b.mode != "main" && b.mode != "pmr" && b.mode != "declarations" &&
               b.mode != "skip") ||
              (b.mode == "skip" && b.reason.empty())) {
            std::fprintf(stderr,
                         "%s:%zu: unknown snippet marker '%s' (main, pmr, declarations, or skip "
                         "with a reason)\n",
                         path.c_str(), m, marker.c_str());
            ok = false;
          }
        }
      }
      for (std::size_t k = i + 1; k < end; ++k) {
        // The block's own indentation (a block inside a list item) is not part of the code.
        const std::string& l = lines[k];
        const std::size_t cut = std::min(indent, l.find_first_not_of(' ') == std::string::npos
                                                     ? l.size()
                                                     : l.find_first_not_of(' '));
        b.code += l.substr(cut) + "\n";
      }
      out->push_back(std::move(b));
    }
    i = end;
  }
  return ok;
}

std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const auto dashes = std::find(args.begin(), args.end(), "--");
  if (args.size() < 2 || dashes == args.end() || dashes + 1 == args.end()) {
    std::fprintf(stderr, "usage: doc_snippets WORKDIR COMPILER [ARGS...] -- FILE.md...\n");
    return 2;
  }
  const std::string workdir = args[0];
  std::string compiler;
  for (auto it = args.begin() + 1; it != dashes; ++it) {
    if (!compiler.empty()) compiler += ' ';
    compiler += shell_quoted(*it);
  }
  std::vector<Block> blocks;
  bool ok = true;
  for (auto it = dashes + 1; it != args.end(); ++it)
    ok = read_blocks(*it, &blocks) && ok;
  if (!ok) return 2;

  int failed = 0, compiled = 0, skipped = 0;
  for (const Block& b : blocks) {
    if (b.mode == "skip") {
      ++skipped;
      continue;
    }
    std::string name = b.file.substr(b.file.find_last_of("/\\") + 1);
    std::replace(name.begin(), name.end(), '.', '_');
    const std::string source = workdir + "/" + name + "_" + std::to_string(b.line) + ".cpp";
    {
      std::ofstream out(source);
      out << "#line 1 \"" << b.file << " (prelude)\"\n";
      if (!b.mode.empty()) out << kPrelude;
      if (b.mode == "pmr")
        out << "#include <reservoir/arena_resource.hpp>\n#if RESERVOIR_HAS_ARENA_RESOURCE\n"
               "#include <memory_resource>\n";
      if (b.mode == "main" || b.mode == "pmr") out << "int main() {\n";
      out << "#line " << b.line + 1 << " \"" << b.file << "\"\n" << b.code;
      if (b.mode == "main" || b.mode == "pmr") out << "}\n";
      if (b.mode == "pmr") out << "#else\nint main() {}\n#endif\n";
      if (!out) {
        std::fprintf(stderr, "doc_snippets: cannot write %s\n", source.c_str());
        return 2;
      }
    }
    const std::string command = compiler + " -fsyntax-only " + shell_quoted(source);
    ++compiled;
    if (std::system(command.c_str()) != 0) {
      std::fprintf(stderr, "%s:%d: this C++ block does not compile (%s)\n", b.file.c_str(), b.line,
                   b.mode.empty() ? "a whole translation unit" : b.mode.c_str());
      ++failed;
    }
  }
  std::printf("doc_snippets: %d blocks compiled, %d failed, %d skipped (with a reason)\n", compiled,
              failed, skipped);
  return std::min(failed, 100);
}
