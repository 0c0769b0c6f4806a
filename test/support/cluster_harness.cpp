#include "test/support/cluster_harness.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

#include <rapidjson/document.h>

#include "runtime/json.hpp"
#include "test/support/poll.hpp"

namespace butlers::test {

using namespace std::chrono_literals;

uint16_t free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0
      || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("bind() to 127.0.0.1:0 failed");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

cluster_harness::cluster_harness(std::string database_url, std::string common)
  : url_(std::move(database_url)), common_(std::move(common)) {
  // nop
}

cluster_harness::~cluster_harness() {
  for (size_t i = nodes_.size(); i-- > 0;)
    if (running(i))
      stop(i);
}

size_t cluster_harness::add(cluster_node_spec spec) {
  node n;
  n.spec = std::move(spec);
  n.cluster_port = free_loopback_port();
  nodes_.push_back(std::move(n));
  return nodes_.size() - 1;
}

std::string cluster_harness::render(const node& n) const {
  auto list = [](const std::vector<std::string>& xs) {
    std::string out = "[";
    for (size_t i = 0; i < xs.size(); ++i)
      out += (i ? ", " : "") + json::quote(xs[i]);
    return out + "]";
  };
  std::vector<std::string> peers;
  for (auto& name : n.spec.peers)
    for (auto& other : nodes_)
      if (other.spec.name == name)
        peers.push_back("127.0.0.1:" + std::to_string(other.cluster_port));
  std::string out = "[node]\nname = "
                    + json::quote(n.spec.node_name.empty() ? n.spec.name
                                                           : n.spec.node_name)
                    + "\ndrain_deadline_s = 5\n" + n.spec.node_extra
                    + "[http]\nport = 0\n"
                      "[scheduler]\nthreads = 2\n"
                      "[cluster]\nbind = \"127.0.0.1\"\nport = "
                    + std::to_string(n.cluster_port)
                    + "\npeers = " + list(peers) + "\nswitchboard = "
                    + (n.spec.switchboard ? "true" : "false") + "\nbutlers = "
                    + list(n.spec.butlers) + "\n" + n.spec.cluster_extra + "\n";
  if (!n.spec.tls_cert.empty() || !n.spec.tls_key.empty()
      || !n.spec.tls_ca.empty())
    out += "[cluster.tls]\ncert = " + json::quote(n.spec.tls_cert)
           + "\nkey = " + json::quote(n.spec.tls_key)
           + "\nca = " + json::quote(n.spec.tls_ca) + "\n";
  return out + common_ + "\n" + n.spec.fragment + "\n";
}

bool cluster_harness::start(size_t i, std::string* why,
                            std::chrono::milliseconds timeout) {
  auto& n = nodes_.at(i);
  if (n.proc)
    n.last_log = n.proc->log();
  n.http.reset();
  n.proc = std::make_unique<node_process>(render(n),
                                          std::map<std::string, std::string>{
                                            {"BUTLERS_DATABASE_URL", url_}});
  auto port = n.proc->wait_listening(timeout);
  if (!port) {
    if (why)
      *why = n.spec.name + " did not listen:\n" + n.proc->log();
    return false;
  }
  n.http = std::make_unique<http_client>("127.0.0.1", *port);
  auto ready = eventually(
    [&] {
      return n.http->get("/readyz").status == 200;
    },
    timeout);
  if (!ready && why)
    *why = n.spec.name + " never became ready:\n" + n.proc->log();
  return ready;
}

bool cluster_harness::start_all(std::string* why) {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (!start(i, why))
      return false;
  return true;
}

void cluster_harness::kill(size_t i) {
  auto& n = nodes_.at(i);
  if (!n.proc)
    return;
  n.proc->signal(SIGKILL);
  n.proc->wait_exit(30s);
  n.http.reset();
}

void cluster_harness::signal(size_t i, int sig) {
  auto& n = nodes_.at(i);
  if (n.proc)
    n.proc->signal(sig);
}

int cluster_harness::stop(size_t i) {
  auto& n = nodes_.at(i);
  if (!n.proc)
    return -1;
  n.proc->signal(SIGCONT); // a frozen node could not stop
  n.proc->signal(SIGTERM);
  auto r = n.proc->wait_exit(30s);
  if (!r) {
    n.proc->signal(SIGKILL);
    r = n.proc->wait_exit(30s);
  }
  n.http.reset();
  return r ? r->exit_code : -1;
}

bool cluster_harness::running(size_t i) const {
  auto& n = nodes_.at(i);
  return n.proc && n.http && !gone(n.proc->pid());
}

http_client& cluster_harness::http(size_t i) {
  auto& n = nodes_.at(i);
  if (!n.http)
    throw std::logic_error(n.spec.name + " is not running");
  return *n.http;
}

uint16_t cluster_harness::cluster_port(size_t i) const {
  return nodes_.at(i).cluster_port;
}

std::string cluster_harness::config(size_t i) const {
  return render(nodes_.at(i));
}

std::string cluster_harness::log(size_t i) const {
  auto& n = nodes_.at(i);
  return n.proc ? n.proc->log() : n.last_log;
}

std::map<std::pair<std::string, std::string>, std::string> cluster_harness::
  hosts(size_t i) {
  std::map<std::pair<std::string, std::string>, std::string> out;
  auto& n = nodes_.at(i);
  if (!n.http)
    return out;
  auto r = n.http->get("/v1/butlers");
  rapidjson::Document d;
  if (r.status != 200 || json::parse(r.body, d) || !d.IsObject()
      || !d.HasMember("butlers"))
    return out;
  for (auto& b : d["butlers"].GetArray())
    out[{b["name"].GetString(), b["node"].GetString()}] = b["status"]
                                                            .GetString();
  return out;
}

double cluster_harness::metric(size_t i, const std::string& series) {
  auto& n = nodes_.at(i);
  if (!n.http)
    return 0;
  auto text = n.http->get("/metrics").body;
  auto pos = text.find("\n" + series + " ");
  return pos == std::string::npos
           ? 0
           : std::stod(text.substr(pos + series.size() + 2));
}

} // namespace butlers::test
