from gitmem.bench.core import main

raise SystemExit(main())
