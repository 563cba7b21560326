"""Near-misses of the find-address answer: the key dropped, the address emptied or cut short,
host a's address, the address with its prefix length."""

from labkit.mutants import answer_mutants


def mutants(ctx):
    answer = ctx.answer()
    address = answer["address"]
    subnet = address.rsplit(".", 1)[0]
    others = [f"{subnet}.1", f"{address}/24"]
    yield from answer_mutants(answer, alternatives={"address": ["", address[:-1], *others]},
                              names=lambda edit: ("address",))
