"""`proxy-config ecds`: istioctl's summary of the extension configs Envoy got over ECDS
(ECDS NAME, TYPE), sorted by type, then name; an empty table when there are none."""

from __future__ import annotations

from meshpilot.proxyinfo.dump import ConfigDump
from meshpilot.proxyinfo.fields import JsonObject, obj, objs, text
from meshpilot.proxyinfo.table import Table

__all__ = ["COLUMNS", "ecds_configs", "ecds_table"]

COLUMNS = ("ECDS NAME", "TYPE")
_TYPE_PREFIX = "type.googleapis.com/"


def ecds_configs(dump: ConfigDump) -> list[JsonObject]:
    """The TypedExtensionConfigs of the EcdsConfigDump, in istioctl's order."""
    found = [c for entry in objs(dump.section("EcdsConfigDump"), "ecds_filters")
             if (c := obj(entry, "ecds_filter"))]  # fmt: skip
    return sorted(found, key=lambda c: (text(c, "typed_config", "@type"), text(c, "name")))


def _row(config: JsonObject) -> tuple[str, str]:
    kind = text(config, "typed_config", "@type").removeprefix(_TYPE_PREFIX)
    return text(config, "name"), kind


def ecds_table(dump: ConfigDump) -> Table:
    return Table.of(COLUMNS, (_row(c) for c in ecds_configs(dump)))
