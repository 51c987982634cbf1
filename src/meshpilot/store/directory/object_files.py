"""Reading a directory store's object files through the loader (store/directory/backend.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.keys import ConfigKey
from meshpilot.config.loader import load_documents
from meshpilot.config.objects import ConfigObject
from meshpilot.config.yaml_source import RawDocument, read_text
from meshpilot.store.matching import matching_documents

__all__ = ["LoadedFiles", "load_object_files", "store_files"]

Manifest = dict[str, Any]


@dataclass(slots=True)
class LoadedFiles:
    """Objects read from files, with their raw manifests."""

    objects: dict[ConfigKey, ConfigObject[Any]] = field(default_factory=dict)
    raw: dict[ConfigKey, Manifest] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # Stand-ins of invalid security policies (config/fail_closed.py), by key.
    fail_closed: dict[ConfigKey, ConfigObject[Any]] = field(default_factory=dict)


def load_object_files(sources: Iterable[Path | RawDocument]) -> LoadedFiles:
    """Load each source in order: a file to read (a missing one is skipped), or a document
    whose file's content is already known (the handle that wrote it)."""
    out = LoadedFiles()
    documents: list[RawDocument] = []
    for source in sources:
        if isinstance(source, RawDocument):
            documents.append(source)
            continue
        try:
            read = read_text(source.read_text(encoding="utf-8"), str(source))
        except FileNotFoundError:
            continue
        except OSError as exc:
            out.diagnostics.append(Diagnostic(str(source), 1, f"cannot read: {exc.strerror}"))
            continue
        except UnicodeDecodeError as exc:
            out.diagnostics.append(Diagnostic(str(source), 1, f"not UTF-8 text ({exc.reason})"))
            continue
        except Exception as exc:  # one bad file must not stop the store's watch
            message = f"cannot load: {type(exc).__name__}: {exc}"
            out.diagnostics.append(Diagnostic(str(source), 1, message))
            continue
        out.diagnostics.extend(read.diagnostics)
        documents.extend(read.documents)
    result = load_documents(documents)
    out.diagnostics.extend(result.diagnostics)
    out.fail_closed = {o.key: o for o in result.fail_closed}
    for obj, doc in zip(result.objects, matching_documents(documents, result), strict=True):
        out.objects[obj.key] = obj
        out.raw[obj.key] = doc.data
    return out


def store_files(root: Path, skip_dirs: frozenset[str]) -> Iterator[Path]:
    """Every object file under `root` (<Kind>/<namespace>/<name>.yaml), sorted."""
    kinds = (p for p in root.iterdir() if p.is_dir() and p.name not in skip_dirs)
    for kind_dir in sorted(kinds):
        for ns_dir in sorted(p for p in kind_dir.iterdir() if p.is_dir()):
            yield from sorted(
                p for p in ns_dir.iterdir() if p.suffix == ".yaml" and not p.name.startswith(".")
            )
