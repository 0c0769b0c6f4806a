#include "actors/type_ids.hpp"

#include <caf/atom.hpp>
#include <caf/message.hpp>

namespace butlers {

void register_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::butlers>();
  cfg.add_error_category(caf::atom("butlers"), [](uint8_t code, caf::atom_value,
                                                  const caf::message& ctx) {
    std::string out = "butlers: ";
    out += to_string(static_cast<butlers_errc>(code));
    if (ctx.size() == 1 && ctx.match_element<std::string>(0)) {
      out += " (";
      out += ctx.get_as<std::string>(0);
      out += ")";
    } else if (!ctx.empty()) {
      out += " ";
      out += to_string(ctx);
    }
    return out;
  });
}

} // namespace butlers
