#include "ops/model/sim_network.hpp"

#include <algorithm>

namespace tilecomm::model {

Network::Network(int nodes, const NetworkParams& params)
    : p_(params),
      egress_free_(nodes, 0.0),
      ingress_free_(nodes, 0.0),
      ingress_busy_(nodes),
      egress_bucket_(nodes, Bucket{p_.burst_bytes, 0}),
      ingress_bucket_(nodes, Bucket{p_.burst_bytes, 0}) {
  core_rate_ = p_.core_oversub > 1 ? nodes * p_.link_bytes_per_s / p_.core_oversub : 0;
}

double Network::shaped_wire(Bucket& b, double start, double bytes) const {
  const double rate = p_.link_bytes_per_s;
  if (p_.burst_bytes <= 0) return bytes / rate;
  b.tokens = std::min(p_.burst_bytes, b.tokens + rate * std::max(0.0, start - b.at));
  b.at = std::max(b.at, start);
  return std::max(0.0, bytes - b.tokens) / rate;
}

// The bucket after `bytes` passed between `start` and `end`: it refilled meanwhile.
void Network::settle(Bucket& b, double start, double end, double bytes) const {
  if (p_.burst_bytes <= 0) return;
  b.tokens =
      std::clamp(b.tokens + p_.link_bytes_per_s * (end - start) - bytes, 0.0, p_.burst_bytes);
  b.at = end;
}

double Network::reserve_ingress(int dst, double head, double wire, double tail) {
  std::vector<Busy>& busy = ingress_busy_[dst];  // disjoint and sorted: their ends too
  double start = head;
  auto it =
      std::partition_point(busy.begin(), busy.end(), [&](const Busy& b) { return b.end <= start; });
  for (;; ++it) {
    const double end = std::max(start + wire, tail);
    if (it == busy.end() || it->start >= end) {
      busy.insert(it, {start, end});
      return end;
    }
    start = std::max(start, it->end);
  }
}

double Network::deliver(double ready, int src, int dst, double bytes, double copied) {
  // Egress: the sender's NIC serialises its messages.
  const double out = std::max(ready, egress_free_[src]);
  const double wire_out = shaped_wire(egress_bucket_[src], out, bytes);
  egress_free_[src] = out + wire_out;
  double head = out;  // when the first byte leaves the last shared stage so far
  double tail = std::max(out + wire_out, copied);
  settle(egress_bucket_[src], out, tail, bytes);
  if (core_rate_ > 0) {  // an oversubscribed core: one more FIFO, at its own rate
    const double start = std::max(head, core_free_);
    core_free_ = start + bytes / core_rate_;
    head = start;
    tail = std::max(tail, core_free_);
  }
  // Ingress: the receiver's NIC, from when the head arrives; never faster than the stages before.
  if (p_.burst_bytes <= 0)
    return reserve_ingress(dst, head + p_.latency_s, bytes / p_.link_bytes_per_s,
                           tail + p_.latency_s);
  const double in = std::max(head + p_.latency_s, ingress_free_[dst]);
  const double wire_in = shaped_wire(ingress_bucket_[dst], in, bytes);
  ingress_free_[dst] = std::max(in + wire_in, tail + p_.latency_s);
  settle(ingress_bucket_[dst], in, ingress_free_[dst], bytes);
  return ingress_free_[dst];
}

void Network::next_call(double after) {
  for (auto* queue : {&egress_free_, &ingress_free_})
    for (double& t : *queue)
      t = std::max(0.0, t - after);
  core_free_ = std::max(0.0, core_free_ - after);
  for (std::vector<Busy>& busy : ingress_busy_) {
    std::erase_if(busy, [&](const Busy& b) { return b.end <= after; });
    for (Busy& b : busy)
      b.start -= after, b.end -= after;
  }
  for (auto* buckets : {&egress_bucket_, &ingress_bucket_})
    for (Bucket& b : *buckets)
      b.at -= after;
}

}  // namespace tilecomm::model
