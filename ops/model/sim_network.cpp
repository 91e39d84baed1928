#include "ops/model/sim_network.hpp"

#include <algorithm>

namespace tilecomm::model {

Network::Network(int nodes, const NetworkParams& params)
    : p_(params), egress_free_(nodes, 0.0), ingress_free_(nodes, 0.0) {
  core_rate_ = p_.core_oversub > 1 ? nodes * p_.link_bytes_per_s / p_.core_oversub : 0;
}

double Network::deliver(double ready, int src, int dst, double bytes, double copied) {
  const double wire = bytes / p_.link_bytes_per_s;
  // Egress: the sender's NIC serialises its messages.
  const double out = std::max(ready, egress_free_[src]);
  egress_free_[src] = out + wire;
  double head = out;  // when the first byte leaves the last shared stage so far
  double tail = std::max(out + wire, copied);
  if (core_rate_ > 0) {  // an oversubscribed core: one more FIFO, at its own rate
    const double start = std::max(head, core_free_);
    core_free_ = start + bytes / core_rate_;
    head = start;
    tail = std::max(tail, core_free_);
  }
  // Ingress: the receiver's NIC, from when the head arrives; never faster than the stages before.
  const double in = std::max(head + p_.latency_s, ingress_free_[dst]);
  ingress_free_[dst] = std::max(in + wire, tail + p_.latency_s);
  return ingress_free_[dst];
}

}  // namespace tilecomm::model
