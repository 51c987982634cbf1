"""Object models (Istio API, Kubernetes subset), YAML loading with positions, validation."""
