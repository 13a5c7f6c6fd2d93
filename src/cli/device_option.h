// `--device cpu|cuda|cuda:N`, parsed once into a typed Device (core/device.h) when the command
// line is read; a malformed value is a usage error (exit 2) naming the option.
//
//   add_device_option(cmd, &o->device, "cpu (reference), cuda or cuda:N");
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

}  // namespace gpuopt::cli
