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

inline CLI::Option* add_device_option(CLI::App* cmd, Device* out, const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          "--device",
          [out](const std::string& text) {
            auto d = parse_device(text);
            if (!d.ok()) throw CLI::ValidationError("--device", d.status().message());
            *out = *d;
          },
          help)
      ->type_name("DEVICE");
}

// The same for commands that keep the device as text (handed on to code that parses it again).
inline CLI::Option* add_device_option(CLI::App* cmd, std::string* out, const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          "--device",
          [out](const std::string& text) {
            auto d = parse_device(text);
            if (!d.ok()) throw CLI::ValidationError("--device", d.status().message());
            *out = text;
          },
          help)
      ->type_name("DEVICE");
}

}  // namespace gpuopt::cli
