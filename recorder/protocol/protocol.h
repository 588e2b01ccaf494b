#pragma once
// The control protocol between the controller and each rank (one private socketpair per rank).
//
// Framing: every frame is a little-endian uint32 payload length followed by the payload; a length
// above kMaxFrameBytes is a protocol error. The first frame a rank sends is its hello, whose
// payload starts with the raw little-endian uint32s kProtocolMagic and kProtocolVersion (checked
// before anything is decoded) followed by the cereal-encoded Hello. Every later frame is a
// cereal PortableBinary encoding of ToRank or FromRank. stdout/stderr are separate pipes, so no
// byte a library prints can ever reach this channel (seed 000 is fixed by construction).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "data/capture.h"
#include "data/case_info.h"
#include "data/execution.h"
#include "data/perturbation.h"
#include "runtime/placement.h"
#include "runtime/startup_phases.h"

namespace cprr {

inline constexpr uint32_t kProtocolMagic = 0x52525043;  // "CPRR" read as little-endian bytes
/// Bump when any message below changes layout or meaning. Controller and worker of different
/// versions refuse each other at the hello with a message naming both versions.
inline constexpr uint32_t kProtocolVersion = 22;  // 2: Hello.comm_id, Bootstrap, Connected, Abort;
                                                  // 3: OpRecord read_spans/write_spans;
                                                  // 4: OpRecord peer/epoch, RunCase.perturbation;
                                                  // 5: Perturbation.poison;
                                                  // 6: CollectiveRecord.op,
                                                  //    Connected.symmetric_pool;
                                                  // 7: RunCase.timeline, CaseCapture.timeline
                                                  // 8: Handshake, Welcome, SignalRank,
                                                  //    RankExited (launchers over TCP)
                                                  // 9: Hello.phases, Connected.phases
                                                  // 10: Hello.device/gpu, Bootstrap.transport
                                                  // 11: DType i8, i16, f16, bf16 (Python cases)
                                                  // 12: Hello.gpu names the host on cpu
                                                  // 13: Catalog.files
                                                  // 14: CollectiveRecord group/members/peer/
                                                  //     where/send_bytes/recv_bytes/row_bytes,
                                                  //     CaseCapture.groups
                                                  // 15: RankOutcome skip
                                                  // 16: OpRecord.moves
                                                  // 17: RankResult first_use, symmetric_pool
                                                  // 18: OpRecord touches/touch_spans
                                                  // 19: RankResult distrusted
                                                  // 20: Perturbation.probe_touches,
                                                  //     OpRecord.probed
                                                  // 21: Bootstrap.transport as the enum
                                                  // 22: Channel::agent, StartRank,
                                                  //     RankNotStarted (node agents)
inline constexpr uint32_t kMaxFrameBytes = 256u << 20;

/// First message of every rank: who it is.
struct Hello {
  int32_t rank = 0;
  int32_t world_size = 0;
  int32_t pid = 0;
  std::string backend;
  std::string version;  ///< cprr version the worker was built from
  /// Rank 0's communicator id (CUDA: the ncclUniqueId bytes); empty on other ranks and on
  /// backends that rendezvous by themselves. The controller hands it to every rank (Bootstrap).
  std::string comm_id;
  /// How long each step of this rank's start-up took, from main() to this hello.
  std::vector<StartupPhase> phases;
  /// The GPU the rank runs on (Backend::device_index, -1 without one) and what tells it apart
  /// from the world's other GPUs (Backend::device_identity): ranks with one identity share a
  /// GPU, so the controller picks their collectives' transport (Bootstrap::transport). On the
  /// cpu backend `gpu` is the rank's host, so a world spread over hosts is refused.
  int32_t device = -1;
  std::string gpu;

  bool operator==(const Hello&) const = default;
  template <class A>
  void serialize(A& a) {
    a(rank, world_size, pid, backend, version, comm_id, phases, device, gpu);
  }
};

// ---- controller -> rank ----

/// Run one case execution. Every rank of the world gets the same message.
struct RunCase {
  uint64_t execution = 0;  ///< controller-unique id; echoed in the result
  std::string name;
  Params params;
  uint64_t seed = 0;
  Placement placement = Placement::best_fit;
  Perturbation perturbation;  ///< what a replay changes to confirm a race; empty when recording
  bool timeline = false;      ///< time every op (CaseCapture::timeline) for a trace

  bool operator==(const RunCase&) const = default;
  template <class A>
  void serialize(A& a) {
    a(execution, name, params, seed, placement, perturbation, timeline);
  }
};

/// Ask the rank's watchdog what it is doing (answered even while the case body is stuck).
struct StatusQuery {
  uint64_t execution = 0;
  bool operator==(const StatusQuery&) const = default;
  template <class A>
  void serialize(A& a) {
    a(execution);
  }
};

/// Leave the command loop and exit 0.
struct Shutdown {
  bool operator==(const Shutdown&) const = default;
  template <class A>
  void serialize(A&) {}
};

/// The first message after every hello: rank 0's communicator id, for every rank to join, and
/// how the world's collectives travel (transport_name: nccl | gloo_staged | gloo).
struct Bootstrap {
  std::string comm_id;
  CollectiveTransport transport = CollectiveTransport::gloo;
  bool operator==(const Bootstrap&) const = default;
  template <class A>
  void serialize(A& a) {
    a(comm_id, transport);
  }
};

/// The controller gave up on the running case (deadline): the watchdog thread aborts the
/// communicator (ncclCommAbort), so stuck collectives end, and the rank exits. Handled even while
/// the case body is stuck.
struct Abort {
  bool operator==(const Abort&) const = default;
  template <class A>
  void serialize(A&) {}
};

using ToRank = std::variant<RunCase, StatusQuery, Shutdown, Bootstrap, Abort>;

// ---- rank -> controller ----

/// A rank's result for one execution: the wire form of the plain RankResult
/// (data/execution.h), which is what the controller keeps.
struct CaseDone : RankResult {
  bool operator==(const CaseDone&) const = default;
};

/// The worker's registered cases (sent instead of running cases when started with --catalog).
struct Catalog {
  std::vector<CaseInfo> cases;
  /// The source files its cases were defined in, absolute (a Python worker's case files); empty
  /// for a worker binary, whose cases are the binary itself. cprecord records their content
  /// hashes, so cpreplay can say when one changed since (data/code_file.h).
  std::vector<std::string> files;
  bool operator==(const Catalog&) const = default;
  template <class A>
  void serialize(A& a) {
    a(cases, files);
  }
};

/// A rank's answer to Bootstrap: it joined the communicator, or why it could not. The world is
/// ready only when every rank said so, so joining is part of start-up, not of the first case.
struct Connected {
  std::string error;                 ///< empty on success
  std::string symmetric_pool;        ///< on success: Backend::symmetric_pool()
  std::vector<StartupPhase> phases;  ///< how long each step of joining the communicator took
  bool operator==(const Connected&) const = default;
  template <class A>
  void serialize(A& a) {
    a(error, symmetric_pool, phases);
  }
};

using FromRank = std::variant<CaseDone, WatchdogStatus, Catalog, Connected>;

// ---- ranks started by a launcher (mpirun, srun): TCP connections back to the controller ----
//
// A launcher starts one node agent per node (`cpworker --agent`, recorder/rank/agent.h), which
// connects on the agent channel. For each rank the controller asks it for (StartRank), the
// agent opens four TCP connections to the controller, one per Channel, starts the rank process
// with the first three as its control channel, stdout and stderr, and keeps the fourth to
// supervise it. Each connection's first frame is a Handshake (raw magic and version first, like
// the hello); the controller answers it with a Welcome and closes the connection when it
// refuses it.

/// Which of a launched rank's four connections this is.
enum class Channel : uint8_t {
  control,     ///< the rank's control channel: Hello, ToRank/FromRank as over a socketpair
  out,         ///< the rank's stdout, raw bytes
  err,         ///< the rank's stderr, raw bytes
  supervisor,  ///< the rank's agent, supervising it: SignalRank in, RankExited out
  /// A node agent (recorder/rank/agent.h), one per node for the whole run: StartRank in,
  /// RankNotStarted out. Its Handshake's world is 0, its rank the node's index and its
  /// world_size the run's node count.
  agent,
};

/// First frame of every connection from a launched rank.
struct Handshake {
  std::string token;  ///< the run's secret (CPRR_TOKEN in the launcher's environment)
  uint64_t world =
      0;  ///< the world it belongs to (--world): a late rank of an old world is refused
  int32_t rank = 0;
  int32_t world_size = 0;
  Channel channel = Channel::control;
  std::string host;  ///< the rank's host name, for messages
  int32_t pid = 0;   ///< the agent's pid on that host

  bool operator==(const Handshake&) const = default;
  template <class A>
  void serialize(A& a) {
    a(token, world, rank, world_size, channel, host, pid);
  }
};

/// The controller's answer to a Handshake: accepted (error empty), or why it was refused.
struct Welcome {
  std::string error;
  /// On the supervisor channel: the environment the rank gets on top of the agent's (the
  /// WorldConfig's, with NCCL_NVLS_ENABLE=0), the same as a local rank's. On the agent channel:
  /// the template environment of the run's worlds (StartRank::template_env), so that an agent
  /// of a Python worker starts its template at once, before the first world asks for a rank.
  std::vector<std::pair<std::string, std::string>> env;

  bool operator==(const Welcome&) const = default;
  template <class A>
  void serialize(A& a) {
    a(error, env);
  }
};

/// Controller -> supervisor: send `signal` to the rank's process group (TERM, then KILL).
struct SignalRank {
  int32_t signal = 0;
  bool operator==(const SignalRank&) const = default;
  template <class A>
  void serialize(A& a) {
    a(signal);
  }
};

/// Supervisor -> controller: how the rank process ended (what waitpid said on its host).
struct RankExited {
  ExitInfo exit;
  bool operator==(const RankExited&) const = default;
  template <class A>
  void serialize(A& a) {
    a(exit);
  }
};

/// Controller -> node agent: start rank `rank` of world `world` on this node. The agent opens
/// the rank's four channels (Handshake with this world and rank), starts the rank and supervises
/// it on the supervisor channel.
struct StartRank {
  uint64_t world = 0;
  int32_t rank = 0;
  int32_t world_size = 0;
  int32_t local_rank = 0;  ///< its index among the world's ranks on this node (CPRR_LOCAL_RANK)
  int32_t local_size = 0;  ///< the world's ranks on this node (CPRR_LOCAL_SIZE)
  std::string rendezvous;
  std::string backend;
  /// Fork the rank from a template process of the agent's worker command (a Python worker),
  /// kept by the agent for every later rank with the same template_env; else spawn it.
  bool fork_from_template = false;
  /// What every rank of the world has in its environment, less what differs per rank: the
  /// template's environment (the rank's own comes in its Welcome).
  std::vector<std::pair<std::string, std::string>> template_env;

  bool operator==(const StartRank&) const = default;
  template <class A>
  void serialize(A& a) {
    a(world, rank, world_size, local_rank, local_size, rendezvous, backend, fork_from_template,
      template_env);
  }
};

/// Node agent -> controller: a StartRank it could not carry out, and why (the template died,
/// the worker could not be executed, ...). The world's start fails at once with it.
struct RankNotStarted {
  uint64_t world = 0;
  int32_t rank = 0;
  std::string why;

  bool operator==(const RankNotStarted&) const = default;
  template <class A>
  void serialize(A& a) {
    a(world, rank, why);
  }
};

// ---- encoding ----

std::string encode_hello(const Hello& hello);
/// Checks magic and version first; throws ProtocolError naming what was received.
Hello decode_hello(std::string_view payload);
std::string encode(const ToRank& msg);
std::string encode(const FromRank& msg);
std::string encode_handshake(const Handshake& hs);
/// Checks magic and version first, like decode_hello; throws ProtocolError.
Handshake decode_handshake(std::string_view payload);
std::string encode(const Welcome& msg);
std::string encode(const SignalRank& msg);
std::string encode(const RankExited& msg);
Welcome decode_welcome(std::string_view payload);
SignalRank decode_signal_rank(std::string_view payload);
RankExited decode_rank_exited(std::string_view payload);
std::string encode(const StartRank& msg);
std::string encode(const RankNotStarted& msg);
StartRank decode_start_rank(std::string_view payload);
RankNotStarted decode_rank_not_started(std::string_view payload);
/// Throws ProtocolError (never crashes) on truncated or malformed payloads.
ToRank decode_to_rank(std::string_view payload);
FromRank decode_from_rank(std::string_view payload);

// ---- framing ----

/// Writes one frame, retrying on EINTR and short writes. Throws cprr::Error on failure (EPIPE
/// when the peer is gone; sockets are written with MSG_NOSIGNAL, so no SIGPIPE is raised).
void write_frame(int fd, std::string_view payload);
/// Encodes `msg` as one whole frame (length and payload) into `frame`, replacing its contents but
/// keeping its capacity: a rank reusing one buffer sends a CaseDone of any size without growing a
/// new buffer or copying the payload again. Throws cprr::Error above kMaxFrameBytes.
void encode_frame(const FromRank& msg, std::string& frame);
/// Writes a frame made by encode_frame, as write_frame writes one (throws the same errors).
void write_encoded_frame(int fd, std::string_view frame);

/// Reassembles frames from a byte stream read in arbitrary pieces (non-blocking friendly).
class FrameReader {
 public:
  enum class Fill { data, eof, would_block };
  /// Reads what is available from `fd` into the buffer.
  Fill fill(int fd);
  /// Appends bytes directly (tests, fuzzing).
  void append(std::string_view bytes) { buf_.append(bytes); }
  /// Takes the next complete frame, if one is buffered. Throws ProtocolError for a length over
  /// kMaxFrameBytes.
  std::optional<std::string> next();
  /// True when a partial frame is buffered (EOF now means a truncated frame).
  bool mid_frame() const { return buf_.size() > consumed_; }

 private:
  std::string buf_;
  std::size_t consumed_ = 0;
};

/// Blocking read of one frame through `reader` (which keeps bytes of later frames between calls).
/// Returns nullopt on EOF at a frame boundary; throws ProtocolError on EOF inside a frame or when
/// no complete frame arrived within `timeout_ms` (-1: wait forever).
std::optional<std::string> read_frame(int fd, FrameReader& reader, int timeout_ms = -1);

/// The descriptor a rank's control channel is given at (--control-fd): the highest below
/// min(RLIMIT_NOFILE, 1024), far from the low descriptors case code and libraries assume free
/// (and within FD_SETSIZE for libraries still using select()).
int control_fd_slot();

/// What a rank process is given after its command, as recorder/rank/worker.cpp parses it: the
/// controller's own spawn and a node agent's start their ranks with these alone.
std::vector<std::string> rank_arguments(int rank, int world_size, int control_fd,
                                        const std::string& rendezvous, std::string_view backend);

}  // namespace cprr
