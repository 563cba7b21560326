"""Reference solution: read the address inside host b, as a student would, and write the answer."""

import json

import yaml

from labkit.exercises import answer_path
from labkit.netlab import run_in


def solve(env):
    out = run_in(env.netns_name("b"), ["ip", "-j", "-4", "addr", "show", "eth0"]).stdout
    address = json.loads(out)[0]["addr_info"][0]["local"]
    path = answer_path(env.lab.id, "find-address")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"address": address}))
