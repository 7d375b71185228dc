from lecode_memctl.cli.main import main

raise SystemExit(main())
