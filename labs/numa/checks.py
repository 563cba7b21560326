def check_qos(ctx): return ctx.failed("todo")
check_cpu_hints = check_merge = check_single_numa = check_static_cpus = check_memory = check_checkpoint = check_pin = check_qos
