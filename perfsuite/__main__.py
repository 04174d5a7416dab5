from perfsuite.cli import main

raise SystemExit(main())
