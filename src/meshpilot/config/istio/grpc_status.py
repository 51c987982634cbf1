"""gRPC status names Istio accepts in a fault's `abort.grpcStatus`, in code order."""

from __future__ import annotations

__all__ = ["GRPC_STATUS_CODES", "GRPC_STATUS_NAMES"]

GRPC_STATUS_NAMES = (
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
)
GRPC_STATUS_CODES = {name: code for code, name in enumerate(GRPC_STATUS_NAMES)}
