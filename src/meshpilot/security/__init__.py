"""The mesh's security: CA, workload identities (SPIFFE), certificate signing and rotation.

identity.py       SpiffeId: spiffe://<trust-domain>/ns/<ns>/sa/<sa>
certs.py          keys, root/intermediate/leaf certificates, PEM
leaf_template.py  workload leaves from DER pieces proven equal to the builder's (hot path)
ca_material.py    the CA dir (generated root, persisted 0600) or a plugged-in cacerts CA
ca.py             CertificateAuthority.sign(csr, identity, ttl): X.509 SVIDs
tokens.py         bootstrap tokens (HMAC-SHA256 JWTs) proving a pod's identity
caller.py         who calls: bearer token or client certificate
csr_service.py    istio.v1.auth.IstioCertificateService/CreateCertificate: issue() and its
                  grpc.aio handler
secure_server.py  the control plane's TLS ports: ADS and the CA
front_server.py   the front Envoy doing TLS and HTTP/2 of 15012 (and the CA-only 15011)
front_envoy.py    that Envoy's bootstrap
front_envoy_process.py  its process, restarted if it dies
ca_http.py        the CA's gRPC-over-HTTP/1.1 protocol on the Unix socket Envoy forwards to
ca_api.py         Istio's CA API messages
"""
