"""Plain YAML values for the readers that need no field lines (store files, values files,
settings): the same bounded builder as the object reader, with one typed error naming
file and line instead of PyYAML's exceptions (or a RecursionError, or a billion laughs)."""

from __future__ import annotations

from typing import Any

from meshpilot.config.yaml_build import BuiltDocument, build_stream
from meshpilot.errors import InputError

__all__ = ["YAMLInputError", "load_yaml", "load_yaml_all"]


class YAMLInputError(InputError):
    """Text that is not YAML this reader accepts; str() is `file:line: invalid YAML: ...`."""

    def __init__(self, file: str, line: int, message: str) -> None:
        super().__init__(f"{file}:{line}: {message}")
        self.file = file
        self.line = line
        self.message = message


def load_yaml_all(text: str, file: str) -> list[Any]:
    """The value of every document (an empty document is None). Duplicate keys keep the
    later value, as yaml.safe_load does."""
    return [doc.data for doc in _documents(text, file)]


def load_yaml(text: str, file: str) -> Any:
    """The value of a single-document text (None when empty)."""
    documents = _documents(text, file)
    if len(documents) > 1:
        message = "invalid YAML: expected one document, found another"
        raise YAMLInputError(file, documents[1].line, message)
    return documents[0].data if documents else None


def _documents(text: str, file: str) -> list[BuiltDocument]:
    stream = build_stream(text, file)
    if stream.error is not None:
        error = stream.error
        raise YAMLInputError(error.file, error.line, error.message)
    return stream.documents
