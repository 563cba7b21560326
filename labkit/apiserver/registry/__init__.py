"""The registry: the generic store every kind goes through (store.py, upstream
staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go) and each API group's
strategies, one module per group as upstream keeps them under pkg/registry/<group>/<kind>/
strategy.go (namespace.py and pod.py for the two core kinds with the most behaviour, core.py for
the other core/v1 kinds), with the catalogue of served kinds in catalog.py.
"""
