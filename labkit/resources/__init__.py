"""Pod resources become cgroups: kubelet's numbers, a live node of real cgroups and processes, and
the eviction manager (the `resources` lab and `labkit resources ...`)."""
