// The simulator's event loop (sim.hpp). Events are processed in time order (ties: in the order
// they were scheduled); a slot runs its task's steps until one takes time (a compute, the CPU of
// a send) or waits (an await), and is resumed by the event that ends it.
#include "ops/model/sim.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "tilecomm/error.hpp"

namespace tilecomm::model {
namespace {

double nonneg(double x) {
  return x > 0 ? x : 0;
}

struct MsgKey {
  int dst, src;
  std::uint64_t key;
  bool operator==(const MsgKey& o) const { return dst == o.dst && src == o.src && key == o.key; }
};
struct MsgHash {
  std::size_t operator()(const MsgKey& k) const {
    return std::hash<std::uint64_t>()(k.key * 1000003u ^ (std::uint64_t(k.dst) << 40) ^
                                      (std::uint64_t(k.src) << 20));
  }
};

enum class EvType { Resume, CpuDone, Inject, NetArrive, Visible };

struct Event {
  double t = 0;
  std::uint64_t seq = 0;
  EvType type = EvType::Resume;
  int rank = 0, slot = 0;     // Resume, CpuDone
  std::uint64_t version = 0;  // CpuDone: stale unless it is the rank's current timer
  int src = 0;                // messages
  std::uint64_t key = 0;
  double bytes = 0;
  bool node_wide = false;
  double ready = 0;  // Inject: when the message may start to leave (its send's CPU began)
  bool operator>(const Event& o) const { return std::tie(t, seq) > std::tie(o.t, o.seq); }
};

// A slot or the proxy using the CPU until the rank's virtual work clock reaches `until`.
struct Running {
  double until;
  int consumer;
  bool operator>(const Running& o) const {
    return std::tie(until, consumer) > std::tie(o.until, o.consumer);
  }
};

struct Slot {
  std::size_t task = 0;
  std::size_t step = 0;
  int phase = 0;  // within a Send: 0 before its CPU, 1 after
  bool busy = false;
  double task_start = 0;
  double send_start = 0;  // within a Send: when its CPU began
};

struct RecvJob {
  int src;
  std::uint64_t key;
  double bytes;
  bool node_wide;
};

struct RankState {
  const SimRank* def = nullptr;
  std::size_t next_task = 0;
  std::vector<Slot> slots;
  // Processor sharing: every consumer (a slot, or the proxy: index slots.size()) gets `rate`
  // cores; `work` is the CPU seconds each has received since the start (virtual time), brought up
  // to date at `last`; one CpuDone event (version `timer`) stands for the earliest end.
  std::priority_queue<Running, std::vector<Running>, std::greater<>> running;
  double work = 0, last = 0;
  std::uint64_t timer = 0;
  int active = 0;
  bool polling = false;  // the proxy's share is taken (SimRank::proxy_polls)
  int busy_slots = 0;
  std::deque<RecvJob> proxy_queue;
  bool proxy_busy = false;
  RecvJob proxy_job{};
  double end = 0;
};

class Engine {
 public:
  Engine(const std::vector<SimRank>& ranks, int rpn, const SimCosts& c, bool timeline, Network* net)
      : costs_(c), rpn_(rpn), net_(net), timeline_(timeline) {
    if (!net_) net_ = &own_net_.emplace(static_cast<int>((ranks.size() + rpn - 1) / rpn), c.net);
    state_.resize(ranks.size());
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      RankState& s = state_[r];
      s.def = &ranks[r];
      s.slots.resize(std::max(1, ranks[r].slots));
      s.last = ranks[r].start;
      s.end = ranks[r].start;
      if (ranks[r].proxy_polls && !ranks[r].tasks.empty()) {
        s.polling = true;
        s.active = 1;
      }
      for (std::size_t k = 0; k < s.slots.size(); ++k)
        push({ranks[r].start, 0, EvType::Resume, static_cast<int>(r), static_cast<int>(k)});
    }
  }

  SimResult run() {
    while (!queue_.empty()) {
      Event e = queue_.top();
      queue_.pop();
      ++result_.events;
      now_ = e.t;
      switch (e.type) {
        case EvType::Resume:
          if (!state_[e.rank].slots[e.slot].busy) take_task(e.rank, e.slot);
          advance(e.rank, e.slot);
          break;
        case EvType::CpuDone:
          cpu_done(e);
          break;
        case EvType::Inject: {
          const double at = net_->deliver(e.ready, node(e.src), node(e.rank), e.bytes, now_);
          push({at, 0, EvType::NetArrive, e.rank, 0, 0, e.src, e.key, e.bytes, e.node_wide});
          break;
        }
        case EvType::NetArrive:
          state_[e.rank].proxy_queue.push_back({e.src, e.key, e.bytes, e.node_wide});
          start_proxy(e.rank);
          break;
        case EvType::Visible:
          visible(e.rank, e.src, e.key, e.node_wide);
          break;
      }
    }
    for (const auto& [k, w] : waiting_)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("simulate: rank {} (slot {}) awaits message {} from rank {}, which "
                              "is never sent",
                              k.dst, w, k.key, k.src));
    for (std::size_t r = 0; r < state_.size(); ++r) {
      result_.rank_end.push_back(state_[r].end);
      result_.time = std::max(result_.time, state_[r].end);
    }
    return std::move(result_);
  }

 private:
  int node(int rank) const { return rank / rpn_; }

  void push(Event e) {
    e.seq = seq_++;
    queue_.push(e);
  }

  // ---- processor sharing of a rank's cores ----
  double rate(const RankState& s) const {
    const double cores = s.def->cores > 0 ? s.def->cores : 1.0;
    return s.active <= cores ? std::min(1.0, cores) : cores / s.active;
  }
  void catch_up(RankState& s) {
    if (s.active > 0) s.work += (now_ - s.last) * rate(s);
    s.last = now_;
  }
  // One event for the earliest end, at the current rate.
  void schedule_cpu(int rank) {
    RankState& s = state_[rank];
    ++s.timer;
    if (s.running.empty()) return;
    const double left = std::max(0.0, s.running.top().until - s.work);
    push({now_ + left / rate(s), 0, EvType::CpuDone, rank, 0, s.timer});
  }
  void use_cpu(int rank, int k, double seconds) {
    RankState& s = state_[rank];
    catch_up(s);
    s.running.push({s.work + seconds, k});
    ++s.active;
    schedule_cpu(rank);
  }
  void cpu_done(const Event& e) {
    RankState& s = state_[e.rank];
    if (e.version != s.timer) return;  // the rate or the earliest end changed since
    catch_up(s);
    // Everything due by now (up to rounding) ends; each may start more work.
    const double eps = 1e-12 * std::max(1.0, s.work);
    std::vector<int> done;
    while (!s.running.empty() && s.running.top().until <= s.work + eps) {
      done.push_back(s.running.top().consumer);
      s.running.pop();
      --s.active;
    }
    schedule_cpu(e.rank);
    for (int k : done)
      finished(e.rank, k);
  }
  void finished(int rank, int k) {
    RankState& s = state_[rank];
    if (k == static_cast<int>(s.slots.size())) {  // the proxy finished a receive
      s.proxy_busy = false;
      visible(rank, s.proxy_job.src, s.proxy_job.key, s.proxy_job.node_wide);
      start_proxy(rank);
      return;
    }
    Slot& sl = s.slots[k];
    const SimStep& st = s.def->tasks[sl.task].steps[sl.step];
    if (st.kind == SimStep::Kind::Send) {
      sl.phase = 1;
    } else {
      ++sl.step;
    }
    advance(rank, k);
  }

  // ---- slots ----
  void take_task(int rank, int k) {
    RankState& s = state_[rank];
    Slot& sl = s.slots[k];
    if (s.next_task >= s.def->tasks.size()) return;
    sl = {s.next_task++, 0, 0, true, now_};
    ++s.busy_slots;
  }

  void advance(int rank, int k) {
    RankState& s = state_[rank];
    Slot& sl = s.slots[k];
    while (sl.busy) {
      const SimTask& task = s.def->tasks[sl.task];
      if (sl.step >= task.steps.size()) {
        if (timeline_)
          result_.timeline.push_back({rank, k, task.label, task.tile, sl.task_start, now_});
        s.end = std::max(s.end, now_);
        sl.busy = false;
        --s.busy_slots;
        take_task(rank, k);
        if (s.polling && s.busy_slots == 0 && s.next_task >= s.def->tasks.size()) {
          catch_up(s);  // the kernel is over: the proxy stops polling
          s.polling = false;
          --s.active;
          schedule_cpu(rank);
        }
        continue;
      }
      const SimStep& st = task.steps[sl.step];
      switch (st.kind) {
        case SimStep::Kind::Compute:
          if (st.seconds > 0) return use_cpu(rank, k, st.seconds);
          ++sl.step;
          break;
        case SimStep::Kind::Send:
          if (sl.phase == 0) {
            sl.phase = 1;
            sl.send_start = now_;
            const double cpu = send_cpu(st);
            if (cpu > 0) return use_cpu(rank, k, cpu);
          }
          dispatch(rank, st, sl.send_start);
          sl.phase = 0;
          ++sl.step;
          break;
        case SimStep::Kind::Await: {
          const MsgKey key{rank, st.peer, st.key};
          if (arrived_.count(key) != 0) {
            ++sl.step;
            break;
          }
          waiting_.emplace(key, k);
          return;
        }
      }
    }
  }

  double send_cpu(const SimStep& st) const {
    switch (st.path) {
      case SimPath::Flag:
        return 0;
      case SimPath::Shm:  // the copy into the peer's segment
        return std::max(nonneg(costs_.shm.cpu_send.at(st.bytes)), costs_.shm.beta() * st.bytes);
      case SimPath::Mpi:
        return nonneg(costs_.mpi.cpu_send.at(costs_.nic_offload ? 0 : st.bytes));
    }
    return 0;
  }

  // A send whose CPU ran from `start` to now. Off the node its bytes leave as the CPU hands them
  // over: the wire from `start`, the last byte no earlier than now.
  void dispatch(int rank, const SimStep& st, double start) {
    ++result_.messages;
    switch (st.path) {
      case SimPath::Flag:
      case SimPath::Shm:  // the copy was the sender's CPU; the flag's latency remains
        push({now_ + costs_.flag_s, 0, EvType::Visible, st.peer, 0, 0, rank, st.key, 0,
              st.node_wide});
        return;
      case SimPath::Mpi:
        if (node(rank) == node(st.peer)) {  // MPI on one node: its own transport, no NIC
          const double t = nonneg(costs_.mpi.alpha()) + costs_.mpi.beta() * st.bytes;
          push({now_ + t, 0, EvType::NetArrive, st.peer, 0, 0, rank, st.key, st.bytes,
                st.node_wide});
          return;
        }
        const double handoff = st.proxied ? costs_.proxy_s : 0;
        push({now_ + handoff, 0, EvType::Inject, st.peer, 0, 0, rank, st.key, st.bytes,
              st.node_wide, start + handoff});
        return;
    }
  }

  // ---- the receiving proxy: one receive at a time, its CPU shared with the slots ----
  void start_proxy(int rank) {
    RankState& s = state_[rank];
    if (s.proxy_busy || s.proxy_queue.empty()) return;
    s.proxy_job = s.proxy_queue.front();
    s.proxy_queue.pop_front();
    s.proxy_busy = true;
    const double cpu = nonneg(costs_.mpi.cpu_recv.at(costs_.nic_offload ? 0 : s.proxy_job.bytes));
    use_cpu(rank, static_cast<int>(s.slots.size()), std::max(cpu, 1e-12));
  }

  void visible(int rank, int src, std::uint64_t key, bool node_wide) {
    if (node_wide) {  // the flag in `rank`'s segment: its node's ranks see it (after a flag)
      const int first = node(rank) * rpn_;
      for (int r = first; r < first + rpn_ && r < static_cast<int>(state_.size()); ++r)
        if (r != rank)
          push({now_ + costs_.flag_s, 0, EvType::Visible, r, 0, 0, src, key, 0, false});
    }
    const MsgKey k{rank, src, key};
    arrived_.emplace(k, now_);
    auto range = waiting_.equal_range(k);
    std::vector<int> slots;
    for (auto it = range.first; it != range.second; ++it)
      slots.push_back(it->second);
    waiting_.erase(range.first, range.second);
    for (int slot : slots) {
      ++state_[rank].slots[slot].step;
      push({now_, 0, EvType::Resume, rank, slot});
    }
  }

  SimCosts costs_;
  int rpn_;
  Network* net_;  // the caller's (a loop's calls share its token buckets), or own_net_
  std::optional<Network> own_net_;
  bool timeline_;
  std::vector<RankState> state_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  std::uint64_t seq_ = 0;
  double now_ = 0;
  std::unordered_map<MsgKey, double, MsgHash> arrived_;
  std::unordered_multimap<MsgKey, int, MsgHash> waiting_;
  SimResult result_;
};

}  // namespace

SimCosts SimCosts::from(const Profile& p) {
  SimCosts c;
  c.shm = p.shm.measured || !p.mpi.measured ? p.shm : p.mpi;
  c.mpi = p.mpi.measured || !p.shm.measured ? p.mpi : p.shm;
  c.flag_s = p.flag_s;
  c.proxy_s = p.proxy_s;
  if (p.link_bytes_per_s > 0)
    c.net.link_bytes_per_s = p.link_bytes_per_s;
  else if (c.mpi.beta() > 0)
    c.net.link_bytes_per_s = 1 / c.mpi.beta();
  c.net.latency_s =
      nonneg(c.mpi.alpha() - nonneg(c.mpi.cpu_send.at(0)) - nonneg(c.mpi.cpu_recv.at(0)));
  return c;
}

SimResult simulate(const std::vector<SimRank>& ranks, int ranks_per_node, const SimCosts& costs,
                   bool timeline, Network* net) {
  if (ranks_per_node < 1)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("simulate: ranks_per_node = {} (must be >= 1)", ranks_per_node));
  return Engine(ranks, ranks_per_node, costs, timeline, net).run();
}

std::string timeline_json(const SimResult& r) {
  std::string out = "{\"traceEvents\": [\n";
  bool first = true;
  for (const SimSpan& s : r.timeline) {
    out += fmt::format(
        "{}{{\"name\": \"{}\", \"ph\": \"X\", \"pid\": {}, \"tid\": {}, \"ts\": {:.3f}, "
        "\"dur\": {:.3f}, \"args\": {{\"tile\": {}}}}}",
        first ? "" : ",\n", s.label, s.rank, s.slot, s.start * 1e6, (s.end - s.start) * 1e6,
        s.tile);
    first = false;
  }
  out += "\n]}\n";
  return out;
}

}  // namespace tilecomm::model
