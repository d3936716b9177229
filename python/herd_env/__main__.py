from .serve import main

raise SystemExit(main())
