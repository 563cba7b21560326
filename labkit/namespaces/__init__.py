"""Namespace deletion tools: `labkit ns explain` (explain.py) and its command line (cli.py).

The mechanisms themselves live with the API server (the namespace lifecycle in
labkit.apiserver.resources, NamespaceLifecycle admission in labkit.apiserver.registry) and the
controllers (labkit.controllers.namespace)."""
