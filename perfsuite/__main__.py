from perfsuite.cli.entry import module_main

raise SystemExit(module_main())
