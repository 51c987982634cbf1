"""The smallest proxy-wasm module that does something visible, built from WAT by `wat2wasm`
(Debian's wabt): it adds `x-wasm-plugin: added` to every request, so the app behind the
sidecar sees it. The ABI (0.2.1) wants an
allocator and the context callbacks exported; the rest of the host calls go unused."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["GOLDEN_MODULE", "HEADER", "build_module", "golden_module"]

HEADER = ("x-wasm-plugin", "added")
# Where the golden case's WasmPlugin (file://) points: Envoy's validation loads the module.
GOLDEN_MODULE = Path(tempfile.gettempdir()) / "meshpilot-golden-wasm" / "add_header.wasm"

_NAME, _VALUE = (s.encode() for s in HEADER)
WAT = f"""
(module
  (import "env" "proxy_add_header_map_value"
    (func $add (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $next (mut i32) (i32.const 1024))
  (data (i32.const 16) "{_NAME.decode()}")
  (data (i32.const 64) "{_VALUE.decode()}")
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $next))
    (global.set $next (i32.add (global.get $next) (local.get $n)))
    (local.get $p))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_vm_start") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_configure") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    ;; map 0: request headers; action 0: continue
    (drop (call $add (i32.const 0) (i32.const 16) (i32.const {len(_NAME)})
                     (i32.const 64) (i32.const {len(_VALUE)})))
    (i32.const 0))
  (func (export "proxy_on_done") (param i32) (result i32) (i32.const 1))
  (func (export "proxy_on_delete") (param i32))
)
"""


def build_module(path: Path) -> Path:
    """Write the module to `path` (atomically: parallel test runs may build it too)."""
    tool = shutil.which("wat2wasm")
    if tool is None:
        raise RuntimeError("wat2wasm (Debian's wabt) is needed to build the test's Wasm module")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        source, out = Path(tmp) / "m.wat", Path(tmp) / "m.wasm"
        source.write_text(WAT)
        subprocess.run([tool, str(source), "-o", str(out)], check=True, capture_output=True)
        os.replace(out, path)
    return path


def golden_module() -> Path:
    return build_module(GOLDEN_MODULE)
