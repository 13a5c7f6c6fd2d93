// `--device cpu|cpu-ref|cuda|cuda:N`, the one parsing of every command's --device: parse_device
// (core/device.h) when the command line is read; a malformed value is a usage error (exit 2)
// naming the option. `cpu` is the fast CPU backend, `cpu-ref` the reference kernels.
//
//   add_device_option(cmd, &o->device, "cpu, cpu-ref, cuda or cuda:N");   // Device
//   add_device_option(cmd, &o->device_text, "...");   // std::string: the text, checked by parse_device
#pragma once

#include "core/device.h"

#include <CLI/CLI.hpp>

#include <string>

namespace gpuopt::cli {

// --device TEXT, parsed here (a usage error names what is wrong); `store` keeps the result.
template <class Store>
CLI::Option* add_device_option_with(CLI::App* cmd, const std::string& help, Store store) {
  return cmd
      ->add_option_function<std::string>(
          "--device",
          [store](const std::string& text) {
            auto d = parse_device(text);
            if (!d.ok()) throw CLI::ValidationError("--device", d.status().message());
            store(text, *d);
          },
          help)
      ->type_name("DEVICE");
}

inline CLI::Option* add_device_option(CLI::App* cmd, Device* out, const std::string& help) {
  return add_device_option_with(cmd, help, [out](const std::string&, const Device& d) { *out = d; });
}

// The same for commands that keep the device as text (handed on to code that parses it again).
inline CLI::Option* add_device_option(CLI::App* cmd, std::string* out, const std::string& help) {
  return add_device_option_with(cmd, help, [out](const std::string& text, const Device&) { *out = text; });
}

}  // namespace gpuopt::cli
