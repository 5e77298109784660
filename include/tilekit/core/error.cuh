#pragma once
// Error reporting for host code.
//
//   TILEKIT_CHECK_CUDA(cudaMalloc(&p, n));        // throws tilekit::cuda_error
//   TILEKIT_CHECK_ARG(n % 8 == 0, "n must be a multiple of 8, got ", n);
//                                                 // throws tilekit::invalid_argument
//
// Both exceptions derive from tilekit::error (itself a std::runtime_error) and
// carry the file and line of the check, so a failure reads like
//   tilekit: CUDA error 2 (cudaErrorMemoryAllocation: out of memory)
//     in cudaMalloc(&p, n) at bench.cu:41
// The message text is built by format_* functions that CPU tests exercise.

#include <cuda_runtime_api.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tilekit {

class error : public std::runtime_error {
 public:
  error(const std::string& what, const char* file, int line)
      : std::runtime_error(what), file_(file ? file : ""), line_(line) {}
  const char* file() const noexcept { return file_; }
  int line() const noexcept { return line_; }

 private:
  const char* file_;
  int line_;
};

class cuda_error : public error {
 public:
  cuda_error(cudaError_t code, const std::string& what, const char* file, int line)
      : error(what, file, line), code_(code) {}
  cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

class invalid_argument : public error {
 public:
  using error::error;
};

namespace detail {
inline const char* basename(const char* path) {
  const char* base = path;
  for (const char* p = path; p && *p; ++p)
    if (*p == '/' || *p == '\\') base = p + 1;
  return base;
}
template <class... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

// "tilekit: CUDA error <n> (<name>: <description>)\n  in <expr> at <file>:<line>"
inline std::string format_cuda_error(cudaError_t code, const char* expr, const char* file, int line) {
  return detail::concat("tilekit: CUDA error ", static_cast<int>(code), " (", cudaGetErrorName(code), ": ",
                        cudaGetErrorString(code), ")\n  in ", expr, " at ", detail::basename(file), ":", line);
}

// "tilekit: invalid argument: <message>\n  (check `<cond>` at <file>:<line>)"
inline std::string format_invalid_argument(const std::string& message, const char* cond, const char* file,
                                           int line) {
  return detail::concat("tilekit: invalid argument: ", message, "\n  (check `", cond, "` at ",
                        detail::basename(file), ":", line, ")");
}

inline void check_cuda(cudaError_t code, const char* expr, const char* file, int line) {
  if (code != cudaSuccess) throw cuda_error(code, format_cuda_error(code, expr, file, line), file, line);
}

// Checks the error state after a kernel launch without synchronizing.
inline void check_last_launch(const char* what, const char* file, int line) {
  check_cuda(cudaGetLastError(), what, file, line);
}

}  // namespace tilekit

#define TILEKIT_CHECK_CUDA(expr) ::tilekit::check_cuda((expr), #expr, __FILE__, __LINE__)
#define TILEKIT_CHECK_LAUNCH(what) ::tilekit::check_last_launch((what), __FILE__, __LINE__)
#define TILEKIT_CHECK_ARG(cond, ...)                                                                  \
  do {                                                                                                \
    if (!(cond))                                                                                      \
      throw ::tilekit::invalid_argument(                                                              \
          ::tilekit::format_invalid_argument(::tilekit::detail::concat(__VA_ARGS__), #cond, __FILE__, \
                                             __LINE__),                                               \
          __FILE__, __LINE__);                                                                        \
  } while (0)
