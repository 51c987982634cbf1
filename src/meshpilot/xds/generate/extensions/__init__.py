"""Extensions served by ECDS: WasmPlugins and EnvoyFilter EXTENSION_CONFIG values.

wasm_plugins.py  which WasmPlugins apply to a proxy, their order and traffic match
wasm_config.py   a WasmPlugin as a TypedExtensionConfig (the module, or its fail-strategy stand-in)
wasm_filters.py  the HTTP filters naming them by `config_discovery`, put into the HCMs
ecds.py          the ECDS generator
"""

from meshpilot.xds.generate.extensions.ecds import generate_extension_configs
from meshpilot.xds.generate.extensions.wasm_filters import apply_wasm_plugins

__all__ = ["apply_wasm_plugins", "generate_extension_configs"]
