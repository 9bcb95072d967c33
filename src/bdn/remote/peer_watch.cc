#include "bdn/remote/peer_watch.h"

#include <algorithm>

#include "bdn/base/log.h"
#include "bdn/digest/digest.h"

namespace bdn::remote {

std::string PeerListDigest(std::vector<std::string> urls) {
  for (auto& u : urls) {
    while (!u.empty() && u.back() == '/') u.pop_back();
  }
  std::sort(urls.begin(), urls.end());
  std::string joined;
  for (const auto& u : urls) joined += u + "\n";
  return Digest::Of(joined).Hex().substr(0, 16);
}

PeerWatch::PeerWatch(ClusterChunkStore* store, std::string node_id, std::string digest)
    : store_(store), node_id_(std::move(node_id)), digest_(std::move(digest)) {
  for (size_t i = 0; i < store_->node_count(); ++i) {
    http::ClientOptions co;
    co.base_url = store_->url(i);
    co.label = "peer";
    co.connect_timeout = std::chrono::milliseconds(1000);
    co.deadline = std::chrono::milliseconds(1000);
    co.max_idle_connections = 1;
    auto client = http::HttpClient::Create(co);
    // The URLs were accepted by the store already; a client that cannot be made stays null.
    clients_.push_back(client ? std::shared_ptr<http::HttpClient>(std::move(*client)) : nullptr);
  }
  seen_.assign(store_->node_count(), Seen::kUnknown);
}

void PeerWatch::ProbeAll() {
  std::vector<Seen> now(clients_.size(), Seen::kNoAnswer);
  std::vector<std::string> why(clients_.size());
  std::vector<std::string> ids(clients_.size());
  for (size_t i = 0; i < clients_.size(); ++i) {
    if (!clients_[i]) continue;
    auto r = clients_[i]->Send({.path = "/healthz"});
    if (!r) {
      why[i] = r.error().message();
      continue;
    }
    if (r->status != 200) {
      why[i] = "GET /healthz: HTTP " + std::to_string(r->status);
      continue;
    }
    const auto id = r->Header("bdn-node");
    const auto digest = r->Header("bdn-peers");
    if (id) ids[i] = std::string(*id);
    if (id && *id == node_id_) {
      now[i] = Seen::kSelf;
    } else if (digest && *digest == digest_) {
      now[i] = Seen::kPeer;
    } else {
      now[i] = Seen::kOtherList;
      why[i] = !id       ? "it is not a bdn cache node"
               : !digest ? "it was started without --peers"
                         : "its --peers list differs (digest " + std::string(*digest) +
                               ", this node's " + digest_ + ")";
    }
  }
  const bool self_found = std::find(now.begin(), now.end(), Seen::kSelf) != now.end();
  MutexLock lock(mu_);
  if (!self_found && !warned_no_self_) {
    log::Warn("--peers: none of its URLs answered as this node (" + node_id_ +
              "); every node must list every node, itself included, with the same URLs: until one "
              "does, this node reads only from its upstream");
  }
  warned_no_self_ = !self_found;
  for (size_t i = 0; i < now.size(); ++i) {
    using Role = ClusterChunkStore::Role;
    Role role = Role::kOff;
    if (now[i] == Seen::kSelf) role = Role::kSelf;
    if (now[i] == Seen::kPeer && self_found) role = Role::kNode;
    store_->SetRole(i, role);
    if (now[i] == seen_[i]) continue;
    seen_[i] = now[i];
    const std::string& url = store_->url(i);
    switch (now[i]) {
      case Seen::kSelf:
        log::Info("peer " + url + ": this node");
        break;
      case Seen::kPeer:
        log::Info("peer " + url + ": cache node " + ids[i] + ", same --peers");
        break;
      case Seen::kOtherList:
        log::Warn("peer " + url + ": not read from: " + why[i]);
        break;
      case Seen::kNoAnswer:
        log::Warn("peer " + url + ": not read from until it answers: " + why[i]);
        break;
      case Seen::kUnknown:
        break;
    }
  }
}

}  // namespace bdn::remote
