"""The mesh's security: CA, workload identities (SPIFFE), certificate signing and rotation."""
