"""The filters of kube-apiserver's handler chain that labkit reconstructs, one module each, as
upstream keeps them in staging/src/k8s.io/apiserver/pkg/endpoints/filters/: a filter takes the
next handler and returns a handler (a function from Request to Response). chain.py composes them
in the order of upstream's DefaultBuildHandlerChain.
"""

from __future__ import annotations

from typing import Callable

from labkit.apiserver.request import Request
from labkit.apiserver.response import Response

Handler = Callable[[Request], Response]
