"""Near-misses of the greeting: another text in the file, no file, the file under another name."""

from labkit.mutants import Mutant


def _write(name, text):
    def apply(env):
        for old in (env.dir / "www").glob("greet*"):
            old.unlink()
        if name:
            (env.dir / "www" / name).write_text(text)
    return apply


def mutants(ctx):
    path, text = ctx.params["path"], ctx.params["text"]
    yield Mutant("text-cut", "the file holds the text without its last letter", names=("answered",),
                 observation=("200", text[:-1]), apply=_write(path, text[:-1] + "\n"))
    yield Mutant("no-file", "no file is served", names=("404",), observation=("404", ""), apply=_write(None, ""))
    yield Mutant("other-name", "the file has another name", names=("404",), observation=("404", ""),
                 apply=_write(path + "s", text + "\n"))
    yield Mutant("no-newline", "the file holds the text without a newline", observation=("200", text),
                 apply=_write(path, text), equivalent="the server sends the file as it is; the check ignores a trailing newline")
