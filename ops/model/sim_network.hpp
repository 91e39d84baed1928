#pragma once
// The simulator's network (docs/model.md, "Simulator"): every node has one NIC with a FIFO link
// queue per direction (egress, ingress) at `link_bytes_per_s`, and the nodes hang off a core that
// is either full bisection (never a bottleneck) or oversubscribed by `core_oversub` (one shared
// FIFO at nodes x link / core_oversub). A message is cut through: it occupies the sender's egress
// for bytes / rate from when that is free, the core likewise, and the receiver's ingress from
// when the head arrives (`latency_s` after it left) and the ingress is free: the first idle spell
// from then on that holds the whole message, so a message whose head arrives first is taken first
// even when its sender asked later. With `burst_bytes`, each NIC direction is a token bucket, as
// Linux's `tbf` shapes the emulated links, and the ingress too is first come, first served (a
// bucket's level is only known in the order the queue reserves).
#include <vector>

namespace tilecomm::model {

struct NetworkParams {
  double link_bytes_per_s = 12.5e9;  ///< per NIC and direction (100 Gbit/s)
  double latency_s = 2e-6;           ///< one way, wire and switches
  double core_oversub = 1;           ///< 1: full bisection; X > 1: core at nodes x link / X
  /// 0: the link runs at its rate (a real NIC). Else each NIC direction is a token bucket of this
  /// many bytes refilled at the link's rate (tc's tbf, tools/cluster): bytes the bucket covers
  /// pass as fast as the sender's CPU hands them over, the rest at the rate. A new Network starts
  /// with full buckets; Network::next_call carries them into the next call of a loop.
  double burst_bytes = 0;
};

class Network {
 public:
  Network(int nodes, const NetworkParams& params);
  /// A message of `bytes` from node `src` to node `dst` (different nodes), ready to leave at
  /// `ready`: reserves the queues it crosses and returns when its last byte has arrived. Its last
  /// byte leaves no earlier than `copied`, when the sender's CPU has handed it all over (a send's
  /// copy into the socket overlaps the wire). The egress queues (and, with buckets, the ingress
  /// ones) are FIFO in the order of the calls, which should come in nondecreasing `ready`.
  double deliver(double ready, int src, int dst, double bytes, double copied = 0);
  /// The next call of a loop starts `after` seconds past this one's time 0 (its end, and the gap
  /// between the calls): the queues are drained by then, the buckets keep what they hold and
  /// refill over the gap. The next call's times start at 0 again.
  void next_call(double after);

 private:
  struct Bucket {
    double tokens = 0, at = 0;  // bytes of credit at time `at`
  };
  struct Busy {
    double start, end;
  };
  // Without buckets: the first spell from `head` on in which node `dst`'s ingress is idle for
  // `wire` seconds and which ends no earlier than `tail`; reserves it and returns its end.
  double reserve_ingress(int dst, double head, double wire, double tail);
  // Seconds `bytes` hold a direction from `start`: what its bucket, refilled up to `start`, does
  // not cover, at the rate (all of them at the rate without a bucket).
  double shaped_wire(Bucket& b, double start, double bytes) const;
  // Takes `bytes` off the bucket once they have passed (from `start` to `end`, refilling
  // meanwhile).
  void settle(Bucket& b, double start, double end, double bytes) const;

  NetworkParams p_;
  std::vector<double> egress_free_, ingress_free_;  // ingress_free_: with buckets
  std::vector<std::vector<Busy>> ingress_busy_;     // without: sorted, disjoint
  std::vector<Bucket> egress_bucket_, ingress_bucket_;
  double core_free_ = 0, core_rate_ = 0;
};

}  // namespace tilecomm::model
