#include "collectives/p2p_common.hpp"

#include <algorithm>

#include "collectives/default_thresholds.hpp"

namespace tilecomm::detail::p2p {

std::size_t slot_bytes(const CommImpl& comm, int slots) {
  constexpr std::size_t kMax = std::size_t{1} << 30;
  const std::size_t b = comm.segment.data_bytes() / static_cast<std::size_t>(std::max(slots, 1));
  return std::clamp<std::size_t>(b & ~std::size_t{63}, 64, kMax);
}

std::byte* staging(CommImpl& comm, std::size_t bytes) {
  if (comm.p2p_staging.size() < bytes) comm.p2p_staging.resize(bytes);
  return comm.p2p_staging.data();
}

void isend(CommImpl& comm, const void* buf, std::size_t bytes, int dst, int tag, MPI_Request* req) {
  mpi_check(MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, dst, tag, comm.mpi, req),
            "MPI_Isend");
}

void irecv(CommImpl& comm, void* buf, std::size_t bytes, int src, int tag, MPI_Request* req) {
  mpi_check(MPI_Irecv(buf, static_cast<int>(bytes), MPI_BYTE, src, tag, comm.mpi, req),
            "MPI_Irecv");
}

namespace {

// post(offset, length) for consecutive pieces of at most eager_message_bytes covering `bytes`.
template <class Post>
void for_each_piece(std::size_t bytes, Post post) {
  for (std::size_t off = 0; off < bytes; off += DefaultThresholds::eager_message_bytes)
    post(off, static_cast<int>(std::min(DefaultThresholds::eager_message_bytes, bytes - off)));
}

}  // namespace

void isend_pieces(const void* buf, std::size_t bytes, int dst, int tag, MPI_Comm mpi,
                  std::vector<MPI_Request>& reqs) {
  for_each_piece(bytes, [&](std::size_t off, int len) {
    reqs.emplace_back();
    mpi_check(MPI_Isend(static_cast<const std::byte*>(buf) + off, len, MPI_BYTE, dst, tag, mpi,
                        &reqs.back()),
              "MPI_Isend");
  });
}

void irecv_pieces(void* buf, std::size_t bytes, int src, int tag, MPI_Comm mpi,
                  std::vector<MPI_Request>& reqs) {
  for_each_piece(bytes, [&](std::size_t off, int len) {
    reqs.emplace_back();
    mpi_check(
        MPI_Irecv(static_cast<std::byte*>(buf) + off, len, MPI_BYTE, src, tag, mpi, &reqs.back()),
        "MPI_Irecv");
  });
}

void bf16_to_float(float* dst, const void* src, std::size_t n) {
  const auto* s = static_cast<const bfloat16*>(src);
  for (std::size_t i = 0; i < n; ++i)
    dst[i] = static_cast<float>(s[i]);
}

void float_to_bf16(void* dst, const float* src, std::size_t n) {
  auto* d = static_cast<bfloat16*>(dst);
  for (std::size_t i = 0; i < n; ++i)
    d[i] = bfloat16(src[i]);
}

}  // namespace tilecomm::detail::p2p
