#include "tilecomm/error.hpp"

namespace tilecomm {

std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidArgument:
      return "InvalidArgument";
    case ErrorCode::InvalidUsage:
      return "InvalidUsage";
    case ErrorCode::NotSupported:
      return "NotSupported";
    case ErrorCode::Mismatch:
      return "Mismatch";
    case ErrorCode::Timeout:
      return "Timeout";
    case ErrorCode::MpiError:
      return "MpiError";
    case ErrorCode::SystemError:
      return "SystemError";
    case ErrorCode::Internal:
      return "Internal";
  }
  return "Unknown";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error("tilecomm: " + std::string(to_string(code)) + ": " + message),
      code_(code),
      message_(message) {}

}  // namespace tilecomm
