from sigconv.cli import main

raise SystemExit(main())
