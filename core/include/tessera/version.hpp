// Version numbers of the core and of the plugin API, with the rule for bumping them.
#pragma once
#include <cstdint>

#define TESSERA_CORE_VERSION_STRING "0.1.0"

namespace tessera {

/// Version of libtessera_core; written into packages and ABI tags.
inline constexpr const char* kCoreVersion = TESSERA_CORE_VERSION_STRING;

/// Plugin API version. Bump the major when a public interface or the manifest changes
/// incompatibly (an old plugin would misbehave); bump the minor when something is added
/// that old plugins do not need. The host loads a plugin whose major equals its own and
/// whose minor is not above its own.
inline constexpr std::uint32_t kPluginApiMajor = 2;  // 2.0: option type "map" (OptionValue's layout changed)
// 2.1: option type "enum", option ranges (TesseraOptionLimits); 2.2: PassContext::progress.
inline constexpr std::uint32_t kPluginApiMinor = 2;

/// The ABI tag compiled into this translation unit: compiler, standard library ABI,
/// Boost version, core version. A plugin's tag must equal the host's.
const char* abi_tag() noexcept;

}  // namespace tessera
