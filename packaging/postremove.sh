#!/bin/sh
# Package postremove: let systemd forget the removed units. The talon user,
# /etc/talon and the cache are left in place (purge removes /etc/talon).
set -e
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
