"""Istio's CA API (istio/api security/v1alpha1/ca.proto), the messages istio-agent sends.

The proto is three fields, so its descriptor is built here instead of shipping generated
code: `istio.v1.auth.IstioCertificateService/CreateCertificate` takes a PEM CSR, a requested
lifetime in seconds and metadata, and answers with the PEM chain (leaf first, root last).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, struct_pb2

__all__ = [
    "CREATE_CERTIFICATE",
    "SERVICE_NAME",
    "IstioCertificateRequest",
    "IstioCertificateResponse",
]

SERVICE_NAME = "istio.v1.auth.IstioCertificateService"
CREATE_CERTIFICATE = f"/{SERVICE_NAME}/CreateCertificate"

_F = descriptor_pb2.FieldDescriptorProto


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(
        name="security/v1alpha1/ca.proto",
        package="istio.v1.auth",
        syntax="proto3",
        dependency=[struct_pb2.DESCRIPTOR.name],
    )
    request = proto.message_type.add(name="IstioCertificateRequest")
    request.field.add(name="csr", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    request.field.add(
        name="validity_duration", number=3, type=_F.TYPE_INT64, label=_F.LABEL_OPTIONAL
    )
    request.field.add(
        name="metadata",
        number=4,
        type=_F.TYPE_MESSAGE,
        type_name=".google.protobuf.Struct",
        label=_F.LABEL_OPTIONAL,
    )
    response = proto.message_type.add(name="IstioCertificateResponse")
    response.field.add(name="cert_chain", number=1, type=_F.TYPE_STRING, label=_F.LABEL_REPEATED)
    service = proto.service.add(name="IstioCertificateService")
    service.method.add(
        name="CreateCertificate",
        input_type=".istio.v1.auth.IstioCertificateRequest",
        output_type=".istio.v1.auth.IstioCertificateResponse",
    )
    return proto


def _messages() -> tuple[Any, Any]:
    pool = descriptor_pool.Default()
    try:
        file = pool.FindFileByName("security/v1alpha1/ca.proto")
    except KeyError:
        pool.Add(_file())
        file = pool.FindFileByName("security/v1alpha1/ca.proto")
    return (
        message_factory.GetMessageClass(file.message_types_by_name["IstioCertificateRequest"]),
        message_factory.GetMessageClass(file.message_types_by_name["IstioCertificateResponse"]),
    )


IstioCertificateRequest, IstioCertificateResponse = _messages()
