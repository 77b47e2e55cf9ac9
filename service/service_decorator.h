// A service that stands in front of the server's local zerovec.v1.ZeroVec
// implementation (ServerOptions::decorator): cluster mode (cluster/) routes
// requests across nodes through it. The server calls Wrap before it listens,
// Started once it does, Stop before it stops accepting calls.
#ifndef ZEROVEC_SERVICE_SERVICE_DECORATOR_H_
#define ZEROVEC_SERVICE_SERVICE_DECORATOR_H_

#include "base/status.h"
#include "zerovec/v1/zerovec.grpc.pb.h"

namespace zv::service {

class ServiceDecorator {
 public:
  virtual ~ServiceDecorator() = default;
  // Returns the service clients reach instead of `local` (which outlives
  // it). An error stops the server's start.
  virtual StatusOr<zerovec::v1::ZeroVec::Service*> Wrap(
      zerovec::v1::ZeroVec::Service* local) = 0;
  // The server listens on `port`; an error stops the start (Server::Start
  // returns it).
  virtual Status Started(int port) = 0;
  // Before the server stops accepting calls. Idempotent.
  virtual void Stop() = 0;
};

}  // namespace zv::service

#endif  // ZEROVEC_SERVICE_SERVICE_DECORATOR_H_
