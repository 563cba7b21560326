def check_follow_the_chain(ctx):
    return ctx.failed('tbd')
