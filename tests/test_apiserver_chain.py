"""The handler chain reads as kube-apiserver's DefaultBuildHandlerChain: one function composes the
filters in upstream's order, and the stages `labkit requests explain` names are the modules that
reconstruct them."""

from __future__ import annotations

import ast
import importlib
import inspect

from labkit.apiserver.filters import chain
from labkit.apiserver.trace import STAGES
from labkit.requests.explain import TITLES, WHERE

# DefaultBuildHandlerChain (v1.34) wraps from the inside out: authorization, (flow control),
# impersonation, audit, authentication, …, audit init outermost
UPSTREAM_ORDER = ["with_authorization", "with_impersonation", "with_audit", "with_authentication",
                  "with_audit_init"]


def test_the_chain_wraps_the_filters_in_upstreams_order():
    body = ast.parse(inspect.getsource(chain.build_handler_chain)).body[0]
    wrapped = [node.value.func.id for node in sorted(ast.walk(body), key=lambda n: getattr(n, "lineno", 0))
               if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
               and isinstance(node.value.func, ast.Name) and node.value.func.id.startswith("with_")
               and node.targets[0].id == "handler"]
    assert [name for name in wrapped if name in UPSTREAM_ORDER] == UPSTREAM_ORDER


def test_every_stage_explain_names_has_its_module():
    assert set(WHERE) == set(STAGES) == set(TITLES)
    for stage, (upstream, module) in WHERE.items():
        importlib.import_module(module)
        if upstream.startswith("filter "):
            filter_name = "with_" + upstream.removeprefix("filter With").lower()
            assert hasattr(importlib.import_module(module), filter_name), (stage, module, filter_name)
