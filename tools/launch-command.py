#!/usr/bin/env python3
"""Shim for `pip install`-ed gemini: the launcher lives in gemini/cli/launch_command.py."""
from gemini.cli.launch_command import main

raise SystemExit(main())
