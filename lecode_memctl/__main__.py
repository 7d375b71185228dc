"""``python -m lecode_memctl``: memctl's entry point (as the console script)."""

try:
    from lecode_memctl.cli.main import main
except KeyboardInterrupt:
    # A Ctrl-C in the first imports, before memctl's handlers are in place:
    # the process ends by the signal with no line, as the docs say of that
    # window (before 2026-12-07 Python printed a KeyboardInterrupt traceback).
    import os
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    raise SystemExit(130) from None

raise SystemExit(main())
