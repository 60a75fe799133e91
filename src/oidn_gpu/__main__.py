"""``python -m oidn_gpu`` runs the command-line tool."""

from oidn_gpu.cli import main

raise SystemExit(main())
