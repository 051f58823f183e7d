#!/bin/sh
# Package preremove: stop the services before their binary goes (on
# removal, not on upgrade).
set -e
case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	systemctl stop talon-coordinator.service talon-worker.service 2>/dev/null || true
	systemctl disable talon-coordinator.service talon-worker.service 2>/dev/null || true
fi
