// A guard of the gRPC listener: a probe that tells whether it still accepts connections (the
// watchdog restarts a dead one).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpuopt::server {

// Whether a listener on host:port (127.0.0.1 for 0.0.0.0) still accepts: a fresh TCP connection
// sends the HTTP/2 preface and an empty SETTINGS frame, and grpc answers with its own SETTINGS once
// it has accepted. Nullopt when this process cannot even make the probe (out of descriptors).
std::optional<bool> listener_answers(const std::string& host, uint16_t port, int timeout_ms);

}  // namespace gpuopt::server
