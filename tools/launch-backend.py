#!/usr/bin/env python3
"""Shim for `pip install`-ed gemini: the launcher lives in gemini/cli/launch_backend.py."""
from gemini.cli.launch_backend import main

raise SystemExit(main())
