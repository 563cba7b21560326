"""CEL evaluation in the embedded API server (labkit/apiserver/admission/cel.py): CPU per
evaluation with the compiled runner (celrunner.py, the default) and with celpy's interpreter
alone, each in a process of its own. The expressions are the requests lab's image policy (its
three validations) and two match conditions, on a Pod creation whose images all pass and one
whose first image fails (an evaluation the compiled path hands to the interpreter counts in full).

Measured on the 2-core workshop build machine, loaded (2026-12-08): 1,155 µs interpreted, 410 µs
compiled (2.8x); three admission expressions on a Pod where nothing fails: 1,059 -> 181 µs. The
requests lab's mutants driver (`python tests/test_mutants.py requests` on a running lab), one run
each: 8,952 CEL evaluations (memo misses), of which 3 went to the interpreter; CPU in cel._evaluate
(the activation's celpy values included) 7.1 s -> 3.1 s, the driver's own CPU 22.7 s -> 18.6 s;
with its children as /usr/bin/time counts them, 25.6 s -> 24.3 s (runs on a loaded machine vary
by a few seconds). The verdicts are the interpreter's.
"""

from __future__ import annotations

import subprocess
import sys

from figures import REPO, Figure

ROUNDS = 200

CHILD = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
import importlib.util
from labkit.apiserver.admission import cel
from labkit.requests.reconstruct import pod_attributes
spec = importlib.util.spec_from_file_location("solution", sys.argv[2] + "/labs/requests/solutions/image-tag-policy.py")
solution = importlib.util.module_from_spec(spec); spec.loader.exec_module(solution)
expressions = list(solution.EXPRESSIONS) + ["request.userInfo.username == 'labkit-admin'",
                                            "!has(object.metadata.labels) || !('run' in object.metadata.labels)"]
pods = [{"metadata": {"name": "web", "labels": {"app": "web"}},
         "spec": {"containers": [{"name": f"c{i}", "image": f"nginx:1.{i}"} for i in range(3)]}},
        {"metadata": {"name": "bad"}, "spec": {"containers": [{"name": "c", "image": "nginx"}],
                                              "initContainers": [{"name": "i", "image": "busybox:1"}]}}]
interpreted = sys.argv[1] == "interpreted"
acts = []
for pod in pods:
    attrs = pod_attributes("web", pod)
    acts.append(cel.Activation(attrs, attrs.rt).values())


def evaluate_all():
    for e in expressions:
        for a in acts:
            try:
                cel._evaluate(e, a, interpreted=interpreted)
            except cel.EvaluationError:
                pass


evaluate_all()      # compiles every expression: the rounds time evaluation alone
rounds = int(sys.argv[3])
start = time.process_time()
for _ in range(rounds):
    evaluate_all()
print((time.process_time() - start) / (rounds * len(expressions) * len(acts)) * 1e6)
"""


def _per_evaluation(runner: str) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, runner, str(REPO), str(ROUNDS)], cwd=REPO,
                         capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def run() -> list[Figure]:
    interpreted = _per_evaluation("interpreted")
    compiled = _per_evaluation("compiled")
    return [
        Figure("cel", "CPU per evaluation, celpy's interpreter alone", round(interpreted), "µs"),
        Figure("cel", "CPU per evaluation, compiled runner (default)", round(compiled), "µs"),
        Figure("cel", "interpreter / compiled", round(interpreted / compiled, 1), "x"),
    ]
