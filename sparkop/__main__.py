from sparkop.cli import main

raise SystemExit(main())
