#include "cli/engine_option.h"

#include "cli/command.h"
#include "core/table.h"

namespace gpuopt::cli {

CLI::Option* add_precision_option(CLI::App* cmd, std::string* out, const std::string& help) {
  return cmd->add_option("--precision", *out, help)->check(one_of(kPrecisions));
}

CLI::Option* add_precision_option(CLI::App* cmd, std::vector<std::string>* out, const std::string& help) {
  return cmd->add_option("--precision", *out, help)->check(one_of(kPrecisions));
}

CLI::Option* add_memory_limit_option(CLI::App* cmd, size_t* out, const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          "--memory-limit",
          [out](const std::string& text) {
            const auto bytes = parse_byte_size(text);
            if (!bytes || *bytes == 0)
              throw CLI::ValidationError("--memory-limit",
                                         "'" + text + "': expected a number of bytes above 0, such as 512M or 2G");
            *out = *bytes;
          },
          help)
      ->type_name("BYTES");
}

}  // namespace gpuopt::cli
