"""labkit: Kubernetes-internals workshop labs built on real Linux parts."""

__version__ = "0.1.0"
