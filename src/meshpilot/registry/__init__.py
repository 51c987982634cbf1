"""Services and workload instances from Services, Endpoints, Pods and ServiceEntries."""
