#include "actors/cluster/driver_link.hpp"

#include <algorithm>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <string>

#include "absl/strings/str_format.h"
#include "actors/cluster/control_messages.hpp"

namespace muflow::actors::cluster {

using transport::cluster::Nonce;

absl::StatusOr<AuthAnswer> answer_challenge(const transport::cluster::ClusterSecret& secret,
                                            const std::string& challenge,
                                            const std::string& where) {
  if (challenge.size() != Nonce{}.size()) {
    return absl::PermissionDeniedError(where + ": sent a malformed challenge");
  }
  Nonce worker_nonce{};
  std::copy(challenge.begin(), challenge.end(), worker_nonce.begin());
  auto own = transport::cluster::make_nonce();
  if (!own.ok()) return own.status();
  const auto proof = secret.prove(worker_nonce, kConnectorRole);
  AuthAnswer a;
  a.proof.assign(proof.begin(), proof.end());
  a.nonce = *own;
  return a;
}

bool worker_proved(const transport::cluster::ClusterSecret& secret, const AuthAnswer& answer,
                   const std::string& proof) {
  return secret.verify(answer.nonce, kAcceptorRole,
                       {reinterpret_cast<const uint8_t*>(proof.data()), proof.size()});
}

absl::StatusOr<WorkerLink> join_worker(caf::actor_system& sys, const ListenAddress& address,
                                       const transport::cluster::ClusterSecret& secret,
                                       uint32_t process, transport::cluster::DataPlane& plane,
                                       std::chrono::milliseconds timeout) {
  const std::string where = absl::StrFormat("worker %s:%d", address.host, address.port);
  if (process == 0) {
    return absl::InvalidArgumentError(where + ": process index 0 is the driver's");
  }
  auto gate = sys.middleman().remote_actor(address.host, address.port);
  if (!gate) {
    return absl::UnavailableError(
        absl::StrFormat("%s: not reachable: %s", where, sys.render(gate.error())));
  }
  caf::scoped_actor self{sys};
  absl::Status failure = absl::OkStatus();
  auto on_error = [&](const char* step, bool refusal) {
    return [&, step, refusal](caf::error& err) {
      const std::string text = sys.render(err);
      failure =
          refusal && text.find("refused") != std::string::npos
              ? absl::PermissionDeniedError(
                    absl::StrFormat("%s refused the %s: %s (do both processes use the same "
                                    "MUFLOW_CLUSTER_TOKEN or --token-file?)",
                                    where, step, text))
              : absl::UnavailableError(absl::StrFormat("%s: %s failed: %s", where, step, text));
    };
  };

  std::string challenge;
  self->request(*gate, timeout, hello_atom::value)
      .receive([&](const std::string& n) { challenge = n; }, on_error("hello", true));
  if (!failure.ok()) return failure;
  absl::StatusOr<AuthAnswer> mine_auth = answer_challenge(secret, challenge, where);
  if (!mine_auth.ok()) return mine_auth.status();
  std::string answer;
  self->request(*gate, timeout, auth_atom::value, mine_auth->proof,
                std::string(mine_auth->nonce.begin(), mine_auth->nonce.end()))
      .receive([&](const std::string& a) { answer = a; }, on_error("cluster token", true));
  if (!failure.ok()) return failure;
  if (!worker_proved(secret, *mine_auth, answer)) {
    return absl::PermissionDeniedError(
        where +
        ": failed to prove the cluster secret (a different token, or not a muflow "
        "worker): not joined");
  }
  std::string worker_address;
  const auto& mine = plane.address();
  self->request(*gate, timeout, join_atom::value, process, std::string(mine.begin(), mine.end()))
      .receive([&](const std::string& a) { worker_address = a; }, on_error("join", true));
  if (!failure.ok()) return failure;
  WorkerLink link;
  link.process = process;
  link.gate = *gate;
  link.ucx_address.assign(worker_address.begin(), worker_address.end());
  if (auto st = plane.connect(process, link.ucx_address); !st.ok()) {
    return absl::InternalError(absl::StrFormat("%s: %s", where, st.message()));
  }
  return link;
}

}  // namespace muflow::actors::cluster
