from rageval.cli import main

raise SystemExit(main())
