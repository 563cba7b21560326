"""Reference solution: read the address inside host b, as a student would, and write the answer."""

import json

from labkit.exercises import write_answer
from labkit.netlab import run_in


def solve(env):
    out = run_in(env.netns_name("b"), ["ip", "-j", "-4", "addr", "show", "eth0"]).stdout
    address = json.loads(out)[0]["addr_info"][0]["local"]
    write_answer(env, "find-address", {"address": address})
