"""Near-misses of the predicted error: each word of the message dropped in turn, the object's name
or the namespace swapped for another, the resource singular, the message of a namespace that does
not exist; kubectl's prefix kept (equivalent: the answer format allows it), the message quoted or
with extra spaces (equivalent: the check compares words, not quoting or spacing)."""

from labkit.mutants import Mutant, answer_mutants

WRONG = ("not what the API server answers",)


def mutants(ctx):
    answer = ctx.answer()
    message = answer["error"]
    words = message.split()
    namespace, configmap = ctx.params["namespace"], ctx.params["configmap"]
    variants = [" ".join(words[:i] + words[i + 1:]) for i in range(len(words))]
    variants += [message.replace(f'"{configmap}"', '"early"'), message.replace(namespace, "default"),
                 message.replace("configmaps ", "configmap ", 1), f'namespaces "{namespace}" not found',
                 f'Error from server (NotFound): namespaces "{namespace}" not found',
                 f"Error from server (Conflict): {message}"]
    yield from answer_mutants(answer, alternatives={"error": variants},
                              names=lambda edit: ("error",) if edit.op == "drop" else WRONG)
    for name, text, how in (
            ("kubectl-prefix", f"Error from server (Forbidden): {message}",
             "the answer format allows kubectl's prefix; the check compares what follows it"),
            ("quoted", f"'{message}'", "the check compares the message, not the YAML quoting around it"),
            ("spaced", "  " + message.replace(" ", "  ") + "\n", "the check compares words, not spacing")):
        yield Mutant(name, f"answer: {how.split(';')[0]}", answer={"error": text}, equivalent=how)
