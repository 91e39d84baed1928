#pragma once
/// \file error.hpp
/// The one exception type tilecomm throws, carrying a machine-readable code.

#include <stdexcept>
#include <string>
#include <string_view>

namespace tilecomm {

/// What went wrong. Every error tilecomm raises is a tilecomm::Error with one of these codes.
enum class ErrorCode {
  InvalidArgument,  ///< a parameter is out of range or inconsistent (the message names it)
  InvalidUsage,     ///< the call is not allowed in the current state
  NotSupported,     ///< an algorithm/dtype/op combination that cannot be done
  Mismatch,         ///< ranks disagree on shapes or calls
  Timeout,          ///< a wait passed its deadline (the message names what was waited for)
  MpiError,         ///< an MPI call returned an error
  SystemError,      ///< an operating-system call failed
  Internal,         ///< a bug in tilecomm
};

/// Short name of an error code, e.g. "InvalidArgument".
std::string_view to_string(ErrorCode code) noexcept;

/// The exception type of tilecomm. what() reads "tilecomm: <Code>: <message>".
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const noexcept { return code_; }
  /// The message without the "tilecomm: <Code>: " prefix.
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorCode code_;
  std::string message_;
};

}  // namespace tilecomm
