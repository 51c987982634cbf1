"""The workload's identity in the agent: key, CSR, certificate, rotation, served secrets.

workload.py   SPIFFE id, in-memory ECDSA key, CSR, checks of the CA's chain (WorkloadCert)
store.py      SecretStore: what SDS serves (`default`, `ROOTCA`, file secrets), with versions
rotation.py   CertificateRotator: first issue, renewal at 80% of lifetime, retries
service.py    WorkloadSecrets: CA client + rotator + SDS server, as the agent runs them
"""
